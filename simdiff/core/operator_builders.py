"""Differential operators as :class:`~simdiff.Derivatives` methods, and their builders.

``derivative_sum`` is the general operator: ``sum_d w_d D^K f(x)[v_d, ..., v_d]``
for directions ``v_d`` (rows of ``directions``) and weights ``w_d``.  The
Laplacian ``tr(Sigma H)`` and the biharmonic operator are sums of this form
(directions: the columns of a factor ``L`` of ``Sigma = L L^T``).  Three
methods compute the same number:

- ``"collapsed"``: one collapsed Taylor pass (:mod:`simdiff.backends.taylor.collapsed`),
  ``1 + (K-1) D + 1`` coefficient vectors;
- ``"taylor"``: ``D`` separate Taylor passes (vmapped), ``D (K+1)`` vectors;
- ``"nested"``: nested AD per direction (vmapped): forward over reverse
  ``v^T H v`` for ``K = 2`` on scalar problems, nested ``jvp`` otherwise.

The public functions live in :mod:`simdiff.core.operators`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends.taylor import taylor_function
from simdiff.backends.taylor.collapsed import collapsed_function
from simdiff.core import arrays as A
from simdiff.core.cache import RecentlyUsed
from simdiff.errors import OptionError, ShapeError

__all__ = ["OPERATOR_KINDS", "OPERATOR_METHODS", "OperatorMethods", "build_operator"]

OPERATOR_METHODS = ("collapsed", "taylor", "nested")
OPERATOR_KINDS = ("derivative_sum", "derivative_sum_nested", "biharmonic_nested")


# --------------------------------------------------------------------------- weights


def _host(a: Any, what: str) -> np.ndarray:
    src = A.backend_of(a)
    arr = src.to_numpy(a) if src.is_native(a) else np.asarray(a)
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise OptionError(f"{what} must be a real array; got dtype {arr.dtype}")
    arr = np.asarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise OptionError(f"{what} must be finite; got a non-finite entry at {_first_bad(arr)}")
    return arr


def _first_bad(a: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])


def covariance_factor(n: int, weights: Any = None, factor: Any = None) -> np.ndarray:
    """Directions ``(r, n)``, the rows ``l_i`` with ``Sigma = sum_i l_i l_i^T``.

    Parameters
    ----------
    n : int
        Input dimension.
    weights : array_like, (n, n) or (n,), optional
        ``Sigma``, symmetric positive semi-definite (a 1-D array is its
        diagonal).  Factored by ``eigh``; eigenvalues below
        ``n * eps * max(eig)`` are dropped, so a rank-``r`` ``Sigma`` gives
        ``r`` directions.
    factor : array_like, (n, r), optional
        ``L`` with ``Sigma = L L^T`` (its columns are the directions).

    Neither: the identity (the plain Laplacian).

    The factors of the last 8 distinct ``Sigma`` are kept (keyed by their
    float64 contents, returned read-only): calls with the same ``Sigma``
    factor it once.

    Raises
    ------
    ShapeError
        Wrong shape.
    OptionError
        Both given; not symmetric (``|Sigma - Sigma^T| > 1e-12 max|Sigma|``);
        an eigenvalue below ``-sqrt(eps) max(eig)`` (not PSD); non-finite.

    Examples
    --------
    >>> covariance_factor(2, weights=np.diag([4.0, 0.0]))
    array([[2., 0.]])
    """
    if weights is not None and factor is not None:
        raise OptionError("give either weights (Sigma) or factor (L with Sigma = L L^T), not both")
    if factor is not None:
        L = _host(factor, "factor")
        if L.ndim != 2 or L.shape[0] != n:
            raise ShapeError(f"factor must have shape ({n}, r); got {L.shape}")
        return np.ascontiguousarray(L.T)
    if weights is None:
        return np.eye(n)
    S = _host(weights, "weights")
    if S.ndim == 1:
        if S.shape != (n,):
            raise ShapeError(f"weights must have shape ({n}, {n}) or ({n},); got {S.shape}")
        if np.any(S < 0):
            i = int(np.argmax(S < 0))
            raise OptionError(
                f"weights (the diagonal of Sigma) must be >= 0; got {S[i]!r} at index {i}"
            )
        keep = S > 0
        return (np.sqrt(S)[:, None] * np.eye(n))[keep]
    if S.shape != (n, n):
        raise ShapeError(f"weights must have shape ({n}, {n}) or ({n},); got {S.shape}")

    def build() -> np.ndarray:
        L = _factor_sigma(S, n)
        L.flags.writeable = False
        return L

    return _FACTORS.get(S.tobytes(), build)


# The last few factored Sigma (eigh costs O(n^3), more than the transfer and dispatch
# of a call at moderate n): repeated calls with the same Sigma reuse the directions.
# Keyed by the float64 bytes of Sigma (n is its shape); the arrays are read-only.
_FACTORS: RecentlyUsed[bytes, np.ndarray] = RecentlyUsed(8)


def _factor_sigma(S: np.ndarray, n: int) -> np.ndarray:
    """The rows of ``covariance_factor`` for a checked-shape 2-D ``Sigma`` (validated here)."""
    scale = float(np.max(np.abs(S))) if S.size else 0.0
    asym = float(np.max(np.abs(S - S.T))) if S.size else 0.0
    if asym > 1e-12 * scale:
        raise OptionError(
            f"weights (Sigma) must be symmetric; max |Sigma - Sigma^T| = {asym:.3g} "
            f"(max |Sigma| = {scale:.3g})"
        )
    lam, U = np.linalg.eigh(0.5 * (S + S.T))
    top = float(lam[-1]) if lam.size else 0.0
    eps = np.finfo(np.float64).eps
    if lam.size and lam[0] < -np.sqrt(eps) * max(top, 0.0) - np.finfo(np.float64).tiny:
        raise OptionError(
            f"weights (Sigma) must be positive semi-definite; its smallest eigenvalue is "
            f"{lam[0]:.6g} (largest {top:.6g})"
        )
    keep = lam > n * eps * max(top, 0.0)
    return np.ascontiguousarray((U[:, keep] * np.sqrt(lam[keep])).T)


def biharmonic_directions(L_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Directions and weights with ``sum_d w_d D^4 f[v_d]^4 = sum_ij D^4 f[l_i, l_i, l_j, l_j]``.

    From ``D^4[a+b] + D^4[a-b] = 2 D^4[a] + 12 D^4[a,a,b,b] + 2 D^4[b]`` (odd
    terms cancel): directions ``l_i`` with weight ``1 - (r-1)/3`` and
    ``l_i +- l_j`` (``i < j``) with weight ``1/6``; ``r^2`` directions in all.

    Examples
    --------
    >>> V, w = biharmonic_directions(np.eye(2))
    >>> V
    array([[ 1.,  0.],
           [ 0.,  1.],
           [ 1.,  1.],
           [ 1., -1.]])
    >>> w
    array([0.66666667, 0.66666667, 0.16666667, 0.16666667])
    """
    r, n = L_rows.shape
    i, j = np.triu_indices(r, k=1)
    pairs = np.stack([L_rows[i] + L_rows[j], L_rows[i] - L_rows[j]], axis=1).reshape(-1, n)
    w = np.concatenate([np.full(r, 1.0 - (r - 1) / 3.0), np.full(len(pairs), 1.0 / 6.0)])
    return np.concatenate([L_rows, pairs]), w


