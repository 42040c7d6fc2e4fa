"""Fixed-step explicit Runge–Kutta as an ODEProblem solver (RK4 by default: order 4)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError, InputTypeError
from ._base import Rhs, SolveInfo, Solver
from .rk import RK4, ButcherTableau, rk_step

__all__ = ["FixedStep", "step_grid"]


def step_grid(
    t0: float, save_at: np.ndarray, dt: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps of at most ``dt`` that land on every save time.

    Returns ``(ts, hs, last)``: the start time and length of each step, and for
    each save time the index of the step that ends on it (-1 for a save time
    equal to ``t0``).
    """
    ts, hs, last = [], [], []
    start = float(t0)
    for s in save_at:
        length = float(s) - start
        if length == 0.0:
            last.append(len(ts) - 1)
            continue
        n = max(1, math.ceil(length / dt - 1e-9))
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
    ``save_at`` (no interpolation).  The whole integration is one ``ops.scan``.

    Parameters
    ----------
    n_steps : int
        Steps over the whole interval when ``save_at`` is evenly spaced
        (default 100); the step bound is ``(t1 - t0) / n_steps``.
    tableau : ButcherTableau
        :data:`~simdiff.ode.RK4` (order 4, default), ``HEUN`` (2), ``EULER`` (1),
        or any explicit tableau.
    checkpoint : bool
        Wrap each step in ``ops.checkpoint`` (memory bounded by recomputation).

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

    def integrate(
        self, rhs: Rhs, y0: Any, t0: float, save_at: np.ndarray, p: Any, ops: Any
    ) -> tuple[Any, SolveInfo]:
        dt = (float(save_at[-1]) - float(t0)) / int(self.n_steps)
        ts, hs, last = step_grid(t0, save_at, dt)
        if ts.size == 0:  # every save time is t0
            ys = ops.stack([y0] * len(save_at))
            zero = ops.asarray(0.0)
            return ys, SolveInfo(ops.asarray(0.0), ops.asarray(float(t0)), y0, zero, zero)

        def step(y: Any, th: tuple[Any, Any]) -> tuple[Any, Any]:
            y_next = rk_step(rhs, th[0], y, th[1], p, ops, self.tableau)
            return y_next, y_next

        if self.checkpoint:
            step = ops.checkpoint(step)
        _, states = ops.scan(step, y0, (ops.asarray(ts), ops.asarray(hs)))
        # Prepend y0 so that index -1 (a save time equal to t0) becomes row 0.
        history = ops.concat([y0[None, :], states], axis=0)
        ys = ops.take(history, ops.asarray(last + 1), axis=0)
        # Status: the first step whose state is not finite, if any.
        finite = ops.sum(ops.where(ops.isfinite(states), 0.0, 1.0), axis=1) == 0.0
        prefix_ok = ops.cumsum(ops.where(finite, 0.0, 1.0)) == 0.0
        n_ok = ops.sum(ops.where(prefix_ok, 1.0, 0.0))
        ok = n_ok == float(ts.size)
        t_reached = float(t0) + ops.sum(ops.where(prefix_ok, ops.asarray(hs), 0.0))
        slot = ops.arange(float(ts.size + 1)) == n_ok
        y_reached = ops.sum(ops.where(slot[:, None], history, 0.0), axis=0)
        info = SolveInfo(
            status=ops.where(ok, 0.0, 2.0),
            t=t_reached,
            y=y_reached,
            n_accepted=n_ok,
            n_rejected=ops.asarray(0.0),
        )
        return ys, info
