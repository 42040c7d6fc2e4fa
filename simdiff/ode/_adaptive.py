"""The adaptive step-size driver shared by Dormand–Prince and Rosenbrock.

One loop iteration attempts one step.  The loop has a fixed length
(``max_steps`` iterations, an ``ops.scan``), so it compiles once on JAX and
maps under ``vmap``; iterations after the last ``save_at`` time do nothing
(they are masked with ``where``).  On the eager contexts (torch, numpy) the
loop stops early once every save point is reached, whenever that can be
decided (not under ``vmap``): the skipped iterations are identities, so the
result and its derivatives are the same.

Step-size decisions (error norm, accept/reject, the next step) are taken on
``ops.stop_gradient`` values: the step sequence is a piecewise constant
function of the inputs, and derivatives are those of the discrete solution
for that fixed sequence of steps.  Saved states are reached exactly (the step
is shortened to land on each ``save_at`` time), so no interpolant enters the
derivatives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError
from ._base import Rhs, SolveInfo, Solver

__all__ = [
    "EmbeddedPair",
    "adaptive_integrate",
    "check_tolerances",
    "initial_step",
    "loop",
    "rms_norm",
]

Step = Callable[[Any, Any, Any], tuple[Any, Any]]


def rms_norm(e: Any, y: Any, y_new: Any, rtol: float, atol: float, ops: Any) -> Any:
    """Hairer's norm ``sqrt(mean((e / (atol + rtol max(|y|, |y_new|)))^2))``."""
    scale = atol + rtol * ops.maximum(ops.abs(y), ops.abs(y_new))
    return ops.sqrt(ops.mean((e / scale) ** 2))


def initial_step(f0: Any, y0: Any, span: float, rtol: float, atol: float, ops: Any) -> Any:
    """Starting step ``0.01 ||y0|| / ||f(t0, y0)||`` (Hairer, Nørsett & Wanner, II.4), capped.

    Computed on stop-gradient values; at most ``span`` and at least
    ``1e-6 * span``.
    """
    y0, f0 = ops.stop_gradient(y0), ops.stop_gradient(f0)
    d0 = rms_norm(y0, y0, y0, rtol, atol, ops)
    d1 = rms_norm(f0, y0, y0, rtol, atol, ops)
    small = (d0 < 1e-5) | (d1 < 1e-5)
    h = ops.where(small, 1e-6 * span, 0.01 * d0 / ops.where(small, 1.0, d1))
    return ops.clip(h, 1e-6 * span, span)


def loop(body: Callable[[Any, Any], tuple[Any, Any]], carry: Any, n: int, ops: Any, done: Any):
    """``ops.scan(body, carry, length=n)`` that may stop early outside JAX.

    ``done(carry)`` returns a boolean array; on eager contexts the loop ends
    when it is all true and can be read as a Python bool (not under vmap).
    """
    # the taylor context over jax traces like jax: no Python-level early exit there
    if ops.name == "jax" or (ops.name == "taylor" and ops.base.name == "jax"):
        return ops.scan(body, carry, None, length=n)[0]
    for _ in range(n):
        carry = body(carry, None)[0]
        try:
            finished = bool(ops.stop_gradient(done(carry)))
        except RuntimeError:  # torch.func.vmap: data-dependent control flow is refused
            finished = False
        if finished:
            break
    return carry


