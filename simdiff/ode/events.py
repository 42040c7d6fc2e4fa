"""Events of an ODE solve: a condition whose sign change stops the solve or updates the state.

An :class:`Event` is a scalar ``condition(t, y, p, ops)``; it *fires* where the
condition changes sign between the ends of an accepted step (in the chosen
``direction``).  The event time is then located on the step's dense output
(:meth:`simdiff.ode.Solver.dense`: Dormand–Prince's quartic interpolant for
Dopri5, Rodas5P's own interpolant, a cubic Hermite interpolant from the step's
end values and slopes for the other solvers):

1. on ``ops.stop_gradient`` values, by bisection (:data:`BISECTIONS` halvings of
   the step) then :data:`POLISH` Newton iterations inside the bracket: the
   event time's value;
2. from that value, ``Event.newton`` differentiable Newton corrections
   ``theta <- theta - G(theta) / G'(theta)`` on ``G(theta) = condition(t +
   theta h, u(theta), p)`` with ``u(theta) = step(t, y, theta h)`` the
   *shortened step*: the method's own step from the step's start to ``t +
   theta h``, a function of the parameters like every step.  The event time's
   derivatives are those of the root of the discrete solution, and the state
   at the event is that shortened step's (Dopri5: order 5, where the dense
   output has order 4).

Why the corrections give exact derivatives: the stop-gradient root ``theta_0``
has the right value and zero derivatives, so its error as a function of the
parameters is ``O(|dp|)``; a Newton step with the exact slope squares the
error, ``e_{k+1} = O(e_k^2)``, so after ``n`` steps the error is ``O(|dp|^(2^n))``
and the derivatives of orders ``1 .. 2^n - 1`` are those of the exact root of
``G`` (the implicit function theorem's, to every one of those orders).  The
default ``newton=3`` covers orders up to 7; a higher ``taylor`` order needs a
larger ``newton``.  The slope ``G'`` is a central difference of ``G`` with
step :data:`DELTA` (of the step) in every context, so every backend and every
mode does the same arithmetic (forward-mode AD of a step costs about 35 times
the step on eager torch).  A slope with relative error ``r`` turns the
squaring into ``e_{k+1} = r e_k + O(e_k^2)``: the derivatives after ``n``
corrections are the exact root's to ``O(r^(n-1))`` relative, with ``r`` about
``1e-10`` (truncation ``DELTA^2`` and rounding ``eps / DELTA`` of ``G``'s scale).

Every derivative mode (gradient, HVP, Hessian, Taylor) differentiates this same
arithmetic: the event time is a smooth function of the parameters wherever the
sequence of accepted steps does not change, like the rest of the discrete
solution.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.backends._tree import tree_map
from simdiff.errors import InputError, InputTypeError, ShapeError

__all__ = ["BISECTIONS", "DELTA", "POLISH", "Event", "EventRecord", "EventSet"]

#: Halvings of the step by which the stop-gradient root is bracketed.
BISECTIONS = 16
#: Stop-gradient Newton iterations after the bisection (clipped to the bracket).
POLISH = 3
#: Central-difference step (in units of the step length) of the slope ``G'``, in
#: every context.
DELTA = 6e-6
#: A condition within this of 0 (relative to ``1 + |condition(t0, y0)|``) after
#: an event cannot fire again until a step ends away from 0 (a bounce starts at 0).
ZERO = 1e-10


@dataclass(frozen=True)
class Event:
    """A scalar condition whose sign change stops the solve or updates its state.

    Parameters
    ----------
    condition : callable
        ``condition(t, y, p, ops) -> scalar`` (shape ``()``), written with
        ``ops`` like the right-hand side.  The event is where it changes sign;
        it must not be 0 at the start ``(t0, y0)``.
    terminal : bool
        ``True`` (default): the solve stops at the event; save times after it
        hold the state at the event, and an observable with a third argument
        receives the :class:`EventRecord`.  ``False``: the solve goes on, from
        ``update(t, y, p, ops)`` if given.
    direction : {None, 1, -1}
        ``1``: only crossings from negative to non-negative; ``-1``: from
        positive to non-positive; ``None`` (default): both.
    update : callable, optional
        ``update(t, y, p, ops) -> y_new`` (shape ``(dim,)``), applied at a
        non-terminal event (a dose, a bounce); default: the state is unchanged.
    newton : int
        Differentiable Newton corrections of the event time: its derivatives
        are exact to order ``2**newton - 1`` (default 3: order 7).
    max_rate : float
        Chattering bound: two firings of this event closer than ``1 /
        max_rate`` in time stop the solve with a :class:`~simdiff.errors.SolverError`
        naming the time (default ``1e6``).

    Notes
    -----
    The sign is tested at the ends of each accepted step: two crossings inside
    one step cancel and are not seen (tighten ``rtol`` or lower the step).
    After a non-terminal event, a condition left within ``1e-10 (1 +
    |condition(t0, y0)|)`` of 0 by the update (a bounce starts on the floor)
    takes the sign of its rate of change along the solution from there, so a
    step that leaves 0 and crosses back (a whole flight of the ball in one
    step) fires it again; where that rate is 0 too, it cannot fire until a
    step ends away from 0.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.ode import Event, ODEProblem
    >>> half = Event(lambda t, y, p, ops: y[0] - 0.5)          # y' = -k y reaches 1/2
    >>> prob = ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 5.0), [2.0],
    ...                   events=[half], observable=lambda ys, ops, ev: ev.t,
    ...                   rtol=1e-12, atol=1e-14)
    >>> bool(abs(prob.evaluate() - np.log(2) / 2) < 1e-10)
    True
    >>> bool(abs(simdiff.grad(prob)[0] + np.log(2) / 4) < 1e-10)      # -ln2 / k^2
    True
    """

    condition: Callable[..., Any]
    terminal: bool = True
    direction: int | None = None
    update: Callable[..., Any] | None = None
    newton: int = 3
    max_rate: float = 1e6

    def __post_init__(self) -> None:
        if not callable(self.condition):
            raise InputTypeError(
                f"Event condition must be callable condition(t, y, p, ops); got {self.condition!r}"
            )
        if not isinstance(self.terminal, bool):
            raise InputTypeError(f"Event terminal must be True or False; got {self.terminal!r}")
        if self.direction not in (None, 1, -1):
            raise InputError(f"Event direction must be None, 1 or -1; got {self.direction!r}")
        if self.update is not None and not callable(self.update):
            raise InputTypeError(
                f"Event update must be callable update(t, y, p, ops); got {self.update!r}"
            )
        if self.update is not None and self.terminal:
            raise InputError(
                "Event update applies at a non-terminal event; pass terminal=False with update="
            )
        if isinstance(self.newton, bool) or not isinstance(self.newton, (int, np.integer)):
            raise InputTypeError(f"Event newton must be an integer >= 1; got {self.newton!r}")
        if self.newton < 1:
            raise InputError(f"Event newton must be >= 1; got {self.newton}")
        if not (isinstance(self.max_rate, (int, float)) and self.max_rate > 0):
            raise InputError(f"Event max_rate must be a positive number; got {self.max_rate!r}")


@dataclass(frozen=True)
class EventRecord:
    """What the events did in a solve: the third argument of an observable.

    Attributes
    ----------
    t : array, shape ()
        Time of the terminal event (NaN if none fired).
    y : array, shape (dim,)
        State at the terminal event (NaN if none fired).
    fired : array, shape ()
        1.0 if a terminal event stopped the solve, else 0.0.
    index : array, shape ()
        Which event (its position in ``events``) stopped the solve (-1 if none).
    times : array, shape (max_events,)
        Times of every firing in order, terminal included (NaN after ``count``).
    which : array, shape (max_events,)
        The event (position in ``events``) of each firing (-1 after ``count``).
    count : array, shape ()
        Number of firings.

    Every field is differentiable with respect to the parameters (the times
    and states by the Newton corrections of :mod:`simdiff.ode.events`).
    """

    t: Any
    y: Any
    fired: Any
    index: Any
    times: Any
    which: Any
    count: Any


def takes_event(observable: Any) -> bool:
    """Whether ``observable`` accepts a third positional argument (the event record)."""
    if observable is None:
        return False
    try:
        params = inspect.signature(observable).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [q for q in params if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(q.kind == q.VAR_POSITIONAL for q in params)


#: ``dense(t, y, h, state, y_new) -> (data, interp)`` with ``interp(theta, data)``.
Dense = Callable[..., Any]


@dataclass(frozen=True)
class EventSet:
    """The events of a problem as the step driver uses them (one object per problem).

    ``require`` says that the observable reads the terminal event, so a solve
    in which no terminal event fires fails (status 5).
    """

    events: tuple[Event, ...]
    max_events: int = 32
    require: bool = False

    @property
    def n(self) -> int:
        return len(self.events)

    @property
    def terminal(self) -> tuple[bool, ...]:
        return tuple(ev.terminal for ev in self.events)

    @property
    def min_gap(self) -> tuple[float, ...]:
        return tuple(1.0 / float(ev.max_rate) for ev in self.events)

    def values(self, t: Any, y: Any, p: Any, ops: Any) -> Any:
        """The conditions at ``(t, y)``, shape ``(n,)``."""
        return ops.stack([ops.reshape(ev.condition(t, y, p, ops), ()) for ev in self.events])

    def triggered(self, g_prev: Any, g_new: Any, tol: Any, ops: Any) -> Any:
        """Which events fire in a step whose ends have conditions ``g_prev`` and ``g_new``.

        An event needs a reference sign (``|g_prev| > tol``) and a crossing in
        its direction: from ``< 0`` to ``>= 0`` (up) or from ``> 0`` to ``<= 0``
        (down).
        """
        armed = ops.abs(g_prev) > tol
        up = (g_prev < 0.0) & (g_new >= 0.0)
        down = (g_prev > 0.0) & (g_new <= 0.0)
        want_up = ops.asarray([ev.direction in (None, 1) for ev in self.events])
        want_down = ops.asarray([ev.direction in (None, -1) for ev in self.events])
        return armed & ((up & want_up) | (down & want_down))

    def restarted(
        self, t: Any, h: Any, y: Any, state: Any, p: Any, tol: Any, step: Any, ops: Any
    ) -> Any:
        """The conditions that the next step compares with after an event at ``(t, y)``.

        ``y`` is the state after the update and ``state`` the method's state
        restarted there.  A condition within ``tol`` of 0 (the bounce starts on
        the floor) takes the sign of its rate of change along the solution
        from there, ``d/ds condition(t + s, step(t, y, s, state))`` at ``s =
        0`` (``step``'s slope at 0 is the right-hand side; a central
        difference over ``DELTA h``, ``h`` the step that found the event), as ``2 tol`` with
        that sign: the event is armed, so a step that leaves 0 and crosses
        back (the ball's whole flight in one step) fires it.  Where the rate
        is 0 too the value stays, and the event cannot fire until a step ends
        away from 0.  Stop-gradient values, shape ``(n,)``.
        """
        sg = ops.stop_gradient
        t, y, p, state, h = sg(t), sg(y), sg(p), tree_map(sg, state), sg(h)
        g = sg(self.values(t, y, p, ops))
        rates = []
        for ev in self.events:

            def along(s: Any, ev: Event = ev) -> Any:
                return ops.reshape(ev.condition(t + s, step(t, y, s, state)[0], p, ops), ())

            rates.append(_slope(along, ops.asarray(0.0), ops, DELTA * h))
        rate = sg(ops.stack(rates))
        lift = (ops.abs(g) <= tol) & (rate != 0.0)
        return ops.where(lift, ops.where(rate > 0.0, 2.0, -2.0) * tol, g)

    def check_start(self, rhs: Any, y0: np.ndarray, t0: float, p: np.ndarray, ops: Any) -> None:
        """Refuse conditions that are not scalars, not finite or 0 at ``(t0, y0)`` (numpy)."""
        t = np.float64(t0)
        for i, ev in enumerate(self.events):
            g = np.asarray(ev.condition(t, y0, p, ops), dtype=np.float64)
            if g.shape != ():
                raise ShapeError(f"events[{i}].condition must return a scalar; got shape {g.shape}")
            if not np.isfinite(g):
                raise InputError(f"events[{i}].condition is not finite at t0={t0}: {g}")
            if g == 0.0:
                raise InputError(
                    f"events[{i}].condition is 0 at t0={t0} (y0={y0}): an event needs a "
                    "sign at the start; shift the condition or start after the event"
                )
            if ev.update is not None:
                u = np.asarray(ev.update(t, y0, p, ops))
                if u.shape != y0.shape:
                    raise ShapeError(
                        f"events[{i}].update must return shape {y0.shape} like y0; got {u.shape}"
                    )

    # ---------------------------------------------------------------- the event
    def bracket(
        self, t: Any, h: Any, y: Any, state: Any, y_new: Any, g_prev: Any, p: Any,
        dense: Dense, ops: Any,
    ) -> Any:  # fmt: skip
        """Each event's root in the step from ``(t, y)`` of length ``h``, on values only.

        The step's dense output (built from stop-gradient values, so no
        derivative of it is traced) is bisected (:data:`BISECTIONS` halvings)
        and polished (:data:`POLISH` Newton steps inside the bracket) for
        every event, in units of the step: stop-gradient values, shape
        ``(n,)``, where :meth:`locate` starts its differentiable corrections.
        A function of its own, so that a strategy that rematerialises the
        location of an event (:meth:`~simdiff.ode.adjoint.Adjoint.event_branch`)
        recomputes the corrections only, not this search, whose result has no
        derivative.
        """
        sg = ops.stop_gradient
        t_c, h_c, p_c = sg(t), sg(h), sg(p)
        data_c, interp = dense(t_c, sg(y), h_c, tree_map(sg, state), sg(y_new))
        data_c = tree_map(sg, data_c)
        roots = []
        for k, ev in enumerate(self.events):

            def G_c(theta: Any, ev: Event = ev) -> Any:
                return ops.reshape(ev.condition(t_c + theta * h_c, interp(theta, data_c), p_c, ops),
                                   ())  # fmt: skip

            roots.append(_bracketed_root(G_c, g_prev[k], ops))
        return sg(ops.stack(roots))

    def locate(
        self,
        t: Any,
        h: Any,
        y: Any,
        state: Any,
        trig: Any,
        roots: Any,
        p: Any,
        ops: Any,
        step: Any,
    ) -> tuple[Any, Any, Any, Any, Any, Any]:
        """The first event in the step from ``(t, y)`` of length ``h`` among ``trig``.

        ``roots`` are the events' places in the step on values
        (:meth:`bracket`, shape ``(n,)``), and ``step(t, y, h, state) -> (y_new,
        err, state_new)`` is the method's step (the driver's): the
        differentiable corrections and the state at the event use the
        *shortened step* ``step(t, y, theta h, state)``, the integrator's own
        solution at ``t + theta h`` (order 5 for Dopri5 where the dense output
        has order 4), so the derivatives through the event are those of the
        discrete solver.

        Returns ``(theta, k, t_event, y_event, y_plus, terminal)``: the event's
        place in the step (0-d, differentiable), its index (float), time, state
        at the event, state after its update, and whether it is terminal
        (boolean 0-d).  Events not in ``trig`` are computed and discarded (a
        ``vmap`` runs every lane), so every value stays finite.
        """
        sg = ops.stop_gradient
        thetas = []
        for k, ev in enumerate(self.events):

            def G_d(theta: Any, ev: Event = ev) -> Any:
                u = step(t, y, theta * h, state)[0]
                return ops.reshape(ev.condition(t + theta * h, u, p, ops), ())

            def correct(theta: Any, _: Any, G_d: Any = G_d) -> tuple[Any, None]:
                return _newton(G_d, theta, ops), None

            # a scan: one step body for every correction (JAX compiles it once)
            theta, _ = ops.scan(correct, sg(roots[k]), None, length=int(ev.newton))
            thetas.append(theta)
        th = ops.stack(thetas)
        th_c = ops.where(trig, sg(th), 2.0)
        first = trig & (th_c == ops.min(th_c))
        first = first & (ops.cumsum(ops.where(first, 1.0, 0.0)) == 1.0)
        theta = ops.sum(ops.where(first, th, 0.0))
        k = ops.sum(ops.where(first, ops.arange(float(self.n)), 0.0))
        terminal = ops.sum(ops.where(first & ops.asarray(list(self.terminal)), 1.0, 0.0)) > 0.5
        t_event = t + theta * h
        y_event = step(t, y, theta * h, state)[0]
        y_plus = y_event
        for i, ev in enumerate(self.events):
            if ev.update is not None:
                y_plus = ops.where(first[i], ev.update(t_event, y_event, p, ops), y_plus)
        return theta, k, t_event, y_event, y_plus, terminal


def _safe(slope: Any, ops: Any) -> Any:
    """The slope, or 1 where it is 0 (a discarded lane without a root: no 0/0 NaN)."""
    return ops.where(ops.abs(slope) > 0.0, slope, 1.0)


def _slope(G: Callable[[Any], Any], theta: Any, ops: Any, delta: Any = DELTA) -> Any:
    """``G'(theta)`` by the central difference ``(G(theta + delta) - G(theta - delta)) / 2 delta``.

    Differentiable like ``G``; the same arithmetic in every context (no
    forward-mode AD, which the Taylor context lacks and eager torch runs
    slowly).
    """
    g_plus, g_minus = _at(G, [theta + delta, theta - delta], ops)
    return (g_plus - g_minus) / (2.0 * delta)


def _newton(G: Callable[[Any], Any], theta: Any, ops: Any) -> Any:
    """``theta - G(theta) / G'(theta)``, the slope by :func:`_slope`'s central difference."""
    g, g_plus, g_minus = _at(G, [theta, theta + DELTA, theta - DELTA], ops)
    return theta - g / _safe((g_plus - g_minus) / (2.0 * DELTA), ops)


def _at(G: Callable[[Any], Any], thetas: list[Any], ops: Any) -> list[Any]:
    """``[G(theta) for theta in thetas]``: where functions are traced, one scan over the points.

    The scan traces ``G`` (a shortened step of the solver and the condition)
    once for all the points, where calls would trace, differentiate and
    compile one copy per point; the arithmetic at each point is the same.
    Eager contexts call ``G`` at each point.
    """
    if ops.eager:
        return [G(theta) for theta in thetas]
    _, gs = ops.scan(lambda c, theta: (c, G(theta)), (), ops.stack(thetas))
    return [gs[i] for i in range(len(thetas))]


def _bracketed_root(G: Callable[[Any], Any], g0: Any, ops: Any) -> Any:
    """A root of ``G`` in ``[0, 1]`` on stop-gradient values: bisection, then Newton.

    ``g0`` is ``G``'s value at 0 (its sign is the reference); ``G(1)`` has the
    other sign or is 0.  :data:`BISECTIONS` halvings, then :data:`POLISH`
    Newton steps clipped to the bracket.
    """
    s0 = ops.stop_gradient(g0) > 0.0

    def halve(c: Any, _: Any) -> tuple[Any, None]:
        lo, hi = c
        mid = 0.5 * (lo + hi)
        same = (G(mid) > 0.0) == s0
        return (ops.where(same, mid, lo), ops.where(same, hi, mid)), None

    (lo, hi), _ = ops.scan(halve, (ops.asarray(0.0), ops.asarray(1.0)), None, length=BISECTIONS)

    def polish(theta: Any, _: Any) -> tuple[Any, None]:
        step = G(theta) / _safe(_slope(G, theta, ops), ops)
        return ops.stop_gradient(ops.minimum(ops.maximum(theta - step, lo), hi)), None

    theta, _ = ops.scan(polish, 0.5 * (lo + hi), None, length=POLISH)
    return theta
