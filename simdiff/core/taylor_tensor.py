"""Full derivative tensors from univariate Taylor propagations by interpolation.

The ``d``-th Taylor coefficient of ``t -> f(x + t i)`` is a homogeneous
polynomial of degree ``d`` in the direction ``i``:

.. math::

    c_d(i) = \\sum_{|j| = d} \\frac{\\partial^j f(x)}{j!}\\, i^j .

Evaluating it along the ``M = binom(n+d-1, d)`` integer directions ``i`` with
``|i| = d`` and solving the ``M x M`` system ``V[i, j] = i^j`` recovers every
distinct entry of the ``d``-th derivative tensor (Griewank, Utke & Walther
2000, who give the inverse in closed form).  All directions run as one batched
Taylor evaluation.  The entry point is
``simdiff.derivative_tensor(problem, order, x, method="taylor")``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

__all__ = ["assemble_tensor", "interpolation_weights"]


def _multi_indices(n: int, d: int) -> list[tuple[int, ...]]:
    """All ``i`` in N^n with ``|i| = d``, in lexicographic order."""
    return [
        tuple(np.bincount(np.asarray(c, dtype=int), minlength=n))
        for c in itertools.combinations_with_replacement(range(n), d)
    ]


@cache
def interpolation_weights(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Directions ``i`` (rows, shape ``(M, n)``) and weights ``W`` (``(M, M)``, [j, i]).

    ``M = binom(n + d - 1, d)``; ``d^j f / j! = sum_i W[j, i] c_d(i)`` where
    ``j`` runs over the same multi-indices as the directions.

    Examples
    --------
    >>> dirs, w = interpolation_weights(2, 2)
    >>> dirs.tolist()
    [[2, 0], [1, 1], [0, 2]]
    >>> w[1].tolist()   # d^2 f / dx dy from directions (2,0), (1,1), (0,2)
    [-0.25, 1.0, -0.25]
    """
    idx = np.array(_multi_indices(n, d), dtype=np.int64)
    vandermonde = np.prod(idx[:, None, :].astype(float) ** idx[None, :, :], axis=-1)
    return idx, np.linalg.inv(vandermonde)


def assemble_tensor(
    taylor: Callable[[np.ndarray, np.ndarray, int], Any],
    x: np.ndarray,
    order: int,
    out_shape: tuple[int, ...],
) -> np.ndarray:
    """Full ``order``-th derivative tensor at one point from Taylor coefficients.

    This is ``simdiff.derivative_tensor(..., method="taylor")``'s algorithm;
    call that function rather than this one.

    Parameters
    ----------
    taylor : callable
        ``taylor(xs, directions, d)`` returns the Taylor coefficients
        ``(M, d + 1, *out_shape)`` of ``t -> f(xs[b] + t directions[b])``
        (a batched :meth:`simdiff.Derivatives.taylor`).
    x : ndarray, shape (n,)
    order : int
        ``d >= 0``.
    out_shape : tuple of int
        The problem's output shape.

    Returns
    -------
    numpy.ndarray, shape ``(*out_shape, n, ..., n)`` (``order`` trailing axes of length n)
        Symmetric in its last ``order`` axes.

    Notes
    -----
    Costs one batched Taylor evaluation of order ``d`` over
    ``binom(n + d - 1, d)`` directions, against ``n^d`` forward passes for
    nested Jacobians.  The weights grow with ``d`` (cancellation), so use it
    for moderate orders and dimensions: the system's conditioning decides
    how many digits survive (tests: ``d <= 4``, ``n <= 8``).

    References
    ----------
    A. Griewank, J. Utke and A. Walther, "Evaluating higher derivative tensors
    by forward propagation of univariate Taylor series", Math. Comp. 69 (2000),
    1117-1130.

    Examples
    --------
    >>> import numpy as np
    >>> def taylor(xs, dirs, d):   # f(x) = x0^2 x1, coefficients c_0..c_2 along each direction
    ...     x0, x1, v0, v1 = xs[:, 0], xs[:, 1], dirs[:, 0], dirs[:, 1]
    ...     c2 = v0 ** 2 * x1 + 2 * x0 * v0 * v1
    ...     return np.stack([x0 ** 2 * x1, 2 * x0 * v0 * x1 + x0 ** 2 * v1, c2], axis=1)
    >>> assemble_tensor(taylor, np.array([1.0, 2.0]), 2, ())
    array([[4., 2.],
           [2., 0.]])
    """
    d, n = order, x.shape[0]
    if d == 0:
        return np.asarray(taylor(x[None], np.zeros((1, n)), 0))[0, 0]
    dirs, weights = interpolation_weights(n, d)
    xs = np.broadcast_to(x, dirs.shape).copy()
    coeffs = np.asarray(taylor(xs, dirs.astype(float), d))[:, d]
    scaled = np.tensordot(weights, coeffs, axes=(1, 0))  # (M, out...): d^j f / j!
    tensor = np.zeros((*out_shape, *(n,) * d))
    for b, j in enumerate(dirs):
        for perm in set(itertools.permutations(np.repeat(np.arange(n), j).tolist())):
            index: tuple[Any, ...] = (..., *perm)
            tensor[index] = scaled[b] * math.prod(math.factorial(int(jl)) for jl in j)
    return tensor