def adaptive_integrate(
    step: Step,
    y0: Any,
    t0: float,
    save_at: np.ndarray,
    ops: Any,
    *,
    h0: Any,
    rtol: float,
    atol: float,
    max_steps: int,
    error_order: int,
    safety: float = 0.9,
    factor_min: float = 0.2,
    factor_max: float = 10.0,
) -> tuple[Any, SolveInfo]:
    """Integrate with error control, landing exactly on each ``save_at`` time.

    Parameters
    ----------
    step : callable
        ``step(t, y, h) -> (y_new, err)``: one step of the method and its
        embedded error estimate (same shape as ``y``).  ``h`` may be 0 (a
        masked iteration) and the step must then return ``y`` unchanged.
    y0 : array, shape (dim,)
    t0 : float
    save_at : numpy array, shape (m,)
        Increasing times ``>= t0``; times equal to ``t0`` save ``y0``.
    h0 : array, shape ()
        First step to try.
    rtol, atol : float
        Tolerances of the error norm :func:`rms_norm`; a step is accepted when
        the norm is at most 1.
    max_steps : int
        Attempted steps (accepted or rejected) before giving up.
    error_order : int
        ``q`` in the standard controller ``h_new = h * clip(safety * err^(-1/(q+1)))``,
        the order of the lower-order solution of the embedded pair.

    Returns
    -------
    ys : array, shape (m, dim)
        NaN rows where the solve failed (see :class:`SolveInfo` ``status``).
    info : SolveInfo
    """
    m = int(save_at.shape[0])
    dim = int(y0.shape[0])
    times = ops.asarray(save_at)
    slots = ops.arange(float(m))
    at_start = ops.asarray(save_at == t0)
    saved0 = ops.where(at_start[:, None], y0[None, :], ops.zeros((m, dim)))
    first = float(np.count_nonzero(save_at == t0))
    zero = ops.asarray(0.0)
    carry0 = (
        ops.asarray(float(t0)),  # t
        y0,
        ops.stop_gradient(h0) + zero,  # h proposed for the next step
        ops.asarray(first),  # index of the next save time
        saved0,
        zero,  # accepted steps
        zero,  # rejected steps
        zero,  # 1.0 once the rhs returned non-finite values
    )
    exponent = -1.0 / (error_order + 1)

    def body(carry: tuple, _: Any) -> tuple[tuple, None]:
        t, y, h, idx, saved, n_acc, n_rej, bad = carry
        done = (idx >= m) | (bad > 0.5)
        slot = slots == idx
        t_next = ops.sum(ops.where(slot, times, 0.0))
        remaining = t_next - t
        h_try = ops.where(done, 0.0, ops.minimum(h, remaining))
        y_new, err_vec = step(t, y, h_try)
        err = rms_norm(
            ops.stop_gradient(err_vec), ops.stop_gradient(y), ops.stop_gradient(y_new),
            rtol, atol, ops,
        )  # fmt: skip
        finite = ops.isfinite(err)
        accept = (err <= 1.0) & ~done
        factor = safety * ops.clip(ops.where(finite, err, 1.0), 1e-10) ** exponent
        factor = ops.where(finite, ops.clip(factor, factor_min, factor_max), factor_min)
        hits = accept & (h >= remaining)
        t_new = ops.where(accept, ops.where(hits, t_next, t + h_try), t)
        y_out = ops.where(accept, y_new, y)
        saved = ops.where((slot & hits)[:, None], y_new[None, :], saved)
        h_new = h_try * factor
        # After a step shortened to land on a save time, keep the longer proposal.
        h_new = ops.where(hits, ops.maximum(h_new, h), h_new)
        h_new = ops.stop_gradient(ops.where(done, h, h_new))
        # The rhs failed if even a tiny step is non-finite (the step shrank to 1e-12 of the span).
        tiny = ~finite & (h_try <= 1e-12 * abs(float(save_at[-1]) - float(t0)))
        carry = (
            ops.stop_gradient(t_new),
            y_out,
            h_new,
            idx + ops.where(hits, 1.0, 0.0),
            saved,
            n_acc + ops.where(accept, 1.0, 0.0),
            n_rej + ops.where(~accept & ~done, 1.0, 0.0),
            ops.maximum(bad, ops.where(tiny & ~done, 1.0, 0.0)),
        )
        return carry, None

    def finished(carry: tuple) -> Any:
        return (carry[3] >= m) | (carry[7] > 0.5)

    t, y, _, idx, saved, n_acc, n_rej, bad = loop(body, carry0, int(max_steps), ops, finished)
    status = ops.where(bad > 0.5, 2.0, ops.where(idx >= m, 0.0, 1.0))
    ok = status == 0.0
    # NaN-poisoning: under jit a failure cannot raise, so the output says it.
    # NaN-poisoning: under jit a failure cannot raise, so the output (and, through
    # the factor, every derivative of it) says it; on success the factor is exactly 1.
    # (``0 * sum(y)`` ties the poison to the inputs even when no row was saved.)
    ys = (saved + 0.0 * ops.sum(y)) * ops.where(ok, 1.0, float("nan"))
    return ys, SolveInfo(status=status, t=t, y=y, n_accepted=n_acc, n_rejected=n_rej)


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
    and ``h0``; ``step(rhs, t, y, h, p, ops)`` returns ``(y_new, err)``.
    """

    rtol: float
    atol: float
    max_steps: int
    h0: float | None
    #: Order of the embedded (lower-order) solution: the controller uses ``err^(-1/(q+1))``.
    error_order: int = 1

    def step(self, rhs: Rhs, t: Any, y: Any, h: Any, p: Any, ops: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def integrate(
        self, rhs: Rhs, y0: Any, t0: float, save_at: np.ndarray, p: Any, ops: Any
    ) -> tuple[Any, SolveInfo]:
        def step(t: Any, y: Any, h: Any) -> tuple[Any, Any]:
            return self.step(rhs, t, y, h, p, ops)

        span = float(save_at[-1]) - float(t0)
        if self.h0 is None:
            f0 = rhs(ops.asarray(float(t0)), y0, p, ops)
            h0 = initial_step(f0, y0, span, self.rtol, self.atol, ops)
        else:
            h0 = ops.asarray(float(self.h0))
        return adaptive_integrate(
            step, y0, t0, save_at, ops, h0=h0, rtol=self.rtol, atol=self.atol,
            max_steps=self.max_steps, error_order=self.error_order,
        )  # fmt: skip
