"""Non-terminal ODE events with a state update: a bouncing ball.

References: the closed form of the drag-free ball (bounce times, final state
and their derivatives by sympy) and SciPy's ``solve_ivp`` with events,
restarted at each bounce (with linear drag, where there is no closed form),
differentiated by central differences.
"""

from collections.abc import Callable

import numpy as np
import pytest
import sympy as sp
from _shared import shared_problem
from scipy.integrate import solve_ivp

import simdiff
from simdiff.errors import SolverError
from simdiff.ode import Event, ODEProblem

G = 9.81
E, H0, V0 = 0.8, 1.0, 0.0  # restitution, initial height and velocity
T_END = 3.0  # six bounces (the seventh would be at 3.12; they accumulate at 4.06)
RTOL = 1e-10


def ball_rhs(t, y, p, ops):  # p = (e, c): restitution and linear drag
    return ops.stack([y[1], -G - p[1] * y[1]])


def floor(t, y, p, ops):
    return y[0]


def bounce(t, y, p, ops):
    return ops.stack([y[0], -p[0] * y[1]])


def ball(observable, c=0.0, t_end=T_END, rtol=RTOL, **kw):
    """The ball from (H0, V0) with x0 = (e, c, h0, v0) (``wrt="both"``)."""
    return ODEProblem(ball_rhs, [H0, V0], (0.0, t_end), [E, c],
                      events=[Event(floor, terminal=False, direction=-1, update=bounce)],
                      observable=observable, wrt="both", rtol=rtol, atol=1e-12, **kw)  # fmt: skip


# --------------------------------------------------------------- closed form
_e, _h, _v = sp.symbols("e h v", positive=True)
_v1 = sp.sqrt(_v**2 + 2 * G * _h)  # speed at the first impact
_t1 = (_v + _v1) / G


def _bounce_time(n):
    """The n-th bounce time (n >= 1) as a sympy expression of (e, h0, v0)."""
    return _t1 + 2 * _v1 / G * sum(_e**j for j in range(1, n))


def closed_time(n, order=0):
    """t_n, its gradient or its Hessian in (e, h0, v0) at (E, H0, V0)."""
    expr, xs = _bounce_time(n), (_e, _h, _v)
    at = {_e: E, _h: H0, _v: V0 + 1e-300}  # v0 = 0 is the edge of sympy's positive domain
    if order == 0:
        return float(expr.subs(at))
    if order == 1:
        return np.array([float(sp.diff(expr, a).subs(at)) for a in xs])
    return np.array([[float(sp.diff(expr, a, b).subs(at)) for b in xs] for a in xs])


def closed_state(t_end):
    """The state at t_end: the last flight from the last bounce before it."""
    v1 = np.sqrt(V0**2 + 2 * G * H0)
    n = max(k for k in range(1, 64) if closed_time(k) < t_end)
    s, v = t_end - closed_time(n), E**n * v1
    return np.array([v * s - G * s * s / 2, v - G * s])


# ------------------------------------------------------- solve_ivp reference
def ivp_ball(e, c, h0, v0, t_end=T_END):
    """Bounce times and final state from solve_ivp restarted at each bounce."""

    def hit(t, y):
        return y[0]

    hit.terminal, hit.direction = True, -1
    t, y, times = 0.0, np.array([h0, v0]), []
    while True:
        sol = solve_ivp(lambda t, y: [y[1], -G - c * y[1]], (t, t_end), y, method="DOP853",
                        events=hit, rtol=1e-13, atol=1e-14)  # fmt: skip
        if sol.status != 1:
            return np.array(times), sol.y[:, -1]
        t, ye = float(sol.t_events[0][0]), sol.y_events[0][0]
        times.append(t)
        y = np.array([ye[0], -e * ye[1]])


# ----------------------------------------------- problems and derivatives shared
C_DRAG = 0.3
V_MODES = np.array([0.3, -0.7, 0.5, 0.2])  # x = (e, c, h0, v0)
X_NO_DRAG = np.array([E, 0.0, H0, V0])


