"""Local sensitivities, Fisher information and Laplace covariance against closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.differentiate
import scipy.stats
from _numerics import path_rtol
from _shared import shared_problem

import simdiff
from simdiff.sensitivity import fisher_information, laplace, local_sensitivity

T = np.linspace(0.0, 2.0, 7)


def _decay(x, ops):
    """y(t) = A exp(-k t) at fixed times: d log y / d log A = 1, d log y / d log k = -k t."""
    return x[0] * ops.exp(-x[1] * ops.asarray(T))


@pytest.fixture
def decay() -> simdiff.Problem:
    return simdiff.Problem(_decay, x0=np.array([3.0, 0.7]), name="decay")


def test_local_sensitivity_closed_form(decay, backend):
    s = local_sensitivity(decay, backend=backend)
    A, k = decay.x0
    # the AD backend's exp against numpy's, 3 roundings a path
    np.testing.assert_allclose(s.values, A * np.exp(-k * T), rtol=path_rtol(3))
    jac = np.stack([np.exp(-k * T), -A * T * np.exp(-k * T)], axis=1)
    np.testing.assert_allclose(s.jacobian, jac, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(s.relative, np.stack([np.ones_like(T), -k * T], axis=1), atol=1e-14)
    np.testing.assert_allclose(s.importance, [1.0, np.sqrt(np.mean((k * T) ** 2))], rtol=1e-14)
    np.testing.assert_array_equal(s.ranking, [0, 1])


def test_scalar_problem_gives_one_row(backend):
    p = simdiff.Problem(lambda x, ops: x[0] ** 2 * ops.exp(x[1]), x0=np.array([2.0, 0.5]))
    s = local_sensitivity(p, backend=backend)
    assert s.jacobian.shape == (1, 2) and s.values.shape == (1,)
    np.testing.assert_allclose(s.relative, [[2.0, 0.5]], rtol=1e-14)  # x0 * 2 / x0, x1


def test_relative_sensitivity_is_nan_where_output_vanishes(backend):
    p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1], x[0] - 1.0]), x0=np.ones(2))
    s = local_sensitivity(p, backend=backend)
    assert np.isnan(s.relative[1]).all()
    np.testing.assert_allclose(s.relative[0], [1.0, 1.0])
    np.testing.assert_allclose(s.importance, [1.0, 1.0])


@pytest.fixture(scope="module")
def lv_fd_jacobian() -> np.ndarray:
    """SciPy's Richardson-extrapolated finite-difference Jacobian of the LV observations."""
    p = shared_problem("lv4_observations")

    def f(x):  # scipy passes x of shape (n, *batch)
        cols = x.reshape(p.n, -1)
        ys = np.stack([p.evaluate(cols[:, i]) for i in range(cols.shape[1])], axis=1)
        return ys.reshape(-1, *x.shape[1:])

    return scipy.differentiate.jacobian(f, p.x0, initial_step=1e-3).df


