"""Derivatives of PDE solutions on each backend: exact references, SciPy finite
differences, finite differences of the AD gradient, cross-backend agreement."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.differentiate as sd
from _shared import shared_problem

import problems
import simdiff
from problems.pde import burgers_colehopf, cole_hopf, cole_hopf_dnu
from simdiff.pde import Grid, burgers, diffusion, fisher_kpp, gray_scott, kuramoto_sivashinsky


def vectorised(problem):
    """``problem.evaluate`` (numpy context) mapped over the trailing axes scipy.differentiate adds."""

    def f(x):
        x = np.asarray(x)
        flat = x.reshape(x.shape[0], -1)
        out = np.array([problem.evaluate(flat[:, i]) for i in range(flat.shape[1])])
        return out.reshape(x.shape[1:])

    return f


def directional_fd(problem, x, v, h=1e-3):
    """Fourth-order central difference of t -> problem(x + t v) at 0 (numpy context)."""
    f = [float(problem.evaluate(x + s * h * v)) for s in (-2, -1, 1, 2)]
    return (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)


# --------------------------------------------------------------------------- exact references


@pytest.mark.parametrize("name", ["heat_modes", "heat_diffusivity", "burgers_colehopf"])
def test_exact_value_and_gradient(name, backend):
    p = shared_problem(name)
    rtol = p.check_options.reference_rtol
    np.testing.assert_allclose(p.evaluate(), p.exact["value"](p.x0), rtol=rtol)
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), p.exact["grad"](p.x0), rtol=rtol)


@pytest.mark.parametrize("name", ["heat_modes", "heat_diffusivity"])
def test_exact_hessian(name, backend):
    p = shared_problem(name)
    np.testing.assert_allclose(
        simdiff.hessian(p, backend=backend), p.exact["hessian"](p.x0), rtol=1e-9, atol=1e-14
    )


def test_cole_hopf_reference_is_a_solution_and_its_nu_derivative_is_right():
    x = np.linspace(0, 2 * np.pi, 7)
    t, nu = 0.7, 0.2
    u = lambda t, x: cole_hopf(x, t, nu)  # noqa: E731
    ut = sd.derivative(u, np.full(7, t), args=(x,)).df
    ux = sd.derivative(lambda s: u(t, s), x).df
    h = 1e-3
    uxx = (u(t, x + h) - 2 * u(t, x) + u(t, x - h)) / h**2  # O(h^2) ~ 1e-7
    np.testing.assert_allclose(ut + u(t, x) * ux, nu * uxx, atol=1e-6)
    dnu = sd.derivative(lambda n, xx: cole_hopf(xx, t, n), np.full(7, nu), args=(x,)).df
    np.testing.assert_allclose(cole_hopf_dnu(x, t, nu), dnu, rtol=1e-9, atol=1e-12)
    p = burgers_colehopf()
    ref = sd.derivative(lambda n: np.vectorize(lambda m: p.exact["value"]([m]))(n), 0.2).df
    np.testing.assert_allclose(p.exact["grad"](p.x0), [ref], rtol=1e-9)


# --------------------------------------------------------------------------- SciPy finite differences


@functools.cache
def fisher():
    g = Grid((32,), (20.0,))
    return fisher_kpp(g, diffusivity=0.8, rate=1.3, t_final=1.0, n_steps=20, method="fd", order=2,
                      wrt="params")  # fmt: skip


@functools.cache
def scipy_reference(kind):
    """scipy.differentiate's jacobian or hessian of the Fisher–KPP functional (once per run)."""
    p = fisher()
    # steps from 0.1 (not SciPy's 0.5): the diffusivity 0.8 must stay >= 0 at every point
    ref = (sd.jacobian if kind == "grad" else sd.hessian)(vectorised(p), p.x0, initial_step=0.1)
    assert np.all(ref.success)
    return ref.df if kind == "grad" else ref.ddf


def test_parameter_gradient_vs_scipy(backend):
    np.testing.assert_allclose(
        simdiff.grad(fisher(), backend=backend), scipy_reference("grad"), rtol=1e-8
    )


@pytest.mark.slow
def test_parameter_hessian_vs_scipy(backend):
    hess = simdiff.hessian(fisher(), backend=backend)
    np.testing.assert_allclose(hess, hess.T, rtol=1e-12)
    np.testing.assert_allclose(hess, scipy_reference("hessian"), rtol=1e-6, atol=1e-9)


# --------------------------------------------------------------------------- field derivatives


@pytest.fixture(scope="module")
def burgers_field():
    g = Grid((64,), (2 * np.pi,))
    x = g.coords()[0]
    return burgers(g, np.sin(x) + 0.3 * np.cos(2 * x), viscosity=0.1, t_final=0.5, n_steps=50)


