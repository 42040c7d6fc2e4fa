"""Derivatives through simdiff.ode solvers: exact references, sensitivity equations, FD, backends."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.differentiate
import scipy.integrate
import scipy.linalg
import scipy.optimize
from _shared import shared_problem

import problems.ode as po
import simdiff
from simdiff.ode import Dopri5, FixedStep, ODEProblem


@pytest.fixture(scope="module")
def lv_fit() -> ODEProblem:
    """The catalogue's LV fit, one problem for the module: its compiled gradient (in its
    cache) serves each test that takes it, at any point."""
    return shared_problem("lotka_volterra_fit")


# --------------------------------------------------------------------------- exact references


@pytest.mark.slow
def test_linear_energy_grad_hessian_hvp_match_expm_derivatives(backend: str) -> None:
    p = shared_problem("ode_linear_energy")
    x = p.x0
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), p.exact["grad"](x), rtol=1e-8)
    H = simdiff.hessian(p, backend=backend)
    np.testing.assert_allclose(H, p.exact["hessian"](x), rtol=1e-7, atol=1e-9)
    v = np.array([0.3, -1.0, 0.5, 2.0])
    np.testing.assert_allclose(simdiff.hvp(p, v, backend=backend), H @ v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["fwd", pytest.param("rev", marks=pytest.mark.slow)])
def test_linear_trajectory_jacobian_matches_expm_frechet(backend: str, mode: str) -> None:
    p = shared_problem("ode_linear")
    J = simdiff.jacobian(p, backend=backend, mode=mode)
    np.testing.assert_allclose(J, p.exact["jacobian"](p.x0), rtol=1e-8, atol=1e-10)


@pytest.mark.slow
def test_linear_trajectory_jvp_and_vjp_match_expm_frechet(backend: str) -> None:
    p = shared_problem("ode_linear")
    J = p.exact["jacobian"](p.x0)  # (6, 4)
    v, u = np.array([0.5, -1.0, 0.25, 1.0]), np.linspace(-1.0, 1.0, 6)
    np.testing.assert_allclose(simdiff.jvp(p, v, backend=backend), J @ v, rtol=1e-8)
    np.testing.assert_allclose(simdiff.vjp(p, u, backend=backend), u @ J, rtol=1e-8)


@pytest.mark.parametrize("wrt", ["y0", pytest.param("both", marks=pytest.mark.slow)])
def test_initial_state_sensitivity_is_the_propagator(backend: str, wrt: str) -> None:
    p = ODEProblem(po.linear_rhs, po.LINEAR_Y0, (0.0, 1.5), po.LINEAR_A.ravel(),
                   save_at=[1.5], solver=Dopri5(rtol=1e-10, atol=1e-12), wrt=wrt)  # fmt: skip
    J = simdiff.jacobian(p, backend=backend)
    propagator = scipy.linalg.expm(1.5 * po.LINEAR_A)  # d y(T) / d y0
    if wrt == "y0":
        np.testing.assert_allclose(J, propagator, rtol=1e-8)
    else:
        assert J.shape == (2, 6)
        np.testing.assert_allclose(J[:, 4:], propagator, rtol=1e-8)
        exact = po._linear_jacobian(po.LINEAR_A.ravel(), np.array([1.5]))
        np.testing.assert_allclose(J[:, :4], exact, rtol=1e-8, atol=1e-10)


def test_nested_third_derivative_through_rk4_is_exact(backend: str) -> None:
    p = shared_problem("ode_rk4_decay")
    v = np.array([1.0])
    for order in (1, 2, 3):
        d = simdiff.derivative(p, order, v, backend=backend, method="nested")
        np.testing.assert_allclose(d, p.exact["derivative"](p.x0, order, v), rtol=1e-12)
    H = simdiff.hessian(p, backend=backend)
    np.testing.assert_allclose(H, p.exact["hessian"](p.x0), rtol=1e-12)


# --------------------------------------------------------------------------- sensitivity equations


def forward_sensitivities(rhs, jac_y, jac_p, y0, p, times, method="DOP853"):
    """d y(t_i) / d p from S' = J_y S + J_p, S(0) = 0, integrated by solve_ivp (rtol 1e-10)."""
    n, m = len(y0), len(p)

    def aug(t, z):
        y, S = z[:n], z[n:].reshape(n, m)
        return np.concatenate([rhs(t, y, p, np), (jac_y(y, p) @ S + jac_p(y, p)).ravel()])

    z0 = np.concatenate([y0, np.zeros(n * m)])
    sol = scipy.integrate.solve_ivp(aug, (0.0, times[-1]), z0, method=method, rtol=1e-10,
                                    atol=1e-12, t_eval=times)  # fmt: skip
    assert sol.success
    return sol.y.T[:, n:].reshape(len(times), n, m).reshape(len(times) * n, m)


