"""Finite-difference references of :func:`simdiff.check`: ``scipy.differentiate`` with its status.

The callables here follow SciPy's layout (the first axis of ``x`` indexes the
inputs, trailing axes are independent points).  Each reference comes back as
``(values, error_estimate, converged)``.  ``converged`` is SciPy's per-element
status ``0`` (converged to its tolerance) or ``-1`` (the error estimate began
to increase: the rounding floor was reached, and the value is the best one
with its estimate, which :func:`simdiff.evidence.check.tolerance.compare_arrays` then
judges); ``-2`` (iteration limit) and ``-3`` (non-finite values) are not, and
such an element is never counted as a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.differentiate as sd

from simdiff.backends import get_backend
from simdiff.core.derivatives import Derivatives
from simdiff.core.problem import Problem
from simdiff.errors import NonFiniteError

__all__ = ["FD_CHUNK", "FiniteDifferences", "batched", "default_fd_step", "numpy_vectorized"]

#: Points per call of an AD callable under finite differences (one compiled shape).
FD_CHUNK = 16

#: ``scipy.differentiate`` statuses whose value and error estimate stand.
CONVERGED = (0, -1)

FDReference = tuple[np.ndarray, np.ndarray, np.ndarray]


def numpy_vectorized(problem: Problem) -> Callable[[np.ndarray], np.ndarray]:
    """``f`` in the numpy context, vectorised as ``scipy.differentiate`` wants.

    The returned callable maps ``x`` of shape ``(n, ...)`` to ``(out..., ...)``.
    """
    be = get_backend("numpy")
    ops = be.ops()

    def f(x: np.ndarray) -> np.ndarray:
        batch = x.shape[1:]
        cols = np.moveaxis(x.reshape(x.shape[0], -1), 0, -1)
        ys = np.stack([np.asarray(problem.fn(be.from_numpy(c, np.float64), ops)) for c in cols], -1)
        return ys.reshape(ys.shape[:-1] + batch)

    return f


def batched(
    fn: Callable[[np.ndarray], np.ndarray], n: int, chunk: int = FD_CHUNK
) -> Callable[[np.ndarray], np.ndarray]:
    """Wrap a batched AD callable (``(batch, n) -> (batch, out...)``) for scipy's layout.

    SciPy shrinks the batch as elements converge; the points go through in
    chunks of ``chunk`` (the last one padded), so that JAX compiles one shape
    per derivative instead of one per SciPy iteration.  ``chunk=1`` calls the
    unbatched function point by point (torch: ``torch.func.vmap`` falls back to
    slow loops for some ops, FFTs of solvers among them).
    """

    def f(x: np.ndarray) -> np.ndarray:
        batch = x.shape[1:]
        pts = np.moveaxis(x.reshape(n, -1), 0, -1)
        count = pts.shape[0]
        if chunk == 1:
            chunks = [np.asarray(fn(np.ascontiguousarray(p)))[None] for p in pts]
        else:
            size = -(-count // chunk) * chunk
            padded = np.concatenate([pts, np.broadcast_to(pts[:1], (size - count, n))])
            chunks = [
                np.asarray(fn(np.ascontiguousarray(padded[i : i + chunk])))
                for i in range(0, size, chunk)
            ]
        y = np.concatenate(chunks)[:count]
        y = np.moveaxis(y, 0, -1)
        return y.reshape(y.shape[:-1] + batch)

    return f


def chunk_for(d: Derivatives) -> int:
    """Points per AD call under finite differences: vmapped chunks where batched calls pay."""
    return FD_CHUNK if d.backend.prefers_batched_calls else 1


def _line(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, v: np.ndarray):
    """``t -> f(x + t v)`` with scipy's layout (``t`` of shape ``(1, ...)``)."""

    def g(t: np.ndarray) -> np.ndarray:
        pts = x.reshape((-1,) + (1,) * (t.ndim - 1)) + t[0] * v.reshape((-1,) + (1,) * (t.ndim - 1))
        return f(pts)

    return g


def default_fd_step(problem: Problem, x: np.ndarray) -> float:
    """SciPy's initial step: ``problem.check_options.fd_step`` or ``0.1 * max(1, max |x|)``.

    ``scipy.differentiate`` starts at 0.5 by default, which sends a simulator
    (an ODE rollout, say) far from where it is well behaved; the extrapolation
    then shrinks the step by 2 per iteration.
    """
    step = problem.check_options.fd_step
    return float(step) if step is not None else 0.1 * max(1.0, float(np.max(np.abs(x))))


class FiniteDifferences:
    """``scipy.differentiate`` with one initial step for a problem (scipy layout callables).

    Each method returns ``(values, error_estimate, converged)``.  A reference
    that comes out non-finite (the first, largest step left the region where
    the simulator is well behaved) is recomputed with the initial step divided
    by 10, twice at most.
    """

    def __init__(self, step: float = 0.5) -> None:
        self.step = float(step)

    def _retry(self, run: Callable[[float], Any]) -> FDReference:
        for k in range(3):
            try:
                with np.errstate(all="ignore"):
                    df, err, status = run(self.step / 10.0**k)
            except NonFiniteError:
                # an AD derivative differenced (FD of the AD gradient) refuses a point the
                # largest step reached: the same as a non-finite value, a smaller step
                if k == 2:
                    raise
                continue
            df, err = np.asarray(df), np.asarray(err)
            if np.all(np.isfinite(df)):
                break
        return df, err, np.isin(np.asarray(status), CONVERGED)

    def jacobian(self, f: Callable, x: np.ndarray) -> FDReference:
        def run(h: float) -> tuple[Any, Any, Any]:
            res = sd.jacobian(f, x, initial_step=h)
            return res.df, res.error, res.status

        return self._retry(run)

    def hessian(self, f: Callable, x: np.ndarray) -> FDReference:
        def run(h: float) -> tuple[Any, Any, Any]:
            res = sd.hessian(f, x, initial_step=h)
            return res.ddf, res.error, res.status

        return self._retry(run)

    def direction(self, f: Callable, x: np.ndarray, v: np.ndarray) -> FDReference:
        """Directional derivative of ``f`` at ``x`` along ``v``, its error estimate and status."""
        scale = max(1.0, float(np.max(np.abs(v), initial=0.0)))

        def run(h: float) -> tuple[Any, Any, Any]:
            res = sd.jacobian(_line(f, x, v), np.zeros(1), initial_step=h / scale)
            return res.df[..., 0], res.error[..., 0], res.status[..., 0]

        return self._retry(run)
