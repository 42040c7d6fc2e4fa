"""Explicit Runge–Kutta: the stage arithmetic of every explicit method, and the fixed-step solvers.

The stage arithmetic (:func:`rk_stages`, :func:`combination`,
:func:`weighted`) serves :class:`FixedStep` and
:class:`~simdiff.ode.Dopri5`.  Fixed steps run two ways: :class:`FixedStep`,
an :class:`~simdiff.ode.ODEProblem` solver in the shared step driver
(:func:`~simdiff.ode.solvers.driver.drive`: events, adjoints, compiled
loops), and :func:`rk_integrate`, a bare ``ops.scan`` over equal steps (one
compilation on JAX whatever the number of steps, a Python loop on torch and
numpy; Taylor arrays pass through it in the taylor context).  The tableaus
themselves are data (:mod:`simdiff.ode.tableau`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.backends.numpy import NumpyOps
from simdiff.errors import InputError, InputTypeError
from simdiff.ode.adjoint import Adjoint, CheckpointAdjoint
from simdiff.ode.solvers._base import Rhs, SolveInfo, Solver
from simdiff.ode.solvers.driver import integrate_steps
from simdiff.ode.stability import check_explicit_step, rhs_spectral_radius
from simdiff.ode.tableau import EULER, HEUN, RK4, ButcherTableau

__all__ = [
    "EULER",
    "HEUN",
    "RK4",
    "ButcherTableau",
    "FixedController",
    "FixedStep",
    "combination",
    "combine",
    "fuses",
    "rk_integrate",
    "rk_stages",
    "rk_step",
    "step_grid",
    "tableau_arrays",
    "weighted",
]


def tableau_arrays(tableau: ButcherTableau, ops: Any) -> list[Any]:
    """The rows of ``a`` as arrays of ``ops`` (row ``i`` has length ``i``; row 0 is ``None``).

    Made once per solve, outside the step loop, so that a step combines its
    stages with one ``matmul`` per stage instead of one product per coefficient.
    """
    return [None] + [ops.asarray(list(row)) for row in tableau.a[1:]]


def rk_stages(
    rhs: Rhs,
    t: Any,
    y: Any,
    h: Any,
    p: Any,
    ops: Any,
    tableau: ButcherTableau = RK4,
    *,
    rows: list[Any] | None = None,
    k1: Any = None,
    with_last_input: bool = False,
    stacked: bool = True,
) -> Any:
    """The stage derivatives ``k_i = rhs(t + c_i h, y + h sum_j a_ij k_j)`` of one step.

    Returns the stage stack, shape ``(stages, dim)`` (``stacked=False``: the
    list of the ``stages`` arrays, for :func:`combination`).  On eager
    backends each stage input is one tensor operation over the stack of the
    previous stages (``a_i @ K``), so they dispatch a few operations per
    stage, not one per coefficient; on compiled contexts (:func:`fuses`) it
    is the sum of the nonzero ``a_ij k_j`` with the coefficients as
    constants, one elementwise fusion per stage.  ``rows`` are
    :func:`tableau_arrays` (made here if not given); ``k1`` reuses a known
    first stage (FSAL).  ``with_last_input`` also returns the last stage's
    input state (the new state of an FSAL method, whose last row of ``a`` is
    ``b``).
    """
    if fuses(ops):
        rows = None
    elif rows is None:
        rows = tableau_arrays(tableau, ops)
    ks = [rhs(t, y, p, ops) if k1 is None else k1]
    yi = y
    for i in range(1, tableau.stages):
        coeffs = tableau.a[i] if rows is None else rows[i]
        yi = y + h * combination(coeffs, ks, ops)
        ks.append(rhs(t + tableau.c[i] * h, yi, p, ops))
    out = ops.stack(ks) if stacked else ks
    return (out, yi) if with_last_input else out


def fuses(ops: Any) -> bool:
    """Whether ``ops`` compiles the step's arithmetic (JAX; torch's compiled parts).

    There a linear combination of stages is written as products by constants
    and sums, which the compiler fuses into one elementwise kernel; eager
    contexts take one ``matmul`` over the stage stack instead (one dispatch).
    """
    return not ops.eager or ops.compile_part is not None


def combination(coeffs: Any, ks: list[Any], ops: Any) -> Any:
    """``sum_i coeffs[i] ks[i]`` over a list of stages (states of one shape).

    ``coeffs`` is a tuple of floats or an array of ``ops`` of shape
    ``(len(ks),)``.  Where :func:`fuses` holds and ``coeffs`` are floats, the
    zero coefficients are skipped and the others are constants of one fused
    elementwise expression: no stage stack is built, and reverse mode
    transposes it to one product per stage.  (A broadcast product and a sum
    over a stacked stage axis, or a ``dot``, read and write the stack: one
    extra pass over ``stages * dim`` values per combination, which dominates
    on large states; see docs/performance.md.)  Otherwise it is
    :func:`weighted` over ``ops.stack(ks)``.
    """
    if isinstance(coeffs, tuple) and fuses(ops):
        out = None
        for c, k in zip(coeffs, ks, strict=True):
            if c != 0.0:
                out = c * k if out is None else out + c * k
        return 0.0 * ks[0] if out is None else out
    w = ops.asarray(list(coeffs)) if isinstance(coeffs, tuple) else coeffs
    return weighted(w, ops.stack(ks), ops)


def combine(y: Any, h: Any, weights: Any, ks: Any, ops: Any) -> Any:
    """``y + h sum_i w_i k_i`` for a stage stack ``ks`` (shape ``(stages, dim)``): one matmul.

    ``weights`` is a tuple of floats or an array of ``ops`` (shape ``(stages,)``
    or ``(r, stages)`` for ``r`` combinations at once).
    """
    w = ops.asarray(list(weights)) if isinstance(weights, tuple) else weights
    return y + h * weighted(w, ks, ops)


def weighted(w: Any, ks: Any, ops: Any) -> Any:
    """``sum_i w_i ks[i]`` over the leading (stage) axis of ``ks``: one matmul.

    States of any shape (fields of a PDE) are flattened for the product.
    On compiled contexts (``ops.eager`` false: JAX) a one-dimensional ``w``
    is applied as a broadcast product and a sum over the stages instead: XLA
    fuses that with the surrounding arithmetic, while a ``dot`` is a library
    call of its own (one kernel per combination more).  Likewise in a
    context that compiles parts (``ops.compile_part``: torch under
    ``compile=True | "auto"``, the step loop), where Inductor makes each
    product an external ``mm`` call.  Measured effects: docs/performance.md.
    """
    if (not ops.eager or ops.compile_part is not None) and len(w.shape) == 1:
        return ops.sum(ops.reshape(w, (-1,) + (1,) * (len(ks.shape) - 1)) * ks, axis=0)
    if len(ks.shape) == 2:
        return ops.matmul(w, ks)
    flat = ops.matmul(w, ops.reshape(ks, (int(ks.shape[0]), -1)))
    lead = () if len(w.shape) == 1 else (int(w.shape[0]),)
    return ops.reshape(flat, lead + tuple(int(d) for d in ks.shape[1:]))


def rk_step(rhs: Rhs, t: Any, y: Any, h: Any, p: Any, ops: Any, tableau: ButcherTableau = RK4):
    """One step ``y(t) -> y(t + h)`` of ``y' = rhs(t, y, p, ops)``."""
    ks = rk_stages(rhs, t, y, h, p, ops, tableau, stacked=False)
    return y + h * combination(tableau.b, ks, ops)


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
    (:func:`simdiff.ode.solvers.driver.drive`) with a :class:`FixedController`.

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

        def stepper(f: Rhs, q: Any) -> Any:
            rows = None if fuses(ops) else tableau_arrays(tableau, ops)
            weights = tableau.b if fuses(ops) else ops.asarray(list(tableau.b))

            def step(t: Any, y: Any, h: Any, state: Any) -> tuple[Any, None, Any]:
                ks = rk_stages(f, t, y, h, q, ops, tableau, rows=rows, stacked=False)
                return y + h * combination(weights, ks, ops), None, state

            return step

        return integrate_steps(
            self, stepper, rhs, y0, t0, save_at, p, ops, state0=(), h0=ops.asarray(dt),
            controller=FixedController(dt),
            # an event shortens one step; the interval after it needs no more steps than before
            max_steps=n_total if events is None else n_total + events.max_events + 1,
            adjoint=adjoint, events=events,
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
