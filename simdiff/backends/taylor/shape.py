"""The Taylor rules of reductions and shape operations: the same operation on every coefficient.

A Taylor array's coefficients lie on a leading axis of length ``K+1``; a
reduction or a shape operation over the array's axes is the base context's
operation over the trailing axes of the coefficient array, except ``prod``
(a balanced tree of Cauchy products) and ``max``/``min`` (selection on the
primal, ties sharing the series equally).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends.taylor.array import TaylorArray
from simdiff.backends.taylor.base import TaylorBase, is_taylor, ndim_of

__all__ = ["ShapeRules"]


class ShapeRules(TaylorBase):
    """Reductions (``sum``, ``mean``, ``cumsum``, ``prod``, ``max``, ``min``) and shape
    operations (``reshape``, ``stack``, ``concat``, ``roll``, ...) on Taylor arrays."""

    # ------------------------------------------------------------------ reductions
    def _axes(self, axis: Any, nd: int) -> tuple[int, ...]:
        """Coefficient-array axes for the trailing ``axis`` (None: all) of an ``nd``-d array."""
        if axis is None:
            return tuple(range(1, nd + 1))
        axes = axis if isinstance(axis, (tuple, list)) else (axis,)
        return tuple(int(a) % nd + 1 for a in axes)

    def _reduce(self, name: str, x: Any, axis: Any, keepdims: bool) -> Any:
        if not is_taylor(x):
            return getattr(self.base, name)(x, axis=axis, keepdims=keepdims)
        axes = self._axes(axis, x.ndim)
        if not axes:
            return x
        return self.wrap(getattr(self.base, name)(x.coeffs, axis=axes, keepdims=keepdims))

    def sum(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce("sum", x, axis, keepdims)

    def mean(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._reduce("mean", x, axis, keepdims)

    def cumsum(self, x: Any, axis: int | None = None) -> Any:
        if not is_taylor(x):
            return self.base.cumsum(x, axis=axis)
        if axis is None:
            return self.wrap(self.base.cumsum(self.base.reshape(x.coeffs, (self.rows, -1)), axis=1))
        return self.wrap(self.base.cumsum(x.coeffs, axis=self._axes(axis, x.ndim)[0]))

    def prod(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """Product by a balanced tree of Cauchy products (exact when entries are zero)."""
        if not is_taylor(x):
            return self.base.prod(x, axis=axis, keepdims=keepdims)
        b, axes = self.base, self._axes(axis, x.ndim)
        if not axes:
            return x
        keep = [a for a in range(1, x.ndim + 1) if a not in axes]
        c = b.permute_dims(x.coeffs, (0, *axes, *keep))
        kept_shape = tuple(c.shape[1 + len(axes) :])
        c = b.reshape(c, (self.rows, -1, *kept_shape))
        while c.shape[1] > 1:
            n = int(c.shape[1])
            half = n // 2
            pair = self.s.cauchy(c[:, :half], c[:, half : 2 * half])
            c = b.concat([pair, c[:, 2 * half :]], axis=1) if n % 2 else pair
        out = self.wrap(c[:, 0])
        if keepdims:
            out = self.reshape(out, tuple(1 if a + 1 in axes else s for a, s in enumerate(x.shape)))
        return out

    def _extreme(self, name: str, x: Any, axis: Any, keepdims: bool) -> Any:
        if not is_taylor(x):
            return getattr(self.base, name)(x, axis=axis, keepdims=keepdims)
        b, axes = self.base, self._axes(axis, x.ndim)
        if not axes:
            return x
        c0 = x.coeffs[0]
        trail = tuple(a - 1 for a in axes)
        hit = c0 == getattr(b, name)(c0, axis=trail, keepdims=True)
        count = b.sum(
            b.where(hit, b.ones_like(c0), b.zeros_like(c0)), axis=trail, keepdims=keepdims
        )
        total = b.sum(b.where(hit, x.coeffs, 0), axis=axes, keepdims=keepdims)
        return self.wrap(total / count)

    def max(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._extreme("max", x, axis, keepdims)

    def min(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return self._extreme("min", x, axis, keepdims)

    # ------------------------------------------------------------------ shapes
    def _mapped(self, x: Any, fn: Callable[[Any], Any]) -> TaylorArray:
        return self.wrap(fn(x.coeffs))

    def reshape(self, x: Any, shape: Any) -> Any:
        if not is_taylor(x):
            return self.base.reshape(x, shape)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return self._mapped(x, lambda c: self.base.reshape(c, (self.rows, *shape)))

    def _join(self, name: str, arrays: Any, axis: int) -> Any:
        arrays = list(arrays)
        if not any(is_taylor(a) for a in arrays):
            return getattr(self.base, name)(arrays, axis=axis)
        nd = max(ndim_of(a) for a in arrays)
        new = nd + 1 if name == "stack" else nd
        ax = int(axis) % new + 1
        return self.wrap(getattr(self.base, name)([self.coeffs(a, nd) for a in arrays], axis=ax))

    def stack(self, arrays: Any, axis: int = 0) -> Any:
        return self._join("stack", arrays, axis)

    def concat(self, arrays: Any, axis: int = 0) -> Any:
        return self._join("concat", arrays, axis)

    def roll(self, x: Any, shift: Any, axis: Any = None) -> Any:
        if not is_taylor(x):
            return self.base.roll(x, shift, axis=axis)
        b = self.base
        if axis is None:
            flat = b.reshape(x.coeffs, (self.rows, -1))
            return self.wrap(b.reshape(b.roll(flat, shift, axis=1), x.coeffs.shape))
        axes = self._axes(axis, x.ndim)
        return self.wrap(b.roll(x.coeffs, shift, axis=axes if isinstance(axis, tuple) else axes[0]))

    def permute_dims(self, x: Any, axes: Any) -> Any:
        if not is_taylor(x):
            return self.base.permute_dims(x, axes)
        return self._mapped(
            x, lambda c: self.base.permute_dims(c, (0, *self._axes(tuple(axes), x.ndim)))
        )

    def expand_dims(self, x: Any, axis: int) -> Any:
        if not is_taylor(x):
            return self.base.expand_dims(x, axis)
        return self._mapped(x, lambda c: self.base.expand_dims(c, int(axis) % (x.ndim + 1) + 1))

    def squeeze(self, x: Any, axis: Any) -> Any:
        if not is_taylor(x):
            return self.base.squeeze(x, axis)
        axes = self._axes(axis, x.ndim)
        return self._mapped(
            x, lambda c: self.base.squeeze(c, axes if isinstance(axis, tuple) else axes[0])
        )

    def broadcast_to(self, x: Any, shape: Any) -> Any:
        if not is_taylor(x):
            return self.base.broadcast_to(x, shape)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return self._mapped(
            x,
            lambda c: self.base.broadcast_to(self.s.align(c, len(shape)), (self.rows, *shape)),
        )

    def flip(self, x: Any, axis: Any = None) -> Any:
        if not is_taylor(x):
            return self.base.flip(x, axis=axis)
        axes = self._axes(axis, x.ndim)
        return x if not axes else self._mapped(x, lambda c: self.base.flip(c, axis=axes))

    def take(self, x: Any, indices: Any, axis: int | None = None) -> Any:
        if not is_taylor(x):
            return self.base.take(x, indices, axis=axis)
        b = self.base
        if axis is None:
            return self.wrap(b.take(b.reshape(x.coeffs, (self.rows, -1)), indices, axis=1))
        return self._mapped(x, lambda c: b.take(c, indices, axis=self._axes(axis, x.ndim)[0]))