def test_field_gradient_vs_finite_differences(burgers_field, backend, rng):
    g = simdiff.grad(burgers_field, backend=backend)
    for _ in range(3):
        v = rng.standard_normal(burgers_field.n)
        fd = directional_fd(burgers_field, burgers_field.x0, v)
        assert g @ v == pytest.approx(fd, rel=1e-7, abs=1e-12)


def test_field_hvp_vs_finite_differences_of_gradient(burgers_field, backend, rng):
    v = rng.standard_normal(burgers_field.n)
    hv = simdiff.hvp(burgers_field, v, backend=backend)
    h = 1e-3
    d = simdiff.Derivatives(burgers_field, backend=backend)
    g = [d.grad(burgers_field.x0 + s * h * v) for s in (-2, -1, 1, 2)]
    fd = (g[0] - 8 * g[1] + 8 * g[2] - g[3]) / (12 * h)
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-9 * np.abs(hv).max())


def test_two_field_gradient_vs_finite_differences(backend, rng):
    """Gray–Scott (two coupled fields, fd order 4): gradient w.r.t. the stacked (u0, v0)."""
    p = gray_scott(Grid((24,), (0.5,)), t_final=20.0, n_steps=20, method="fd", order=4,
                   observable=lambda u, ops: ops.mean(u[1] ** 2))  # fmt: skip
    assert p.n == 48
    g = simdiff.grad(p, backend=backend)
    v = rng.standard_normal(p.n)
    assert g @ v == pytest.approx(directional_fd(p, p.x0, v, h=1e-4), rel=1e-9)


def test_mass_gradient_is_exact_for_periodic_diffusion(backend):
    g = Grid((12, 10), (1.0, 2.0))
    p = diffusion(g, diffusivity=0.05, t_final=0.2, n_steps=20, method="fd", order=2,
                  observable=lambda u, ops: ops.mean(u))  # fmt: skip
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), np.full(g.size, 1 / g.size),
                               rtol=1e-13)  # fmt: skip


def test_field_output_vjp_is_the_functional_gradient(backend):
    g = Grid((32,), (2.0,), boundary="dirichlet")
    kw = {"diffusivity": 0.02, "t_final": 0.5, "n_steps": 50, "method": "fd", "order": 2}
    scalar, field = diffusion(g, **kw), diffusion(g, output="field", **kw)
    uT = field.evaluate()
    np.testing.assert_allclose(simdiff.vjp(field, uT / g.size, backend=backend),
                               simdiff.grad(scalar, backend=backend), rtol=1e-12)  # fmt: skip


# --------------------------------------------------------------------------- checkpointing, backends


@pytest.fixture(scope="module")
def ks_pair():
    g = Grid((64,), (32 * np.pi,))
    kw = {"t_final": 10.0, "n_steps": 40, "stepper": "etdrk4"}
    return kuramoto_sivashinsky(g, **kw), kuramoto_sivashinsky(g, checkpoint=True, **kw)


def test_checkpointing_does_not_change_the_gradient(ks_pair, backend):
    plain, ckpt = (simdiff.grad(p, backend=backend) for p in ks_pair)
    np.testing.assert_allclose(ckpt, plain, rtol=1e-12, atol=1e-15)


def test_checkpoint_blocks_with_a_remainder(backend):
    """40 steps in blocks of 7: five checkpointed blocks and a 5-step remainder."""
    g = Grid((24,), (2 * np.pi,))
    kw = {"diffusivity": 0.1, "t_final": 1.0, "n_steps": 40, "method": "fd", "order": 2,
          "observable": lambda u, ops: ops.sum(ops.sin(u))}  # fmt: skip
    plain = simdiff.grad(diffusion(g, **kw), backend=backend)
    blocked = simdiff.grad(diffusion(g, checkpoint=7, **kw), backend=backend)
    np.testing.assert_allclose(blocked, plain, rtol=1e-13)


@pytest.mark.slow
def test_jax_and_torch_agree_on_field_and_parameter_gradients(ks_pair):
    np.testing.assert_allclose(
        simdiff.grad(ks_pair[1], backend="jax"), simdiff.grad(ks_pair[1], backend="torch"),
        rtol=1e-10, atol=1e-14,
    )  # fmt: skip
    gs = gray_scott(Grid((12, 12), (0.5, 0.5)), t_final=20.0, n_steps=20, stepper="etdrk4",
                    wrt="params")  # fmt: skip
    np.testing.assert_allclose(simdiff.grad(gs, backend="jax"), simdiff.grad(gs, backend="torch"),
                               rtol=1e-10)  # fmt: skip


def test_catalogue_entries_are_tagged_and_cited():
    names = problems.names("pde")
    assert {"heat_modes", "heat_diffusivity", "burgers_colehopf", "ks_field"} <= set(names)
    for name in names:
        p = shared_problem(name)
        assert p.meta["citation"] and "pde" in p.meta["tags"]
    assert shared_problem("ks_field").meta["setup"]["L"] == pytest.approx(32 * np.pi)
