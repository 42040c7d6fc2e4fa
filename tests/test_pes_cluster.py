"""Cluster energies: dimers against analytic Hessians, SciPy and AD-gradient finite
differences, jax vs torch, periodic boxes, Müller–Brown, and bad input."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.differentiate
from _shared import shared_problem

import simdiff
from problems.pes import LJEnergyNumpy
from simdiff.pes import (
    check_positions,
    cluster_energy,
    cluster_problem,
    forces,
    lennard_jones,
    morse,
    smooth_cutoff,
)


@pytest.mark.parametrize("name", ["lj-dimer", "morse-dimer"])
def test_dimer_matches_analytic(backend, name):
    p = shared_problem(name)
    x = p.x0
    np.testing.assert_allclose(p.evaluate(x), p.exact["value"](x), rtol=1e-14)
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), p.exact["grad"](x), rtol=1e-12,
                               atol=1e-13)  # fmt: skip
    np.testing.assert_allclose(simdiff.hessian(p, backend=backend), p.exact["hessian"](x),
                               rtol=1e-12, atol=1e-12)  # fmt: skip


def test_muller_brown_matches_analytic(backend):
    p = shared_problem("muller-brown")
    for x in (p.x0, np.array([0.3, 0.1]), np.array([-1.1, 0.9])):
        np.testing.assert_allclose(p.evaluate(x), p.exact["value"](x), rtol=1e-14)
        np.testing.assert_allclose(simdiff.grad(p, x, backend=backend), p.exact["grad"](x),
                                   rtol=1e-12, atol=1e-10)  # fmt: skip
        np.testing.assert_allclose(simdiff.hessian(p, x, backend=backend), p.exact["hessian"](x),
                                   rtol=1e-12, atol=1e-9)  # fmt: skip


@pytest.fixture(scope="module")
def lj7_scipy_hessian():
    p = shared_problem("lj7")
    f = LJEnergyNumpy(7)
    assert f(p.x0) == pytest.approx(float(p.evaluate()), rel=1e-13)
    res = scipy.differentiate.hessian(f, p.x0, initial_step=0.05, order=8,
                                      tolerances={"atol": 1e-9, "rtol": 1e-12})  # fmt: skip
    assert np.all(res.success)
    return p, res


def test_lj7_hessian_against_scipy_finite_differences(backend, lj7_scipy_hessian):
    p, res = lj7_scipy_hessian
    h = simdiff.hessian(p, backend=backend)
    # SciPy's error estimates are <= 1e-9 here; allow 1e-8 relative to the largest entry
    np.testing.assert_allclose(h, res.ddf, rtol=0, atol=1e-8 * np.abs(h).max())


def test_lj38_hessian_against_finite_differences_of_ad_gradient(backend):
    p = shared_problem("lj38")
    x, n, step = p.x0, p.n, 1e-5
    shifts = np.eye(n) * step
    g = simdiff.grad(p, np.vstack([x + shifts, x - shifts]), backend=backend)  # vmapped
    fd = (g[:n] - g[n:]) / (2 * step)
    h = simdiff.hessian(p, backend=backend)
    # central differences: truncation O(step^2 |g'''|), rounding O(eps |g| / step)
    np.testing.assert_allclose(h, fd, atol=1e-6 * np.abs(h).max())
    np.testing.assert_allclose(h, h.T, atol=1e-12 * np.abs(h).max())


def test_jax_and_torch_agree_lj13():
    p = shared_problem("lj13")
    hj = simdiff.hessian(p, backend="jax")
    ht = simdiff.hessian(p, backend="torch")
    np.testing.assert_allclose(hj, ht, rtol=1e-12, atol=1e-11)
    v = np.random.default_rng(0).standard_normal(p.n)
    np.testing.assert_allclose(simdiff.hvp(p, v, backend="torch"), hj @ v, rtol=1e-10, atol=1e-10)


def test_energy_matches_pair_loop():
    rng = np.random.default_rng(5)
    pos = rng.uniform(0, 3, (9, 3))
    pair = functools.partial(morse, D=0.5, a=1.3, r0=1.1)
    p = cluster_problem(pair, pos)
    ops = simdiff.get_ops("numpy")
    loop = sum(float(pair(np.linalg.norm(pos[i] - pos[j]), ops))
               for i in range(9) for j in range(i + 1, 9))  # fmt: skip
    assert float(p.evaluate()) == pytest.approx(loop, rel=1e-13)


def test_forces_sum_to_zero_and_translation_invariance(backend):
    p = shared_problem("lj13")
    f = forces(p, backend=backend)
    np.testing.assert_allclose(f.reshape(-1, 3).sum(axis=0), 0.0, atol=1e-11)
    shifted = (p.x0.reshape(-1, 3) + np.array([0.3, -1.0, 2.0])).reshape(-1)
    np.testing.assert_allclose(p.evaluate(shifted), p.evaluate(), rtol=1e-13)


# --------------------------------------------------------------------------- periodic


def _fcc_crystal(cells, a):
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    grid = np.array([[i, j, k] for i in range(cells) for j in range(cells) for k in range(cells)])
    return ((grid[:, None, :] + basis[None]).reshape(-1, 3)) * a


def _brute_periodic(pos, box, pair, r_cut):
    """Energy by explicit image sums (no minimum image), numpy."""
    ops = simdiff.get_ops("numpy")
    n, e = len(pos), 0.0
    imgs = np.array([[i, j, k] for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)])
    for i in range(n):
        for j in range(i + 1, n):
            r = np.linalg.norm(pos[j] - pos[i] + imgs * box, axis=1)
            e += float(np.sum(pair(r[r < r_cut], ops)))
    return e


@pytest.fixture
def periodic():
    pair = smooth_cutoff(lennard_jones, r_on=1.8, r_cut=2.2)
    a = 1.55
    pos = _fcc_crystal(3, a) + np.random.default_rng(1).normal(0, 0.05, (108, 3))
    return cluster_problem(pair, pos, box=3 * a, name="lj-fcc108"), pair


def test_periodic_energy_matches_image_sum(periodic):
    p, pair = periodic
    box = p.meta["pes"].box
    assert float(p.evaluate()) == pytest.approx(
        _brute_periodic(p.x0.reshape(-1, 3), box, pair, 2.2), rel=1e-12)  # fmt: skip


def test_periodic_wrap_invariance(periodic, backend):
    p, _ = periodic
    box = p.meta["pes"].box
    moved = p.x0.reshape(-1, 3).copy()
    moved[5] += box * np.array([1, -2, 1])
    moved = moved.reshape(-1)
    assert float(p.evaluate(moved)) == pytest.approx(float(p.evaluate()), rel=1e-12)
    np.testing.assert_allclose(simdiff.grad(p, moved, backend=backend),
                               simdiff.grad(p, backend=backend), atol=1e-10)  # fmt: skip


def test_periodic_perfect_crystal_has_zero_forces(backend):
    pair = smooth_cutoff(lennard_jones, r_on=1.8, r_cut=2.2)
    p = cluster_problem(pair, _fcc_crystal(3, 1.55), box=3 * 1.55)
    np.testing.assert_allclose(forces(p, backend=backend), 0.0, atol=1e-11)


def test_periodic_needs_cutoff():
    with pytest.raises(ValueError, match="cutoff r_cut <= min"):
        cluster_problem(lennard_jones, _fcc_crystal(2, 1.55), box=3.1)
    # a cutoff beyond half the box: image pairs (tests/test_pes_small_cells.py)
    p = cluster_problem(smooth_cutoff(lennard_jones, r_on=1.0, r_cut=2.0), _fcc_crystal(2, 1.55),
                        box=3.1)  # fmt: skip
    assert type(p.fn).__name__ == "ImagePairEnergy"


# --------------------------------------------------------------------------- bad input


def test_empty_system():
    with pytest.raises(ValueError, match="at least one particle"):
        cluster_problem(lennard_jones, np.zeros((0, 3)))


@pytest.mark.parametrize("shape", [(4, 2), (7,), (2, 3, 1)])
def test_wrong_position_shapes(shape):
    with pytest.raises(simdiff.ShapeError, match=r"positions must have shape \(N, 3\)"):
        cluster_problem(lennard_jones, np.arange(np.prod(shape), dtype=float).reshape(shape))


@pytest.mark.parametrize("masses", [[1.0, 0.0], [1.0, -2.0], [1.0, np.nan]])
def test_non_positive_masses(masses):
    with pytest.raises(ValueError, match=r"masses must be finite and positive; masses\[1\]"):
        cluster_problem(lennard_jones, [[0, 0, 0], [1.0, 0, 0]], masses=masses)


def test_wrong_mass_shape():
    with pytest.raises(simdiff.ShapeError, match=r"masses must be a scalar or of shape \(2,\)"):
        cluster_problem(lennard_jones, [[0, 0, 0], [1.0, 0, 0]], masses=[1.0, 1.0, 1.0])


def test_coincident_start_rejected():
    with pytest.raises(ValueError, match="particles 0 and 2 coincide"):
        cluster_problem(lennard_jones, [[0, 0, 0], [1.0, 0, 0], [0, 0, 0]])


def test_coincidence_check_is_exact_and_sees_periodic_images():
    """Found among many particles (k-d tree), through a periodic image, and not for a pair
    1e-12 apart (distinct, so finite): the first coincident pair in row order is named."""
    from simdiff.pes import check_positions

    pos = np.random.default_rng(0).random((300, 3)) * 5
    near = pos.copy()
    near[200] = near[40] + 1e-12
    assert check_positions(near, 300).shape == (300, 3)
    same = near.copy()
    same[250], same[120] = same[90], same[60]
    with pytest.raises(ValueError, match="particles 60 and 120 coincide"):
        check_positions(same, 300)
    box = np.full(3, 5.0)
    image = pos.copy()
    image[7] = np.round(pos[3] * 8) / 8 + [5.0, 0.0, -5.0]  # binary fractions: exact images
    image[3] = np.round(pos[3] * 8) / 8
    with pytest.raises(ValueError, match="particles 3 and 7 coincide"):
        check_positions(image, 300, box=box)
    assert check_positions(image, 300).shape == (300, 3)  # without the box: distinct


def test_coincident_point_gives_inf_energy_and_reported_derivatives(backend):
    p = shared_problem("lj7")
    x = p.x0.copy()
    x[3:6] = x[0:3]  # particle 1 onto particle 0
    assert float(p.evaluate(x)) == np.inf
    assert float(simdiff.Derivatives(p, backend, check_finite=False).value(x)) == np.inf
    with pytest.raises(simdiff.NonFiniteError):
        simdiff.grad(p, x, backend=backend)
    with pytest.raises(simdiff.NonFiniteError):
        simdiff.hessian(p, x, backend=backend)
    with pytest.raises(ValueError, match="particles 0 and 1 coincide"):
        forces(p, x, backend=backend)


def test_coincident_morse_is_inf_not_finite():
    """Morse is finite at r = 0, but coincident particles still give the explicit +inf."""
    p = cluster_problem(morse, [[0, 0, 0], [1.0, 0, 0]])
    assert float(p.evaluate(np.zeros(6))) == np.inf


def test_distinct_particles_are_finite_near_coincidence(backend):
    p = cluster_problem(morse, [[0, 0, 0], [1.0, 0, 0]])
    h = simdiff.hessian(p, np.array([0, 0, 0, 1e-3, 0, 0.0]), backend=backend)
    assert np.all(np.isfinite(h))


def test_check_positions_shapes():
    with pytest.raises(simdiff.ShapeError, match=r"expected coordinates of shape \(6,\)"):
        check_positions(np.zeros(5), 2)
    with pytest.raises(ValueError, match="coordinates must be finite; particle 1"):
        check_positions(np.array([0, 0, 0, np.nan, 0, 0]), 2)


def test_cluster_energy_docstring_dimer():
    ops = simdiff.get_ops("numpy")
    r = 1.3
    x = np.array([0, 0, 0, 0, r, 0.0])
    assert float(cluster_energy(x, ops, pair=lennard_jones, n_particles=2)) == pytest.approx(
        4 * (r**-12 - r**-6), rel=1e-14)  # fmt: skip


@pytest.mark.parametrize("name", ["lj7", "lj13", "lj38"])
def test_catalogue_energy_matches_independent_numpy(name):
    p = shared_problem(name)
    x = p.x0 + np.random.default_rng(3).normal(0, 0.01, p.n)
    assert float(p.evaluate(x)) == pytest.approx(float(p.exact["value"](x)), rel=1e-13)


def test_cluster_problems_pickle(backend):
    """Problems built by cluster_problem (also with a cutoff and a box) pickle for workers."""
    import pickle

    pair = smooth_cutoff(functools.partial(morse, a=1.4), r_on=1.8, r_cut=2.2)
    p = cluster_problem(pair, _fcc_crystal(3, 1.55), box=3 * 1.55, masses=2.0)
    simdiff.grad(p, backend=backend)  # fills the compiled-function cache
    q = pickle.loads(pickle.dumps(p))
    assert float(q.evaluate()) == float(p.evaluate())
    np.testing.assert_allclose(simdiff.grad(q, backend=backend), simdiff.grad(p, backend=backend))
    np.testing.assert_array_equal(q.meta["pes"].masses, np.full(108, 2.0))


@pytest.mark.parametrize("name", ["lj-dimer", "morse-dimer", "morse-h2", "lj13", "muller-brown"])
def test_catalogue_entries_pickle(name):
    import pickle

    p = shared_problem(name)
    q = pickle.loads(pickle.dumps(p))
    x = p.x0 + 0.01
    assert float(q.evaluate(x)) == float(p.evaluate(x))
    for key, ref in p.exact.items():
        np.testing.assert_array_equal(q.exact[key](x), ref(x))
