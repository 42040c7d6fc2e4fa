"""simdiff.sensitivity.moments: exact on quadratics, Monte Carlo on an ODE model, warnings, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import problems.ode
import simdiff
from simdiff.errors import OptionError, ShapeError
from simdiff.sensitivity import MomentWarning, moments

RNG = np.random.default_rng(11)
A = (lambda m: m + m.T)(RNG.normal(size=(3, 3)))
B = RNG.normal(size=3)
QUAD = simdiff.Problem(
    lambda x, ops: 0.5 * ops.sum(x * ops.matmul(ops.asarray(A), x)) + ops.sum(ops.asarray(B) * x)
    + 1.0,
    x0=np.zeros(3), name="quadratic",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_rng(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test draws from a generator of its own: what it draws does not depend on which
    of this module's tests ran before it in the process (xdist's work stealing splits a
    module between workers, so that order changes from run to run)."""
    monkeypatch.setitem(globals(), "RNG", np.random.default_rng(1011))


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_quadratic_is_exact(backend):
    mu = np.array([0.3, -1.0, 0.5])
    S = (lambda m: m @ m.T)(RNG.normal(size=(3, 3)))
    m = moments(QUAD, mu, S, backend=backend)
    g = A @ mu + B
    assert m.value == pytest.approx(0.5 * mu @ A @ mu + B @ mu + 1.0, rel=1e-13)
    assert m.mean == pytest.approx(m.value + 0.5 * np.trace(S @ A), rel=1e-12)
    assert m.variance == pytest.approx(g @ S @ g + 0.5 * np.trace(S @ A @ S @ A), rel=1e-12)
    assert abs(m.third_order) < 1e-10 * m.variance
    m1 = moments(QUAD, mu, S, order=1, backend=backend)
    assert (m1.mean, m1.variance) == (pytest.approx(m.value), pytest.approx(g @ S @ g))


@pytest.mark.slow
def test_ode_model_agrees_with_monte_carlo():
    """0.5 |y(1.5)|^2 of the linear ODE with Gaussian matrix entries (3% spread).

    Monte Carlo with 20000 samples (seeded): the expansion must lie within 4
    standard errors (mean: std/sqrt(N); variance: var sqrt(2/(N-1))), and the
    mean shift must matter: f(mu) alone lies outside.
    """
    p = problems.ode.linear_energy()
    mu = p.x0
    cov = np.diag((0.03 * np.abs(mu)) ** 2 + 1e-6)
    m = moments(p, mu, cov, backend="torch")
    xs = np.random.default_rng(0).multivariate_normal(mu, cov, size=20000)
    v = np.asarray(simdiff.Derivatives(p, "jax").value(xs))
    se_mean = v.std(ddof=1) / np.sqrt(v.size)
    se_var = v.var(ddof=1) * np.sqrt(2.0 / (v.size - 1))
    assert abs(v.mean() - m.mean) < 4.0 * se_mean
    assert abs(v.mean() - m.value) > 4.0 * se_mean
    assert abs(v.var(ddof=1) - m.variance) < 4.0 * se_var


def test_large_third_order_term_warns():
    p = simdiff.Problem(lambda x, ops: x[0] ** 3 + x[1], x0=np.ones(2), name="cubic")
    with pytest.warns(MomentWarning, match="third-order variance term"):
        m = moments(p, np.array([0.1, 0.0]), np.array([1.0, 0.01]))
    # 3 sum_i T[Sigma g, l, l] for T = 6 e0 e0 e0: tau_3 = 6 * (Sigma g)_0 * Sigma_00
    assert m.third_order == pytest.approx(6.0 * 0.03 * 1.0, rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        moments(p, np.array([1.0, 0.0]), np.array([1e-4, 0.01]))


def test_bad_input():
    vec = simdiff.Problem(lambda x, ops: x**2, x0=np.ones(2), name="vec")
    with pytest.raises(ShapeError, match="moments needs a scalar-valued problem; 'vec'"):
        moments(vec, np.ones(2), np.eye(2))
    with pytest.raises(OptionError, match="order must be 1 or 2; got 3"):
        moments(QUAD, np.zeros(3), np.eye(3), order=3)
    with pytest.raises(OptionError, match="positive semi-definite"):
        moments(QUAD, np.zeros(3), -np.eye(3))
    with pytest.raises(ShapeError, match=r"mean for problem 'quadratic' must have shape \(3,\)"):
        moments(QUAD, np.zeros(2), np.eye(3))
