"""A rejected step puts no NaN into a derivative: a first step so long that its stages overflow.

The driver discards a rejected step with a ``where``; in reverse mode on JAX its zero
cotangents still ran through the step's backward pass, where ``0 * inf`` is NaN.  The
problem here, ``y' = -p sinh(y)``, has a closed form, and a first step of 1e4 whose second
stage is ``sinh(-2000) = -inf``: the solve rejects it (a non-finite error estimate) and
shrinks the step.
"""

from __future__ import annotations

import numpy as np
import pytest
from _numerics import path_rtol

import problems.ode as po
import simdiff
from simdiff.errors import NonFiniteError
from simdiff.ode import CheckpointAdjoint, DirectAdjoint, Dopri5, ODEProblem, Rodas3, Rodas5P

T, Y0, P = 2.0, 1.0, 1.5
RTOL = 1e-10


def _rhs(t, y, p, ops):
    return -p[0] * ops.sinh(y)


def _exact(p: float) -> tuple[float, float, float]:
    """``y(T)``, ``dy/dp``, ``d2y/dp2`` from ``tanh(y/2) = tanh(y0/2) exp(-p t)``."""
    u = np.tanh(Y0 / 2) * np.exp(-p * T)
    du, d2u = -T * u, T**2 * u
    y = 2 * np.arctanh(u)
    dy = 2 * du / (1 - u**2)
    d2y = 2 * (d2u * (1 - u**2) + 2 * u * du**2) / (1 - u**2) ** 2
    return y, dy, d2y


def _problem(adjoint) -> ODEProblem:
    return ODEProblem(
        _rhs, [Y0], (0.0, T), [P], observable=lambda ys, ops: ys[-1, 0],
        solver=Dopri5(rtol=RTOL, atol=1e-12, h0=1e4), adjoint=adjoint,
    )  # fmt: skip


ADJOINTS = {"checkpoint": CheckpointAdjoint(), "direct": DirectAdjoint()}


def test_the_first_step_overflows_and_is_rejected() -> None:
    info = _problem(None).solve_info()
    assert info["n_rejected"] >= 3  # 1e4, 2e3, 400: sinh of the stage overflows
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.sinh(Y0 - 0.2 * 1e4 * np.sinh(Y0)))


@pytest.mark.parametrize("adjoint", list(ADJOINTS))
def test_reverse_mode_gradient_and_hessian_are_finite_and_exact_on_jax(adjoint: str) -> None:
    p = _problem(ADJOINTS[adjoint])
    d = simdiff.Derivatives(p, backend="jax")
    _, dy, d2y = _exact(P)
    g, H = np.asarray(d.grad()), np.asarray(d.hessian())
    fwd = np.asarray(d.jacobian(mode="fwd"))
    # the discrete solution's derivative differs from the exact one by the solver's
    # error, a few rtol relative here; reverse and forward mode by rounding only
    assert abs(g[0] - dy) <= 1e3 * RTOL * abs(dy)
    assert abs(H[0, 0] - d2y) <= 1e3 * RTOL * abs(d2y)
    steps = p.solve_info()["n_accepted"]
    assert abs(g[0] - fwd[0]) <= path_rtol(7 * steps * 20) * abs(fwd[0])


def test_batched_gradient_is_finite_and_exact_on_jax() -> None:
    """A batch of points runs the masked loop under ``vmap``: the gate holds per lane."""
    xs = np.array([[P], [2 * P]])
    g = np.asarray(simdiff.grad(_problem(None), xs, backend="jax"))
    exact = np.array([[_exact(P)[1]], [_exact(2 * P)[1]]])
    assert np.all(np.abs(g - exact) <= 1e3 * RTOL * np.abs(exact))


def test_torch_gradient_is_exact_where_the_loop_runs_on_the_host() -> None:
    """Eager torch never records a rejected step: the loop branches on the host."""
    g = np.asarray(simdiff.grad(_problem(None), backend="torch"))
    assert abs(g[0] - _exact(P)[1]) <= 1e3 * RTOL * abs(_exact(P)[1])


