"""The leak probe: does a derivative see the whole computation?

A problem that leaves the traced computation (``float(x[0])``, ``x.item()``,
a round trip through numpy, a Python ``if`` on an array value) turns part of
the computation into a constant the derivative cannot see.  JAX's tracer
raises at once; torch runs on and returns a wrong derivative.  On the first
call of a :class:`~simdiff.Derivatives` object on a backend whose tracer
does not catch leaks, :func:`probe` compares a directional derivative along
a random direction (from the first call's gradient or Jacobian, or from one
VJP at a point a little off ``x``) with a central difference of the problem's
own values, and raises
:class:`~simdiff.errors.LeakError` naming the likely causes when they
disagree beyond the difference's error estimate.

Notes
-----
Cost, once per ``Derivatives`` object: three evaluations of the function,
plus one VJP unless the first call computed a gradient or Jacobian, which the
probe then reuses (docs/errors.md).  A VJP, not a JVP: in eager torch a
reverse pass through a time loop costs 2.5-9 times less than a forward one.

``ops.stop_gradient`` is honoured: the values it returns at the probe point
are recorded and replayed, in call order, at the shifted points, so the
difference quotient differentiates exactly what AD differentiates (adaptive
step-size control stays fixed).  If a shifted evaluation makes a different
number of ``stop_gradient`` calls the probe is inconclusive and passes, as it
does when any value is non-finite.

With a VJP of its own, the point is shifted from ``x`` by ``1e-4 (1 + |x|)`` in
a random direction so that a kink at ``x`` itself (``abs`` at 0, a tie in ``maximum``), where
simdiff's derivative convention need not equal the central difference, is not
mistaken for a leak.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.errors import LeakError, UnsupportedError

__all__ = ["LEAK_CAUSES", "probe"]

#: What the error message suggests (in the order a user is likely to have written it).
LEAK_CAUSES = (
    "float(x[i]) or int(...) on an array",
    "x.item() or x.tolist()",
    "a round trip through numpy (np.asarray(x), x.numpy(), np.* functions on x)",
    "a Python `if`/`while` on an array value",
)


class _Replay:
    """``stop_gradient`` that records its outputs, or replays them in call order."""

    def __init__(self, inner: Callable[[Any], Any]) -> None:
        self.inner = inner
        self.recorded: list[Any] = []
        self.replaying = False
        self.index = 0
        self.mismatch = False

    def __call__(self, x: Any) -> Any:
        if not self.replaying:
            y = self.inner(x)
            self.recorded.append(y)
            return y
        if self.index >= len(self.recorded) or tuple(getattr(x, "shape", ())) != tuple(
            getattr(self.recorded[self.index], "shape", ())
        ):
            self.mismatch = True
            return self.inner(x)
        y = self.recorded[self.index]
        self.index += 1
        return y


def probe(
    problem: Any,
    backend: Any,
    ops: Any,
    x: np.ndarray,
    dtype: Any,
    directional: Callable[[np.ndarray], np.ndarray] | None = None,
) -> dict[str, Any]:
    """Compare a directional derivative with a difference quotient; raise LeakError if they differ.

    Parameters
    ----------
    problem : Problem
    backend : Backend
        A differentiating backend (its ``vjp``, ``from_numpy``, ``to_numpy``).
    ops : Ops
        A fresh ops namespace of ``backend`` (its ``stop_gradient`` is replaced).
    x : ndarray, shape (n,)
        The point of the first call.
    dtype : numpy dtype
        Computation dtype; the steps scale with its ``eps``.
    directional : callable, optional
        ``v -> J(x) v`` (flattened) from a derivative already computed at
        ``x`` (a gradient or Jacobian); then the probe point is ``x`` itself
        and no VJP is computed.  Otherwise, or if that comparison fails (``x``
        may sit on a kink), ``u^T J v`` from one VJP at the shifted point
        (``u`` a random cotangent) against ``u^T`` times the difference decides.

    Returns
    -------
    dict
        ``derivative``, ``difference``, ``tolerance`` and ``status`` (``"agree"``,
        or ``"inconclusive"`` when a value is non-finite or the
        ``stop_gradient`` calls differ between the points); only ``status``
        (``"skipped: ..."``) when the problem refuses reverse mode
        (``ops.forward_only``, e.g. an ODE with ``ForwardAdjoint``).

    Raises
    ------
    LeakError
        The derivative and the difference quotient disagree by more than
        ``1e-3 size + 1e3 eps max|f| / h`` (``size``: the larger of the two, or
        ``sum |u_i diff_i|`` in the VJP form).
    """
    eps = float(np.finfo(dtype).eps)
    rng = np.random.default_rng(20261201)
    x = np.asarray(x, dtype=np.float64)
    scale = 1.0 + np.abs(x)
    x1 = x if directional is not None else x + 1e-4 * scale * rng.uniform(-1.0, 1.0, x.shape)
    v = scale * rng.standard_normal(x.shape)
    v /= np.max(np.abs(v))
    # central difference: truncation ~ h^2 (third derivative), rounding ~ eps |f| / h
    h = 0.1 * eps ** (1.0 / 3.0)

    replay = _Replay(ops.stop_gradient)
    ops.__dict__["stop_gradient"] = replay

    def values(a: np.ndarray) -> np.ndarray:
        replay.index = 0
        y = problem.fn(backend.from_numpy(a, dtype), ops)
        y = backend.to_numpy(y) if backend.is_native(y) else y  # a constant: a Python number
        return np.asarray(y, dtype=np.float64).ravel()

    try:
        f1 = values(x1)
        replay.replaying = True
        fp, fm = values(x1 + h * v), values(x1 - h * v)
    finally:
        ops.__dict__["stop_gradient"] = replay.inner
    diff = (fp - fm) / (2 * h)
    if directional is not None:
        got, want = np.asarray(directional(v), dtype=np.float64).ravel(), diff
        size = max(np.max(np.abs(want), initial=0.0), np.max(np.abs(got), initial=0.0))
    else:
        # one reverse pass (in eager torch cheaper than a JVP, docs/performance.md): u^T J v
        # against u^T diff
        def fn(a: Any) -> Any:
            y = problem.fn(a, ops)
            if isinstance(y, (int, float, np.integer, np.floating)) and not isinstance(y, bool):
                return ops.sum(a * 0.0) + float(y)  # a constant (as the derivative builders do)
            return y

        y, pullback = backend.vjp(fn, backend.from_numpy(x1, dtype))
        u = rng.standard_normal(f1.shape)
        cot = backend.from_numpy(np.reshape(u, tuple(y.shape)), dtype)
        try:
            g = np.asarray(backend.to_numpy(pullback(cot)[0]), dtype=np.float64).ravel()
        except UnsupportedError as exc:  # a forward-only problem (ops.forward_only)
            return {"status": f"skipped: reverse mode refused ({str(exc)[:80]}...)"}
        got, want = np.array([g @ v]), np.array([u @ diff])
        size = max(np.sum(np.abs(u * diff)), abs(got[0]))
    tol = 1e-3 * size + 1e3 * eps * np.max(np.abs(f1), initial=0.0) / h
    result = {"derivative": got, "difference": want, "tolerance": tol}
    finite = np.all(np.isfinite(np.concatenate([f1, fp, fm, got])))
    if replay.mismatch or not finite or got.shape != want.shape:
        return {**result, "status": "inconclusive"}
    gap = np.max(np.abs(got - want), initial=0.0)
    if gap > tol and directional is not None:
        # x may sit on a kink, where the convention need not equal a central difference:
        # decide at a shifted point, with a VJP of its own
        return probe(problem, backend, ops, x, dtype)
    if gap > tol:
        raise LeakError(
            f"the derivative of problem {problem.name!r} on {backend.name} ignores part of its "
            f"computation: along a random direction its derivative is {_show(got)} but a central "
            f"difference of the problem's own values gives {_show(want)} (gap {gap:.3g}, "
            f"tolerance {tol:.3g}). The problem likely leaves the traced computation: "
            + "; ".join(LEAK_CAUSES)
            + ". Write it with ops (ops.where for branches, ops.stop_gradient for values "
            "meant to be constant); if the function is not differentiable here, pass "
            "probe=False to Derivatives."
        )
    return {**result, "status": "agree"}


def _show(a: np.ndarray) -> str:
    if a.size == 1:
        return f"{a[0]:.6g}"
    head = ", ".join(f"{t:.4g}" for t in a[:4])
    return f"[{head}{', ...' if a.size > 4 else ''}]"
