"""simdiff.ode solvers: trajectories against SciPy, convergence orders, failures, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate
from _shared import shared_problem

import problems
import problems.ode as po
import simdiff
from simdiff.errors import ShapeError, SolverError
from simdiff.ode import DOPRI5, RK4, Dopri5, FixedStep, ODEProblem, Rodas3, rk_integrate, solve

NP = simdiff.get_ops("numpy")


def reference(rhs, y0, span, p, times, method="DOP853"):
    """solve_ivp at rtol 1e-10 (the independent reference)."""
    sol = scipy.integrate.solve_ivp(
        lambda t, y: rhs(t, y, np.asarray(p), np), span, np.asarray(y0, dtype=float),
        method=method, rtol=1e-10, atol=1e-12, t_eval=times,
    )  # fmt: skip
    assert sol.success, sol.message
    return sol.y.T


# --------------------------------------------------------------------------- trajectories


@pytest.mark.parametrize("context", ["numpy", "jax", "torch"])
def test_dopri5_lotka_volterra_matches_dop853(context: str) -> None:
    times = po.LV_TIMES
    ys = solve(po.lotka_volterra_rhs, po.LV_Y0, (0.0, 3.0), po.LV_PARAMS, save_at=times,
               solver=Dopri5(rtol=1e-10, atol=1e-12), backend=context)  # fmt: skip
    ref = reference(po.lotka_volterra_rhs, po.LV_Y0, (0.0, 3.0), po.LV_PARAMS, times)
    np.testing.assert_allclose(ys, ref, rtol=1e-8, atol=1e-10)


def test_stored_lotka_volterra_data_is_the_exact_trajectory() -> None:
    """The catalogue's stored fit data against a fresh DOP853 solve at rtol 1e-12: equal to
    what that tolerance and the error growth over [0, 3] allow (a changed constant fails)."""
    sol = scipy.integrate.solve_ivp(
        lambda t, y: po.lotka_volterra_rhs(t, y, po.LV_PARAMS, np), (0.0, 3.0), po.LV_Y0,
        method="DOP853", rtol=1e-12, atol=1e-12, t_eval=po.LV_TIMES,
    )  # fmt: skip
    np.testing.assert_allclose(po.lv_data(), sol.y.T, rtol=1e-9, atol=1e-11)


def test_rk4_and_dopri5_match_closed_form_oscillator() -> None:
    p = shared_problem("ode_oscillator")
    np.testing.assert_allclose(p.evaluate(), p.exact["value"](p.x0), rtol=1e-8, atol=1e-9)
    rk = ODEProblem(po.oscillator_rhs, [1.0, 0.0], (0.0, 3.0), p.x0, save_at=po.OSC_TIMES,
                    observable=lambda ys, ops: ys[:, 0], solver=FixedStep(n_steps=600))  # fmt: skip
    np.testing.assert_allclose(rk.evaluate(), p.exact["value"](p.x0), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("context", ["numpy", "jax"])
def test_rodas3_robertson_matches_radau(context: str) -> None:
    times = np.array([0.4, 4.0, 40.0])
    k = np.log(po.ROBERTSON_K)
    ys = solve(po.robertson_rhs, [1.0, 0.0, 0.0], (0.0, 40.0), k, save_at=times,
               solver=Rodas3(rtol=1e-8, atol=1e-12, max_steps=2000), backend=context)  # fmt: skip
    ref = reference(po.robertson_rhs, [1.0, 0.0, 0.0], (0.0, 40.0), k, times, "Radau")
    np.testing.assert_allclose(ys, ref, rtol=1e-6, atol=1e-12)
    # Literature value at t = 40 (Hairer & Wanner II, IV.10)
    lit = shared_problem("robertson").meta["literature"]["y(40)"]
    np.testing.assert_allclose(ys[-1], lit, rtol=1e-6)


def test_rodas3_stiff_van_der_pol_matches_radau() -> None:
    p = shared_problem("van_der_pol_stiff")
    ref = reference(po.van_der_pol_rhs, p.y0, p.t_span, p.params, p.save_at, "Radau")
    np.testing.assert_allclose(p.trajectory(), ref, rtol=1e-4, atol=1e-6)
    assert p.solve_info()["n_accepted"] < 100  # an explicit method needs thousands


def test_save_at_t0_returns_y0_and_torch_equals_jax() -> None:
    times = np.array([0.0, 1.0, 2.0])
    out = {
        be: solve(po.van_der_pol_rhs, [2.0, 0.0], (0.0, 2.0), [1.0], save_at=times, backend=be)
        for be in ("jax", "torch")
    }
    np.testing.assert_array_equal(out["jax"][0], [2.0, 0.0])
    np.testing.assert_allclose(out["jax"], out["torch"], rtol=1e-13, atol=1e-14)


# --------------------------------------------------------------------------- orders


def _observed_order(errors: list[float], hs: list[float]) -> float:
    slope, _ = np.polyfit(np.log(hs), np.log(errors), 1)
    return float(slope)


def _decay_rhs(t, y, p, ops):
    # Non-autonomous, nonlinear test equation with y(t) = 1 / (1 + t^2 / 2) ... y' = -t y^2
    return -t * y**2


def _decay_exact(t: float) -> float:
    return 1.0 / (1.0 + t**2 / 2.0)


@pytest.mark.parametrize(("tableau", "order"), [(RK4, 4), (DOPRI5, 5)])
def test_explicit_rk_convergence_order(tableau, order: int) -> None:
    ns = [16, 32, 64, 128]
    errors = []
    for n in ns:
        y1, _ = rk_integrate(_decay_rhs, np.array([1.0]), 0.0, 2.0, n, None, NP, tableau)
        errors.append(abs(float(y1[0]) - _decay_exact(2.0)))
    assert _observed_order(errors, [2.0 / n for n in ns]) == pytest.approx(order, abs=0.3)


def test_rodas3_convergence_order_and_error_estimate_order() -> None:
    solver = Rodas3()
    ns = [10, 20, 40, 80]
    errors, estimates = [], []
    for n in ns:
        h = 2.0 / n
        y = np.array([1.0])
        for i in range(n):
            y = solver.step(_decay_rhs, np.float64(i * h), y, h, None, (), NP)[0]
        errors.append(abs(float(y[0]) - _decay_exact(2.0)))
        y_half = np.array([_decay_exact(0.5)])
        estimates.append(
            abs(float(solver.step(_decay_rhs, np.float64(0.5), y_half, h, None, (), NP)[1][0]))
        )
    hs = [2.0 / n for n in ns]
    assert _observed_order(errors, hs) == pytest.approx(3.0, abs=0.3)
    # The embedded estimate is a local error of the order-2 solution: O(h^3).
    assert _observed_order(estimates, hs) == pytest.approx(3.0, abs=0.4)


def test_dopri5_error_estimate_is_order_five_local() -> None:
    solver = Dopri5()
    hs = [0.2, 0.1, 0.05, 0.025]
    y, t = np.array([_decay_exact(0.5)]), np.float64(0.5)
    k1 = solver.init(_decay_rhs, t, y, None, NP)  # first same as last: f(t, y)
    est = [abs(float(solver.step(_decay_rhs, t, y, h, None, k1, NP)[1][0])) for h in hs]
    assert _observed_order(est, hs) == pytest.approx(5.0, abs=0.4)


def test_dopri5_tolerance_proportionality() -> None:
    errs = []
    tols = [1e-5, 1e-7, 1e-9]
    for tol in tols:
        ys = solve(_decay_rhs, [1.0], (0.0, 2.0), save_at=[2.0],
                   solver=Dopri5(rtol=tol, atol=tol * 1e-3))  # fmt: skip
        errs.append(abs(ys[0, 0] - _decay_exact(2.0)))
    slope = _observed_order(errs, tols)
    assert 0.7 < slope < 1.2  # error proportional to the tolerance
    assert errs[-1] < 1e-8


# --------------------------------------------------------------------------- failures


def _vdp(max_steps: int, mu: float = 1000.0) -> ODEProblem:
    # A fresh problem each time: its output shape is evaluated (at x0) and cached on first use.
    return ODEProblem(po.van_der_pol_rhs, [2.0, 0.0], (0.0, 1.0), [mu],
                      observable=lambda ys, ops: ops.sum(ys), solver="dopri5",
                      max_steps=max_steps)  # fmt: skip


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_fixed_step_grid_survives_rounding_of_late_times(backend: str) -> None:
    """1000 steps of 5e-4 from t = 1000: the remaining length over dt drifts above an
    integer by ~1e-7 through rounding; the grid must not count an extra step (which
    exhausted max_steps, as 10^5 steps on [0, 10] did)."""
    p = ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (1000.0, 1001.0), [2.0],
                   save_at=[1000.5, 1001.0], solver=FixedStep(n_steps=2000))  # fmt: skip
    info = p.solve_info(p.x0, backend=backend)
    assert info["status"] == 0 and info["n_accepted"] == 2000
    np.testing.assert_allclose(p.trajectory()[:, 0], np.exp([-1.0, -2.0]), rtol=1e-10)


@pytest.mark.parametrize("context", ["numpy", "torch"])
def test_explicit_solver_on_stiff_problem_raises_with_time_and_hint(context: str) -> None:
    p = _vdp(60)
    with pytest.raises(SolverError, match=r"max_steps=60 exhausted at t=.*try solver='rodas3'"):
        p.evaluate(backend=context)
    info = p.solve_info()
    assert info["status"] == 1 and 0.0 < info["t"] < 1.0


def test_exhausted_budget_under_jit_is_reported_not_returned() -> None:
    p = _vdp(60, mu=1.0)  # mu = 1 is not stiff: the budget suffices at x0
    assert np.isfinite(simdiff.grad(p, backend="jax")).all()
    stiff = np.array([1000.0])
    with pytest.raises(SolverError, match="max_steps=.* exhausted at t="):
        simdiff.grad(p, stiff, backend="jax")  # NaN-poisoned output: the API asks the model why
    assert p.solve_info(stiff, backend="jax")["status"] == 1
    with pytest.raises(SolverError, match="exhausted"):
        simdiff.grad(_vdp(60))  # at x0 the problem's own evaluation (output shape) raises first


@pytest.mark.parametrize("solver", ["dopri5", "rodas3", "rk4"])
def test_non_finite_rhs_raises_with_time_and_state(solver: str) -> None:
    def rhs(t, y, p, ops):  # log of a negative number after t = 0.5
        return y * ops.log(p[0] - t)

    p = ODEProblem(rhs, [1.0], (0.0, 1.0), [0.5 + 1e-9 + 0.25], solver=solver)
    with pytest.raises(SolverError, match=r"non-finite values at t=0\.7\d*, y=\["):
        p.trajectory()


# --------------------------------------------------------------------------- bad input


def _rhs(t, y, p, ops):
    return -p[0] * y


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"y0": [[1.0]]}, ShapeError, r"y0 must have shape \(n,\).*got shape \(1, 1\)"),
        ({"t_span": (1.0, 0.0)}, ValueError, r"t0 < t1.*got \(1.0, 0.0\)"),
        ({"t_span": (1.0, 1.0)}, ValueError, r"t0 < t1"),
        ({"t_span": (0.0, 1.0, 2.0)}, ShapeError, r"t_span must be \(t0, t1\)"),
        ({"save_at": [0.5, 2.0]}, ValueError, r"save_at must lie in t_span"),
        ({"save_at": [0.5, 0.2]}, ValueError, r"strictly increasing"),
        ({"solver": "euler"}, ValueError, r"unknown solver 'euler'; expected one of"),
        ({"wrt": "p"}, ValueError, r"wrt must be one of \['params', 'y0', 'both'\]; got 'p'"),
        ({"params": []}, ShapeError, r"wrt='params' needs at least one parameter"),
        ({"params": [np.nan]}, ValueError, r"params must be finite; params\[0\] = nan"),
        ({"rtol": -1.0}, ValueError, r"rtol must be a positive finite float"),
    ],
)
def test_bad_input_raises_clear_errors(kwargs: dict, error: type, match: str) -> None:
    args = {"y0": [1.0], "t_span": (0.0, 1.0), "params": [2.0]}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        ODEProblem(_rhs, **args)


def test_rhs_of_wrong_shape_is_rejected() -> None:
    with pytest.raises(ShapeError, match=r"rhs must return shape \(2,\) like y0; got shape \(3,\)"):
        ODEProblem(
            lambda t, y, p, ops: ops.stack([y[0], y[1], y[0]]), [1.0, 2.0], (0.0, 1.0), [1.0]
        )


def test_wrong_x_shape_is_rejected() -> None:
    p = shared_problem("ode_rk4_decay")
    with pytest.raises(ShapeError, match=r"expects x of shape \(1,\); got \(2,\)"):
        p.trajectory(np.ones(2))


# --------------------------------------------------------------------------- catalogue


# entries with events (a bouncing ball) are checked against solve_ivp restarted at each
# event in tests/test_ode_bounce.py
@pytest.mark.parametrize(
    "name", [n for n in problems.names("ode") if shared_problem(n).events is None]
)
def test_catalogue_entry_trajectory_matches_solve_ivp(name: str) -> None:
    p = shared_problem(name)
    assert p.meta.get("citation") or p.meta.get("reference"), "every entry names its reference"
    assert p.check_options.solver_rtol == getattr(p.solver, "rtol", 0.0)  # declared to check
    method = "Radau" if "stiff" in p.meta["tags"] else "DOP853"
    ref = reference(p.rhs, p.y0, p.t_span, p.params, p.save_at, method)
    scale = np.max(np.abs(ref), axis=0)  # per component: Robertson's span 1e-6..1
    err = np.max(np.abs(p.trajectory() - ref) / scale)
    # Adaptive: about the tolerance; fixed-step RK4 (20 steps of 0.05): C h^4 ~ 2e-6.
    assert err < (100 * p.solver.rtol if hasattr(p.solver, "rtol") else 1e-5), err


@pytest.mark.parametrize(
    ("rhs", "y0", "p", "span", "rtol", "atol", "order"),
    [
        (po.robertson_rhs, [1.0, 0.0, 0.0], np.log(po.ROBERTSON_K), 1e5, 1e-6, 1e-10, 3),
        (po.lotka_volterra_rhs, po.LV_Y0, po.LV_PARAMS, 10.0, 1e-8, 1e-10, 4),
        (lambda t, y, p, ops: ops.stack([y[1], -9.81 + 0.0 * y[0]]), [0.1, 5.0], [0.0], 1.0,
         1e-10, 1e-12, 4),
        (lambda t, y, p, ops: -p[0] * y, [0.0], [2.0], 1.0, 1e-6, 1e-9, 4),  # d0 = d1 = 0
    ],
)  # fmt: skip
def test_initial_step_is_scipys(rhs, y0, p, span, rtol, atol, order) -> None:
    """The automatic first step is SciPy's ``select_initial_step`` (Hairer II.4), an
    independent implementation of the same estimate.  Robertson's, 1.0e-3 over a span
    of 1e5, is ``h1``: no floor proportional to the span lengthens it."""
    from scipy.integrate._ivp.common import select_initial_step

    from simdiff.ode.solvers.adaptive import initial_step

    ops = simdiff.get_ops("numpy")
    y0, p = np.asarray(y0, dtype=float), np.asarray(p, dtype=float)
    f0 = np.asarray(rhs(0.0, y0, p, ops))
    ours = float(initial_step(rhs, 0.0, y0, f0, p, span, rtol, atol, order, ops))
    theirs = select_initial_step(
        lambda t, y: np.asarray(rhs(t, y, p, ops)), 0.0, y0, span, np.inf, f0, 1.0, order,
        rtol, atol,
    )  # fmt: skip
    assert ours == pytest.approx(theirs, rel=1e-12)
