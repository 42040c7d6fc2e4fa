"""Faults of the ODE solvers on every derivative path: exhausted budgets, stiff systems on an
explicit solver, non-finite Jacobians and singular linear systems in a Rosenbrock step."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _numerics import path_rtol

import simdiff
from simdiff.backends import get_backend
from simdiff.errors import SolverError
from simdiff.ode import Dopri5, ODEProblem, Rodas3, Rodas5P

KINDS = ["value", "grad", "hessian", "hvp", "taylor"]


def _jac(t, y, p, ops):
    return ops.reshape(-p[0] + 0.0 * y, (1, 1))


def _dfdt(t, y, p, ops):
    return -p[0] * ops.sin(t) + 0.0 * y


#: Budgets that suffice for the forced decay at k = 2 (x0) and not at k = 30 (steps
#: measured: dopri5 39 / 205, rodas3 34 / 71, rodas5p 46 / 84).  The analytic
#: Jacobian lets the Rosenbrock methods run in the Taylor context.
SOLVERS = {
    "dopri5": Dopri5(rtol=1e-10, atol=1e-12, max_steps=100),
    "rodas3": Rodas3(rtol=1e-5, atol=1e-7, max_steps=50, jac=_jac, dfdt=_dfdt),
    "rodas5p": Rodas5P(rtol=1e-10, atol=1e-12, max_steps=60, jac=_jac, dfdt=_dfdt),
}


def _forced_decay(solver) -> ODEProblem:
    return ODEProblem(
        lambda t, y, p, ops: -p[0] * (y - ops.cos(t)), [1.0], (0.0, 1.0), [2.0],
        observable=lambda ys, ops: ys[-1, 0], solver=solver,
    )  # fmt: skip


def _call(problem: ODEProblem, kind: str, backend: str, x: np.ndarray):
    v = np.ones(1)
    if kind == "taylor":
        return simdiff.taylor(problem, 2, v, x, backend=backend)
    d = simdiff.Derivatives(problem, backend=backend)
    return d.hvp(v, x) if kind == "hvp" else getattr(d, kind)(x)


def _exhausted(solver: str) -> str:
    return rf"{solver}: max_steps={SOLVERS[solver].max_steps} exhausted at t=0\.\d+ before the end"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("solver", list(SOLVERS))
def test_exhausted_budget_names_the_solver_and_t_on_torch(solver: str, kind: str) -> None:
    p = _forced_decay(SOLVERS[solver])
    assert np.isfinite(p.evaluate())  # the budget suffices at x0
    with pytest.raises(SolverError, match=_exhausted(solver)):
        _call(p, kind, "torch", np.array([30.0]))


@pytest.mark.slow
@pytest.mark.parametrize(("solver", "kind"), [("rodas5p", "taylor"), ("rodas3", "hvp")])
def test_exhausted_budget_names_the_solver_and_t_on_jax(solver: str, kind: str) -> None:
    """The compiled call returns NaN; the boundary asks the model, which raises."""
    with pytest.raises(SolverError, match=_exhausted(solver)):
        _call(_forced_decay(SOLVERS[solver]), kind, "jax", np.array([30.0]))


def test_stiff_system_on_an_explicit_solver_says_how_stiff_and_what_to_use() -> None:
    p = _forced_decay(Dopri5(rtol=1e-6, atol=1e-9, max_steps=100))
    with pytest.raises(SolverError) as e:
        simdiff.grad(p, np.array([1e4]), backend="torch")
    msg = str(e.value)
    # |lambda| = 1e4 and dopri5's real stability interval 3.307: h <= 3.3e-4
    assert "|lambda_max(df/dy)| = 1e+04" in msg and "stable only up to h = 0.000331" in msg
    assert "try solver='rodas3' (loose rtol) or 'rodas5p' (tight rtol), or solver='auto'" in msg


# --------------------------------------------------------------------------- linear systems


def _sqrt_rhs(t, y, p, ops):
    """Finite, but d sqrt(|y0|) / dy0 at y0 = 0 is not: df/dy has a NaN from the start."""
    return ops.stack([-p[0] * ops.sqrt(ops.abs(y[0])), -y[1]])


def _non_finite_jacobian(solver: str) -> ODEProblem:
    return ODEProblem(_sqrt_rhs, [0.0, 1.0], (0.0, 1.0), [1.0],
                      observable=lambda ys, ops: ops.sum(ys), solver=solver)  # fmt: skip


NON_FINITE = (
    r"{}: the step returned non-finite values at t=0, y=\[0\., 1\.\] after \d+ attempted "
    r"steps, down to a step of 1e-12 of the interval: .*linear system W = I - h\*gamma\*J"
)


@pytest.mark.parametrize("kind", ["value", "grad", "hessian", "hvp"])
@pytest.mark.parametrize("solver", ["rodas3", "rodas5p"])
def test_non_finite_jacobian_names_t_and_the_step_on_torch(solver: str, kind: str) -> None:
    with pytest.raises(SolverError, match=NON_FINITE.format(solver)):
        _call(_non_finite_jacobian(solver), kind, "torch", np.ones(1))


@pytest.mark.slow
def test_non_finite_jacobian_names_t_and_the_step_on_jax() -> None:
    """numpy's Jacobian is a central difference, finite here: the boundary repeats the
    failed solve on JAX, whose AD Jacobian it was."""
    with pytest.raises(SolverError, match=NON_FINITE.format("rodas3")):
        _call(_non_finite_jacobian("rodas3"), "grad", "jax", np.ones(1))


def _singular_at_the_first_step() -> ODEProblem:
    """y' = 16 y with Rodas3 (gamma = 1/2) from h0 = 1/8: W = 1 - h gamma J = 0 exactly."""
    return ODEProblem(lambda t, y, p, ops: p[0] * y, [1.0], (0.0, 0.25), [16.0],
                      observable=lambda ys, ops: ys[-1, 0],
                      solver=Rodas3(h0=0.125, rtol=1e-5, atol=1e-8))  # fmt: skip


