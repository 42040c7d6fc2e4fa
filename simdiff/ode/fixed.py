"""Fixed-step explicit Runge–Kutta as an ODEProblem solver (RK4 by default: order 4)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.backends.numpy import NumpyOps
from simdiff.errors import InputError, InputTypeError
from simdiff.ode._base import Rhs, SolveInfo, Solver
from simdiff.ode._driver import drive
from simdiff.ode.adjoint import Adjoint, CheckpointAdjoint, make_adjoint
from simdiff.ode.rk import RK4, ButcherTableau, combination, fuses, rk_stages, tableau_arrays
from simdiff.ode.stability import check_explicit_step, rhs_spectral_radius

__all__ = ["FixedController", "FixedStep", "step_grid"]


#: Relative slack in ``ceil(length / dt)``: the time reached after ``k`` steps
#: carries a rounding error of about ``k eps |t|``, so the remaining length over
#: ``dt`` can sit above an integer by ``~ eps |t| / dt`` relative (2e-8 absolute
#: after 1000 steps of 1e-4 at t = 10), and an absolute slack of 1e-9 then
#: counted one step too many and exhausted ``max_steps`` (seen at 10^5 steps).
GRID_SLACK = 1e-7


def step_grid(
    t0: float, save_at: np.ndarray, dt: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps of at most ``dt`` that land on every save time.

    Returns ``(ts, hs, last)``: the start time and length of each step, and for
    each save time the index of the step that ends on it (-1 for a save time
    equal to ``t0``).
    """
    ts: list[float] = []
    hs: list[float] = []
    last: list[int] = []
    start = float(t0)
    for s in save_at:
        length = float(s) - start
        if length == 0.0:
            last.append(len(ts) - 1)
            continue
        n = max(1, math.ceil(length / dt * (1.0 - GRID_SLACK) - 1e-9))
        h = length / n
        ts.extend(start + h * np.arange(n))
        hs.extend([h] * n)
        last.append(len(ts) - 1)
        start = float(s)
    return np.asarray(ts), np.asarray(hs), np.asarray(last)


