"""``TaylorArray``: an array carrying truncated Taylor coefficients.

The coefficients live in one native array of the base context with the
order on the leading axis: shape ``(K+1, *shape)``.  Operators dispatch to the
:class:`~simdiff.backends.taylor.TaylorOps` the array belongs to, so a problem
written against ``ops`` runs unchanged.  Comparisons look at the primal
(``c_0``) and return plain boolean arrays; indexing applies to the trailing
axes.
"""

from __future__ import annotations

import sys
from typing import Any

from simdiff.errors import BackendUnavailable, InputTypeError

__all__ = ["TaylorArray", "register_jax_pytree"]


class TaylorArray:
    """Truncated Taylor series ``sum_k c_k t^k`` of an array-valued function of ``t``.

    Parameters
    ----------
    coeffs : native array, shape (K+1, *shape)
        Coefficients ``c_0 .. c_K`` (``c_k = f^{(k)}(0) / k!``) in the base context.
    ops : TaylorOps
        The context the array belongs to (its rules implement the operators).

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.backends.numpy import NumpyOps
    >>> from simdiff.backends.taylor import TaylorArray, TaylorOps
    >>> ops = TaylorOps(NumpyOps(), order=3)
    >>> t = TaylorArray(np.array([[0.0], [1.0], [0.0], [0.0]]), ops)  # the series t
    >>> (ops.exp(t) * 6.0).coeffs[:, 0]
    array([6., 6., 3., 1.])
    """

    __slots__ = ("coeffs", "ops")
    __array_priority__ = 1000  # numpy defers binary operators to us
    __array_ufunc__ = None

    def __init__(self, coeffs: Any, ops: Any) -> None:
        self.coeffs = coeffs
        self.ops = ops

    # ------------------------------------------------------------------ array protocol
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.coeffs.shape[1:])

    @property
    def ndim(self) -> int:
        return self.coeffs.ndim - 1

    @property
    def dtype(self) -> Any:
        return self.coeffs.dtype

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= int(s)
        return n

    @property
    def primal(self) -> Any:
        """``c_0``: the value itself, a plain array."""
        return self.coeffs[0]

    @property
    def T(self) -> TaylorArray:
        return self.ops.permute_dims(self, tuple(range(self.ndim))[::-1])

    @property
    def real(self) -> TaylorArray:
        return TaylorArray(self.coeffs.real, self.ops)

    @property
    def imag(self) -> TaylorArray:
        return TaylorArray(self.coeffs.imag, self.ops)

    def conj(self) -> TaylorArray:
        return TaylorArray(self.coeffs.conj(), self.ops)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise InputTypeError("len() of a 0-d TaylorArray")
        return int(self.shape[0])

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, index: Any) -> TaylorArray:
        if isinstance(index, TaylorArray):
            raise InputTypeError(
                "a TaylorArray cannot be used as an index (indices are not differentiable)"
            )
        index = index if isinstance(index, tuple) else (index,)
        return TaylorArray(self.coeffs[(slice(None), *index)], self.ops)

    def __repr__(self) -> str:
        order, base = self.coeffs.shape[0] - 1, self.ops.base.name
        return f"TaylorArray(order={order}, shape={self.shape}, base={base})"

    def __bool__(self) -> bool:
        return bool(self.coeffs[0])

    __hash__ = None  # type: ignore[assignment]  # == compares primals elementwise

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other: Any) -> Any:
        return self.ops.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return self.ops.add(other, self)

    def __sub__(self, other: Any) -> Any:
        return self.ops.subtract(self, other)

    def __rsub__(self, other: Any) -> Any:
        return self.ops.subtract(other, self)

    def __mul__(self, other: Any) -> Any:
        return self.ops.multiply(self, other)

    def __rmul__(self, other: Any) -> Any:
        return self.ops.multiply(other, self)

    def __truediv__(self, other: Any) -> Any:
        return self.ops.divide(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return self.ops.divide(other, self)

    def __pow__(self, other: Any) -> Any:
        return self.ops.pow(self, other)

    def __rpow__(self, other: Any) -> Any:
        return self.ops.pow(other, self)

    def __matmul__(self, other: Any) -> Any:
        return self.ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return self.ops.matmul(other, self)

    def __neg__(self) -> TaylorArray:
        return TaylorArray(-self.coeffs, self.ops)

    def __pos__(self) -> TaylorArray:
        return self

    def __abs__(self) -> Any:
        return self.ops.abs(self)

    # ------------------------------------------------------------------ comparisons (primal)
    def __lt__(self, other: Any) -> Any:
        return self.coeffs[0] < _primal(other)

    def __le__(self, other: Any) -> Any:
        return self.coeffs[0] <= _primal(other)

    def __gt__(self, other: Any) -> Any:
        return self.coeffs[0] > _primal(other)

    def __ge__(self, other: Any) -> Any:
        return self.coeffs[0] >= _primal(other)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self.coeffs[0] == _primal(other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self.coeffs[0] != _primal(other)


def _primal(x: Any) -> Any:
    return x.coeffs[0] if isinstance(x, TaylorArray) else x


_registered = False


def register_jax_pytree() -> None:
    """Register :class:`TaylorArray` as a JAX pytree (once; only when JAX is in use).

    The coefficient array is the child; the ``TaylorOps`` is static auxiliary
    data.  Called by ``TaylorOps`` over a jax base, so importing simdiff never
    imports JAX.
    """
    global _registered
    if _registered:
        return
    jax = sys.modules.get("jax")
    if jax is None:  # the jax base context imports jax before any TaylorOps over it exists
        raise BackendUnavailable("register_jax_pytree() called before jax was imported")
    jax.tree_util.register_pytree_node(
        TaylorArray,
        lambda t: ((t.coeffs,), t.ops),
        lambda ops, children: TaylorArray(children[0], ops),
    )
    _registered = True