# --------------------------------------------------------------------------- builders


def _per_direction(fn: Callable[[Any, Any], Any], T: Any) -> Callable[[Any, Any], Any]:
    """``fn(x, v)`` mapped over the rows of ``V``: ``(D, *out)``."""
    return lambda x, V: T.vmap(lambda v: fn(x, v), in_axes=0)(V)


def _weighted(ops: Any, per: Any, w: Any, grouped: bool) -> Any:
    """``sum_d w_d per_d`` (``w`` (D,)) or ``W @ per`` per group (``W`` (G, D))."""
    if not grouped:
        return ops.sum(ops.reshape(w, (-1, *(1,) * (per.ndim - 1))) * per, axis=0)
    return ops.sum(ops.reshape(w, (*w.shape, *(1,) * (per.ndim - 1))) * per[None], axis=1)


def _nested_order_k(f: Callable[[Any], Any], T: Any, order: int, scalar: bool):
    """``D^K f(x)[v]^K``: forward over reverse for ``K = 2`` (scalar), nested jvp otherwise."""
    if order == 2 and scalar:
        grad = T.grad(f)
        return lambda x, v: (T.jvp(grad, (x,), (v,))[1] * v).sum()

    def g(x: Any, v: Any) -> Any:
        h = f
        for _ in range(order):
            h = (lambda inner: lambda y: T.jvp(inner, (y,), (v,))[1])(h)
        return h(x)

    return g


def _laplacian_nested(f: Callable[[Any], Any], T: Any) -> Callable[[Any, Any], Any]:
    """``sum_d v_d^T H(x) v_d`` by forward over reverse, vmapped over the rows of ``V``."""
    per = _per_direction(_nested_order_k(f, T, 2, True), T)
    return lambda x, V: per(x, V).sum()


def build_operator(kind: str, params: dict[str, Any], problem: Any, ops: Any, T: Any) -> Callable:
    """The one-point function of an operator kind (``Derivatives`` vmaps and compiles it)."""

    call = T.problem_call(problem.fn)

    def f(x: Any) -> Any:
        return call(x, ops)

    if kind == "biharmonic_nested":  # Laplacian of the Laplacian, both by nested AD
        lap = _laplacian_nested(f, T)
        return lambda x, V: _laplacian_nested(lambda y: lap(y, V), T)(x, V)
    order, method, grouped = params["order"], params["method"], params["grouped"]
    if method == "collapsed":
        unit = bool(params.get("unit", False)) and not grouped
        return collapsed_function(problem, ops, order, grouped=grouped, unit=unit)
    if method == "taylor":
        g = taylor_function(problem, ops, order)
        scale = float(math.factorial(order))
        one = _per_direction(lambda x, v: g(x, v)[order] * scale, T)
    else:
        one = _per_direction(_nested_order_k(f, T, order, problem.is_scalar), T)
    return lambda x, V, w: _weighted(ops, one(x, V), w, grouped)