@pytest.fixture(scope="module")
def t4() -> ODEProblem:
    """The 4th bounce time with drag: one problem for the module, so its compiled
    derivatives (in its cache) serve every test that differentiates it, at x0 or at
    ``X_NO_DRAG`` (the drag-free ball of the closed form)."""
    return ball(lambda ys, ops, ev: ev.times[3], c=C_DRAG)


@pytest.fixture(scope="module")
def t4_torch_modes(t4: ODEProblem) -> tuple:
    """Every mode of ``t4`` on torch at x0 (see ``_modes``): checked against each other and
    JAX by the every-mode test, the gradient and Hessian against solve_ivp differences."""
    return _modes(t4, "torch", V_MODES)


@pytest.fixture(scope="module")
def catalogue_ball() -> ODEProblem:
    return shared_problem("bouncing_ball_drag")


@pytest.fixture(scope="module")
def catalogue_ball_grad(catalogue_ball: ODEProblem) -> Callable[..., np.ndarray]:
    """The gradient at x0 (or at ``x``) on a backend, computed once per backend and point in
    this module (torch's: checked against the closed form, the reference of others)."""
    grads: dict[tuple, np.ndarray] = {}

    def grad(backend: str, x: np.ndarray | None = None) -> np.ndarray:
        x = catalogue_ball.x0 if x is None else x
        key = (backend, *np.asarray(x, dtype=float).tolist())
        if key not in grads:
            grads[key] = np.asarray(simdiff.grad(catalogue_ball, x, backend=backend))
        return grads[key]

    return grad


@pytest.fixture(scope="module")
def catalogue_ball_fd(catalogue_ball: ODEProblem) -> np.ndarray:
    """Central differences in (e, c) of the 4th bounce time by solve_ivp events."""
    p = catalogue_ball
    x = np.asarray(p.x0, dtype=float)
    fd = []
    for i in range(2):
        d = np.zeros(2)
        d[i] = 1e-4
        tp = ivp_ball(*(x + d), H0, V0, t_end=p.t_span[1])[0][3]
        tm = ivp_ball(*(x - d), H0, V0, t_end=p.t_span[1])[0][3]
        fd.append((tp - tm) / 2e-4)
    return np.array(fd)


# --------------------------------------------------------------------- tests
def test_bounce_times_and_state_closed_form():
    prob = ball(lambda ys, ops, ev: ops.concat([ev.times[:7], ops.stack([ev.count]), ys[-1]]))
    out = np.asarray(prob.evaluate())
    assert out[7] == 6.0 and np.isnan(out[6])
    want = [closed_time(n) for n in range(1, 7)]
    np.testing.assert_allclose(out[:6], want, rtol=0, atol=1e-9)
    np.testing.assert_allclose(out[8:], closed_state(T_END), rtol=0, atol=1e-8)


def test_bounce_with_drag_against_solve_ivp():
    c = 0.3
    times, y_end = ivp_ball(E, c, H0, V0)
    prob = ball(lambda ys, ops, ev: ops.concat([ev.times[:12], ops.stack([ev.count]), ys[-1]]),
                c=c)  # fmt: skip
    out = np.asarray(prob.evaluate())
    n = len(times)
    assert n == 9 and out[12] == n
    np.testing.assert_allclose(out[:n], times, rtol=0, atol=1e-9)
    np.testing.assert_allclose(out[13:], y_end, rtol=0, atol=1e-8)


@pytest.mark.parametrize("backend", ["torch", pytest.param("jax", marks=pytest.mark.slow)])
def test_bounce_time_gradient_closed_form(backend, t4):
    g = simdiff.grad(t4, X_NO_DRAG, backend=backend)
    want = closed_time(4, order=1)  # (e, h0, v0); the drag c enters too, checked below
    np.testing.assert_allclose(g[[0, 2, 3]], want, rtol=0, atol=1e-8)


def test_bounce_time_hessian_closed_form(t4):
    H = simdiff.hessian(t4, X_NO_DRAG, backend="torch")
    want = closed_time(4, order=2)
    idx = np.ix_([0, 2, 3], [0, 2, 3])
    np.testing.assert_allclose(H[idx], want, rtol=0, atol=1e-7)
    np.testing.assert_allclose(H, H.T, rtol=0, atol=1e-10)


