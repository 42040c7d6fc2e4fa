"""Dormand–Prince 5(4): adaptive explicit Runge–Kutta of order 5 with an order-4 error estimate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simdiff.ode.solvers._base import Rhs
from simdiff.ode.solvers.adaptive import EmbeddedPair, check_tolerances
from simdiff.ode.solvers.rk import ButcherTableau, combination, fuses, rk_stages, tableau_arrays

__all__ = ["DOPRI5", "Dopri5"]

#: The Dormand–Prince 5(4) tableau; ``b`` is the 5th-order solution (local extrapolation).
DOPRI5 = ButcherTableau(
    "dopri5",
    (
        (),
        (1 / 5,),
        (3 / 40, 9 / 40),
        (44 / 45, -56 / 15, 32 / 9),
        (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
        (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
        (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
    ),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0),
    (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0),
    order=5,
)
#: ``b - b_hat``: the 5th-order minus the embedded 4th-order weights.
ERROR_WEIGHTS = (
    71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40,
)  # fmt: skip
_ERROR = ERROR_WEIGHTS


#: Dense output of Dormand–Prince (Shampine's quartic, as in SciPy's RK45): the state at
#: ``t + theta h`` is ``y + h K^T P [theta, theta^2, theta^3, theta^4]`` over the seven stages.
DENSE_P = (
    (1.0, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432),
    (0.0, 0.0, 0.0, 0.0),
    (0.0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799),
    (0.0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072),
    (0.0, 127303824393 / 49829197408, -318862633887 / 49829197408,
     701980252875 / 199316789632),
    (0.0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844),
    (0.0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423),
)  # fmt: skip


@dataclass(frozen=True)
class Dopri5(EmbeddedPair):
    """Adaptive Dormand–Prince 5(4) (Dormand & Prince 1980), order 5.

    Parameters
    ----------
    rtol, atol : float
        Tolerances of the error norm
        ``sqrt(mean((err / (atol + rtol * max(|y|, |y_new|)))^2))``; a step is
        accepted when it is at most 1.  The standard controller
        ``h_new = h * clip(0.9 * err^(-1/5), 0.2, 10)`` proposes the next step.
    max_steps : int
        Attempted steps (accepted and rejected) before the solve fails.  It
        bounds the loop; the cost follows the steps actually taken (see
        :mod:`simdiff.ode.adjoint` for how each derivative strategy loops).
    h0 : float, optional
        First step; default Hairer's estimate as SciPy's ``select_initial_step``
        makes it: ``0.01 ||y0|| / ||f0||``, refined by one explicit Euler step.

    Notes
    -----
    *Derivatives are those of the discrete solver.*  Step sizes are chosen on
    ``ops.stop_gradient`` values, so differentiation sees the accepted steps as
    constants: the result is the exact derivative of the numerical solution
    for that step sequence, identical on JAX and torch, and it converges to
    the derivative of the exact solution as the tolerances tighten (it is not
    the derivative of the tolerance-driven step selection, which is piecewise
    constant).  Consequences: (i) a finite-difference check must use steps small
    enough not to change the accepted step sequence, or compare at a tolerance
    where both agree to ``O(rtol)``; (ii) derivatives are accurate to about the
    solution's own accuracy, not better; (iii) derivatives of any order exist,
    since every operation on the differentiated path is smooth.

    Save times are hit exactly (the step is shortened to land on them): no
    dense-output interpolant enters the derivatives, except at events, which
    are located on the quartic dense output :data:`DENSE_P`
    (:mod:`simdiff.ode.events`).  First same as last: the
    seventh stage ``f(t + h, y_new)`` of an accepted step is the next step's
    first, so a step costs six right-hand-side evaluations.

    *Failure.*  If ``max_steps`` is exhausted, the saved states are NaN (a
    JAX-compiled function cannot raise) and the status is 1;
    :func:`simdiff.ode.solve` and :meth:`ODEProblem.evaluate` raise
    :class:`~simdiff.errors.SolverError` naming the time reached, and the
    derivative API reports the NaN as :class:`~simdiff.errors.NonFiniteError`.
    A rejected step whose stages overflow can make reverse-mode derivatives NaN
    even when the solve succeeds (0 times inf in the masked branch).

    References
    ----------
    J. R. Dormand, P. J. Prince, "A family of embedded Runge-Kutta formulae",
    J. Comput. Appl. Math. 6 (1980) 19–26.  E. Hairer, S. P. Nørsett,
    G. Wanner, *Solving Ordinary Differential Equations I*, 2nd ed., II.4–II.5.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.ode import Dopri5, solve
    >>> ys = solve(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
    ...            save_at=[0.5, 1.0], solver=Dopri5(rtol=1e-10, atol=1e-12))
    >>> np.allclose(ys[:, 0], np.exp([-1.0, -2.0]), rtol=1e-9)
    True
    """

    rtol: float = 1e-6
    atol: float = 1e-9
    max_steps: int = 4096
    h0: float | None = None
    name = "dopri5"
    order = 5
    error_order = 4
    fsal = True
    loop_compiles = True

    def __post_init__(self) -> None:
        check_tolerances(self.rtol, self.atol, self.max_steps, self.h0)

    def init(self, rhs: Rhs, t0: Any, y0: Any, p: Any, ops: Any) -> Any:
        """``f(t0, y0)``: the first stage of the first step (first same as last)."""
        return rhs(t0, y0, p, ops)

    def stepper(self, rhs: Rhs, p: Any, ops: Any) -> Any:
        rows = None if fuses(ops) else tableau_arrays(DOPRI5, ops)
        error = _ERROR if fuses(ops) else ops.asarray(list(_ERROR))

        def step(t: Any, y: Any, h: Any, k1: Any) -> tuple[Any, Any, Any]:
            # The last row of ``a`` is ``b`` (and b_7 = 0): stage 7's input is the new state.
            ks, y_new = rk_stages(
                rhs, t, y, h, p, ops, DOPRI5, rows=rows, k1=k1, with_last_input=True,
                stacked=False,
            )  # fmt: skip
            return y_new, h * combination(error, ks, ops), ks[6]

        return step

    def dense(self, rhs: Rhs, p: Any, ops: Any) -> Any:
        """The quartic dense output :data:`DENSE_P` (order 4); the step's stages are recomputed."""
        rows = None if fuses(ops) else tableau_arrays(DOPRI5, ops)
        cols = [ops.asarray([r[j] for r in DENSE_P]) for j in range(4)]

        def quartic(theta: Any, data: tuple[Any, Any]) -> Any:
            y, hk = data
            w = theta * (cols[0] + theta * (cols[1] + theta * (cols[2] + theta * cols[3])))
            return y + ops.sum(ops.reshape(w, (-1, 1)) * hk, axis=0)

        def make(t: Any, y: Any, h: Any, k1: Any, y_new: Any) -> tuple[Any, Any]:
            ks = rk_stages(rhs, t, y, h, p, ops, DOPRI5, rows=rows, k1=k1)
            return (y, h * ks), quartic

        return make

    def step(
        self, rhs: Rhs, t: Any, y: Any, h: Any, p: Any, state: Any, ops: Any
    ) -> tuple[Any, Any, Any]:
        """One step: ``(y_new, err, k7)``, the 5th-order solution, its error estimate and
        ``f(t + h, y_new)`` (the next step's first stage when this one is accepted)."""
        return self.stepper(rhs, p, ops)(t, y, h, state)