def _lv_jacobians():
    def jy(y, p):
        a, b, d, g = p
        return np.array([[a - b * y[1], -b * y[0]], [d * y[1], d * y[0] - g]])

    def jp(y, p):
        return np.array([[y[0], -y[0] * y[1], 0.0, 0.0], [0.0, 0.0, y[0] * y[1], -y[1]]])

    return jy, jp


def test_lotka_volterra_jacobian_matches_sensitivity_equations(backend: str) -> None:
    p = shared_problem("lotka_volterra")
    jy, jp = _lv_jacobians()
    ref = forward_sensitivities(po.lotka_volterra_rhs, jy, jp, po.LV_Y0, po.LV_PARAMS, p.save_at)
    J = simdiff.jacobian(p, backend=backend)
    # The catalogue solves at rtol 1e-7: derivatives are as accurate as the solution.
    np.testing.assert_allclose(J, ref, rtol=2e-5, atol=2e-6)


@pytest.fixture(scope="module")
def robertson_radau_sensitivities() -> np.ndarray:
    """The catalogue Robertson's d y(t_i) / d ln k by Radau (once for the module: both
    backends' Jacobians are checked against it)."""
    p = shared_problem("robertson")
    k = np.exp(p.x0)

    def jy(y, _):
        return np.array([[-k[0], k[2] * y[2], k[2] * y[1]],
                         [k[0], -2 * k[1] * y[1] - k[2] * y[2], -k[2] * y[1]],
                         [0.0, 2 * k[1] * y[1], 0.0]])  # fmt: skip

    def jp(y, _):  # d f / d ln k_j = k_j d f / d k_j
        r1, r2, r3 = k[0] * y[0], k[1] * y[1] ** 2, k[2] * y[1] * y[2]
        return np.array([[-r1, 0.0, r3], [r1, -r2, -r3], [0.0, r2, 0.0]])

    return forward_sensitivities(po.robertson_rhs, jy, jp, p.y0, p.x0, p.save_at, "Radau")


def test_robertson_rodas3_jacobian_matches_radau_sensitivities(
    backend: str, robertson_radau_sensitivities: np.ndarray
) -> None:
    p = shared_problem("robertson")
    ref = robertson_radau_sensitivities
    J = simdiff.jacobian(p, backend=backend)
    scale = np.max(np.abs(ref), axis=1, keepdims=True)  # per-output scale (they span 1e-6..1)
    assert np.max(np.abs(J - ref) / scale) < 2e-3  # the catalogue runs Rodas3 at rtol 1e-4


def test_jax_and_torch_differentiate_the_same_discrete_solver() -> None:
    p = shared_problem("van_der_pol_stiff")  # Rodas3: J by jax.jacfwd vs torch.func.jacfwd
    J = {be: simdiff.jacobian(p, backend=be) for be in ("jax", "torch")}
    np.testing.assert_allclose(J["jax"], J["torch"], rtol=1e-10, atol=1e-14)


# --------------------------------------------------------------------------- finite differences


def _lv_misfit_rk4() -> ODEProblem:
    fit = shared_problem("lotka_volterra_fit")
    return ODEProblem(po.lotka_volterra_rhs, po.LV_Y0, (0.0, 3.0), fit.x0, save_at=po.LV_TIMES,
                      observable=fit.observable, solver=FixedStep(n_steps=60))  # fmt: skip


def test_fixed_step_gradient_matches_scipy_differentiate(backend: str) -> None:
    p = _lv_misfit_rk4()
    g = simdiff.grad(p, backend=backend)

    def f(xs):  # scipy.differentiate evaluates elementwise over a trailing batch axis
        flat = xs.reshape(4, -1).T
        return np.array([p.evaluate(x) for x in flat]).reshape(xs.shape[1:])

    fd = []
    for i in range(4):

        def fi(t, i=i):
            xs = np.repeat(p.x0[:, None], t.size, axis=1)
            xs[i] = t.ravel()
            return f(xs).reshape(t.shape)

        res = scipy.differentiate.derivative(fi, p.x0[i], initial_step=1e-2)
        assert res.success
        fd.append(res.df)
    np.testing.assert_allclose(g, fd, rtol=1e-8)


