"""``taylor_function``: a problem's Taylor coefficients along a direction, as one callable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simdiff.backends.taylor.base import is_taylor
from simdiff.backends.taylor.ops import TaylorOps
from simdiff.errors import UnsupportedError

__all__ = ["taylor_function"]


def taylor_function(problem: Any, ops: Any, order: int) -> Callable[[Any, Any], Any]:
    """``g(x, v)`` returning the Taylor coefficients of ``t -> problem.fn(x + t v)``.

    Parameters
    ----------
    problem : simdiff.Problem
    ops : Ops
        The base context (numpy, jax or torch ops).
    order : int
        Highest coefficient ``K``.

    Returns
    -------
    callable
        ``g(x, v)`` for native arrays of shape ``(n,)``, returning one native
        array of shape ``(K+1, *out_shape)`` with ``c_k = f^{(k)} / k!``.  It
        traces under ``jax.jit``/``jax.vmap`` and runs under
        ``torch.func.vmap``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.backends.numpy import NumpyOps
    >>> p = simdiff.Problem(lambda x, ops: ops.exp(2.0 * x[0]), x0=np.zeros(1))
    >>> g = taylor_function(p, NumpyOps(), 3)
    >>> g(np.zeros(1), np.ones(1))          # 1, 2, 4/2!, 8/3!
    array([1.        , 2.        , 2.        , 1.33333333])
    """
    tops = TaylorOps(ops, order)

    def g(x: Any, v: Any) -> Any:
        y = problem.fn(tops.variable(x, v), tops)
        if is_taylor(y):
            return y.coeffs
        if isinstance(y, (tuple, list, dict)):
            raise UnsupportedError(
                f"taylor: problem {problem.name!r} returned a {type(y).__name__}; expected an array"
            )
        return tops.s.lift(ops.asarray(y))

    return g