def test_lotka_volterra_sensitivities_match_finite_differences(backend, lv_fd_jacobian):
    s = local_sensitivity(shared_problem("lv4_observations"), backend=backend)
    fd = lv_fd_jacobian
    np.testing.assert_allclose(s.jacobian, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


# --------------------------------------------------------------------------- Fisher information

X = np.array([[1.0, 0.0, 2.0], [1.0, 1.0, 0.5], [1.0, 2.0, -1.0], [1.0, 3.0, 0.0], [1.0, 4.0, 1.0]])


def _linear(x, ops):
    return ops.matmul(ops.asarray(X), x)


def test_fim_of_linear_model_equals_xtx(backend):
    p = simdiff.Problem(_linear, x0=np.zeros(3))
    fim = fisher_information(p, sigma=0.5, backend=backend)
    np.testing.assert_allclose(fim.matrix, X.T @ X / 0.25, rtol=1e-13)
    np.testing.assert_allclose(
        fim.eigenvalues, np.linalg.eigvalsh(X.T @ X)[::-1] / 0.25, rtol=1e-12
    )
    np.testing.assert_allclose(fim.covariance, 0.25 * np.linalg.inv(X.T @ X), rtol=1e-10)
    assert fim.identifiable and fim.rank == 3 and fim.null_space.shape == (3, 0)
    ev = np.linalg.eigvalsh(X.T @ X)
    assert fim.condition == pytest.approx(ev[-1] / ev[0], rel=1e-10)
    assert "identifiable: rank 3 of 3" in fim.message


def test_fim_noise_models_agree(backend):
    p = simdiff.Problem(_linear, x0=np.zeros(3))
    sig = np.array([0.5, 1.0, 2.0, 1.0, 0.25])
    per = fisher_information(p, sigma=sig, backend=backend)
    cov = fisher_information(p, sigma=np.diag(sig**2), backend=backend)
    expected = X.T @ np.diag(1 / sig**2) @ X
    np.testing.assert_allclose(per.matrix, expected, rtol=1e-13)
    np.testing.assert_allclose(cov.matrix, expected, rtol=1e-13)
    full = np.full((5, 5), 0.3) + np.diag(sig**2)
    fc = fisher_information(p, sigma=full, backend=backend)
    np.testing.assert_allclose(fc.matrix, X.T @ np.linalg.solve(full, X), rtol=1e-12)


def test_singular_fim_reports_unidentifiable_direction(backend):
    # y depends on x0 + 2 x1 only: the direction (2, -1)/sqrt(5) is unidentifiable.
    p = simdiff.Problem(lambda x, ops: ops.stack([x[0] + 2 * x[1], ops.sin(x[0] + 2 * x[1]), x[2]]),
                        x0=np.array([0.1, 0.2, 0.3]))  # fmt: skip
    fim = fisher_information(p, backend=backend)
    assert not fim.identifiable and fim.rank == 2 and fim.condition == np.inf
    assert fim.covariance is None and fim.std_errors is None
    assert fim.null_space.shape == (3, 1)
    v = fim.null_space[:, 0] * np.sign(fim.null_space[0, 0])
    np.testing.assert_allclose(v, np.array([2.0, -1.0, 0.0]) / np.sqrt(5), atol=1e-12)
    assert "not identifiable: rank 2 of 3" in fim.message


def test_sloppy_lotka_volterra_spectrum(backend):
    p = shared_problem("lv4_observations")
    fim = fisher_information(p, sigma=0.5, backend=backend)
    assert fim.identifiable and fim.rank == 4
    assert np.all(np.diff(fim.eigenvalues) <= 0)
    # eigenvectors diagonalise the FIM
    v = fim.eigenvectors
    np.testing.assert_allclose(v.T @ fim.matrix @ v, np.diag(fim.eigenvalues),
                               atol=1e-9 * fim.eigenvalues[0])  # fmt: skip


@pytest.mark.parametrize(
    ("sigma", "message"),
    [
        (0.0, "sigma must be positive"),
        (np.ones(3), "sigma must be a scalar, shape (5,) (per-output) or (5, 5) (covariance)"),
        (-np.eye(5), "the noise covariance must be positive definite"),
        (np.triu(np.ones((5, 5))), "the noise covariance must be symmetric"),
        (np.nan, "sigma must be finite"),
    ],
)
def test_invalid_noise_models(sigma, message):
    p = simdiff.Problem(_linear, x0=np.zeros(3))
    with pytest.raises(ValueError) as info:
        fisher_information(p, sigma=sigma)
    assert message in str(info.value)


# --------------------------------------------------------------------------- Laplace


def test_laplace_linear_gaussian_posterior(backend):
    # L(b) = |X b - y|^2 / (2 s^2) + b^T P b / 2: Gaussian posterior with covariance
    # (X^T X / s^2 + P)^-1 and mean at the minimiser.
    y = np.array([1.0, 2.0, 2.5, 4.2, 4.9])
    s, P = 0.3, np.diag([0.1, 0.2, 0.5])

    def nll(b, ops):
        r = ops.matmul(ops.asarray(X), b) - ops.asarray(y)
        return 0.5 * ops.sum(r**2) / s**2 + 0.5 * ops.sum(b * ops.matmul(ops.asarray(P), b))

    p = simdiff.Problem(nll, x0=np.zeros(3))
    res = simdiff.minimize(p, backend=backend)
    H = X.T @ X / s**2 + P
    mean = np.linalg.solve(H, X.T @ y / s**2)
    np.testing.assert_allclose(res.x, mean, rtol=1e-8, atol=1e-10)
    lap = laplace(p, res.x, backend=backend, level=0.9)
    assert lap.positive_definite
    cov = np.linalg.inv(H)
    np.testing.assert_allclose(lap.covariance, cov, rtol=1e-10)
    z = scipy.stats.norm.ppf(0.95)
    np.testing.assert_allclose(lap.ci, [mean - z * np.sqrt(np.diag(cov)), mean + z * np.sqrt(np.diag(cov))],
                               rtol=1e-8)  # fmt: skip
    scaled = laplace(p, res.x, backend=backend, scale=4.0)
    np.testing.assert_allclose(scaled.std_errors, 2 * lap.std_errors, rtol=1e-12)


def test_laplace_singular_and_indefinite(backend):
    flat = simdiff.Problem(lambda x, ops: (x[0] + x[1]) ** 2 + x[2] ** 2, x0=np.zeros(3))
    r = laplace(flat, backend=backend)
    assert not r.positive_definite and r.covariance is None and r.ci is None
    v = r.null_space[:, 0] * np.sign(r.null_space[0, 0])
    np.testing.assert_allclose(v, [2**-0.5, -(2**-0.5), 0.0], atol=1e-12)
    assert "1 flat (unidentifiable) direction(s)" in r.message
    saddle = simdiff.Problem(lambda x, ops: x[0] ** 2 - x[1] ** 2, x0=np.zeros(2))
    r = laplace(saddle, backend=backend)
    assert r.negative_directions.shape == (2, 1) and "x is not a minimum" in r.message


def test_laplace_bad_input():
    p = simdiff.Problem(lambda x, ops: ops.sum(x**2), x0=np.zeros(2))
    with pytest.raises(ValueError, match=r"level must lie in \(0, 1\); got 0"):
        laplace(p, level=0)
    with pytest.raises(simdiff.ShapeError, match=r"must have shape \(2,\); got \(3,\)"):
        laplace(p, np.zeros(3))
    with pytest.raises(simdiff.ShapeError, match="use fisher_information"):
        laplace(shared_problem("spherical"))