def test_bounce_state_gradient_closed_form():
    # the height at T_END after six bounces: through every event time and update
    prob = ball(lambda ys, ops, ev: ys[-1, 0])
    g = simdiff.grad(prob, backend="torch")

    def height(e, h0, v0):
        v1 = sp.sqrt(v0**2 + 2 * G * h0)
        s = T_END - ((v0 + v1) / G + 2 * v1 / G * sum(e**j for j in range(1, 6)))
        return e**6 * v1 * s - G * s * s / 2

    expr = height(_e, _h, _v)
    at = {_e: E, _h: H0, _v: V0 + 1e-300}
    want = [float(sp.diff(expr, a).subs(at)) for a in (_e, _h, _v)]
    np.testing.assert_allclose(g[[0, 2, 3]], want, rtol=0, atol=1e-7)


def test_bounce_with_drag_gradient_against_solve_ivp_differences(t4_torch_modes):
    # the 4th bounce time's gradient in (e, c, h0) against central differences of solve_ivp
    g = t4_torch_modes[0]
    x = np.array([E, C_DRAG, H0, V0])
    fd = []
    for i in range(3):
        d = np.zeros(4)
        d[i] = 1e-4
        fd.append((ivp_ball(*(x + d))[0][3] - ivp_ball(*(x - d))[0][3]) / 2e-4)
    # differences: truncation ~1e-8 d^3t, rounding 1e-13 / 1e-4
    np.testing.assert_allclose(g[:3], fd, rtol=0, atol=1e-6)


def test_event_that_never_fires_leaves_the_solution():
    never = Event(lambda t, y, p, ops: y[0] + 100.0, terminal=False, direction=-1,
                  update=bounce)  # fmt: skip
    prob = ODEProblem(ball_rhs, [H0, 5.0], (0.0, 0.5), [E, 0.0], events=[never],
                      observable=lambda ys, ops, ev: ops.concat([ys[-1], ops.stack([ev.count])]),
                      rtol=RTOL, atol=1e-12)  # fmt: skip
    out = np.asarray(prob.evaluate())
    assert out[2] == 0.0
    np.testing.assert_allclose(out[:2], [H0 + 5.0 * 0.5 - G / 8, 5.0 - G / 2], atol=1e-12)


@pytest.mark.parametrize("backend", [None, "torch", "jax"])
def test_terminal_event_that_never_fires_is_reported(backend):
    prob = ODEProblem(ball_rhs, [H0, 5.0], (0.0, 0.5), [E, 0.0],
                      events=[Event(lambda t, y, p, ops: y[0] + 100.0)],
                      observable=lambda ys, ops, ev: ev.t, rtol=RTOL, atol=1e-12)  # fmt: skip
    with pytest.raises(SolverError, match="no terminal event fired"):
        if backend is None:
            prob.evaluate()
        else:
            simdiff.grad(prob, backend=backend)


@pytest.mark.parametrize("direction", [1, -1, None])
def test_direction_filters_crossings(direction):
    # thrown up from 0.1 at 5 m/s: x = 1 is crossed upwards at t_a and downwards at t_b.
    # A condition is compared at the ends of each step, so a step holding both crossings
    # would see neither; the save time 0.5, between them, ends a step there.
    x0, v0 = 0.1, 5.0
    root = np.sqrt(v0**2 - 2 * G * (1.0 - x0))
    t_a, t_b = (v0 - root) / G, (v0 + root) / G
    assert t_a < 0.5 < t_b
    level = Event(lambda t, y, p, ops: y[0] - 1.0, terminal=False, direction=direction)
    prob = ODEProblem(ball_rhs, [x0, v0], (0.0, 1.0), [E, 0.0], events=[level],
                      save_at=[0.5, 1.0],
                      observable=lambda ys, ops, ev: ops.concat([ev.times[:2],
                                                                 ops.stack([ev.count])]),
                      rtol=RTOL, atol=1e-12)  # fmt: skip
    out = np.asarray(prob.evaluate())
    want = {1: [t_a], -1: [t_b], None: [t_a, t_b]}[direction]
    assert out[2] == len(want)
    np.testing.assert_allclose(out[: len(want)], want, rtol=0, atol=1e-10)


