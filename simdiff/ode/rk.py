"""Explicit Runge–Kutta methods with a fixed step, written once over ``ops``.

The loop is ``ops.scan``: one compilation on JAX whatever the number of steps,
a Python loop on torch and numpy, and Taylor arrays pass through it in the
taylor context.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simdiff.errors import InputError

__all__ = [
    "EULER",
    "HEUN",
    "RK4",
    "ButcherTableau",
    "combination",
    "combine",
    "fuses",
    "rk_integrate",
    "rk_stages",
    "rk_step",
    "tableau_arrays",
    "weighted",
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
    over a stacked stage axis, or a ``dot``, read and write the stack: for
    the Lorenz-96 benchmark of docs/ode.md with 10,000 states the Dopri5 solve
    took about 4 times longer that way, 131 against 30 ms, and the gradient
    about 2 times, 449 against 234 ms.)  Otherwise it is :func:`weighted`
    over ``ops.stack(ks)``.
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
    call of its own (for the Lotka-Volterra benchmark of docs/ode.md, 37 to
    29 kernels per Dopri5 step).  Likewise in a context that compiles parts
    (``ops.compile_part``: torch under ``compile=True | "auto"``, the step
    loop), where Inductor made each product an external ``mm`` call: the
    compiled LV gradient of ``validation.benchmarks.bench_ode_compile`` (then the
    compiled step) went from 0.26-0.28x to 0.21-0.22x torchdiffeq's, its
    cold compile from 26-28 s to 18-21 s (docs/ode.md).
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
