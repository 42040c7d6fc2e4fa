"""Explicit Runge–Kutta methods with a fixed step, written once over ``ops``.

The loop is ``ops.scan``: one compilation on JAX whatever the number of steps,
a Python loop on torch and numpy, and Taylor arrays pass through it in the
taylor context.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InputError

__all__ = [
    "EULER",
    "HEUN",
    "RK4",
    "ButcherTableau",
    "combine",
    "rk_integrate",
    "rk_stages",
    "rk_step",
]


@dataclass(frozen=True)
class ButcherTableau:
    """An explicit Runge–Kutta method: lower-triangular ``a``, weights ``b``, nodes ``c``.

    ``order`` is the classical order of the solution with weights ``b``.
    """

    name: str
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    c: tuple[float, ...]
    order: int

    @property
    def stages(self) -> int:
        return len(self.b)


EULER = ButcherTableau("euler", ((),), (1.0,), (0.0,), order=1)
HEUN = ButcherTableau("heun", ((), (1.0,)), (0.5, 0.5), (0.0, 1.0), order=2)
#: The classical fourth-order method (Kutta 1901).
RK4 = ButcherTableau(
    "rk4",
    ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
    (1 / 6, 1 / 3, 1 / 3, 1 / 6),
    (0.0, 0.5, 0.5, 1.0),
    order=4,
)

Rhs = Callable[[Any, Any, Any, Any], Any]


def rk_stages(
    rhs: Rhs, t: Any, y: Any, h: Any, p: Any, ops: Any, tableau: ButcherTableau = RK4
) -> list[Any]:
    """The stage derivatives ``k_i = rhs(t + c_i h, y + h sum_j a_ij k_j)`` of one step."""
    ks: list[Any] = []
    for i in range(tableau.stages):
        yi = y
        for aij, kj in zip(tableau.a[i], ks, strict=False):
            if aij != 0.0:
                yi = yi + (h * aij) * kj
        ks.append(rhs(t + tableau.c[i] * h, yi, p, ops))
    return ks


def combine(y: Any, h: Any, weights: tuple[float, ...], ks: list[Any]) -> Any:
    """``y + h sum_i w_i k_i`` (zero weights skipped)."""
    out = y
    for wi, ki in zip(weights, ks, strict=True):
        if wi != 0.0:
            out = out + (h * wi) * ki
    return out


def rk_step(rhs: Rhs, t: Any, y: Any, h: Any, p: Any, ops: Any, tableau: ButcherTableau = RK4):
    """One step ``y(t) -> y(t + h)`` of ``y' = rhs(t, y, p, ops)``."""
    return combine(y, h, tableau.b, rk_stages(rhs, t, y, h, p, ops, tableau))


def rk_integrate(
    rhs: Rhs,
    y0: Any,
    t0: float,
    t1: float,
    n_steps: int,
    p: Any,
    ops: Any,
    tableau: ButcherTableau = RK4,
    *,
    checkpoint: bool = False,
) -> tuple[Any, Any]:
    """Integrate from ``t0`` to ``t1`` in ``n_steps`` equal steps.

    Returns ``(y(t1), ys)`` with ``ys`` of shape ``(n_steps, *y0.shape)``: the
    state after each step.  ``checkpoint=True`` wraps the step in
    ``ops.checkpoint`` (memory bounded by recomputation in reverse mode).
    """
    if int(n_steps) < 1:
        raise InputError(f"n_steps must be a positive integer; got {n_steps!r}")
    h = (float(t1) - float(t0)) / int(n_steps)
    ts = float(t0) + h * ops.arange(int(n_steps), dtype=ops.dtype)

    def step(y: Any, t: Any) -> tuple[Any, Any]:
        y_next = rk_step(rhs, t, y, h, p, ops, tableau)
        return y_next, y_next

    if checkpoint:
        step = ops.checkpoint(step)
    return ops.scan(step, y0, ts)
