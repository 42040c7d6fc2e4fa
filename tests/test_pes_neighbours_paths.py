"""The fixed-capacity neighbour list on other paths: a triclinic cell (rebuilt inside jit,
equal to cluster_problem) and a minimisation inside one jitted lax.scan (find_minimum's
minimum)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from ase.build import bulk

import simdiff
from problems.pes import fcc_cluster
from simdiff.pes import (
    Cell,
    NeighbourList,
    cluster_problem,
    find_minimum,
    lennard_jones,
    smooth_cutoff,
)

EPS = float(np.finfo(np.float64).eps)
PAIR = smooth_cutoff(lennard_jones, r_on=1.2, r_cut=1.5)


def test_minimisation_inside_one_jitted_scan_reaches_find_minimum():
    """Steepest descent (step 0.002, below 2 / the largest curvature) in one lax.scan of 4000
    steps, the list rebuilt inside it as the rattled LJ38 relaxes: monotone energies, and the
    minimum find_minimum reaches from the same start (energy to |g|^2 plus rounding)."""
    pair = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.5)
    x0 = fcc_cluster(38).ravel() + 0.05 * np.random.default_rng(1).standard_normal(114)
    nl = NeighbourList(pair, skin=0.05)

    @jax.jit
    def descend(x, nb):
        def step(c, _):
            x, nb = c
            nb = nl.update(x, nb)
            e, g = jax.value_and_grad(nl.energy)(x, nb)
            return (x - 0.002 * g, nb), e

        (x, nb), es = jax.lax.scan(step, (x, nb), None, length=4000)
        return x, nb, es

    x, nb, es = descend(jnp.asarray(x0), nl.allocate(x0))
    es = np.asarray(es)
    m_pairs = int(nb.count)
    rounding = 2 * m_pairs * EPS * (np.abs(es).max() + m_pairs)
    problem = cluster_problem(pair, x0)
    # es[-1] is the energy one step before x: lower by 0.002 |g|^2, nothing at convergence
    assert abs(float(problem.evaluate(np.asarray(x))) - es[-1]) <= rounding
    assert int(nb.rebuilds) >= 2
    assert np.all(np.diff(es) <= 64 * EPS * np.abs(es[1:]))  # monotone, to rounding
    m = find_minimum(problem)
    assert m.converged
    assert abs(es[-1] - m.energy) <= m.grad_norm**2 + 1e-10 + rounding


def test_triclinic_cell_list_equals_the_cluster_problem():
    """A 64-atom triclinic fcc cell (heights 3.70 >= 2 r_cut): the list's energy and forces at
    a point that needed a rebuild inside jit equal cluster_problem's there."""
    atoms = bulk("Ar", "fcc", a=1.6).repeat(4)
    cell = Cell(atoms.cell[:], [True] * 3)
    x0 = atoms.positions.ravel()
    nl = NeighbourList(PAIR, box=cell, skin=0.2)
    nbrs = nl.allocate(x0)
    moved = x0 + 0.15 * np.random.default_rng(5).standard_normal(x0.size)

    @jax.jit
    def at(x, nb):
        nb = nl.update(x, nb)
        e, g = jax.value_and_grad(nl.energy)(x, nb)
        return e, g, nb

    e, g, nb = at(jnp.asarray(moved), nbrs)
    assert int(nb.rebuilds) == 1
    reference = cluster_problem(PAIR, moved, box=cell, skin=0.2)
    m = int(nb.count)
    e_ref = float(reference.evaluate())
    assert abs(float(e) - e_ref) <= 2 * m * EPS * (abs(e_ref) + m)
    g_ref = simdiff.grad(reference)
    np.testing.assert_allclose(np.asarray(g), g_ref, rtol=0,
                               atol=2 * m * EPS * np.abs(g_ref).max())  # fmt: skip