# --------------------------------------------------------------------------- methods


def _method(method: str) -> str:
    if method != "auto" and method not in OPERATOR_METHODS:
        raise OptionError(f"unknown operator method {method!r}; expected one of "
                          f"{['auto', *OPERATOR_METHODS]}")  # fmt: skip
    return method


class OperatorMethods:
    """The operator methods of :class:`~simdiff.Derivatives` (a mixin: it uses ``_call``)."""

    problem: Any
    backend: Any
    dtype: Any
    _call: Callable[..., Any]
    #: ``(method, fallback, taylor) -> (method, reason)``: ``"auto"`` resolved (Derivatives)
    _taylor_or: Callable[..., tuple[str, Any]]

    def _operand(self, a: np.ndarray, x: Any) -> Any:
        """The checked host array ``a`` as a backend array on ``x``'s device.

        The last 16 are kept, keyed by their contents: a call with the same
        directions and weights (a fixed ``Sigma``, the identity) reuses them
        instead of a new host-to-device transfer.  A copy is transferred, so
        a later change to the caller's array cannot reach the kept one.
        """
        be = self.backend
        device = be.device_of(x) if be.is_native(x) else None
        key = (a.shape, a.tobytes(), str(device))
        kept = self.__dict__.setdefault("_operands", RecentlyUsed(16))
        return kept.get(key, lambda: be.from_numpy(np.array(a, copy=True), self.dtype, device))

    def _scalar(self, what: str) -> None:
        if not self.problem.is_scalar:
            raise ShapeError(
                f"simdiff.{what} needs a scalar-valued problem; {self.problem.name!r} returns "
                f"shape {self.problem.output_shape} (use derivative_sum for vector outputs)"
            )

    def derivative_sum(
        self,
        order: int,
        directions: Any,
        x: Any = None,
        *,
        weights: Any = None,
        method: str = "auto",
    ) -> Any:
        """``sum_d w_d D^K f(x)[v_d, ..., v_d]``, shape ``out`` (``(G, *out)`` for grouped weights).

        ``directions`` (D, n); ``weights`` (D,) (default ones) or (G, D) for
        ``G`` separate weighted sums.  ``method="auto"`` is ``"collapsed"``,
        or ``"nested"`` where the problem does not run in the Taylor context
        (the reason goes to ``cache_info()``).  See :func:`simdiff.derivative_sum`.
        """
        if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 1:
            raise OptionError(f"order must be an integer >= 1; got {order!r}")
        method, reason = self._taylor_or(_method(method), "nested", "collapsed")
        V = _host(directions, "directions")
        n = self.problem.n
        if V.ndim != 2 or V.shape[1] != n or V.shape[0] == 0:
            raise ShapeError(f"directions must have shape (D, {n}) with D >= 1; got {V.shape}")
        D = V.shape[0]
        w = np.ones(D) if weights is None else _host(weights, "weights")
        if not (w.shape == (D,) or (w.ndim == 2 and w.shape[1] == D and w.shape[0] >= 1)):
            raise ShapeError(f"weights must have shape ({D},) or (G, {D}); got {w.shape}")
        params = {"order": int(order), "method": method, "grouped": w.ndim == 2,
                  "unit": weights is None}  # fmt: skip
        xd = self.problem.x0 if x is None else x
        extras = [("directions", self._operand(V, xd), V.shape),
                  ("weights", self._operand(w, xd), w.shape)]  # fmt: skip
        # one kind per capability: the numpy context evaluates the Taylor methods, not nested AD
        kind = "derivative_sum_nested" if method == "nested" else "derivative_sum"
        return self._call(kind, params, x, extras, reason)

    def laplacian(
        self, x: Any = None, *, weights: Any = None, factor: Any = None, method: str = "auto"
    ) -> Any:
        """``tr(Sigma H(x))`` (``Sigma = I``: the Laplacian); see :func:`simdiff.laplacian`."""
        self._scalar("laplacian")
        V = covariance_factor(self.problem.n, weights, factor)
        if V.shape[0] == 0:  # Sigma = 0
            V = np.zeros((1, self.problem.n))
        return self.derivative_sum(2, V, x, method=method)

    def biharmonic(
        self, x: Any = None, *, weights: Any = None, factor: Any = None, method: str = "auto"
    ) -> Any:
        """``sum_ij D^4 f[l_i, l_i, l_j, l_j]`` (``Sigma = I``: ``Delta^2 f``); see
        :func:`simdiff.biharmonic`."""
        self._scalar("biharmonic")
        Lr = covariance_factor(self.problem.n, weights, factor)
        if Lr.shape[0] == 0:
            Lr = np.zeros((1, self.problem.n))
        method, reason = self._taylor_or(_method(method), "nested", "collapsed")
        if method == "nested":
            extras = [("directions", Lr, Lr.shape)]
            return self._call("biharmonic_nested", {}, x, extras, reason)
        V, w = biharmonic_directions(Lr)
        return self.derivative_sum(4, V, x, weights=w, method=method)
