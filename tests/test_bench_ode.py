"""The ODE benchmark's own pieces: its references, its peers and its memory fit.

Numbers the benchmark prints are only as good as the references it compares
with; these tests check each reference against an independent computation.
No timings are asserted.
"""

from __future__ import annotations

import numpy as np
import pytest

import problems
import problems.ode
import simdiff
from validation.benchmarks import bench_ode


def test_fitted_exponent_recovers_powers() -> None:
    ns = [1_000, 10_000, 100_000]
    assert bench_ode.fitted_exponent(ns, [3.0 * n**0.5 for n in ns]) == pytest.approx(0.5)
    assert bench_ode.fitted_exponent(ns, [2.0 * n for n in ns]) == pytest.approx(1.0)


def test_lv_reference_gradient_matches_central_differences() -> None:
    """The sensitivity-equation gradient against differences of tight DOP853 solves."""
    p = problems.get("lotka_volterra_fit")
    ref = bench_ode.lv_reference_grad(p)
    q = bench_ode.lv_long()  # also the long problem, whose data are its own
    assert bench_ode.lv_reference_grad(q).shape == (4,)

    import scipy.integrate

    import problems.ode as po

    def misfit(x: np.ndarray) -> float:
        sol = scipy.integrate.solve_ivp(
            lambda t, y: po.lotka_volterra_rhs(t, y, x, np), (0.0, 3.0), po.LV_Y0,
            method="DOP853", rtol=1e-13, atol=1e-14, t_eval=p.save_at,
        )  # fmt: skip
        return 0.5 * float(np.sum((sol.y.T - po.lv_data()) ** 2))

    h = 1e-5
    fd = [(misfit(p.x0 + h * e) - misfit(p.x0 - h * e)) / (2 * h) for e in np.eye(4)]
    np.testing.assert_allclose(ref, fd, rtol=1e-7)
    # and simdiff's own gradient agrees to its solver tolerance (rtol 1e-7)
    np.testing.assert_allclose(simdiff.grad(p), ref, rtol=1e-5)


def test_torch_peers_compute_the_same_derivatives() -> None:
    p = problems.get("lotka_volterra_fit")
    v = np.array([1.0, -0.5, 0.25, 2.0])
    ref = bench_ode.lv_reference_grad(p)
    for make in (bench_ode.torchdiffeq_callables, bench_ode.torchode_callables):
        fns = make(p, v)
        g = bench_ode._np(fns["grad"]())
        np.testing.assert_allclose(g, ref, rtol=1e-5)
        H = bench_ode._np(fns["hessian"]())
        np.testing.assert_allclose(H, H.T, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(bench_ode._np(fns["hvp"]()), H @ v, rtol=1e-8)


@pytest.mark.slow
def test_robertson_reference_matches_differences_of_its_value() -> None:
    """The sensitivity gradient against central differences of value-only Radau solves (the
    3 states with their exact Jacobian, not the 12 of the augmented system: cheaper, and a
    code path apart from the one checked)."""
    import scipy.integrate

    x0 = np.log(problems.ode.ROBERTSON_K)
    value, grad = bench_ode.robertson_reference(1e-10)
    assert np.isfinite(value) and grad.shape == (3,)
    w = np.array([1.0, 1e4, 0.0])  # the reference's observable: sum y1 + 1e4 sum y2

    def observed(x: np.ndarray) -> float:
        k = np.exp(x)

        def jac(t: float, y: np.ndarray) -> np.ndarray:
            return np.array([[-k[0], k[2] * y[2], k[2] * y[1]],
                             [k[0], -2 * k[1] * y[1] - k[2] * y[2], -k[2] * y[1]],
                             [0.0, 2 * k[1] * y[1], 0.0]])  # fmt: skip

        sol = scipy.integrate.solve_ivp(
            lambda t, y: problems.ode.robertson_rhs(t, y, x, np), (0.0, 1e5), [1.0, 0.0, 0.0],
            method="Radau", rtol=1e-10, atol=1e-16, t_eval=bench_ode.ROBERTSON_TIMES, jac=jac,
        )  # fmt: skip
        return float(np.sum(sol.y.T @ w))

    # both solves at rtol 1e-10: the values agree to about that
    assert observed(x0) == pytest.approx(value, rel=1e-8)
    h = 1e-5  # differences: rounding and step-sequence noise ~ rtol / h = 1e-5 relative
    fd = [(observed(x0 + h * e) - observed(x0 - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * np.max(np.abs(grad)))


@pytest.mark.slow
def test_memory_table_separates_the_adjoints() -> None:
    temp = bench_ode.memory([1024], repeats=1)  # one size: the fit needs more, the table not
    assert temp["DirectAdjoint"][1024] > 4 * temp["CheckpointAdjoint"][1024]


def test_hires_jacobians_match_differences_of_the_rhs() -> None:
    """The by-hand df/dy and df/dk the HIRES reference integrates, against central differences."""
    ops = simdiff.get_ops("numpy")
    k = problems.ode.HIRES_K
    y = np.linspace(0.1, 0.8, 8)  # every species nonzero, so every entry is exercised
    jy, jk = bench_ode.hires_jacobians(y, k)
    fd_y = ops.jacfwd(lambda z: problems.ode.hires_rhs(0.0, z, k, np))(y)
    fd_k = ops.jacfwd(lambda q: problems.ode.hires_rhs(0.0, y, q, np))(k)
    # central differences, step eps^(1/3) max(1, |z|): error ~1e-10 times the entries (<= 300)
    np.testing.assert_allclose(jy, fd_y, rtol=0, atol=1e-7)
    np.testing.assert_allclose(jk, fd_k, rtol=0, atol=1e-7)
