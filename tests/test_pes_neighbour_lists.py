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


@pytest.mark.parametrize(("reader", "read"), [(10, 11), (3, 17), (17, 3), (0, 1)])
def test_a_coupling_between_any_two_terms_is_refused(reader, read):
    """Every pair is probed (not a sample of terms): term ``reader`` also reads the energy of
    term ``read`` alone; accepted, the structured Hessian would differ from the dense one by
    about 1 (0.94 for 10 <- 11 before every pair was probed)."""

    def bond(r, ops):
        d = r[..., 1, :] - r[..., 0, :]
        return 0.5 * (ops.sqrt(ops.sum(d * d, axis=-1)) - 1.0) ** 2

    def coupled(r, ops):
        e = bond(r, ops)
        if e.ndim == 0:
            return e
        shift = (read - reader) % e.shape[0]
        at = ops.asarray(np.arange(e.shape[0]) == reader)
        return e + ops.where(at, ops.roll(e, -shift, axis=0), 0.0 * e)

    pos = np.random.default_rng(3).standard_normal((21, 3))
    index = [[i, i + 1] for i in range(20)]
    with pytest.raises(InputError, match=rf"moving the atoms of term {read} .*energy of term "
                       rf"{reader} "):  # fmt: skip
        term_energy(coupled, index, pos)


def _moved(p: simdiff.Problem, seed: int = 4, size: float = 0.15) -> np.ndarray:
    x = p.x0 + size * np.random.default_rng(seed).uniform(-1, 1, p.n)
    assert p.fn.stale(x) is not None  # beyond the skin: the list must change
    return x


def test_list_follows_the_atoms_and_equals_a_fresh_problem(pos, backend):
    """After a rebuild energy, forces and Hessian are those of a problem built at that geometry
    (same list, same code path: equal to rounding of the summation order)."""
    p = cluster_problem(PAIR, pos)
    d = simdiff.Derivatives(p, backend)
    d.grad(p.x0)  # built (and compiled) for the first list
    x = _moved(p)
    fresh = cluster_problem(PAIR, x.reshape(-1, 3))
    np.testing.assert_allclose(d.value(x), fresh.evaluate(), rtol=1e-14)
    np.testing.assert_allclose(d.grad(x), simdiff.grad(fresh, backend=backend), atol=1e-12)
    np.testing.assert_allclose(d.hessian(x), simdiff.hessian(fresh, backend=backend),
                               atol=1e-11)  # fmt: skip
    np.testing.assert_array_equal(p.fn.index, fresh.fn.index)
    info = d.cache_info()[-1]
    assert info["kind"] == "neighbour_list" and info["rebuilds"] >= 1
    assert info["pairs"] == fresh.fn.n_terms


def test_rebuilt_list_is_exact_against_all_pairs(pos):
    """The rebuilt list misses no interacting pair: the all-pairs energy agrees."""
    from functools import partial

    from simdiff.pes import cluster_energy

    p = cluster_problem(PAIR, pos)
    full = simdiff.Problem(partial(cluster_energy, pair=PAIR, n_particles=38), p.x0)
    x = _moved(p, seed=9, size=0.4)
    np.testing.assert_allclose(p.evaluate(x), full.evaluate(x), rtol=1e-13)
    np.testing.assert_allclose(simdiff.grad(p, x), simdiff.grad(full, x), atol=1e-11)


def test_batch_beyond_the_skin_gets_one_list_for_all_points(pos):
    p = cluster_problem(PAIR, pos)
    xs = np.stack([_moved(p, seed=s) for s in (1, 2, 3)])
    got = simdiff.grad(p, xs, backend="torch")
    for x, g in zip(xs, got, strict=True):
        np.testing.assert_allclose(g, simdiff.grad(cluster_problem(PAIR, x), backend="torch"),
                                   atol=1e-12)  # fmt: skip
    assert p.fn.references.shape == (3, 38, 3)


def _fcc_box(cells: int = 3, a: float = 1.6) -> tuple[np.ndarray, np.ndarray]:
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    grid = np.array([[i, j, k] for i in range(cells) for j in range(cells) for k in range(cells)])
    pos = ((grid[:, None, :] + basis[None]) * a).reshape(-1, 3)
    return pos, np.full(3, cells * a)


def test_translated_periodic_box_has_the_same_finite_energy():
    pair = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.2)
    pos, box = _fcc_box()
    pos = pos + 0.005 * np.random.default_rng(0).standard_normal(pos.shape)
    p = cluster_problem(pair, pos, box=box, skin=0.2)
    e0, g0 = simdiff.value_and_grad(p)
    for shift in ([0.7, -0.3, 0.45], [4.8, 0.0, -9.6], [100.3, 0.2, 0.1]):
        x = (pos + np.array(shift)).reshape(-1)
        e, g = simdiff.value_and_grad(p, x)
        assert np.isfinite(e)
        np.testing.assert_allclose(e, e0, rtol=1e-13)
        np.testing.assert_allclose(g, g0, atol=1e-12)
    assert p.fn.neighbour_list()["rebuilds"] >= 1


