"""A fixed-capacity neighbour list under jit: rebuilt inside the compiled step, overflow flagged,
re-allocated on the host with one recompile; energies and derivatives equal all pairs."""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from ase.build import bulk

import simdiff
import simdiff.jax
import simdiff.torch
from problems.pes import fcc_cluster
from simdiff.errors import InputError, NeighbourListError
from simdiff.pes import (
    NeighbourList,
    cluster_energy,
    cluster_problem,
    lennard_jones,
    pair_index,
    smooth_cutoff,
)

EPS = float(np.finfo(np.float64).eps)
PAIR = smooth_cutoff(lennard_jones, r_on=1.2, r_cut=1.5)


def _crystal(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """32-atom fcc LJ crystal (a = 1.5496, box 3.10 >= 2 r_cut), rattled, at T ~ 0.6."""
    atoms = bulk("Ar", "fcc", a=1.5496, cubic=True).repeat(2)
    rng = np.random.default_rng(seed)
    n = len(atoms)
    x = (atoms.positions + 0.02 * rng.standard_normal((n, 3))).ravel()
    v = 0.8 * rng.standard_normal((n, 3))
    return x, (v - v.mean(axis=0)).ravel(), np.diag(atoms.cell[:]).copy()


def _md_chunk(nl: NeighbourList, steps: int, dt: float, traces: list[int]):
    """A jitted lax.scan of velocity-Verlet steps that update the list; counts its traces."""

    @jax.jit
    def chunk(carry, nbrs):
        traces.append(1)  # runs once per trace (compile), never per call

        def step(c, _):
            x, v, f, nb = c
            v = v + 0.5 * dt * f
            x = x + dt * v
            nb = nl.update(x, nb)
            e, g = jax.value_and_grad(nl.energy)(x, nb)
            v = v - 0.5 * dt * g
            return (x, v, -g, nb), (x, e)

        x, v = carry
        f = -jax.grad(nl.energy)(x, nbrs)
        (x, v, f, nb), (xs, es) = jax.lax.scan(step, (x, v, f, nbrs), None, length=steps)
        return (x, v, xs, es), nb

    return chunk


def _summation_tol(values: np.ndarray, n_terms: int) -> np.ndarray:
    """Both sums add the same pair energies in other orders: |error| <= 2 gamma_m sum |phi|,
    bounded here with sum |phi| <= m max |phi_t| <~ |E| + m (the pair energies are >= -1)."""
    return 2.0 * n_terms * EPS * (np.abs(values) + n_terms)


def test_md_under_jit_follows_the_atoms_and_equals_all_pairs():
    """300 velocity-Verlet steps of a 32-atom periodic crystal in three jitted scans: the list
    is rebuilt inside the compiled step many times, the function is traced once, and every
    step's energy equals the dense all-pairs energy at that step's positions."""
    x0, v0, box = _crystal()
    n = x0.size // 3
    nl = NeighbourList(PAIR, box=box, skin=0.2)
    nbrs = nl.allocate(x0)
    traces: list[int] = []
    chunk = _md_chunk(nl, 100, 0.004, traces)
    carry = (jnp.asarray(x0), jnp.asarray(v0))
    xs, es = [], []
    for _ in range(3):
        (x, v, xk, ek), nbrs = nl.advance(chunk, carry, nbrs)
        carry = (x, v)
        xs.append(xk)
        es.append(ek)
    assert len(traces) == 1 and nl.reallocations == 0
    assert int(nbrs.rebuilds) >= 5 and not nl.overflowed(nbrs)
    positions, energies = jnp.concatenate(xs), np.asarray(jnp.concatenate(es))
    ops = simdiff.get_ops("jax")
    dense = jax.jit(jax.vmap(lambda y: cluster_energy(y, ops, pair=PAIR, n_particles=n,
                                                      box=box)))  # fmt: skip
    reference = np.asarray(dense(positions))
    m = n * (n - 1) // 2
    np.testing.assert_array_less(np.abs(energies - reference), _summation_tol(reference, m))
    assert np.ptp(reference) > 1.0  # the system moved: not the same point 300 times


def test_contraction_overflows_once_and_reallocates_once(caplog):
    """An expanded 38-atom cluster released at rest contracts: pairs come within reach, the
    tight buffer overflows inside the compiled chunk, the host re-allocates once (a second
    trace, for the new capacity) and the rerun from the same start is complete."""
    x0 = fcc_cluster(38, spacing=1.1 * 1.35).ravel()
    n = 38
    nl = NeighbourList(PAIR, skin=0.2, capacity_multiplier=1.5)
    tight = pair_index(x0.reshape(-1, 3), nl.radius).shape[0]
    nbrs = nl.allocate(x0, capacity=tight)
    assert nbrs.capacity == tight
    traces: list[int] = []
    chunk = _md_chunk(nl, 200, 0.005, traces)
    carry = (jnp.asarray(x0), jnp.zeros(3 * n))
    first, overflowed = chunk(carry, nbrs)
    assert nl.overflowed(overflowed) and int(overflowed.count) > tight
    assert np.isnan(np.asarray(first[3])).any()  # an overflowed list gives NaN, not a number
    with caplog.at_level(logging.INFO, logger="simdiff.pes.neighbours"):
        (_, _, positions, energies), nbrs = nl.advance(chunk, carry, nbrs)
    assert nl.reallocations == 1 and len(traces) == 2
    assert f"({int(overflowed.count)} pairs needed, capacity {tight})" in caplog.text
    assert nbrs.capacity >= int(overflowed.count) and not nl.overflowed(nbrs)
    assert int(np.asarray(nbrs.count)) > tight
    ops = simdiff.get_ops("jax")
    reference = np.asarray(jax.vmap(lambda y: cluster_energy(y, ops, pair=PAIR,
                                                             n_particles=n))(positions))  # fmt: skip
    energies = np.asarray(energies)
    np.testing.assert_array_less(np.abs(energies - reference),
                                 _summation_tol(reference, n * (n - 1) // 2))  # fmt: skip
    assert reference[-1] < reference[0] - 10.0  # it did contract


def test_energy_forces_hessian_equal_the_cluster_problem(backend):
    x0 = fcc_cluster(19).ravel() + 0.03 * np.random.default_rng(2).standard_normal(57)
    nl = NeighbourList(PAIR, skin=0.2, backend=backend)
    nbrs = nl.allocate(x0)
    reference = cluster_problem(PAIR, x0, skin=0.2)
    face = simdiff.jax if backend == "jax" else simdiff.torch

    def derivatives(y, nb):
        energy = lambda z: nl.energy(z, nb)  # noqa: E731
        return energy(y), face.grad(energy)(y), face.hessian(energy)(y)

    if backend == "jax":
        e, g, h = jax.jit(derivatives)(jnp.asarray(x0), nbrs)
    else:
        e, g, h = derivatives(torch.tensor(x0), nbrs)
    e, g, h = float(e), np.asarray(g), np.asarray(h)
    e_ref = float(reference.evaluate())
    g_ref = simdiff.grad(reference, backend=backend)
    h_ref = simdiff.hessian(reference, backend=backend)
    m = int(np.asarray(nbrs.count))
    # sums of at most m pair contributions, in other orders
    assert abs(e - e_ref) <= 2 * m * EPS * (abs(e_ref) + m)
    np.testing.assert_allclose(g, g_ref, rtol=0, atol=2 * m * EPS * np.abs(g_ref).max())
    np.testing.assert_allclose(h, h_ref, rtol=0, atol=2 * m * EPS * np.abs(h_ref).max())


def test_translation_invariance():
    """A rigid translation: the same pairs and the same energy (free cluster, and a periodic
    crystal translated by a non-lattice vector, atoms crossing the box faces)."""
    x0 = fcc_cluster(38).ravel()
    nl = NeighbourList(PAIR, skin=0.2)
    shift = np.tile([3.7, -1.3, 0.41], 38)
    a, b = nl.allocate(x0), nl.allocate(x0 + shift)
    np.testing.assert_array_equal(np.asarray(a.pairs), np.asarray(b.pairs))
    e0, e1 = float(nl.energy(x0, a)), float(nl.energy(x0 + shift, b))
    m = int(a.count)
    assert abs(e0 - e1) <= 2 * m * EPS * (abs(e0) + m)
    xc, _, box = _crystal()
    pc = NeighbourList(PAIR, box=box, skin=0.2)
    moved = xc + np.tile([0.37 * box[0], 2.1, -1.9], xc.size // 3)
    ca, cb = pc.allocate(xc), pc.allocate(moved)
    # the same pairs (same count); and updating the list built at xc to the moved crystal works
    assert int(ca.count) == int(cb.count)
    rebuilt = jax.jit(pc.update)(moved, ca)
    energy = jax.jit(pc.energy)
    ea, eb, er = float(energy(xc, ca)), float(energy(moved, cb)), float(energy(moved, rebuilt))
    mc = int(ca.count)
    assert abs(ea - eb) <= 2 * mc * EPS * (abs(ea) + mc)
    assert abs(ea - er) <= 2 * mc * EPS * (abs(ea) + mc)


def test_stale_list_gives_nan_on_both_backends_and_update_restores_it(backend):
    x0 = fcc_cluster(13).ravel()
    nl = NeighbourList(PAIR, skin=0.2, backend=backend)
    nbrs = nl.allocate(x0)
    moved = x0.copy()
    moved[5] += 0.11  # beyond skin / 2 = 0.1
    x = jnp.asarray(moved) if backend == "jax" else torch.tensor(moved)
    energy, update = nl.energy, nl.update
    if backend == "jax":
        energy, update = jax.jit(energy), jax.jit(update)
    assert np.isnan(float(energy(x, nbrs)))
    fresh = update(x, nbrs)
    assert int(fresh.rebuilds) == 1 and np.isfinite(float(energy(x, fresh)))
    within = x0.copy()
    within[5] += 0.09
    within = jnp.asarray(within) if backend == "jax" else torch.tensor(within)
    assert int(update(within, nbrs).rebuilds) == 0  # inside the skin: no rebuild


def test_torch_overflow_has_the_same_semantics():
    """On torch (no compile, no recompile) the flag, the recorded count and the NaN energy are
    those of JAX; advance re-allocates once."""
    x0 = fcc_cluster(38, spacing=1.4).ravel()
    nl = NeighbourList(PAIR, skin=0.2, capacity_multiplier=1.5, backend="torch")
    tight = pair_index(x0.reshape(-1, 3), nl.radius).shape[0]
    nbrs = nl.allocate(x0, capacity=tight)
    squeezed = torch.tensor(0.85 * x0)

    def chunk(carry, nb):
        nb = nl.update(carry[0], nb)
        return (carry[0], nl.energy(carry[0], nb)), nb

    (_, e), over = chunk((squeezed,), nbrs)
    assert nl.overflowed(over) and int(over.count) > tight and torch.isnan(e)
    again = nl.update(squeezed * 0.9, over)  # sticky: no further rebuild, the count is kept
    assert int(again.count) == int(over.count) and int(again.rebuilds) == int(over.rebuilds)
    (_, e), nbrs = nl.advance(chunk, (squeezed,), nbrs)
    assert nl.reallocations == 1 and torch.isfinite(e)
    ops = simdiff.get_ops("torch")
    e_ref = float(cluster_energy(squeezed, ops, pair=PAIR, n_particles=38))
    m = int(nbrs.count)
    assert abs(float(e) - e_ref) <= 2 * m * EPS * (abs(e_ref) + m)


def test_advance_gives_up_after_max_reallocations():
    x0 = fcc_cluster(13, spacing=1.4).ravel()
    nl = NeighbourList(PAIR, skin=0.2)

    def never_fits(carry, nb):  # every chunk needs one pair more than the buffer holds
        return carry, nb._replace(overflow=jnp.asarray(True), count=jnp.asarray(nb.capacity + 1))

    with pytest.raises(NeighbourListError, match="after 2 re-allocations"):
        nl.advance(never_fits, (x0,), nl.allocate(x0), max_reallocations=2)


def test_bad_input_is_refused_by_name():
    with pytest.raises(InputError, match="needs a pair potential with a cutoff"):
        NeighbourList(lennard_jones)
    with pytest.raises(InputError, match="capacity_multiplier must be at least 1; got 0.5"):
        NeighbourList(PAIR, capacity_multiplier=0.5)
    with pytest.raises(InputError, match="skin must be a non-negative length"):
        NeighbourList(PAIR, skin=-0.1)
    with pytest.raises(InputError, match="box vector x"):
        NeighbourList(PAIR, box=[2.0, 4.0, 4.0])
    nl = NeighbourList(PAIR)
    x0 = fcc_cluster(13).ravel()
    with pytest.raises(InputError, match="capacity 2 is below the"):
        nl.allocate(x0, capacity=2)
    bad = x0.copy()
    bad[4] = np.nan
    with pytest.raises(InputError, match="particle 1"):
        nl.allocate(bad)
