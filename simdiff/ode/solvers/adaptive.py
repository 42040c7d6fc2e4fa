"""Adaptive step-size control shared by Dormand–Prince and Rosenbrock.

The error norm, the starting step, the controller and the base class of the
embedded pairs; the loop itself is :func:`simdiff.ode.solvers.driver.drive`.

Step-size decisions (error norm, accept/reject, the next step) are taken on
``ops.stop_gradient`` values: the step sequence is a piecewise constant
function of the inputs, and derivatives are those of the discrete solution
for that fixed sequence of steps.  Saved states are reached exactly (the step
is shortened to land on each ``save_at`` time), so no interpolant enters the
derivatives.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.backends._tree import tree_map
from simdiff.errors import InputError, UnsupportedError
from simdiff.ode.adjoint import DECISION, Adjoint
from simdiff.ode.solvers._base import Rhs, SolveInfo, Solver
from simdiff.ode.solvers.driver import integrate_steps

__all__ = [
    "TIGHT_RTOL",
    "AdaptiveController",
    "EmbeddedPair",
    "check_tolerances",
    "initial_step",
    "rms_norm",
    "tightened_solver",
]


def rms_norm(e: Any, y: Any, y_new: Any, rtol: float, atol: float, ops: Any) -> Any:
    """Hairer's norm ``sqrt(mean((e / (atol + rtol max(|y|, |y_new|)))^2))``."""
    scale = atol + rtol * ops.maximum(ops.abs(y), ops.abs(y_new))
    return ops.sqrt(ops.mean((e / scale) ** 2))


def initial_step(
    rhs: Rhs, t0: Any, y0: Any, f0: Any, p: Any, span: float, rtol: float, atol: float,
    error_order: int, ops: Any,
) -> Any:  # fmt: skip
    """The starting step of Hairer, Nørsett & Wanner (*Solving ODEs I*, II.4), as SciPy's.

    With ``||.||`` the :func:`rms_norm` scaled by ``atol + rtol |y0|``:

    1. ``d0 = ||y0||``, ``d1 = ||f0||`` with ``f0 = rhs(t0, y0)``; a first guess
       ``h0 = 0.01 d0 / d1`` (``1e-6`` where either is below ``1e-5``), at most ``span``;
    2. one explicit Euler step, ``d2 = ||rhs(t0 + h0, y0 + h0 f0) - f0|| / h0``,
       an estimate of the second derivative;
    3. ``h1 = (0.01 / max(d1, d2))^(1/(q+1))`` with ``q = error_order``, the step
       whose local error would be about ``0.01`` (``max(1e-6, 1e-3 h0)`` where
       ``d1`` and ``d2`` are both below ``1e-15``);
    4. ``h = min(100 h0, h1, span)``, at least ``10 eps span`` (only against a
       zero step).

    Step 2 is what sees a fast initial transient (Robertson's ``3e7 y2^2``,
    zero in ``f0``), which ``0.01 d0 / d1`` alone misses.  One more evaluation
    of ``rhs``; computed on stop-gradient values, as in SciPy's
    ``select_initial_step`` and diffrax's ``PIDController``.
    """
    sg = ops.stop_gradient
    t0, y0, f0 = sg(t0), sg(y0), sg(f0)
    d0 = rms_norm(y0, y0, y0, rtol, atol, ops)
    d1 = rms_norm(f0, y0, y0, rtol, atol, ops)
    small = (d0 < 1e-5) | (d1 < 1e-5)
    h0 = ops.minimum(ops.where(small, 1e-6, 0.01 * d0 / ops.where(small, 1.0, d1)), span)
    f1 = sg(rhs(t0 + h0, y0 + h0 * f0, tree_map(sg, p), ops))
    d2 = rms_norm(f1 - f0, y0, y0, rtol, atol, ops) / h0
    d = ops.maximum(d1, d2)
    flat = d <= 1e-15
    h1 = ops.where(
        flat, ops.maximum(1e-6, 1e-3 * h0),
        (0.01 / ops.where(flat, 1.0, d)) ** (1.0 / (error_order + 1)),
    )  # fmt: skip
    # a non-finite d2 (the Euler step overflowed) leaves the first guess
    h1 = ops.where(ops.isfinite(h1), h1, h0)
    return ops.clip(ops.minimum(100.0 * h0, h1), 10.0 * _EPS * span, span)