def test_periodic_forces_match_ase_lennard_jones():
    """Where the two potentials agree (no pair in the switching region [r_on, r_cut]: an fcc box
    whose shells lie outside it), forces equal ASE's LennardJones (smooth=False, rc=r_cut),
    and energies differ by ASE's shift LJ(rc) per pair, also after a rebuilding move."""
    ase = pytest.importorskip("ase")
    from ase.calculators.lj import LennardJones

    from simdiff.pes import pair_index

    pair = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.2)
    pos, box = _fcc_box()
    rng = np.random.default_rng(5)
    start = pos + 0.005 * rng.standard_normal(pos.shape)
    p = cluster_problem(pair, start, box=box, skin=0.2)
    shift = 4 * (2.2**-12 - 2.2**-6)
    for x in (start, start + np.array([0.9, 0.3, -0.2]) + 0.005 * rng.standard_normal(pos.shape)):
        atoms = ase.Atoms(f"Ar{len(pos)}", positions=x, cell=box, pbc=True)
        atoms.calc = LennardJones(sigma=1.0, epsilon=1.0, rc=2.2, smooth=False)
        e, g = simdiff.value_and_grad(p, x.reshape(-1))
        pairs = len(pair_index(x, 2.2, box))
        np.testing.assert_allclose(e - pairs * shift, atoms.get_potential_energy(), rtol=1e-12)
        np.testing.assert_allclose(-g.reshape(-1, 3), atoms.get_forces(), atol=1e-10)
    assert p.fn.neighbour_list()["rebuilds"] >= 1


@pytest.mark.slow
def test_find_minimum_converges_with_a_list_that_follows_the_atoms(pos):
    """A perturbed LJ38 with a cutoff: atoms travel beyond the skin; the list follows and the
    minimum is a minimum of a problem built there."""
    start = pos + 0.1 * np.random.default_rng(1).standard_normal(pos.shape)
    p = cluster_problem(PAIR, start)
    res = simdiff.pes.find_minimum(p, method="L-BFGS-B", backend="torch", gtol=1e-7)
    assert res.converged and res.index == 0
    assert res.extra["neighbour_list"]["rebuilds"] >= 1
    fresh = cluster_problem(PAIR, res.x.reshape(-1, 3))
    assert float(fresh.evaluate()) == pytest.approx(res.energy, rel=1e-14)
    assert np.linalg.norm(simdiff.grad(fresh)) < 1e-5


def test_skin_beyond_half_the_box_is_kept_and_exact():
    """r_cut + skin may exceed half the box: the skin is used as asked (not shrunk), the list
    holds the pairs by minimum-image distance, and inside the skin the energy and forces are
    those of all minimum-image pairs."""
    from functools import partial

    from simdiff.pes import cluster_energy

    pair = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.2)
    pos, box = _fcc_box()  # box 4.8: half the box - r_cut = 0.2
    pos = pos + 0.01 * np.random.default_rng(2).standard_normal(pos.shape)
    p = cluster_problem(pair, pos, box=box, skin=0.8)
    assert p.fn.neighbour_list()["skin"] == pytest.approx(0.8)
    full = simdiff.Problem(partial(cluster_energy, pair=pair, n_particles=len(pos), box=box),
                           p.x0)  # fmt: skip
    step = np.random.default_rng(3).standard_normal(pos.shape)
    x = (pos + 0.38 * step / np.linalg.norm(step, axis=1, keepdims=True)).reshape(-1)
    assert p.fn.stale(x) is None  # every atom moved 0.38 < skin / 2: the list holds, no rebuild
    np.testing.assert_allclose(p.evaluate(x), full.evaluate(x), rtol=1e-13)
    np.testing.assert_allclose(simdiff.grad(p, x), simdiff.grad(full, x), atol=1e-11)
    assert p.fn.neighbour_list()["rebuilds"] == 0


def test_displacement_is_euclidean_not_per_axis():
    """An atom that moved 0.8 of the limit along each axis has moved 1.39 of it: two such atoms
    moving toward each other close in by more than the skin, so the list must be rebuilt."""
    p = cluster_problem(PAIR, fcc_cluster(38), rebuild=False)
    x = p.x0.reshape(-1, 3).copy()
    x[7] += 0.8 * p.fn.max_shift
    with pytest.raises(NeighbourListError, match=r"atom 7 has moved 0\.17"):
        simdiff.grad(p, x.reshape(-1))
