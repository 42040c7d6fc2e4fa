"""Linear algebra of the torch context: solves whose derivatives nest correctly.

``ops.linalg.solve`` (:func:`solve`), ``ops.lu_factor`` and ``ops.lu_solve``.
A singular matrix gives non-finite results, as on JAX, and does not raise.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["lu_factor", "lu_solve", "solve"]


def solve(a: Any, b: Any) -> Any:
    """``torch.linalg.solve(a, b)`` as ``torch.linalg.inv(a) @ b``.

    ``torch.linalg.solve``'s second-order forward-mode derivative (a JVP of a
    JVP) is wrong in torch 2.13: on a 2x2 system it differs from JAX's and
    from a central difference of the first JVP by up to 30%
    (``tests/test_backends.py``); the nested directional derivatives of a
    Rosenbrock solve (Rodas3 on robertson) were 3% off.  ``linalg.inv``'s
    derivatives are written in terms of the inverse itself (``-A^-1 dA A^-1``
    forward, ``-A^-T G A^-T`` in reverse), so they nest correctly, and its
    reverse pass is two matrix products.  (``lu_factor`` + ``lu_solve`` nest
    correctly too, but their reverse pass unpacks the factors with
    ``triu``/``tril``, which start an intra-op parallel region even for an
    8x8 matrix, a thread fork and join per call that was the main cost of a
    torch Rodas5P gradient; ``docs/results/probe_torch_rosenbrock.txt``,
    docs/performance.md.)  The forward error is
    of the order of ``cond(a) * eps``, as for an LU solve.  ``b`` of shape
    ``a.shape[:-1]`` is a vector, as in ``torch.linalg.solve``.

    A singular ``a`` gives NaN, as JAX's solve gives a non-finite result, and
    does not raise: the inverse is ``torch.linalg.inv_ex``'s, whose ``info``
    selects NaN in place of the inverse of a matrix it could not invert.  A
    graph of it then holds no error check, which is an effect to
    Inductor: such a graph is never taken from Inductor's FX graph cache, and
    its C++ wrapper reports the error as a bare ``RuntimeError``.  simdiff's
    finite check names the entry a NaN reaches; a Rosenbrock step rejects the
    step (:func:`simdiff.ode.solvers.rosenbrock._factor`).
    """
    vec = b.ndim == a.ndim - 1
    inv, info = torch.linalg.inv_ex(a)
    inv = torch.where((info == 0)[..., None, None], inv, math.nan)
    x = torch.matmul(inv, b.unsqueeze(-1) if vec else b)
    return x.squeeze(-1) if vec else x


def lu_factor(a: Any) -> Any:
    """``torch.linalg.lu_factor_ex``'s factors: a singular ``a`` (a zero pivot) gives
    non-finite solutions, as on JAX, and does not raise (a graph of it holds no error
    check; see :func:`solve`).

    Its derivatives nest correctly to second order (unlike
    ``torch.linalg.solve``'s, see :func:`solve`); the reverse pass unpacks
    the factors with ``triu``/``tril``, an intra-op parallel region (a
    thread fork and join per call), so it pays only for large matrices
    (``docs/ode.md``, docs/performance.md).
    """
    lu, pivots, _ = torch.linalg.lu_factor_ex(a)
    return lu, pivots


def lu_solve(lu: Any, b: Any) -> Any:
    """``torch.linalg.lu_solve``; a vector ``b`` of shape ``(n,)`` is allowed."""
    vec = b.ndim == 1
    x = torch.linalg.lu_solve(lu[0], lu[1], b.unsqueeze(-1) if vec else b)
    return x.squeeze(-1) if vec else x