def test_torch_masked_loop_raises_on_an_overflowed_rejected_step() -> None:
    """Torch's masked loop (a batch under ``torch.func.vmap``; ``compile=True``'s one-graph
    loop) has no gate: the NaN is reported, never returned (docs/ode.md, Failures)."""
    with pytest.raises(NonFiniteError, match="simdiff.grad is not finite"):
        simdiff.grad(_problem(None), np.array([[P], [2 * P]]), backend="torch")


@pytest.mark.slow
@pytest.mark.parametrize("adjoint", list(ADJOINTS))
def test_rodas5p_robertson_gradient_with_a_first_step_that_overflows(adjoint: str) -> None:
    """Robertson to t = 1e5 from a first step of 0.1: ``3e7 y2^2`` overflows in its stages."""
    p = ODEProblem(
        po.robertson_rhs, [1.0, 0.0, 0.0], (0.0, 1e5), np.log(po.ROBERTSON_K), save_at=[1e5],
        observable=lambda ys, ops: ys[-1, 0] + 1e4 * ys[-1, 1],
        solver=Rodas5P(rtol=1e-6, atol=1e-10, h0=0.1), adjoint=ADJOINTS[adjoint],
    )  # fmt: skip
    d = simdiff.Derivatives(p, backend="jax")
    g, fwd = np.asarray(d.grad()), np.asarray(d.jacobian(mode="fwd"))
    assert p.solve_info()["n_rejected"] >= 1
    info = p.solve_info()
    steps = info["n_accepted"]
    assert np.all(np.abs(g - fwd) <= path_rtol(steps * 200, condition=1e3) * np.abs(fwd))


def test_a_step_rejected_for_a_singular_w_leaves_the_jax_gradient_finite() -> None:
    """y' = 16 y with Rodas3 from h0 = 1/8: W = 1 - h gamma J = 0 exactly in the first step,
    whose stages are then infinite; the gradient is torch's (whose tape never holds it)."""
    p = ODEProblem(lambda t, y, p, ops: p[0] * y, [1.0], (0.0, 0.25), [16.0],
                   observable=lambda ys, ops: ys[-1, 0],
                   solver=Rodas3(h0=0.125, rtol=1e-5, atol=1e-8))  # fmt: skip
    info = p.solve_info(backend="jax")
    assert info["n_rejected"] >= 1
    g = np.asarray(simdiff.grad(p, backend="jax"))
    assert g[0] == pytest.approx(0.25 * np.exp(4.0), rel=1e-2)  # d e^(k/4) / dk at k = 16
    steps = info["n_accepted"] + info["n_rejected"]
    g_torch = np.asarray(simdiff.grad(p, backend="torch"))
    np.testing.assert_allclose(g, g_torch, rtol=path_rtol(100 * steps), atol=0)


@pytest.mark.slow
def test_rodas5p_robertson_gradient_from_the_automatic_first_step_matches_radau() -> None:
    """The reported case: Robertson to t = 1e5 at 13 save times, rtol 1e-6, the automatic
    first step; the reference is Radau-integrated sensitivity equations at rtol 1e-11."""
    from validation.benchmarks.bench_ode import (
        ROBERTSON_TIMES,
        _robertson_observable,
        robertson_reference,
    )

    p = ODEProblem(
        po.robertson_rhs, [1.0, 0.0, 0.0], (0.0, 1e5), np.log(po.ROBERTSON_K),
        save_at=ROBERTSON_TIMES, observable=_robertson_observable,
        solver=Rodas5P(rtol=1e-6, atol=1e-10),
    )  # fmt: skip
    _, ref = robertson_reference()
    g = np.asarray(simdiff.grad(p, backend="jax"))
    # the discrete solution's error, about rtol relative (measured: 7e-8)
    np.testing.assert_allclose(g, ref, rtol=10 * 1e-6, atol=0)