_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class AdaptiveController:
    """The error-per-step controller of an embedded pair: integral (I) or PI.

    I (``beta2 = 0``, the default): ``h_new = h * clip(safety * err^(-1/(q+1)),
    factor_min, factor_max)`` with ``err`` the :func:`rms_norm` of the error
    estimate and ``q`` the order of the embedded (lower-order) solution.

    PI (``beta2 > 0``; Gustafsson's controller as in Hairer & Wanner, *Solving
    ODEs II*, IV.8, and OrdinaryDiffEq.jl's ``PIController``): after an
    accepted step ``h_new = h * clip(safety * err^(-beta1) * err_prev^beta2,
    factor_min, factor_max)`` with ``err_prev`` the error of the previous
    accepted step (``max(err_prev, 1e-4)``, starting at ``1e-4``); after a
    rejected step the I factor, at most 1.  The controller's memory
    (``err_prev``) is carried by the driver's loop (:meth:`memory0`).

    A step is accepted when ``err <= 1``.  After a step shortened to land on
    a save time the longer proposal is kept.  A non-finite error shrinks the
    step by ``factor_min``; the solve fails (status 2) when it is still
    non-finite at ``1e-12`` of the span.  Every decision is taken on
    ``ops.stop_gradient`` values.
    """

    rtol: float
    atol: float
    error_order: int
    span: float
    safety: float = 0.9
    factor_min: float = 0.2
    factor_max: float = 10.0
    beta1: float | None = None
    beta2: float = 0.0

    @classmethod
    def pi(cls, rtol: float, atol: float, error_order: int, span: float) -> AdaptiveController:
        """The PI controller with ``beta1 = 0.7/(q+1)``, ``beta2 = 0.4/(q+1)``."""
        k = error_order + 1
        return cls(rtol, atol, error_order, span, beta1=0.7 / k, beta2=0.4 / k)

    def memory0(self, ops: Any) -> Any:
        """The controller's memory before the first step: ``()`` (I) or ``err_prev = 1e-4`` (PI)."""
        return () if self.beta2 == 0.0 else ops.asarray(1e-4)

    @staticmethod
    def try_step(h: Any, remaining: Any, ops: Any) -> Any:
        """The proposal, shortened to land on the next save time.

        Tagged :data:`~simdiff.ode.adjoint.DECISION`, as is :meth:`decide`'s accept flag:
        the proposal follows from error estimates, whose rounding a recomputation compiled
        apart from the forward may change, so a checkpointed loop stores both per step
        and its recomputation replays them (:func:`~simdiff.ode.adjoint.blocked_loop`).
        """
        return ops.checkpoint_name(ops.minimum(h, remaining), DECISION)

    def decide(
        self,
        h: Any,
        h_try: Any,
        remaining: Any,
        y: Any,
        y_new: Any,
        err_vec: Any,
        memory: Any,
        ops: Any,
    ) -> tuple[Any, Any, Any, Any]:
        """``(accept, h_next, failed, memory)`` for a step ``h_try`` from ``y`` to ``y_new``.

        :meth:`judge` of :meth:`measure`.
        """
        return self.judge(h, h_try, remaining, self.measure(y, y_new, err_vec, ops), memory, ops)

    def measure(self, y: Any, y_new: Any, err_vec: Any, ops: Any) -> Any:
        """What :meth:`judge` reads of a step's arrays: the :func:`rms_norm` of its error
        estimate, a scalar (on ``stop_gradient`` values)."""
        sg = ops.stop_gradient
        return rms_norm(sg(err_vec), sg(y), sg(y_new), self.rtol, self.atol, ops)

    def judge(
        self, h: Any, h_try: Any, remaining: Any, err: Any, memory: Any, ops: Any
    ) -> tuple[Any, Any, Any, Any]:
        """``(accept, h_next, failed, memory)`` from the error norm ``err`` (:meth:`measure`)."""
        finite = ops.isfinite(err)
        accept = err <= 1.0
        safe_err = ops.clip(ops.where(finite, err, 1.0), 1e-10)
        factor = self.safety * safe_err ** (-1.0 / (self.error_order + 1))
        if self.beta2 != 0.0:
            beta1 = 0.7 / (self.error_order + 1) if self.beta1 is None else self.beta1
            pi = self.safety * safe_err ** (-beta1) * memory**self.beta2
            factor = ops.where(accept, pi, ops.minimum(factor, 1.0))
            memory = ops.where(accept & finite, ops.maximum(safe_err, 1e-4), memory)
        factor = ops.where(
            finite, ops.clip(factor, self.factor_min, self.factor_max), self.factor_min
        )
        h_next = h_try * factor
        # After a step shortened to land on a save time, keep the longer proposal.
        hits = accept & (h >= remaining)
        h_next = ops.where(hits, ops.maximum(h_next, h), h_next)
        failed = ~finite & (h_try <= 1e-12 * self.span)
        return ops.checkpoint_name(accept, DECISION), h_next, failed, memory


#: The tightest ``rtol`` :func:`tightened_solver` gives a solver.
TIGHT_RTOL = 1e-12


