"""The solver contract shared by simdiff's ODE solvers.

A solver is a small frozen object with a ``name``, its classical ``order`` and
one method, ``integrate(rhs, y0, t0, save_at, p, ops, adjoint)``, which returns the
states at ``save_at`` (shape ``(len(save_at), dim)``) and a
:class:`SolveInfo` of arrays of the active context.  Solvers are written once
over ``ops``, so every derivative of the discrete solution is available on
every backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.errors import UnsupportedError

__all__ = ["STATUS", "Rhs", "SolveInfo", "Solver", "Step", "status_message"]

#: ``rhs(t, y, p, ops) -> dy/dt``.
Rhs = Callable[[Any, Any, Any, Any], Any]
#: A method's step ``step(t, y, h, state) -> (y_new, err, state_new)``.
Step = Callable[[Any, Any, Any, Any], tuple[Any, Any, Any]]

#: Status codes of :class:`SolveInfo` (SciPy style: 0 is success).
STATUS = {
    0: "success: every save_at time was reached",
    1: "max_steps exhausted before the end of the interval",
    2: "the right-hand side returned non-finite values",
    3: "an event chattered (fired twice within 1 / max_rate)",
    4: "more events than max_events",
    5: "no terminal event fired before the end of the interval (the observable reads it)",
}


@dataclass(frozen=True)
class SolveInfo:
    """What a solve did, as arrays of the context it ran in.

    Attributes
    ----------
    status : int array, shape ()
        A key of :data:`STATUS`.
    t : float array, shape ()
        The time reached (the end of the interval on success).
    y : float array, shape (dim,)
        The state at ``t``; on status 2 the last finite state before the
        right-hand side failed.
    n_accepted, n_rejected : int arrays, shape ()
        Step counts (fixed-step solvers never reject).
    events : EventRecord or None
        What the events did (:class:`~simdiff.ode.events.EventRecord`), for a
        problem with ``events``.
    """

    status: Any
    t: Any
    y: Any
    n_accepted: Any
    n_rejected: Any
    events: Any = None


class Solver:
    """Base class of simdiff's ODE solvers.

    Subclasses set ``name`` and ``order`` (the classical order of the
    solution they return) and implement :meth:`integrate`.
    """

    #: Whether the whole step loop is one compiled graph under ``compile=True | "auto"``
    #: on torch (value, gradient, VJP; :func:`~simdiff.ode.solvers.driver._compiled_loop`).
    loop_compiles: bool = False
    #: Whether each step is one compiled graph under ``compile=True | "auto"`` on torch,
    #: the loop running on the host (value, gradient, VJP;
    #: :func:`~simdiff.ode.solvers.driver._compiled_step`): for solvers whose loop cannot be
    #: one graph (the Rosenbrock methods).
    step_compiles: bool = False

    name: str = "solver"
    order: int = 0
    #: Whether the method is meant for stiff systems (used in error messages).
    stiff: bool = False

    def check(self, rhs: Rhs, y0: np.ndarray, t0: float, save_at: np.ndarray, p: Any) -> None:
        """Checks before any solve, on numpy values (default: none).

        :class:`~simdiff.ode.FixedStep` checks its step against the stability
        limit here; raising is the way to refuse a problem.
        """

    #: Whether the solver runs in simdiff's step driver and so supports ``events=``.
    supports_events: bool = False

    def dense(self, rhs: Rhs, p: Any, ops: Any) -> Callable[..., Any]:
        """The dense output of a step: ``make(t, y, h, state, y_new) -> (data, interp)``.

        ``interp(theta, data)`` is the state at ``t + theta h``, ``0 <= theta <=
        1``, a polynomial in ``theta`` whose coefficients ``data`` (a tuple of
        arrays) come from the step.  Default: the cubic Hermite interpolant of
        the step's end values and slopes ``f(t, y)``, ``f(t + h, y_new)``
        (order 3, two right-hand-side evaluations).  Used to locate events
        (:mod:`simdiff.ode.events`).
        """

        def make(t: Any, y: Any, h: Any, state: Any, y_new: Any) -> tuple[Any, Any]:
            data = (y, y_new, h * rhs(t, y, p, ops), h * rhs(t + h, y_new, p, ops))
            return data, hermite

        return make

    def restart(self, rhs: Rhs, p: Any, ops: Any) -> Callable[[Any, Any], Any]:
        """``init(t, y)``: the method's state to continue from after an event (default ``()``)."""
        return lambda t, y: ()

    def integrate(
        self,
        rhs: Rhs,
        y0: Any,
        t0: float,
        save_at: np.ndarray,
        p: Any,
        ops: Any,
        adjoint: Any = None,
        events: Any = None,
    ) -> tuple[Any, SolveInfo]:
        """States at ``save_at`` (shape ``(len(save_at), dim)``) and a :class:`SolveInfo`.

        ``adjoint`` (an :class:`~simdiff.ode.adjoint.Adjoint`, default
        checkpointed) says how the step loop is differentiated; ``events`` (an
        :class:`~simdiff.ode.events.EventSet`, solvers with ``supports_events``)
        the events to locate.
        """
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")


