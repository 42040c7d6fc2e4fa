"""The numpy context: plain evaluation, the finite-difference reference.

It has no automatic differentiation: the transforms raise
:class:`~simdiff.errors.UnsupportedError`.  ``vmap`` is a loop, ``jit`` the
identity.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from simdiff.backends._backend import Backend
from simdiff.backends._ops_base import LoopOps
from simdiff.backends._xp import XPOps
from simdiff.errors import UnsupportedError

#: ``dtype -> dtype.name``, read once per dtype.
_DTYPE_NAMES: dict[Any, str] = {}

__all__ = ["NumpyBackend", "NumpyOps"]


class NumpyOps(XPOps, LoopOps):
    """``ops`` over numpy (float64 unless asked otherwise)."""

    name = "numpy"

    def __init__(self, dtype: Any = np.float64) -> None:
        super().__init__(np, dtype)

    @staticmethod
    def stack(arrays: Any, /, axis: int = 0) -> Any:
        """``numpy.stack``; along the first axis by ``numpy.array`` where the parts have one shape.

        A right-hand side stacks a few scalars at every stage of a numpy ODE
        step: ``numpy.array`` makes them in one call, where ``numpy.stack``
        first makes each part an array and then concatenates (docs/performance.md),
        the same array.  Parts of different shapes, and anything
        but a list or tuple, go to ``numpy.stack`` (and its error message).
        """
        if axis == 0 and isinstance(arrays, (list, tuple)) and arrays:
            try:
                return np.array(arrays)
            except ValueError:  # ragged: numpy.stack says which shapes differ
                pass
        return np.stack(arrays, axis=axis)

    def checkpoint(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """No derivatives here, so nothing to rematerialise: returns ``fn``."""
        return fn

    def stop_gradient(self, x: Any) -> Any:
        """Identity (numpy has no gradients to stop)."""
        return x

    def concrete(self, x: Any) -> Any:
        """``x`` as a numpy array (always concrete here)."""
        return np.asarray(x)

    def errstate(self) -> AbstractContextManager[Any]:
        """``numpy.errstate(all="ignore")``: no overflow/invalid warnings inside the block."""
        return np.errstate(all="ignore")

    @staticmethod
    def lu_factor(a: Any) -> Any:
        """``scipy.linalg.lu_factor``; a singular ``a`` raises ``numpy.linalg.LinAlgError``."""
        import scipy.linalg  # here, not at import: importing simdiff must stay cheap

        lu, piv = scipy.linalg.lu_factor(a, check_finite=False)
        if not np.all(np.isfinite(lu)) or np.any(np.diag(lu) == 0):
            raise np.linalg.LinAlgError("singular matrix (a zero pivot in its LU factorisation)")
        return lu, piv

    @staticmethod
    def lu_solve(lu: Any, b: Any) -> Any:
        """``scipy.linalg.lu_solve``."""
        import scipy.linalg

        return scipy.linalg.lu_solve(lu, b, check_finite=False)

    def jacfwd(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``d fn(z, *consts) / dz`` by central differences (numpy has no AD).

        The step is ``eps**(1/3) max(1, |z_i|)``; ``consts`` are passed through.

        For solvers that need ``df/dy`` (Rosenbrock methods) when run in the
        numpy context; accurate to about ``eps**(2/3)`` relative.

        Examples
        --------
        >>> ops = NumpyOps()
        >>> ops.jacfwd(lambda z: z ** 2)(np.array([1.0, 3.0])).round(6)
        array([[2., 0.],
               [0., 6.]])
        """

        def jac(z: Any, *consts: Any) -> Any:
            z = np.asarray(z, dtype=self.dtype)
            eps = np.finfo(self.dtype).eps ** (1 / 3)
            cols = []
            for i in range(z.shape[0]):
                dz = np.zeros_like(z)
                dz[i] = eps * max(1.0, abs(float(z[i])))
                up, down = np.asarray(fn(z + dz, *consts)), np.asarray(fn(z - dz, *consts))
                cols.append((up - down) / (2 * dz[i]))
            return np.stack(cols, axis=-1)

        return jac


def _no_ad(name: str) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(
            f"transform {name} is not available in the 'numpy' context: numpy evaluates, "
            "it does not differentiate; use backend='jax' or backend='torch'"
        )

    return fail


class NumpyBackend(Backend):
    name = "numpy"
    ops_class = NumpyOps
    differentiable = False
    prefers_batched_calls = False
    grad = staticmethod(_no_ad("grad"))
    jvp = staticmethod(_no_ad("jvp"))
    vjp = staticmethod(_no_ad("vjp"))
    jacfwd = staticmethod(_no_ad("jacfwd"))
    jacrev = staticmethod(_no_ad("jacrev"))

    def ops(self, dtype: Any = None, device: Any = None) -> NumpyOps:
        return NumpyOps(np.float64 if dtype is None else dtype)

    def vmap(self, fn: Callable[..., Any], in_axes: Any = 0) -> Callable[..., Any]:
        axes = in_axes if isinstance(in_axes, tuple) else None

        def mapped(*args: Any) -> Any:
            ax = axes or (in_axes,) * len(args)
            n = next(a.shape[0] for a, i in zip(args, ax, strict=True) if i is not None)
            rows = [
                fn(*(a if i is None else a[k] for a, i in zip(args, ax, strict=True)))
                for k in range(n)
            ]
            return np.stack(rows)

        return mapped

    def is_native(self, x: Any) -> bool:
        return isinstance(x, np.ndarray)

    def from_numpy(self, a: Any, dtype: Any, device: Any = None) -> Any:
        return np.asarray(a, dtype=dtype)

    def to_numpy(self, x: Any) -> Any:
        return np.asarray(x)

    def dtype_name(self, x: Any) -> str:
        dtype = x.dtype if type(x) is np.ndarray else np.asarray(x).dtype
        name = _DTYPE_NAMES.get(dtype)
        if name is None:  # numpy computes a dtype's name in Python, on every read
            name = _DTYPE_NAMES[dtype] = dtype.name
        return name
