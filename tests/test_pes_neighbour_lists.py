"""Cutoff neighbour lists at every evaluated point: a clear error beyond the skin, or a list that
follows the atoms (rebuilt at the evaluation boundary, derivatives exact); coupled terms refused."""

from __future__ import annotations

import numpy as np
import pytest

import simdiff
from problems.pes import fcc_cluster
from simdiff.errors import InputError, NeighbourListError
from simdiff.pes import cluster_problem, lennard_jones, smooth_cutoff, term_energy

PAIR = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.5)


@pytest.fixture(scope="module")
def pos() -> np.ndarray:
    return fcc_cluster(38)


def _beyond_skin(p: simdiff.Problem, atom: int = 5, factor: float = 1.6) -> np.ndarray:
    x = p.x0.copy()
    x[3 * atom + 1] += factor * p.fn.max_shift
    return x


@pytest.mark.parametrize("kind", ["value", "grad", "hessian"])
def test_fixed_list_names_atom_displacement_and_skin_at_every_point(pos, backend, kind):
    """Checked at each call, not at construction: the first call at x0 passes, a later call
    beyond the skin raises NeighbourListError (an InputError), not NonFiniteError."""
    p = cluster_problem(PAIR, pos, rebuild=False)
    d = simdiff.Derivatives(p, backend)
    call = {"value": d.value, "grad": d.grad, "hessian": d.hessian}[kind]
    assert np.all(np.isfinite(call(p.x0)))
    x = _beyond_skin(p)
    with pytest.raises(NeighbourListError) as info:
        call(x)
    msg = str(info.value)
    assert "atom 5 has moved 0.2" in msg and "skin 0.25" in msg and "limit 0.125" in msg
    assert isinstance(info.value, InputError) and not isinstance(info.value, FloatingPointError)
    within = p.x0.copy()
    within[16] += 0.9 * p.fn.max_shift  # inside the skin: fine
    assert np.all(np.isfinite(call(within)))


def test_fixed_list_error_in_a_batch_names_the_atom(pos):
    p = cluster_problem(PAIR, pos, rebuild=False)
    xs = np.stack([p.x0, _beyond_skin(p, atom=11)])
    with pytest.raises(NeighbourListError, match="atom 11 has moved"):
        simdiff.grad(p, xs, backend="torch")


def test_coupled_terms_are_refused_at_construction():
    """A term that reduces over the term axis (a mean of the energies) couples the terms: the
    structured Hessian would be wrong, so term_energy refuses it naming both terms."""

    def bond(r, ops):
        d = r[..., 1, :] - r[..., 0, :]
        return 0.5 * (ops.sqrt(ops.sum(d * d, axis=-1)) - 1.0) ** 2

    def coupled(r, ops):
        e = bond(r, ops)
        return e - 0.5 * ops.mean(e, axis=0) if e.ndim else 0.5 * e

    def max_coupled(r, ops):  # coupled through the largest energy only
        e = bond(r, ops)
        return e + 0.1 * ops.max(e, axis=0) if e.ndim else 1.1 * e

    pos = np.random.default_rng(3).standard_normal((6, 3))
    index = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]
    p = term_energy(bond, index, pos)  # independent terms pass
    np.testing.assert_allclose(simdiff.hessian(p), simdiff.hessian(p, method="fwd-rev"),
                               atol=1e-12)  # fmt: skip
    for term in (coupled, max_coupled):
        with pytest.raises(InputError, match=r"couples its terms: moving the atoms of term \d+"):
            term_energy(term, index, pos)
