"""The leak probe: does a derivative see the whole computation?

A problem that leaves the traced computation (``float(x[0])``, ``x.item()``,
a round trip through numpy, a Python ``if`` on an array value) turns part of
the computation into a constant the derivative cannot see.  JAX's tracer
raises at once; torch runs on and returns a wrong derivative.  On the first
call of a :class:`~simdiff.Derivatives` object on a backend whose tracer
does not catch leaks, :func:`probe` compares one JVP, along a random
direction at a point a little off ``x``, with a Richardson-extrapolated
central difference of the problem's own values, and raises
:class:`~simdiff.errors.LeakError` naming the likely causes when they
disagree beyond the difference's error estimate.

Notes
-----
Cost, once per ``Derivatives`` object: three evaluations of the function,
plus one JVP unless the first call computed a gradient or Jacobian, which the
probe then reuses (docs/errors.md).

``ops.stop_gradient`` is honoured: the values it returns at the probe point
are recorded and replayed, in call order, at the shifted points, so the
difference quotient differentiates exactly what AD differentiates (adaptive
step-size control stays fixed).  If a shifted evaluation makes a different
number of ``stop_gradient`` calls the probe is inconclusive and passes, as it
does when any value is non-finite.

With a separate JVP, the point is shifted from ``x`` by ``1e-4 (1 + |x|)`` in
a random direction so that a kink at ``x`` itself (``abs`` at 0, a tie in ``maximum``), where
simdiff's derivative convention need not equal the central difference, is not
mistaken for a leak.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import LeakError

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
    """Compare a JVP with a difference quotient of the values; raise LeakError on disagreement.

    Parameters
    ----------
    problem : Problem
    backend : Backend
        A differentiating backend (its ``jvp``, ``from_numpy``, ``to_numpy``).
    ops : Ops
        A fresh ops namespace of ``backend`` (its ``stop_gradient`` is replaced).
    x : ndarray, shape (n,)
        The point of the first call.
    dtype : numpy dtype
        Computation dtype; the steps scale with its ``eps``.
    directional : callable, optional
        ``v -> J(x) v`` (flattened) from a derivative already computed at
        ``x`` (a gradient or Jacobian); then the probe point is ``x`` itself
        and no JVP is computed.  Otherwise, or if that comparison fails (``x``
        may sit on a kink), a JVP at the shifted point decides.

    Returns
    -------
    dict
        ``jvp``, ``difference``, ``tolerance`` and ``status`` (``"agree"``,
        or ``"inconclusive"`` when a value is non-finite or the
        ``stop_gradient`` calls differ between the points).

    Raises
    ------
    LeakError
        The JVP and the difference quotient disagree by more than
        ``1e-3 max(|jvp|, |diff|) + 1e3 eps max|f| / h``.
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
        return np.asarray(backend.to_numpy(y), dtype=np.float64).ravel()

    try:
        f1 = values(x1)
        replay.replaying = True
        fp, fm = values(x1 + h * v), values(x1 - h * v)
    finally:
        ops.__dict__["stop_gradient"] = replay.inner
    if directional is not None:
        jvp = np.asarray(directional(v), dtype=np.float64).ravel()
    else:
        primal, tangent = backend.from_numpy(x1, dtype), backend.from_numpy(v, dtype)
        jvp = backend.jvp(lambda a: problem.fn(a, ops), (primal,), (tangent,))[1]
        jvp = np.asarray(backend.to_numpy(jvp), dtype=np.float64).ravel()

    diff = (fp - fm) / (2 * h)
    size = max(np.max(np.abs(diff), initial=0.0), np.max(np.abs(jvp), initial=0.0))
    tol = 1e-3 * size + 1e3 * eps * np.max(np.abs(f1), initial=0.0) / h
    result = {"jvp": jvp, "difference": diff, "tolerance": tol}
    finite = np.all(np.isfinite(np.concatenate([f1, fp, fm, jvp])))
    if replay.mismatch or not finite or jvp.shape != diff.shape:
        return {**result, "status": "inconclusive"}
    gap = np.max(np.abs(jvp - diff), initial=0.0)
    if gap > tol and directional is not None:
        # x may sit on a kink, where the convention need not equal a central difference:
        # decide at a shifted point, with a JVP of its own
        return probe(problem, backend, ops, x, dtype)
    if gap > tol:
        raise LeakError(
            f"the derivative of problem {problem.name!r} on {backend.name} ignores part of its "
            f"computation: along a random direction the JVP is {_show(jvp)} but a central "
            f"difference of the problem's own values gives {_show(diff)} (gap {gap:.3g}, "
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
