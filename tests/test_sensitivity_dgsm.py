"""DGSM: analytic measures and bounds (Ishigami, Sobol G), distributions, SALib as the peer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _numerics import path_rtol
from _shared import shared_problem
from SALib.analyze import dgsm as salib_dgsm
from SALib.analyze import sobol as salib_sobol
from SALib.sample import finite_diff
from SALib.sample import sobol as salib_sobol_sample

import simdiff
from simdiff.sensitivity import (
    LogUniform,
    Normal,
    Uniform,
    as_distributions,
    batched_value_and_grad,
    dgsm,
    sample,
)

N = 4096


@pytest.fixture(scope="module")
def ishigami() -> simdiff.Problem:
    return shared_problem("ishigami")


@pytest.fixture(scope="module")
def sobol_g() -> simdiff.Problem:
    return shared_problem("sobol_g")


@pytest.mark.parametrize("name", ["ishigami", "sobol_g"])
def test_exact_gradients_of_test_functions(name, backend, rng):
    p = shared_problem(name)
    dists = as_distributions(p.meta["distributions"], p.n)
    xs = np.stack([d.ppf(rng.random(16)) for d in dists], axis=1)
    f, g = batched_value_and_grad(p, xs, backend=backend, chunk_size=5)
    np.testing.assert_allclose(f, [p.exact["value"](x) for x in xs], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(g, [p.exact["grad"](x) for x in xs], rtol=1e-12, atol=1e-12)


def test_analytic_indices_by_monte_carlo_integration(ishigami, sobol_g, rng):
    # The closed forms in the catalogue, checked by plain integration of the exact gradient.
    for p in (ishigami, sobol_g):
        dists = as_distributions(p.meta["distributions"], p.n)
        xs = np.stack([d.ppf(rng.random(10_000)) for d in dists], axis=1)
        g = np.array([p.exact["grad"](x) for x in xs])
        np.testing.assert_allclose(np.mean(g**2, axis=0), p.meta["dgsm"], rtol=0.06)
        values = np.array([p.exact["value"](x) for x in xs])
        np.testing.assert_allclose(np.var(values), p.meta["variance"], rtol=0.06)


@pytest.mark.parametrize("name", ["ishigami", "sobol_g"])
def test_dgsm_matches_analytic_and_bounds_total_index(name, backend):
    p = shared_problem(name)
    r = dgsm(p, p.meta["distributions"], N, backend=backend, n_bootstrap=300, seed=3)
    exact_nu = p.meta["dgsm"]
    np.testing.assert_allclose(r.nu, exact_nu, rtol=2e-3)
    assert np.all((r.nu_ci[0] <= exact_nu) & (exact_nu <= r.nu_ci[1]))
    consts = np.array([d.poincare for d in as_distributions(p.meta["distributions"], p.n)])
    exact_bound = consts * exact_nu / p.meta["variance"]
    np.testing.assert_allclose(r.bound, exact_bound, rtol=5e-3)
    assert np.all(r.bound >= p.meta["total"])
    assert np.all(exact_bound >= p.meta["total"])


def test_backends_agree(ishigami):
    a = dgsm(ishigami, ishigami.meta["distributions"], 512, backend="jax", n_bootstrap=0)
    b = dgsm(ishigami, ishigami.meta["distributions"], 512, backend="torch", n_bootstrap=0)
    np.testing.assert_allclose(a.nu, b.nu, rtol=1e-13)
    assert np.isnan(a.nu_ci).all()


def test_normal_inputs_linear_model_bound_is_tight(backend):
    # f = x0 + 2 x1 with x ~ N(0, 0.5^2): Poincare is an equality for linear f and
    # normal inputs, so the bounds equal the total indices 1/5 and 4/5.
    p = simdiff.Problem(lambda x, ops: x[0] + 2.0 * x[1], x0=np.zeros(2))
    r = dgsm(p, Normal(0.0, 0.5), 1024, backend=backend, n_bootstrap=0)
    np.testing.assert_allclose(r.nu, [1.0, 4.0], rtol=1e-12)
    np.testing.assert_allclose(r.bound, [0.2, 0.8], rtol=0.03)


def test_log_uniform_bound_in_log_coordinate(backend):
    # f = log x with x log-uniform: f is uniform, S_T = 1, and the bound is 12/pi^2.
    p = simdiff.Problem(lambda x, ops: ops.log(x[0]), x0=np.ones(1))
    r = dgsm(p, [("log-uniform", 0.1, 10.0)], 4096, backend=backend, n_bootstrap=0)
    np.testing.assert_allclose(r.bound, [12 / math.pi**2], rtol=2e-3)
    assert LogUniform(0.1, 10.0).poincare == pytest.approx(math.log(100.0) ** 2 / math.pi**2)
    # nu itself is E[1/x^2] = (1/a^2 - 1/b^2) / (2 log(b/a))
    np.testing.assert_allclose(r.nu, [(100.0 - 0.01) / (2 * math.log(100.0))], rtol=0.02)


def test_sampling_methods_and_variance(rng):
    dists = [Uniform(-1.0, 3.0), Normal(2.0, 0.5), LogUniform(1.0, 100.0)]
    for method in ("sobol", "random"):
        xs = sample(dists, 2**14, method=method, seed=1)
        assert xs.shape == (2**14, 3)
        np.testing.assert_allclose(np.var(xs, axis=0), [d.variance for d in dists], rtol=0.05)
        assert xs[:, 0].min() >= -1.0 and xs[:, 0].max() <= 3.0
    a, b = sample(dists, 100, seed=5), sample(dists, 100, seed=5)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        (("uniform", 1.0, 1.0), ValueError, "uniform(a, b) needs a < b; got a=1.0, b=1.0"),
        (("uniform", 0.0, math.inf), ValueError, "uniform upper bound b must be finite"),
        (("normal", 0.0, -1.0), ValueError, "normal(mu, sigma) needs sigma > 0; got sigma=-1.0"),
        (("log-uniform", 0.0, 1.0), ValueError, "needs 0 < a < b; got a=0.0, b=1.0"),
        (("beta", 0.0, 1.0), ValueError, "must be a Distribution or a tuple (kind, p1, p2)"),
        (("uniform", "0", 1.0), TypeError, "must be a real number; got '0'"),
        ([("uniform", 0.0, 1.0)] * 3, ValueError, "expected 2 distributions (one per parameter)"),
    ],
)
def test_invalid_distributions(spec, error, message):
    with pytest.raises(error) as info:
        as_distributions(spec, 2)
    assert message in str(info.value)


def test_invalid_dgsm_arguments(ishigami):
    d = ishigami.meta["distributions"]
    with pytest.raises(ValueError, match="unknown sampling method 'lhs'"):
        dgsm(ishigami, d, 64, method="lhs")
    with pytest.raises(ValueError, match="n_samples must be at least 2; got 1"):
        dgsm(ishigami, d, 1)
    with pytest.raises(ValueError, match=r"confidence must lie in \(0, 1\); got 1.5"):
        dgsm(ishigami, d, 64, confidence=1.5)
    with pytest.raises(simdiff.ShapeError, match="needs a scalar-valued problem"):
        dgsm(shared_problem("spherical"), ("uniform", 0.0, 1.0), 64)
    const = simdiff.Problem(lambda x, ops: 0.0 * x[0], x0=np.zeros(1))
    with pytest.raises(ValueError, match="sample variance is 0.0"):
        dgsm(const, ("uniform", 0.0, 1.0), 64, n_bootstrap=0)


def test_non_finite_model_is_reported(backend):
    p = simdiff.Problem(lambda x, ops: ops.sqrt(x[0]), x0=np.ones(1))
    with pytest.raises(simdiff.NonFiniteError, match="not finite at sample point"):
        dgsm(p, ("uniform", -1.0, 1.0), 64, backend=backend, n_bootstrap=0)


def test_chunking_compiles_once(ishigami):
    d = simdiff.Derivatives(ishigami, "jax", check_finite=False)
    xs = sample(as_distributions(ishigami.meta["distributions"], 3), 1000)
    f, g = batched_value_and_grad(ishigami, xs, chunk_size=300, derivatives=d)
    assert d.compilations == 1  # 4 chunks, the last padded
    f1, g1 = batched_value_and_grad(ishigami, xs, chunk_size=1000)
    # another batch size may vectorise differently: Ishigami's ~16 operations a path
    np.testing.assert_allclose(f, f1, rtol=path_rtol(16))
    np.testing.assert_allclose(g, g1, rtol=path_rtol(16))


# --------------------------------------------------------------------------- SALib, the peer


def _salib_problem(p: simdiff.Problem) -> dict:
    bounds = [[a, b] for _, a, b in p.meta["distributions"]]
    return {"num_vars": p.n, "names": [f"x{i}" for i in range(p.n)], "bounds": bounds}


@pytest.mark.parametrize("name", ["ishigami", "sobol_g"])
def test_salib_finite_difference_dgsm_on_the_same_points(name):
    p = shared_problem(name)
    sp = _salib_problem(p)
    X = finite_diff.sample(sp, 1024, delta=1e-3, seed=7)
    Y = np.array([p.exact["value"](x) for x in X])
    S = salib_dgsm.analyze(sp, X, Y, num_resamples=50, seed=7)
    base = X[:: p.n + 1]
    _, g = batched_value_and_grad(p, base)
    nu = np.mean(g**2, axis=0)
    # Same points: the difference is SALib's forward-difference error, O(delta).
    np.testing.assert_allclose(S["vi"], nu, rtol=1e-2)
    bound = (
        np.array([(b - a) ** 2 for a, b in sp["bounds"]]) / math.pi**2 * nu / np.var(Y[:: p.n + 1])
    )
    np.testing.assert_allclose(S["dgsm"], bound, rtol=1e-2)


def test_salib_sobol_indices_respect_the_dgsm_bound(ishigami):
    sp = _salib_problem(ishigami)
    X = salib_sobol_sample.sample(sp, 1024, calc_second_order=False, seed=11)
    Y = np.array([ishigami.exact["value"](x) for x in X])
    Si = salib_sobol.analyze(sp, Y, calc_second_order=False, seed=11)
    np.testing.assert_allclose(Si["ST"], ishigami.meta["total"], atol=0.05)
    r = dgsm(ishigami, ishigami.meta["distributions"], 1024, n_bootstrap=0)
    assert np.all(r.bound >= Si["ST"] - Si["ST_conf"])