def test_zeno_ball_exceeds_max_events():
    # the bounces accumulate at 4.06: past it the ball would bounce without end
    prob = ball(lambda ys, ops, ev: ys[-1, 0], t_end=5.0)
    with pytest.raises(SolverError, match="more events than max_events"):
        prob.evaluate()


@pytest.mark.parametrize("backend", [None, "torch", "jax"])
def test_zeno_ball_chatters_near_the_accumulation_point(backend):
    t_inf = closed_time(1) + 2 * np.sqrt(2 * G * H0) / G * E / (1 - E)
    prob = ball(lambda ys, ops, ev: ys[-1, 0], t_end=5.0, max_events=400)
    with pytest.raises(SolverError, match="chattered at t=") as info:
        if backend is None:
            prob.evaluate()
        else:  # a derivative raises too, naming the cause
            simdiff.grad(prob, backend=backend)
    t = float(str(info.value).split("chattered at t=")[1].split()[0])
    assert abs(t - t_inf) < 1e-4


def test_bounce_with_drag_hessian_against_solve_ivp_differences(t4_torch_modes):
    # second differences of solve_ivp in e and h0: truncation d^2 t''''/12 ~ 1e-7,
    # rounding 1e-13 / d^2 = 1e-7 at d = 1e-3
    H = t4_torch_modes[1]
    x, d = np.array([E, C_DRAG, H0, V0]), 1e-3
    t4 = ivp_ball(*x)[0][3]
    for i in (0, 2):
        step = np.zeros(4)
        step[i] = d
        fd = (ivp_ball(*(x + step))[0][3] - 2 * t4 + ivp_ball(*(x - step))[0][3]) / d**2
        assert H[i, i] == pytest.approx(fd, abs=1e-5)


# ------------------------------------------------------ the catalogue entry
def test_catalogue_ball_matches_lambert_w_closed_form(catalogue_ball, catalogue_ball_grad):
    p = catalogue_ball
    x = p.x0
    # its bounce times against solve_ivp restarted at each bounce (the ODE's trajectory)
    times, _ = ivp_ball(x[0], x[1], H0, V0, t_end=p.t_span[1])
    assert float(p.evaluate()) == pytest.approx(times[3], abs=1e-9)
    # and the exact value and derivatives (Lambert W, mpmath) at the solver's accuracy:
    # measured errors 6e-12, 8e-11, 8e-10 at rtol 1e-10
    assert float(p.evaluate()) == pytest.approx(p.exact["value"](x), abs=1e-10)
    np.testing.assert_allclose(catalogue_ball_grad("torch"), p.exact["grad"](x), atol=1e-9)
    H = simdiff.hessian(p, backend="torch")
    np.testing.assert_allclose(H, p.exact["hessian"](x), atol=1e-8)


@pytest.mark.parametrize("solver", ["rk4", "rodas3", "rodas5p"])
def test_bounce_times_on_every_event_solver(solver):
    # the flights are parabolas: RK4 and Rodas5P reproduce them to rounding, Rodas3 (order 3,
    # rtol 1e-8) to 2.4e-11
    opts = {"n_steps": 300} if solver == "rk4" else {"rtol": 1e-8, "atol": 1e-10}
    prob = ODEProblem(ball_rhs, [H0, V0], (0.0, T_END), [E, 0.0],
                      events=[Event(floor, terminal=False, direction=-1, update=bounce)],
                      observable=lambda ys, ops, ev: ops.concat([ev.times[:6], ops.stack([ev.count])]),
                      solver=solver, **opts)  # fmt: skip
    out = np.asarray(prob.evaluate())
    assert out[6] == 6.0
    np.testing.assert_allclose(out[:6], [closed_time(n) for n in range(1, 7)], rtol=0, atol=1e-9)


# ------------------------------------------------- every mode, the same derivatives
def _modes(prob, backend, v):
    """Gradient, Hessian, HVP, JVP, Taylor coefficients 1-2 and the nested 2nd derivative."""
    g = np.asarray(simdiff.grad(prob, backend=backend))
    H = np.asarray(simdiff.hessian(prob, backend=backend))
    hv = np.asarray(simdiff.hvp(prob, v, backend=backend))
    jv = float(np.asarray(simdiff.jvp(prob, v, backend=backend)))
    c = np.asarray(simdiff.taylor(prob, 2, v, backend=backend))
    d2 = float(np.asarray(simdiff.derivative(prob, 2, v, backend=backend, method="nested")))
    return g, H, hv, jv, c, d2


