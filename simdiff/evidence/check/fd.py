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
from simdiff.errors import NonFiniteError, SolverError, StabilityError

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


def _scaled(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, h: np.ndarray):
    """``z -> f(x + h * z)`` with scipy's layout: the coordinates scaled by their own steps,
    so that one scalar step of SciPy's is a step of ``h_i`` in each element."""

    def g(z: np.ndarray) -> np.ndarray:
        shape = (-1,) + (1,) * (z.ndim - 1)
        return f(x.reshape(shape) + h.reshape(shape) * z)

    return g


def default_fd_step(problem: Problem, x: np.ndarray) -> float | np.ndarray:
    """SciPy's initial step: ``problem.check_options.fd_step``, or one per element of ``x``.

    The default is ``h = 0.1 * max(1, max |x|)`` (scipy.differentiate starts
    at 0.5, which sends a simulator, an ODE rollout say, far from where it is
    well behaved; its extrapolation then shrinks the step by 2 per
    iteration), capped for each element at half its own size,
    ``h_i = min(h, |x_i| / 2)``: no perturbed point leaves
    ``[x_i / 2, 3 x_i / 2]``, so a rate constant of 0.075 beside one of 1.5
    is never pushed to zero or below.  Elements below ``h / 10`` (zero, or a
    field's values near a zero crossing, whose own size is no scale) keep
    ``h``.  Along a direction the scalar ``h`` is used (see
    :meth:`FiniteDifferences.direction`).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x), x0=np.ones(3))
    >>> default_fd_step(p, np.array([1.5, 0.075, 0.0]))
    array([0.15  , 0.0375, 0.15  ])
    """
    step = problem.check_options.fd_step
    if step is not None:
        return float(step)
    x = np.abs(np.asarray(x, dtype=np.float64))
    h = 0.1 * max(1.0, float(np.max(x, initial=0.0)))
    own = x >= 0.1 * h  # elements of their own scale; smaller ones (a field crossing 0) take h
    if x.ndim == 0 or x.size == 0 or np.all(~own | (x >= 2 * h)):
        return h  # no element needs its own step: the scalar SciPy takes
    return np.where(own, np.minimum(h, x / 2), h)


class FiniteDifferences:
    """``scipy.differentiate`` with one initial step for a problem (scipy layout callables).

    Each method returns ``(values, error_estimate, converged)``.  A reference
    that comes out non-finite (the first, largest step left the region where
    the simulator is well behaved) is recomputed with the initial step divided
    by 10, twice at most.
    """

    def __init__(self, step: float | np.ndarray = 0.5) -> None:
        #: The initial step: one number, or one per element of the point.
        self.step: float | np.ndarray = (
            float(step) if np.ndim(step) == 0 else np.asarray(step, dtype=np.float64)
        )
        #: The initial step of the last reference computed (after any shrinking).
        self.used_step: float | np.ndarray = self.step

    def _retry(self, run: Callable[[Any], Any], step: Any = None) -> FDReference:
        """Run ``run(step)``; where a perturbed evaluation fails (non-finite, or the
        simulator refuses the point), again with the step divided by 10, twice at most."""
        step = self.step if step is None else step
        for k in range(3):
            h = step / 10.0**k
            try:
                with np.errstate(all="ignore"):
                    df, err, status = run(h)
            except (NonFiniteError, SolverError, StabilityError):
                # a perturbed point the simulator refuses (an AD derivative differenced
                # refuses a non-finite point; a solve that blows up raises): the same as a
                # non-finite value, a smaller step
                if k == 2:
                    raise
                continue
            df, err = np.asarray(df), np.asarray(err)
            if np.all(np.isfinite(df)):
                break
        self.used_step = h
        return df, err, np.isin(np.asarray(status), CONVERGED)

    def jacobian(self, f: Callable, x: np.ndarray) -> FDReference:
        def run(h: Any) -> tuple[Any, Any, Any]:
            if np.ndim(h) == 0:
                res = sd.jacobian(f, x, initial_step=h)
                return res.df, res.error, res.status
            # per-element steps: differentiate in z, x = x0 + h * z, with one step of 1
            res = sd.jacobian(_scaled(f, x, h), np.zeros_like(x), initial_step=1.0)
            return res.df / h, res.error / h, res.status

        return self._retry(run)

    def hessian(self, f: Callable, x: np.ndarray) -> FDReference:
        def run(h: Any) -> tuple[Any, Any, Any]:
            if np.ndim(h) == 0:
                res = sd.hessian(f, x, initial_step=h)
                return res.ddf, res.error, res.status
            hh = np.outer(h, h)
            res = sd.hessian(_scaled(f, x, h), np.zeros_like(x), initial_step=1.0)
            return res.ddf / hh, res.error / hh, res.status

        return self._retry(run)

    def direction(self, f: Callable, x: np.ndarray, v: np.ndarray) -> FDReference:
        """Directional derivative of ``f`` at ``x`` along ``v``, its error estimate and status."""
        av = np.abs(np.asarray(v, dtype=np.float64))
        # one step for the line: per-element steps would let the smallest element set it
        # (a field of 128 values near zero: a step at rounding level); a point the
        # simulator refuses shrinks it (:meth:`_retry`)
        h = float(np.max(self.step)) if np.ndim(self.step) else float(self.step)
        step = h / max(1.0, float(np.max(av, initial=0.0)))

        def run(h: float) -> tuple[Any, Any, Any]:
            res = sd.jacobian(_line(f, x, v), np.zeros(1), initial_step=h)
            return res.df[..., 0], res.error[..., 0], res.status[..., 0]

        return self._retry(run, step)
