"""Checks at every evaluated point: a fixed-step march built at a stable parameter and
evaluated at an unstable (or refused) one raises, on every backend and derivative."""

from __future__ import annotations

import numpy as np
import pytest

import simdiff
from simdiff.errors import InputError, StabilityError
from simdiff.ode import ODEProblem
from simdiff.pde import Grid, diffusion

BACKENDS = ("jax", "torch")


def _decay_rk4() -> ODEProblem:
    # rk4, 20 steps on [0, 1]: stable while dt * k <= 2.785, i.e. k <= 55.7
    return ODEProblem(
        lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
        observable=lambda ys, ops: ys[-1, 0], solver="rk4", n_steps=20,
    )  # fmt: skip


def _heat() -> simdiff.Problem:
    # euler, 2nd-order fd on 50 cells of [0, 1]: stable while kappa <= dx^2 n_steps / (2 t_final)
    g = Grid((50,), (1.0,))
    n_steps = int(np.ceil(0.1 / (g.dx**2 / (2 * 0.5))))
    return diffusion(g, diffusivity=0.5, t_final=0.1, n_steps=n_steps, method="fd", order=2,
                     stepper="euler", wrt="params")  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["value", "grad", "hessian"])
def test_fixed_step_ode_refuses_an_unstable_parameter_at_evaluation(backend, kind) -> None:
    d = simdiff.Derivatives(_decay_rk4(), backend)
    assert np.isfinite(getattr(d, kind)(np.array([2.0]))).all()
    with pytest.raises(StabilityError, match=r"limit of rk4.*n_steps >= 36 \(got 20\)"):
        getattr(d, kind)(np.array([100.0]))  # unchecked: 5e22 for a true exp(-100)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["value", "grad", "hessian"])
def test_pde_march_refuses_what_construction_refuses(backend, kind) -> None:
    d = simdiff.Derivatives(_heat(), backend)
    with pytest.raises(InputError, match="diffusivity must be >= 0; got -0.1"):
        getattr(d, kind)(np.array([-0.1]))
    with pytest.raises(StabilityError, match="limit of euler"):
        getattr(d, kind)(np.array([2.0]))


def test_batched_points_are_each_checked() -> None:
    with pytest.raises(StabilityError):
        simdiff.grad(_decay_rk4(), np.array([[1.0], [60.0]]))
    with pytest.raises(StabilityError):
        _decay_rk4().evaluate(np.array([60.0]))


def test_a_sweep_records_the_refusal_with_its_message() -> None:
    r = simdiff.sweep(_decay_rk4(), np.array([[1.0], [100.0], [2.0]]))
    assert r.status.tolist() == [0, 3, 0]
    assert r.messages[1].startswith("StabilityError: time step dt=0.05 is beyond")
    # rk4 global error ~ (dt k)^5 / 120 per step times 20 steps: 2e-6 at k = 2
    np.testing.assert_allclose(r["value"][[0, 2]], np.exp([-1.0, -2.0]), rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["value", "grad", "hessian"])
def test_exhausted_max_steps_on_the_derivative_path_is_a_solver_error(backend, kind) -> None:
    # dopri5 at rtol 1e-10 needs ~55 steps at k = 2 (x0) and ~250 at k = 30
    p = ODEProblem(
        lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
        observable=lambda ys, ops: ys[-1, 0], rtol=1e-10, atol=1e-12, max_steps=100,
    )  # fmt: skip
    d = simdiff.Derivatives(p, backend)
    with pytest.raises(simdiff.errors.SolverError, match=r"max_steps=100 exhausted at t=0\.\d+"):
        getattr(d, kind)(np.array([30.0]))
