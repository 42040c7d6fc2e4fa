"""Butcher tableaus of explicit Runge–Kutta methods: the data, below the solvers that step them.

:mod:`simdiff.ode.stability` reads a tableau's stability interval and
:mod:`simdiff.ode.solvers.rk` steps it; both import it from here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EULER", "HEUN", "RK4", "ButcherTableau"]


@dataclass(frozen=True)
class ButcherTableau:
    """An explicit Runge–Kutta method: lower-triangular ``a``, weights ``b``, nodes ``c``.

    ``order`` is the classical order of the solution with weights ``b``.

    Examples
    --------
    >>> from simdiff.ode import RK4
    >>> RK4.stages, RK4.order
    (4, 4)
    """

    name: str
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    c: tuple[float, ...]
    order: int

    @property
    def stages(self) -> int:
        """The number of stages, ``len(b)``."""
        return len(self.b)


#: The explicit Euler method (order 1).
EULER = ButcherTableau("euler", ((),), (1.0,), (0.0,), order=1)
#: Heun's method, the explicit trapezoidal rule (order 2).
HEUN = ButcherTableau("heun", ((), (1.0,)), (0.5, 0.5), (0.0, 1.0), order=2)
#: The classical fourth-order method (Kutta 1901).
RK4 = ButcherTableau(
    "rk4",
    ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
    (1 / 6, 1 / 3, 1 / 3, 1 / 6),
    (0.0, 0.5, 0.5, 1.0),
    order=4,
)