@dataclass(frozen=True)
class FixedStep(Solver):
    """Explicit Runge–Kutta with a fixed step size (classical RK4 unless ``tableau`` says).

    Each interval between save times is split into equal steps of at most
    ``(t1 - t0) / n_steps``, so the saved states are computed exactly at
    ``save_at`` (no interpolation).  The steps run in the shared driver
    (:func:`simdiff.ode._driver.drive`) with a :class:`FixedController`.

    Parameters
    ----------
    n_steps : int
        Steps over the whole interval when ``save_at`` is evenly spaced
        (default 100); the step bound is ``(t1 - t0) / n_steps``.
    tableau : ButcherTableau
        :data:`~simdiff.ode.RK4` (order 4, default), ``HEUN`` (2), ``EULER`` (1),
        or any explicit tableau.
    checkpoint : bool
        Deprecated spelling of ``adjoint=CheckpointAdjoint(block=1)`` (each step
        rematerialised), used when the problem gives no ``adjoint``.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.ode import FixedStep, solve
    >>> ys = solve(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
    ...            save_at=[1.0], solver=FixedStep(n_steps=50))
    >>> bool(abs(ys[0, 0] - np.exp(-2.0)) < 1e-7)
    True
    """

    n_steps: int = 100
    tableau: ButcherTableau = RK4
    checkpoint: bool = False
    loop_compiles = True
    supports_events = True

    def __post_init__(self) -> None:
        if isinstance(self.n_steps, bool) or not isinstance(self.n_steps, (int, np.integer)):
            raise InputTypeError(f"n_steps must be an integer; got {self.n_steps!r}")
        if self.n_steps < 1:
            raise InputError(f"n_steps must be >= 1; got {self.n_steps}")

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.tableau.name

    @property
    def order(self) -> int:  # type: ignore[override]
        return self.tableau.order

    def check(self, rhs: Rhs, y0: np.ndarray, t0: float, save_at: np.ndarray, p: Any) -> None:
        """Raise :class:`~simdiff.errors.StabilityError` if the step is beyond the stability limit.

        The spectral radius of ``df/dy`` at ``(t0, y0, p)`` is estimated by
        :func:`~simdiff.ode.stability.rhs_spectral_radius` (central-difference
        Jacobian-vector products) and compared with the tableau's real
        stability interval (:func:`~simdiff.ode.stability.check_explicit_step`).
        """
        ops = NumpyOps()
        t = np.float64(t0)
        with np.errstate(all="ignore"):
            rho = rhs_spectral_radius(lambda y: rhs(t, y, p, ops), y0)
        check_explicit_step(
            float(save_at[-1]) - float(t0), int(self.n_steps), rho, self.tableau,
            f"spectral radius of df/dy at t0={float(t0):g}",
            remedy="or an adaptive solver (solver='dopri5', or 'rodas3' if the problem is stiff)",
        )  # fmt: skip

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
        dt = span / int(self.n_steps)
        n_total = int(step_grid(t0, save_at, dt)[0].size)
        if n_total == 0:  # every save time is t0
            ys = ops.stack([y0] * len(save_at))
            zero = ops.asarray(0.0)
            return ys, SolveInfo(ops.asarray(0.0), ops.asarray(float(t0)), y0, zero, zero)
        tableau = self.tableau
        if self.checkpoint and adjoint is None:
            adjoint = CheckpointAdjoint(block=1)
        adjoint = make_adjoint(adjoint)
        stage_rhs = adjoint.step_rhs(rhs, ops)
        event_rhs = adjoint.event_rhs(rhs, ops)

        def stepper(q: Any, f: Any = stage_rhs) -> Any:
            rows = None if fuses(ops) else tableau_arrays(tableau, ops)
            weights = tableau.b if fuses(ops) else ops.asarray(list(tableau.b))

            def step(t: Any, y: Any, h: Any, state: Any) -> tuple[Any, None, Any]:
                ks = rk_stages(f, t, y, h, q, ops, tableau, rows=rows, stacked=False)
                return y + h * combination(weights, ks, ops), None, state

            return step

        return drive(
            stepper, p, (), y0, t0, save_at, ops, h0=ops.asarray(dt),
            controller=FixedController(dt),
            # an event shortens one step; the interval after it needs no more steps than before
            max_steps=n_total if events is None else n_total + events.max_events + 1,
            adjoint=adjoint, key=(self, rhs, adjoint) if self.loop_compiles else None,
            events=None if events is None else (
                events,
                lambda q: self.dense(rhs, q, ops),
                lambda q: self.restart(event_rhs, q, ops),
                lambda q: stepper(q, event_rhs),
            ),
        )  # fmt: skip


@dataclass(frozen=True)
class FixedController:
    """Equal steps of at most ``dt`` that land on every save time (no error control).

    Each interval up to the next save time of length ``L`` is cut into
    ``ceil(L / dt)`` equal steps (the grid of :func:`step_grid`): the step
    tried is ``remaining / ceil(remaining / dt)``.  Every finite step is
    accepted; a non-finite state stops the solve (status 2).
    """

    dt: float

    def try_step(self, h: Any, remaining: Any, ops: Any) -> Any:
        ratio = ops.stop_gradient(remaining) / self.dt
        n = -ops.floor(-(ratio * (1.0 - GRID_SLACK) - 1e-9))  # ceil, as step_grid
        return remaining / ops.clip(n, 1.0)

    @staticmethod
    def memory0(ops: Any) -> Any:
        """No memory: ``()``."""
        return ()

    def decide(
        self, h: Any, h_try: Any, remaining: Any, y: Any, y_new: Any, err: Any, memory: Any,
        ops: Any,
    ) -> tuple[Any, Any, Any, Any]:  # fmt: skip
        """``(accept, h, failed, ())``: accept a finite step, fail on a non-finite one."""
        return self.judge(h, h_try, remaining, self.measure(y, y_new, err, ops), memory, ops)

    @staticmethod
    def measure(y: Any, y_new: Any, err: Any, ops: Any) -> Any:
        """What :meth:`judge` reads of a step's arrays: its number of non-finite entries."""
        return ops.sum(ops.where(ops.isfinite(ops.stop_gradient(y_new)), 0.0, 1.0))

    @staticmethod
    def judge(
        h: Any, h_try: Any, remaining: Any, nonfinite: Any, memory: Any, ops: Any
    ) -> tuple[Any, Any, Any, Any]:
        """``(accept, h, failed, ())`` from the step's count of non-finite entries."""
        finite = nonfinite == 0.0
        return finite, h, ~finite, memory