@pytest.mark.slow
def test_adaptive_gradient_matches_central_differences(backend: str, lv_fit) -> None:
    # Step-size decisions are stop-gradient: FD of the adaptive solver sees step-sequence jumps
    # of order rtol, so the comparison holds to about rtol / h = 1e-7 / 1e-4 relative.
    p = lv_fit
    g = simdiff.grad(p, backend=backend)
    h = 1e-4 * np.maximum(1.0, np.abs(p.x0))
    fd = [(p.evaluate(p.x0 + h[i] * e) - p.evaluate(p.x0 - h[i] * e)) / (2 * h[i])
          for i, e in enumerate(np.eye(4))]  # fmt: skip
    np.testing.assert_allclose(g, fd, rtol=1e-4)


@pytest.mark.slow
def test_lotka_volterra_fit_hessian_vs_fd_of_gradient_and_backends(lv_fit) -> None:
    p = lv_fit
    H = {be: simdiff.hessian(p, backend=be) for be in ("jax", "torch")}
    np.testing.assert_allclose(H["jax"], H["torch"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(H["jax"], H["jax"].T, rtol=1e-10, atol=1e-10)
    h = 1e-5
    fd = np.stack([(simdiff.grad(p, p.x0 + h * e) - simdiff.grad(p, p.x0 - h * e)) / (2 * h)
                   for e in np.eye(4)])  # fmt: skip
    np.testing.assert_allclose(H["jax"], fd, rtol=1e-4, atol=1e-4 * np.abs(H["jax"]).max())


# --------------------------------------------------------------------------- batches, fitting


@pytest.mark.slow
def test_batched_gradients_of_64_parameter_sets(
    backend: str, rng: np.random.Generator, lv_fit
) -> None:
    p = lv_fit
    xs = p.x0 * (1.0 + 0.1 * rng.standard_normal((64, 4)))
    G = simdiff.grad(p, xs, backend=backend)
    assert G.shape == (64, 4)
    for i in (0, 37):
        np.testing.assert_allclose(G[i], simdiff.grad(p, xs[i], backend=backend), rtol=1e-10)


# --------------------------------------------------------------------------- whole catalogue


def _fd_jacobians(rhs, p: np.ndarray):
    """J_y and J_p of the right-hand side by central differences (no AD anywhere)."""

    def central(f, z: np.ndarray) -> np.ndarray:
        cols = []
        for i in range(z.size):
            dz = np.zeros_like(z)
            dz[i] = 1e-6 * max(1.0, abs(z[i]))
            cols.append((f(z + dz) - f(z - dz)) / (2 * dz[i]))
        return np.stack(cols, axis=1)

    def jy(y, _):
        return central(lambda yy: np.asarray(rhs(0.0, yy, p, np)), np.asarray(y))

    def jp(y, _):
        return central(lambda pp: np.asarray(rhs(0.0, y, pp, np)), np.asarray(p))

    return jy, jp


TRAJECTORY_ENTRIES = ["ode_linear", "lotka_volterra", "van_der_pol", "van_der_pol_stiff",
                      "lorenz63", "robertson"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", TRAJECTORY_ENTRIES)
def test_catalogue_trajectory_jacobians_match_sensitivity_equations(name: str) -> None:
    p = shared_problem(name)
    assert p.observable is None and p.wrt == "params"  # the value is the trajectory
    jy, jp = _fd_jacobians(p.rhs, p.x0)  # all catalogue right-hand sides are autonomous
    method = "Radau" if "stiff" in p.meta["tags"] else "DOP853"
    ref = forward_sensitivities(p.rhs, jy, jp, p.y0, p.x0, p.save_at, method)
    J = simdiff.jacobian(p, backend="jax")
    scale = np.maximum(np.max(np.abs(ref), axis=1, keepdims=True), 1e-300)
    assert np.max(np.abs(J - ref) / scale) < 100 * p.solver.rtol