def test_a_singular_step_is_retried_shorter_on_torch() -> None:
    """As Hairer's RODAS does; the solve then reaches y(1/4) = e^4 to its tolerance."""
    p = _singular_at_the_first_step()
    value = float(p.evaluate(backend="torch"))
    assert value == pytest.approx(np.exp(4.0), rel=1e-3)
    info = p.solve_info(backend="torch")
    assert info["status"] == 0 and info["n_rejected"] >= 1
    g = simdiff.grad(p, backend="torch")  # the rejected step is not on the tape
    assert g[0] == pytest.approx(0.25 * np.exp(4.0), rel=1e-2)  # d e^(k/4) / dk at k = 16


@pytest.mark.slow
def test_a_singular_step_is_retried_shorter_under_the_compiled_step(aot_eager) -> None:
    """compile=True on torch: the compiled step's solve gives NaN on the singular W (torch's
    solve does not raise), the step is rejected and retried shorter, and every attempted
    step runs compiled, none eagerly.  (Compiled with
    ``aot_eager``: the retry is simdiff's and the step's graph make_fx's, run as traced;
    Inductor's code for a Rosenbrock step is tests/test_ode_compiled_loop.py's.)"""
    p = _singular_at_the_first_step()
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    g = d.grad()
    assert d.cache_info()[0]["path"] == "compiled"
    eager = simdiff.grad(p, backend="torch")
    info = p.solve_info(backend="torch")
    steps = int(info["n_accepted"] + info["n_rejected"])
    np.testing.assert_allclose(g, eager, rtol=path_rtol(100 * steps), atol=0)
    assert info["n_rejected"] >= 1  # the singular first step
    # the same gradient in a context whose parts count their calls: every attempted step,
    # the singular one included, ran compiled
    T = get_backend("torch")
    ops = T.ops_compiling_parts()
    T.grad(lambda y: p.fn(y, ops))(torch.tensor(p.x0, dtype=torch.float64))
    assert ops.compile_part.eager_calls == 0
    assert ops.compile_part.compiled_calls == steps


@pytest.mark.slow
def test_a_singular_step_takes_the_same_steps_on_jax_and_torch() -> None:
    p = _singular_at_the_first_step()
    on_jax, on_torch = p.solve_info(backend="jax"), p.solve_info(backend="torch")
    assert (on_jax["n_accepted"], on_jax["n_rejected"]) == (
        on_torch["n_accepted"], on_torch["n_rejected"],
    )  # fmt: skip
    np.testing.assert_allclose(p.trajectory(backend="jax"), p.trajectory(backend="torch"),
                               rtol=1e-12)  # fmt: skip
