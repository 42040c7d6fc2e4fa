"""simdiff.sensitivity.profile_likelihood: profiles traced with exact Hessians.

References: the closed-form Wald interval of a linear-Gaussian model (where the
profile is exactly quadratic), SciPy re-optimisation profiles with
finite-difference Jacobians on the NumPy backend (an independent code path),
and the other backend.
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import scipy.optimize
import scipy.stats

import simdiff
from simdiff.core.config import Config
from simdiff.errors import InputError, InputTypeError, OutOfRangeError, SimdiffError
from simdiff.sensitivity import SIDE_STATUS, ProfileLikelihood, profile_likelihood
from simdiff.sensitivity._common import derivatives
from simdiff.sensitivity._profile import _cost_problem

matplotlib.use("Agg")

T = np.linspace(0.0, 1.0, 20)
A = np.stack([np.ones_like(T), T, T**2], axis=1)
SIGMA = 0.1
DATA = A @ np.array([1.0, -2.0, 0.5]) + SIGMA * np.random.default_rng(0).standard_normal(20)


def _linear(x, ops):
    return (ops.matmul(ops.asarray(A), x) - ops.asarray(DATA)) / SIGMA


def _flat(x, ops):  # only x0 + x1 enters: one non-identifiable direction
    return ((x[0] + x[1]) * ops.asarray(T) + x[2] * ops.asarray(T**2) - ops.asarray(DATA)) / SIGMA


DECAY_DATA = 2.0 * np.exp(-1.3 * T) + 0.05 * np.random.default_rng(1).standard_normal(20)


def _decay(x, ops):  # nonlinear in x[1]
    return (x[0] * ops.exp(-x[1] * ops.asarray(T)) - ops.asarray(DECAY_DATA)) / 0.05


@pytest.fixture(scope="module")
def linear_fit():
    return simdiff.least_squares(simdiff.Problem(_linear, x0=np.zeros(3), name="linear"))


@pytest.fixture(scope="module")
def linear_profile(linear_fit):
    return profile_likelihood(linear_fit)


def test_linear_gaussian_interval_is_the_exact_wald_interval(linear_profile):
    cov = np.linalg.inv(A.T @ A) * SIGMA**2
    xhat = np.linalg.solve(A.T @ A, A.T @ DATA)
    z = scipy.stats.norm.ppf(0.975)
    for p in linear_profile.profiles:
        half = z * np.sqrt(cov[p.index, p.index])
        assert (p.lower_status, p.upper_status) == ("threshold", "threshold")
        np.testing.assert_allclose(p.lower, xhat[p.index] - half, rtol=0, atol=1e-8)
        np.testing.assert_allclose(p.upper, xhat[p.index] + half, rtol=0, atol=1e-8)
        # the profile is exactly the quadratic ((c - xhat) / se)^2 at every traced point
        np.testing.assert_allclose(
            p.ratio, ((p.c - xhat[p.index]) / np.sqrt(cov[p.index, p.index])) ** 2, atol=1e-8
        )
        assert p.counts["reoptimised"] == 0 and p.counts["nhess"] > 0
        assert not p.reoptimised.any()
    assert isinstance(linear_profile, ProfileLikelihood)
    assert linear_profile.threshold == pytest.approx(0.5 * scipy.stats.chi2.ppf(0.95, 1))


def test_level_changes_the_interval(linear_fit):
    narrow = profile_likelihood(linear_fit, 1, level=0.5)[1]
    wide = profile_likelihood(linear_fit, 1, level=0.99)[1]
    assert wide.lower < narrow.lower < narrow.upper < wide.upper
    np.testing.assert_allclose([narrow.lower, narrow.upper], narrow.wald, atol=1e-8)


def test_table_and_plot(linear_profile):
    text = linear_profile.table()
    for word in ("parameter", "Wald 95 % interval", "profile 95 % interval", "x[0]", "threshold"):
        assert word in text
    fig = linear_profile.plot()
    assert isinstance(fig, matplotlib.figure.Figure)
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 3
    assert fig.axes[0].lines  # profile, Laplace parabola, interval lines drawn


def test_at_evaluates_off_the_grid(linear_profile):
    p = linear_profile["x[2]"]
    c = 0.5 * (p.c[1] + p.c[2])
    value, theta = linear_profile.at("x[2]", c)
    assert theta[2] == c
    se = linear_profile.laplace.std_errors[2]
    assert 2 * (value - linear_profile.objective) == pytest.approx(
        ((c - p.estimate) / se) ** 2, abs=1e-8
    )


def _brute_force(residuals_np, x, i, c):
    """SciPy least_squares over the other parameters, 2-point finite differences, NumPy."""
    r = np.arange(x.size) != i

    def res(z):
        full = x.copy()
        full[r], full[i] = z, c
        return residuals_np(full)

    sol = scipy.optimize.least_squares(res, x[r], xtol=1e-15, ftol=1e-15, gtol=1e-15)
    return 0.5 * float(sol.fun @ sol.fun)


@pytest.fixture(scope="module")
def decay_fit():
    return simdiff.least_squares(simdiff.Problem(_decay, x0=np.array([1.0, 1.0]), name="decay"))


def test_nonlinear_profile_matches_reoptimisation(decay_fit):
    fit = decay_fit
    prof = profile_likelihood(fit)
    problem = fit.problem
    for p in prof.profiles:
        assert (p.lower_status, p.upper_status) == ("threshold", "threshold")
        # curved profile: the likelihood-ratio interval differs from Wald's
        assert abs(p.lower - p.wald[0]) > 1e-6
        for k in range(0, p.c.size, 3):
            ref = _brute_force(lambda x: problem.evaluate(x), prof.x, p.index, p.c[k])
            assert p.objective[k] == pytest.approx(ref, abs=1e-7)


def test_lockstep_paths_equal_paths_traced_alone(decay_fit):
    """All sides traced together take the steps each takes alone, in fewer batched calls."""
    together = profile_likelihood(decay_fit)
    assert together.counts["batches"] < together.counts["nhess"]
    for i in (0, 1):
        alone, p = profile_likelihood(decay_fit, i)[i], together[i]
        assert p.c.shape == alone.c.shape
        np.testing.assert_allclose(p.c, alone.c, rtol=1e-12)
        np.testing.assert_allclose(p.objective, alone.objective, rtol=1e-12)
        assert p.counts == alone.counts


@pytest.mark.parametrize("batch", [1, 3])
def test_batch_size_changes_the_calls_not_the_profiles(decay_fit, batch):
    """``batch=1``: every point alone (no batched call); 3: the 4 sides in calls of 3."""
    ref = profile_likelihood(decay_fit)
    got = profile_likelihood(decay_fit, batch=batch)
    assert (got.counts["batches"] == 0) == (batch == 1)
    assert ref.counts["batches"] > 0
    for p, q in zip(got.profiles, ref.profiles, strict=True):
        np.testing.assert_allclose(p.c, q.c, rtol=1e-12)
        np.testing.assert_allclose(p.objective, q.objective, rtol=1e-12)
        assert p.counts == q.counts


def test_a_batched_call_that_raises_falls_back_to_single_points(decay_fit, monkeypatch):
    """A problem the framework cannot vmap: the points one at a time, and the message says so."""
    ref = profile_likelihood(decay_fit)
    d = derivatives(_cost_problem(decay_fit.problem), Config(backend="jax"))  # the one profiled
    plain = d.hessian

    def hessian(x=None, **kw):
        if np.ndim(x) == 2:
            raise RuntimeError("vmap: data-dependent control flow")
        return plain(x, **kw)

    monkeypatch.setattr(d, "hessian", hessian)
    got = profile_likelihood(decay_fit)
    assert got.counts["batches"] == 0
    assert "a batched derivative call raised (RuntimeError: vmap" in got.message
    for p, q in zip(got.profiles, ref.profiles, strict=True):
        np.testing.assert_allclose(p.objective, q.objective, rtol=1e-12)
        assert p.counts == q.counts


def test_torch_agrees_with_jax(decay_fit):
    ref = profile_likelihood(decay_fit, 1, backend="jax")
    got = profile_likelihood(decay_fit, 1, backend="torch")
    assert (got.backend, ref.backend) == ("torch", "jax")
    p, q = got[1], ref[1]
    np.testing.assert_allclose([p.lower, p.upper], [q.lower, q.upper], rtol=1e-10)
    np.testing.assert_allclose(p.c, q.c, rtol=1e-8)
    np.testing.assert_allclose(p.objective, q.objective, rtol=1e-10)


def test_non_identifiable_direction_is_reported():
    fit = simdiff.least_squares(simdiff.Problem(_flat, x0=np.array([0.5, 0.5, 0.0]), name="flat"))
    prof = profile_likelihood(fit, max_steps=30)
    for name in ("x[0]", "x[1]"):
        p = prof[name]
        assert (p.lower, p.upper) == (None, None)
        assert (p.lower_status, p.upper_status) == ("flat", "flat")
        assert "not identifiable" in p.lower_message
        assert p.counts["steps"] < 2 * 30
    # x[2] is identifiable, but H_rr (x0, x1) is singular: re-optimised, and said so
    p = prof["x[2]"]
    assert (p.lower_status, p.upper_status) == ("threshold", "threshold")
    assert p.reoptimised.any() and "re-optimised" in prof.message
    assert prof.laplace.ci is None and p.wald is None
    assert set(SIDE_STATUS) >= {p.lower_status, prof["x[0]"].upper_status}


def test_bound_is_reported(linear_fit):
    wald = profile_likelihood(linear_fit, 1)[1].wald
    bounded = simdiff.least_squares(
        simdiff.Problem(_linear, x0=np.zeros(3), name="linear"),
        bounds=[(None, None), (0.5 * (wald[0] + linear_fit.x[1]), None), (None, None)],
    )
    p = profile_likelihood(bounded, [1])[1]
    assert p.lower is None and p.lower_status == "bound" and "bound" in p.lower_message
    assert p.c[0] == pytest.approx(0.5 * (wald[0] + linear_fit.x[1]))
    assert p.upper_status == "threshold"


def test_max_steps_is_reported(linear_fit):
    p = profile_likelihood(linear_fit, 0, max_steps=2, step_fraction=0.01)[0]
    assert (p.lower_status, p.upper_status) == ("max_steps", "max_steps")
    assert p.lower is None and "2 steps" in p.lower_message


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (({"x": np.zeros(3)},), {}, InputTypeError, "expected the result of simdiff.least_squares"),
        ((np.zeros(3),), {}, InputTypeError, "got ndarray"),
        ((None, "y"), {}, InputError, r"unknown parameter 'y'; expected one of \['x\[0\]'"),
        ((None, 5), {}, OutOfRangeError, "index 5 out of range for 3 parameters"),
        ((None, [0, 0]), {}, InputError, "repeat a parameter"),
        ((None, 1.5), {}, InputTypeError, "names or integer indices; got float"),
        ((None,), {"level": 1.0}, InputError, r"level must lie in \(0, 1\); got 1.0"),
        ((None,), {"scale": -1.0}, InputError, "scale must be a positive finite number"),
        ((None,), {"max_steps": 0}, InputError, "max_steps must be a positive integer"),
        ((None,), {"step_fraction": 2.0}, InputError, "step_fraction must be .* at most 1.0"),
        ((None,), {"names": ["a", "a", "b"]}, InputError, "names must be 3 distinct strings"),
        ((None,), {"max_step": -1.0}, InputError, "max_step must be positive"),
        ((None,), {"batch": 0}, InputError, "batch must be a positive integer; got 0"),
        ((None,), {"bounds": [(0, 1)]}, SimdiffError, r"bounds must be 3 \(low, high\) pairs"),
    ],
)
def test_bad_input(linear_fit, args, kwargs, error, match):
    args = (linear_fit if args[0] is None else args[0], *args[1:])
    with pytest.raises(error, match=match):
        profile_likelihood(*args, **kwargs)
    assert issubclass(error, SimdiffError)


def test_likelihood_fit_from_minimize(linear_fit):
    nll = simdiff.Problem(lambda x, ops: 0.5 * ops.sum(_linear(x, ops) ** 2), x0=np.zeros(3))
    fit = simdiff.minimize(nll, method="trust-exact")
    p = profile_likelihood(fit, "x[1]")["x[1]"]
    ref = profile_likelihood(linear_fit, 1)[1]
    np.testing.assert_allclose([p.lower, p.upper], [ref.lower, ref.upper], atol=1e-8)


@pytest.mark.slow
def test_lotka_volterra_profile_matches_reoptimisation():
    """The fit of docs/sensitivity.md; slow only for JAX's compilation of the RK4 Hessian."""
    from validation.benchmarks.bench_profile import lv_fit

    fit = lv_fit()
    prof = profile_likelihood(fit, ["beta", "gamma"])
    for p in prof.profiles:
        assert (p.lower_status, p.upper_status) == ("threshold", "threshold")
        assert p.lower < p.estimate < p.upper
        for c in np.linspace(p.c[0], p.c[-1], 4):
            ref = _brute_force(lambda x: fit.problem.evaluate(x), prof.x, p.index, c)
            assert prof.at(p.name, c)[0] == pytest.approx(ref, abs=1e-5)