def hermite(theta: Any, data: tuple[Any, Any, Any, Any]) -> Any:
    """The cubic Hermite interpolant at ``theta`` of ``(y0, y1, h f0, h f1)``."""
    y0, y1, d0, d1 = data
    t2 = theta * theta
    t3 = t2 * theta
    return (
        (2.0 * t3 - 3.0 * t2 + 1.0) * y0
        + (t3 - 2.0 * t2 + theta) * d0
        + (3.0 * t2 - 2.0 * t3) * y1
        + (t3 - t2) * d1
    )


def status_message(
    status: int, t: float, t1: float, y: Any, solver: Solver, steps: int | None = None,
    note: str = "",
) -> str:  # fmt: skip
    """The message of the :class:`~simdiff.errors.SolverError` for a failed solve.

    ``steps`` (attempted steps, where known) and ``note`` (what the problem
    adds: the stiffness at ``t`` for an explicit solver, the ``solver="auto"``
    choice) complete it.
    """
    state = np.array2string(np.asarray(y), precision=6, separator=", ")
    after = "" if steps is None else f" after {steps} attempted steps"
    if status == 1:
        auto = "solver='auto' chose" in note  # never suggest the choice that just failed
        hint = (
            "the system may be stiff: try solver='rodas3' (loose rtol) or 'rodas5p' "
            "(tight rtol)" + ("" if auto else ", or solver='auto'")
            if not solver.stiff
            else "raise max_steps or loosen rtol/atol"
        )
        return (
            f"{solver.name}: max_steps={getattr(solver, 'max_steps', '?')} exhausted at "
            f"t={t:.6g} before the end t={t1:.6g} (state {state}){note}; {hint}"
        )
    if status == 2:
        if solver.stiff:
            return (
                f"{solver.name}: the step returned non-finite values at t={t:.6g}, y={state}"
                f"{after}, down to a step of 1e-12 of the interval: the right-hand side, its "
                "Jacobian df/dy or the linear system W = I - h*gamma*J is not finite or "
                f"singular there{note}"
            )
        return (
            f"{solver.name}: the right-hand side returned non-finite values at t={t:.6g}, "
            f"y={state}{after}{note}"
        )
    if status == 3:
        return (
            f"{solver.name}: an event chattered at t={t:.10g} (state {state}): it fired twice "
            "within 1 / max_rate; the events accumulate (a Zeno point) -- end the solve before "
            "t with a terminal event or t_span, or raise Event(max_rate=)"
        )
    if status == 4:
        return (
            f"{solver.name}: more events than max_events by t={t:.6g}; raise "
            "ODEProblem(max_events=)"
        )
    if status == 5:
        return (
            f"{solver.name}: no terminal event fired before the end t={t1:.6g} (state {state}); "
            "the observable reads the event (event.t, event.y): lengthen t_span or check "
            "the condition's sign change (event.fired says whether it fired)"
        )
    return STATUS.get(status, f"unknown status {status}")