def _assert_modes_agree(g, H, hv, jv, c, d2, v, scale_g, scale_h):
    # every mode differentiates the same discrete arithmetic (the event times by the
    # same Newton corrections): they agree to rounding, amplified by the solve's length
    # (~1e3 eps of each derivative's size), far below the solver's error (1e-10 .. 1e-8)
    tol_g, tol_h = 1e-12 * scale_g, 1e-12 * scale_h
    np.testing.assert_allclose(hv, H @ v, rtol=0, atol=tol_h)
    assert jv == pytest.approx(g @ v, abs=tol_g)
    assert c[1] == pytest.approx(g @ v, abs=tol_g)
    assert 2 * c[2] == pytest.approx(v @ H @ v, abs=tol_h)
    assert d2 == pytest.approx(v @ H @ v, abs=tol_h)


def test_every_mode_gives_the_same_derivatives_after_the_last_update_torch():
    """Four bounces (non-terminal events with an update) with drag, x = (e, c, h0, v0):
    the state after the last update, read at the save time, has one gradient, Hessian,
    HVP, JVP, Taylor and nested derivative on torch.  (rtol 1e-8: 49 steps, not 99; the
    modes agree to rounding whatever the tolerance.)"""
    prob = ball(lambda ys, ops, ev: ys[-1, 0], c=C_DRAG, rtol=1e-8)
    v = np.array([0.3, -0.7, 0.5, 0.2])
    g, H, hv, jv, c, d2 = _modes(prob, "torch", v)
    _assert_modes_agree(g, H, hv, jv, c, d2, v, np.abs(g).max(), np.abs(H).max())


@pytest.mark.slow
def test_every_mode_gives_the_same_derivatives_of_a_bounce_time_on_each_backend(t4, t4_torch_modes):
    """The 4th bounce time: every mode agrees on torch and on JAX (reverse modes through
    the checkpointed loop with the event branch rematerialised, forward modes through
    the same loop), and JAX equals torch.  (The torch modes are computed once, a fixture.)"""
    v = V_MODES
    want = t4_torch_modes
    _assert_modes_agree(*want, v, np.abs(want[0]).max(), np.abs(want[1]).max())
    got = _modes(t4, "jax", v)
    g, H = got[0], got[1]
    _assert_modes_agree(*got, v, np.abs(g).max(), np.abs(H).max())
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11 * np.abs(H).max())


@pytest.mark.parametrize("backend", ["torch", pytest.param("jax", marks=pytest.mark.slow)])
def test_catalogue_ball_gradient_against_solve_ivp_differences(
    backend, catalogue_ball, catalogue_ball_grad, catalogue_ball_fd
):
    """The 4th bounce time's gradient in (e, c) against central differences of solve_ivp
    events, to 1e-6, on each backend."""
    g = catalogue_ball_grad(backend)
    fd = catalogue_ball_fd
    # differences: truncation d^2 t'''/6 ~ 1e-8, rounding 1e-13 / 1e-4 = 1e-9
    np.testing.assert_allclose(g, fd, rtol=0, atol=1e-6)


@pytest.mark.parametrize("backend", ["torch", pytest.param("jax", marks=pytest.mark.slow)])
def test_batched_gradient_through_bounces_equals_point_by_point(
    backend, catalogue_ball, catalogue_ball_grad
):
    """A batch of points runs the traced loop under vmap (the event branch under the
    adjoint's event_branch on both backends); each row is the single point's gradient."""
    p = catalogue_ball
    X = np.stack([p.x0, p.x0 * np.array([0.98, 1.05])])
    want = np.stack([catalogue_ball_grad("torch"), catalogue_ball_grad("torch", X[1])])
    got = np.asarray(simdiff.grad(p, X, backend=backend))
    # the same arithmetic, batched or not: rounding (the gradient is O(1))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
