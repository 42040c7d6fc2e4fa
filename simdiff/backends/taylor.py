"""The ``taylor`` context: univariate Taylor propagation over a base context.

``TaylorOps(base_ops, order)`` is an ``ops`` namespace whose arrays are
:class:`TaylorArray` objects carrying the truncated Taylor coefficients of
``t -> f(x + t v)``.  Running a problem once in it gives every directional
derivative up to ``order`` (``f^{(k)} = k! c_k``) at a cost polynomial in the
order (quadratic for products and the elementary functions), where nested
forward mode costs grow exponentially.

Every name in :data:`simdiff.backends.OP_NAMES` has a rule; plain arrays of
the base context mix freely with Taylor arrays (they are constants).  The
rules for the linear-algebra and FFT operations live in
:mod:`simdiff.backends._taylor_linear`, the coefficient recurrences in
:mod:`simdiff.backends._taylor_series`.

References
----------
A. Griewank and A. Walther, *Evaluating Derivatives*, 2nd ed., SIAM 2008, ch. 13.
J. Bettencourt, M. J. Johnson and D. Duvenaud, "Taylor-mode automatic
differentiation for higher-order derivatives in JAX", NeurIPS workshop 2019.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends import _taylor_linear as linear
from simdiff.backends._base import LoopOps, Namespace
from simdiff.backends._taylor_array import TaylorArray, register_jax_pytree
from simdiff.backends._taylor_series import Series
from simdiff.errors import InputError, InputTypeError, UnsupportedError

__all__ = ["TaylorArray", "TaylorOps", "taylor_function"]


def _is(x: Any) -> bool:
    return isinstance(x, TaylorArray)


def _ndim(x: Any) -> int:
    return int(getattr(x, "ndim", np.ndim(x)))


class TaylorOps(LoopOps):
    """``ops`` namespace of truncated Taylor series over ``base`` (numpy, jax or torch ops).

    Parameters
    ----------
    base : Ops
        The context the coefficients are computed in.
    order : int
        Truncation order ``K >= 0``: arrays carry ``c_0 .. c_K``.

    Notes
    -----
    Comparisons, ``where``, ``abs``, ``sign``, ``maximum``/``minimum``,
    ``clip`` and ``max``/``min`` select on the primal ``c_0``, with the
    conventions of every context at kinks and ties (docs/errors.md): ties in
    ``maximum``/``minimum`` and ``max``/``min`` share the series equally,
    ``abs`` has derivative ``sign(c_0)`` (0 at 0), ``clip`` selects ``x`` on
    the closed interval.  Power with a
    real exponent, ``sqrt``, ``log`` and the inverse functions are singular
    where their derivatives are (e.g. ``sqrt`` at 0); integer powers are
    exact everywhere.  ``checkpoint`` is the identity: Taylor propagation is
    forward-only and stores nothing to rematerialise.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.backends.numpy import NumpyOps
    >>> ops = TaylorOps(NumpyOps(), order=4)
    >>> t = ops.variable(np.zeros(1), np.ones(1))     # the series of x + t v
    >>> ops.sin(t).coeffs[:, 0]                       # sin t = t - t^3/6 + ...
    array([ 0.        ,  1.        ,  0.        , -0.16666667,  0.        ])
    """

    name = "taylor"

    def __init__(self, base: Any, order: int) -> None:
        if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
            raise InputError(f"Taylor order must be a non-negative integer; got {order!r}")
        self.base = base
        self.order = int(order)
        self.rows = self.order + 1  # coefficient rows of an array (the collapsed context has more)
        self.dtype = base.dtype
        self.s: Any = Series(base, self.order)  # subclasses (collapsed) bring their own
        if base.name == "jax":
            register_jax_pytree()
        self.linalg = Namespace(solve=lambda a, b: linear.solve(self, a, b))
        self.fft = Namespace(
            rfft=lambda x, n=None, axis=-1, norm=None: linear.fft(self, "rfft", x, n, axis, norm),
            irfft=lambda x, n=None, axis=-1, norm=None: linear.fft(self, "irfft", x, n, axis, norm),
            fft=lambda x, n=None, axis=-1, norm=None: linear.fft(self, "fft", x, n, axis, norm),
            ifft=lambda x, n=None, axis=-1, norm=None: linear.fft(self, "ifft", x, n, axis, norm),
            rfftfreq=base.fft.rfftfreq,
            fftfreq=base.fft.fftfreq,
        )

    def __repr__(self) -> str:
        return (
            f"<simdiff ops: taylor(order={self.order}) over {self.base.name}, dtype={self.dtype}>"
        )

    @property
    def eager(self) -> bool:  # type: ignore[override]
        """As the base context: a Python loop over numpy/torch, traced over jax."""
        return bool(self.base.eager)

    def concrete(self, x: Any) -> Any:
        """The base context's :meth:`concrete` of the primal of ``x``."""
        return self.base.concrete(_primal(x))

    def errstate(self) -> Any:
        """The base context's :meth:`errstate` (numpy's floating-point warnings silenced)."""
        return self.base.errstate()

    # ------------------------------------------------------------------ plumbing
    def wrap(self, coeffs: Any) -> TaylorArray:
        """A :class:`TaylorArray` of this context from coefficients ``(K+1, *shape)``."""
        return TaylorArray(coeffs, self)

    def variable(self, x: Any, v: Any) -> TaylorArray:
        """The series ``x + t v`` (coefficients ``x, v, 0, ..., 0``)."""
        b = self.base
        rows = [x, v][: self.order + 1] + [b.zeros_like(x)] * max(0, self.order - 1)
        return self.wrap(b.stack(rows))

    def coeffs(self, x: Any, nd: int | None = None) -> Any:
        """Coefficients of ``x`` (a plain ``x`` is a constant), aligned to ``nd`` trailing axes."""
        c = x.coeffs if _is(x) else self.s.lift(x)
        return c if nd is None else self.s.align(c, nd)

    def _plain(self, *xs: Any) -> list[Any]:
        """Host arrays (numpy) as arrays of the base context; everything else as it is."""
        return [self.base.asarray(x) if isinstance(x, np.ndarray) else x for x in xs]

    def _pair(self, x: Any, y: Any) -> tuple[Any, Any]:
        nd = max(_ndim(x), _ndim(y))
        return self.coeffs(x, nd), self.coeffs(y, nd)

    def _scaled(self, x: Any, p: Any, op: Callable[[Any, Any], Any]) -> TaylorArray:
        """``op(c, p)`` for Taylor ``x`` and a plain ``p`` acting on each coefficient."""
        return self.wrap(op(self.coeffs(x, max(x.ndim, _ndim(p))), p))

    # ------------------------------------------------------------------ binary arithmetic
    def add(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (_is(x) or _is(y)):
            return self.base.add(x, y)
        if _is(x) and _is(y):
            a, c = self._pair(x, y)
            return self.wrap(a + c)
        t, p = (x, y) if _is(x) else (y, x)
        c = self.coeffs(t, max(t.ndim, _ndim(p)))
        c0 = c[0] + p if _is(x) else p + c[0]
        rest = self.base.broadcast_to(c[1:], (self.rows - 1, *c0.shape))
        return self.wrap(self.base.concat([c0[None], rest]))

    def subtract(self, x: Any, y: Any) -> Any:
        if not (_is(x) or _is(y)):
            return self.base.subtract(x, y)
        return self.add(x, self.negative(y) if _is(y) else -y)

    def multiply(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (_is(x) or _is(y)):
            return self.base.multiply(x, y)
        if _is(x) and _is(y):
            return self.wrap(self.s.cauchy(*self._pair(x, y)))
        if _is(x):
            return self._scaled(x, y, lambda c, p: c * p)
        return self._scaled(y, x, lambda c, p: p * c)

    def divide(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (_is(x) or _is(y)):
            return self.base.divide(x, y)
        if not _is(y):
            return self._scaled(x, y, lambda c, p: c / p)
        return self.wrap(self.s.divide(*self._pair(x, y)))

    def pow(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (_is(x) or _is(y)):
            return self.base.pow(x, y)
        if _is(y):  # x ** y = exp(y log x)
            return self.exp(self.multiply(y, self.log(x if _is(x) else self.base.asarray(x))))
        if isinstance(y, (int, float, np.integer, np.floating)) and not isinstance(y, bool):
            r = float(y)
            if r.is_integer() and abs(r) <= 1024:
                return self.wrap(self.s.pow_int(x.coeffs, int(r)))
            if r == 0.5:
                return self.sqrt(x)
        return self._scaled(x, y, self.s.pow_real)

    def atan2(self, y: Any, x: Any) -> Any:
        y, x = self._plain(y, x)
        if not (_is(x) or _is(y)):
            return self.base.atan2(y, x)
        return self.wrap(self.s.atan2(*self._pair(y, x)))

    def maximum(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (_is(x) or _is(y)):
            return self.base.maximum(x, y)
        return self._select_tie(_primal(x) > _primal(y), _primal(x) < _primal(y), x, y)

    def minimum(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (_is(x) or _is(y)):
            return self.base.minimum(x, y)
        return self._select_tie(_primal(x) < _primal(y), _primal(x) > _primal(y), x, y)

    def _select_tie(self, pick_x: Any, pick_y: Any, x: Any, y: Any) -> Any:
        """``x`` where ``pick_x``, ``y`` where ``pick_y``, their mean at a tie (neither).

        At a tie the values agree and every higher coefficient is the mean of
        the two series: the derivative of ``maximum``/``minimum`` at a tie is
        split equally between the arguments, as JAX and torch do in nested AD.
        """
        nd = max(_ndim(x), _ndim(y))
        cx, cy = self.coeffs(x, nd), self.coeffs(y, nd)
        b = self.base
        return self.wrap(b.where(pick_x, cx, b.where(pick_y, cy, (cx + cy) * 0.5)))

    # ------------------------------------------------------------------ unary
    def _unary(self, name: str, x: Any, rule: Callable[[Any], Any]) -> Any:
        if not _is(x):
            return getattr(self.base, name)(x)
        return self.wrap(rule(x.coeffs))

    def _plus(self, c: Any, a: float) -> Any:
        """Series ``a + c``."""
        return self.base.concat([c[:1] + a, c[1:]])

    def negative(self, x: Any) -> Any:
        return self._unary("negative", x, lambda c: -c)

    def abs(self, x: Any) -> Any:
        """``|x|``: every coefficient times ``sign(c_0)``, so all derivatives are 0 at ``c_0 = 0``.

        This is the chain rule with ``d|u|/du = sign(u)`` (0 at 0), the
        convention of every context (docs/errors.md).
        """
        return self._unary("abs", x, lambda c: c * self.base.sign(c[0]))

    def sign(self, x: Any) -> Any:
        return self._unary("sign", x, lambda c: self.s.lift(self.base.sign(c[0])))

    def floor(self, x: Any) -> Any:
        """Piecewise constant: the primal's floor, zero higher coefficients."""
        return self._unary("floor", x, lambda c: self.s.lift(self.base.floor(c[0])))

    def round(self, x: Any) -> Any:
        """Piecewise constant: the primal rounded (half to even), zero higher coefficients."""
        return self._unary("round", x, lambda c: self.s.lift(self.base.round(c[0])))

    def isfinite(self, x: Any) -> Any:
        """Finiteness of the primal (a plain boolean array)."""
        return self.base.isfinite(_primal(x))

    def sqrt(self, x: Any) -> Any:
        return self._unary("sqrt", x, self.s.sqrt)

    def square(self, x: Any) -> Any:
        return self._unary("square", x, lambda c: self.s.cauchy(c, c))

    def exp(self, x: Any) -> Any:
        return self._unary("exp", x, self.s.exp)

    def expm1(self, x: Any) -> Any:
        return self._unary("expm1", x, lambda c: self.s.exp(c, self.base.expm1(c[0])))

    def log(self, x: Any) -> Any:
        return self._unary("log", x, self.s.log)

    def log1p(self, x: Any) -> Any:
        return self._unary(
            "log1p", x, lambda c: self.s.log(self._plus(c, 1.0), self.base.log1p(c[0]))
        )

    def sin(self, x: Any) -> Any:
        return self._unary("sin", x, lambda c: self.s.sincos(c)[0])

    def cos(self, x: Any) -> Any:
        return self._unary("cos", x, lambda c: self.s.sincos(c)[1])

    def sinh(self, x: Any) -> Any:
        return self._unary("sinh", x, lambda c: self.s.sincos(c, hyperbolic=True)[0])

    def cosh(self, x: Any) -> Any:
        return self._unary("cosh", x, lambda c: self.s.sincos(c, hyperbolic=True)[1])

    def tan(self, x: Any) -> Any:
        return self._unary("tan", x, self.s.tan)

    def tanh(self, x: Any) -> Any:
        return self._unary("tanh", x, lambda c: self.s.tan(c, hyperbolic=True))

    def _inverse(self, name: str, x: Any, g: Callable[[Any, Any], Any]) -> Any:
        """Inverse functions from ``y' = u' g(u)``; ``g(c, u2)`` gets ``u`` and ``u^2``."""

        def rule(c: Any) -> Any:
            g_series = g(c, self.s.cauchy(c, c))
            return self.s.compose(c, getattr(self.base, name)(c[0]), g_series)

        return self._unary(name, x, rule)

    def asin(self, x: Any) -> Any:
        return self._inverse("asin", x, lambda c, u2: self.s.pow_real(self._plus(-u2, 1.0), -0.5))

    def acos(self, x: Any) -> Any:
        return self._inverse("acos", x, lambda c, u2: -self.s.pow_real(self._plus(-u2, 1.0), -0.5))

    def atan(self, x: Any) -> Any:
        return self._inverse("atan", x, lambda c, u2: self.s.pow_int(self._plus(u2, 1.0), -1))

    def asinh(self, x: Any) -> Any:
        return self._inverse("asinh", x, lambda c, u2: self.s.pow_real(self._plus(u2, 1.0), -0.5))

    def acosh(self, x: Any) -> Any:
        return self._inverse("acosh", x, lambda c, u2: self.s.pow_real(self._plus(u2, -1.0), -0.5))

    def atanh(self, x: Any) -> Any:
        return self._inverse("atanh", x, lambda c, u2: self.s.pow_int(self._plus(-u2, 1.0), -1))

    # ------------------------------------------------------------------ selection
    def where(self, condition: Any, x1: Any, x2: Any) -> Any:
        """Select on a plain boolean ``condition`` (from comparisons of primals)."""
        if _is(condition):
            raise InputTypeError(
                "ops.where: the condition must be a boolean array, got a TaylorArray"
            )
        condition, x1, x2 = self._plain(condition, x1, x2)
        if not (_is(x1) or _is(x2)):
            return self.base.where(condition, x1, x2)
        nd = max(_ndim(condition), _ndim(x1), _ndim(x2))
        return self.wrap(self.base.where(condition, self.coeffs(x1, nd), self.coeffs(x2, nd)))

    def clip(self, x: Any, min: Any = None, max: Any = None) -> Any:
        x, min, max = self._plain(x, min, max)
        if not (_is(x) or _is(min) or _is(max)):
            return self.base.clip(x, min, max)
        out = x
        if min is not None:
            out = self.where(_primal(out) < _primal(min), min, out)
        if max is not None:
            out = self.where(_primal(out) > _primal(max), max, out)
        return out if _is(out) else self.wrap(self.s.lift(out))

    # ------------------------------------------------------------------ reductions
    def _axes(self, axis: Any, nd: int) -> tuple[int, ...]:
        """Coefficient-array axes for the trailing ``axis`` (None: all) of an ``nd``-d array."""
        if axis is None:
            return tuple(range(1, nd + 1))
        axes = axis if isinstance(axis, (tuple, list)) else (axis,)
        return tuple(int(a) % nd + 1 for a in axes)

    def _reduce(self, name: str, x: Any, axis: Any, keepdims: bool) -> Any:
        if not _is(x):
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
        if not _is(x):
            return self.base.cumsum(x, axis=axis)
        if axis is None:
            return self.wrap(self.base.cumsum(self.base.reshape(x.coeffs, (self.rows, -1)), axis=1))
        return self.wrap(self.base.cumsum(x.coeffs, axis=self._axes(axis, x.ndim)[0]))

    def prod(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """Product by a balanced tree of Cauchy products (exact when entries are zero)."""
        if not _is(x):
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
        if not _is(x):
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
        if not _is(x):
            return self.base.reshape(x, shape)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return self._mapped(x, lambda c: self.base.reshape(c, (self.rows, *shape)))

    def _join(self, name: str, arrays: Any, axis: int) -> Any:
        arrays = list(arrays)
        if not any(_is(a) for a in arrays):
            return getattr(self.base, name)(arrays, axis=axis)
        nd = max(_ndim(a) for a in arrays)
        new = nd + 1 if name == "stack" else nd
        ax = int(axis) % new + 1
        return self.wrap(getattr(self.base, name)([self.coeffs(a, nd) for a in arrays], axis=ax))

    def stack(self, arrays: Any, axis: int = 0) -> Any:
        return self._join("stack", arrays, axis)

    def concat(self, arrays: Any, axis: int = 0) -> Any:
        return self._join("concat", arrays, axis)

    def roll(self, x: Any, shift: Any, axis: Any = None) -> Any:
        if not _is(x):
            return self.base.roll(x, shift, axis=axis)
        b = self.base
        if axis is None:
            flat = b.reshape(x.coeffs, (self.rows, -1))
            return self.wrap(b.reshape(b.roll(flat, shift, axis=1), x.coeffs.shape))
        axes = self._axes(axis, x.ndim)
        return self.wrap(b.roll(x.coeffs, shift, axis=axes if isinstance(axis, tuple) else axes[0]))

    def permute_dims(self, x: Any, axes: Any) -> Any:
        if not _is(x):
            return self.base.permute_dims(x, axes)
        return self._mapped(
            x, lambda c: self.base.permute_dims(c, (0, *self._axes(tuple(axes), x.ndim)))
        )

    def expand_dims(self, x: Any, axis: int) -> Any:
        if not _is(x):
            return self.base.expand_dims(x, axis)
        return self._mapped(x, lambda c: self.base.expand_dims(c, int(axis) % (x.ndim + 1) + 1))

    def squeeze(self, x: Any, axis: Any) -> Any:
        if not _is(x):
            return self.base.squeeze(x, axis)
        axes = self._axes(axis, x.ndim)
        return self._mapped(
            x, lambda c: self.base.squeeze(c, axes if isinstance(axis, tuple) else axes[0])
        )

    def broadcast_to(self, x: Any, shape: Any) -> Any:
        if not _is(x):
            return self.base.broadcast_to(x, shape)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return self._mapped(
            x,
            lambda c: self.base.broadcast_to(self.s.align(c, len(shape)), (self.rows, *shape)),
        )

    def flip(self, x: Any, axis: Any = None) -> Any:
        if not _is(x):
            return self.base.flip(x, axis=axis)
        axes = self._axes(axis, x.ndim)
        return x if not axes else self._mapped(x, lambda c: self.base.flip(c, axis=axes))

    def take(self, x: Any, indices: Any, axis: int | None = None) -> Any:
        if not _is(x):
            return self.base.take(x, indices, axis=axis)
        b = self.base
        if axis is None:
            return self.wrap(b.take(b.reshape(x.coeffs, (self.rows, -1)), indices, axis=1))
        return self._mapped(x, lambda c: b.take(c, indices, axis=self._axes(axis, x.ndim)[0]))

    # ------------------------------------------------------------------ linear
    def matmul(self, x1: Any, x2: Any) -> Any:
        return linear.matmul(self, x1, x2)

    def vecdot(self, x1: Any, x2: Any, axis: int = -1) -> Any:
        if not (_is(x1) or _is(x2)):
            return self.base.vecdot(x1, x2, axis=axis)
        return self.sum(self.multiply(x1, x2), axis=axis)

    def einsum(self, subscripts: str, *operands: Any) -> Any:
        return linear.einsum(self, subscripts, *operands)

    # ------------------------------------------------------------------ creation (plain arrays)
    def asarray(self, x: Any, dtype: Any = None) -> Any:
        """Plain arrays go to the base context; a TaylorArray is returned as it is."""
        if _is(x):
            return x if dtype is None else self.wrap(self.base.asarray(x.coeffs, dtype=dtype))
        return self.base.asarray(x, dtype=dtype)

    def zeros(self, shape: Any, dtype: Any = None) -> Any:
        return self.base.zeros(shape, dtype=dtype)

    def ones(self, shape: Any, dtype: Any = None) -> Any:
        return self.base.ones(shape, dtype=dtype)

    def full(self, shape: Any, fill_value: Any, dtype: Any = None) -> Any:
        return self.base.full(shape, fill_value, dtype=dtype)

    def zeros_like(self, x: Any) -> Any:
        return self.base.zeros_like(_primal(x))

    def ones_like(self, x: Any) -> Any:
        return self.base.ones_like(_primal(x))

    def full_like(self, x: Any, fill_value: Any) -> Any:
        return self.base.full_like(_primal(x), fill_value)

    def arange(self, start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Any:
        return self.base.arange(start, stop, step, dtype=dtype)

    def linspace(self, start: Any, stop: Any, num: int, endpoint: bool = True) -> Any:
        return self.base.linspace(start, stop, num, endpoint=endpoint)

    def eye(self, n: int, m: int | None = None, k: int = 0) -> Any:
        return self.base.eye(n, m, k=k)

    # ------------------------------------------------------------------ control
    def stop_gradient(self, x: Any) -> Any:
        """Keep the value, drop the higher coefficients (they become zeros)."""
        if not _is(x):
            return self.base.stop_gradient(x)
        return self.wrap(self.s.lift(self.base.stop_gradient(x.coeffs[0])))

    def checkpoint(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Identity: Taylor propagation is forward-only, there is nothing to rematerialise.

        Host (numpy) arguments are made arrays of the base context, as the
        base context's ``checkpoint`` does.
        """
        return lambda *args: fn(*self._plain(*args))

    def scan(self, step: Callable[[Any, Any], tuple[Any, Any]], carry: Any, xs: Any = None,
             length: int | None = None) -> tuple[Any, Any]:  # fmt: skip
        """``lax.scan`` over Taylor carries on a jax base; the Python loop elsewhere.

        On JAX, floating carry leaves are lifted to Taylor arrays so that the
        carry keeps one structure, and Taylor arrays in ``xs``/``ys`` are
        scanned along their first trailing axis (not the coefficient axis).
        """
        if self.base.name != "jax":
            return super().scan(step, carry, xs, length)
        return linear.jax_scan(self, step, carry, xs, length)

    def while_loop(self, cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any,
                   max_steps: int) -> Any:  # fmt: skip
        """Bounded while loop: ``lax.while_loop`` over Taylor carries on jax, else a Python loop."""
        if self.eager:
            return super().while_loop(cond, body, carry, max_steps)
        return linear.jax_while_loop(self, cond, body, carry, max_steps)

    def cond(self, pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any],
             *operands: Any) -> Any:  # fmt: skip
        """``lax.cond`` over Taylor operands on jax (on the primal of ``pred``), else ``if``."""
        if self.eager:
            return super().cond(_primal(pred), true_fn, false_fn, *operands)
        return linear.jax_cond(self, pred, true_fn, false_fn, *operands)


def _primal(x: Any) -> Any:
    return x.coeffs[0] if _is(x) else x


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
        if _is(y):
            return y.coeffs
        if isinstance(y, (tuple, list, dict)):
            raise UnsupportedError(
                f"taylor: problem {problem.name!r} returned a {type(y).__name__}; expected an array"
            )
        return tops.s.lift(ops.asarray(y))

    return g