def tightened_solver(solver: Solver, factor: float) -> tuple[Solver, float] | None:
    """``(solver with rtol and atol divided by f, f)``, ``f = min(factor, rtol / TIGHT_RTOL)``.

    ``max_steps`` is multiplied by ``ceil(f^(1/3))`` (the step count of a
    method of order ``q`` grows like ``f^(1/(q+1))``; ``q >= 2`` here).
    ``None`` for a solver already at or below :data:`TIGHT_RTOL`, a
    fixed-step solver (nothing to tighten) or one whose tolerances are not
    dataclass fields.

    Examples
    --------
    >>> from simdiff.ode import Dopri5
    >>> from simdiff.ode.solvers.adaptive import tightened_solver
    >>> tight, f = tightened_solver(Dopri5(rtol=1e-6), 1e3)
    >>> f"{tight.rtol:.1e} {f:.0e} {tight.max_steps}"
    '1.0e-09 1e+03 40960'
    """
    fields: Any = solver  # a dataclass with rtol, atol and max_steps, checked here
    is_dc = dataclasses.is_dataclass(fields)
    names = {f.name for f in dataclasses.fields(fields)} if is_dc else set()
    rtol = float(getattr(fields, "rtol", 0.0))
    if not {"rtol", "atol", "max_steps"} <= names or rtol <= TIGHT_RTOL:
        return None
    f = min(float(factor), rtol / TIGHT_RTOL)
    new = dataclasses.replace(
        fields, rtol=rtol / f, atol=float(fields.atol) / f,
        max_steps=int(fields.max_steps) * math.ceil(f ** (1.0 / 3.0)),
    )  # fmt: skip
    return new, f


def check_tolerances(rtol: float, atol: float, max_steps: int, h0: float | None) -> None:
    """Validate an adaptive solver's settings; messages name what was expected."""
    for what, v in (("rtol", rtol), ("atol", atol)):
        if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
            raise InputError(f"{what} must be a positive finite float; got {v!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise InputError(f"max_steps must be a positive integer; got {max_steps!r}")
    if h0 is not None and not (np.isfinite(h0) and h0 > 0):
        raise InputError(f"h0 must be a positive finite float or None; got {h0!r}")


class EmbeddedPair(Solver):
    """An adaptive solver from an embedded pair: subclasses define ``step`` and ``error_order``.

    Subclasses are dataclasses with fields ``rtol``, ``atol``, ``max_steps``
    and ``h0``.  ``init(rhs, t0, y0, p, ops)`` returns the method's state
    before the first step (default ``()``); ``step(rhs, t, y, h, p, state,
    ops)`` returns ``(y_new, err, state_new)``, ``state_new`` being used by
    the next step if this one is accepted.
    """

    rtol: float
    atol: float
    max_steps: int
    h0: float | None
    #: Order of the embedded (lower-order) solution: the controller uses ``err^(-1/(q+1))``.
    error_order: int = 1
    #: Whether ``init`` returns ``f(t0, y0)`` (first same as last).
    fsal: bool = False

    def init(self, rhs: Rhs, t0: Any, y0: Any, p: Any, ops: Any) -> Any:
        """The state before the first step (``()``: the method carries nothing)."""
        return ()

    supports_events = True

    def restart(self, rhs: Rhs, p: Any, ops: Any) -> Any:
        """``init`` at ``(t, y)``: the state to continue from after an event."""
        return lambda t, y: self.init(rhs, t, y, p, ops)

    def make_controller(self, span: float) -> AdaptiveController:
        """The step controller of a solve over ``span`` (default: I, exponent ``-1/(q+1)``)."""
        return AdaptiveController(self.rtol, self.atol, self.error_order, abs(span))

    def step(
        self, rhs: Rhs, t: Any, y: Any, h: Any, p: Any, state: Any, ops: Any
    ) -> tuple[Any, Any, Any]:
        """One step: ``(y_new, err, state_new)``."""
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")

    def stepper(self, rhs: Rhs, p: Any, ops: Any) -> Any:
        """``step(t, y, h, state)`` for the driver; constants are made here, once per solve."""

        def step(t: Any, y: Any, h: Any, state: Any) -> tuple[Any, Any, Any]:
            return self.step(rhs, t, y, h, p, state, ops)

        return step

    def integrate(
        self,
        rhs: Rhs,
        y0: Any,
        t0: float,
        save_at: np.ndarray,
        p: Any,
        ops: Any,
        adjoint: Adjoint | None = None,
        events: Any = None,
    ) -> tuple[Any, SolveInfo]:
        span = float(save_at[-1]) - float(t0)
        t0_ = ops.asarray(float(t0))
        state0 = self.init(rhs, t0_, y0, p, ops)
        if self.h0 is None:
            f0 = state0 if self.fsal else rhs(t0_, y0, p, ops)
            h0 = initial_step(
                rhs, t0_, y0, f0, p, span, self.rtol, self.atol, self.error_order, ops
            )
        else:
            h0 = ops.asarray(float(self.h0))
        return integrate_steps(
            self, lambda f, q: self.stepper(f, q, ops), rhs, y0, t0, save_at, p, ops,
            state0=state0, h0=h0, controller=self.make_controller(span),
            max_steps=self.max_steps, adjoint=adjoint, events=events,
        )  # fmt: skip
