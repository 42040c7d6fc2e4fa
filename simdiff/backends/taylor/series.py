"""Truncated Taylor-series arithmetic on coefficient arrays.

A series of order ``K`` is a native array ``c`` of shape ``(K+1, *shape)``
holding the Taylor coefficients ``c_k = f^{(k)}(0) / k!`` of
``t -> f(x + t v)``.  :class:`Series` implements the propagation rules on such
arrays with the base context's ``ops``; :mod:`simdiff.backends.taylor` wraps
them in :class:`~simdiff.backends.taylor.TaylorArray` objects.

The recurrences are those of Griewank & Walther, *Evaluating Derivatives*
(2nd ed., SIAM 2008), ch. 13, written for the scaled coefficients ``c_k``:

* product (Cauchy): ``(ab)_k = sum_{j=0}^k a_j b_{k-j}``;
* quotient: ``(a/b)_k = (a_k - sum_{j=1}^k b_j (a/b)_{k-j}) / b_0``;
* ``y = exp(u)``: ``y_k = (1/k) sum_{j=1}^k j u_j y_{k-j}``;
* ``y = u^r``: ``y_k = 1/(k u_0) sum_{j=1}^{k} ((r+1) j - k) u_j y_{k-j}``;
* ``y = sqrt(u)``: ``y_k = (u_k - sum_{j=1}^{k-1} y_j y_{k-j}) / (2 y_0)``;
* ``s, c = sin(u), cos(u)``: ``s_k = (1/k) sum j u_j c_{k-j}``,
  ``c_k = -(1/k) sum j u_j s_{k-j}`` (hyperbolic: without the minus);
* functions with a known derivative ``y' = u' g(u)`` (log, tan, the inverse
  trigonometric and hyperbolic functions): ``y = y_0 + integral(u' g)``, where
  the series of ``g`` comes from the rules above.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Series"]


class Series:
    """Rules on coefficient arrays of order ``order`` over base ops ``b``.

    Parameters
    ----------
    b : Ops
        The base context (numpy, jax or torch ops).
    order : int
        Truncation order ``K``; arrays have ``K + 1`` coefficients on axis 0.
    """

    def __init__(self, b: Any, order: int) -> None:
        self.b = b
        self.K = int(order)
        # The sums below are unrolled into elementwise operations on single
        # coefficients: XLA fuses them into a few kernels, and eager torch does
        # less work than with stacked (K+1)^2 gathers (docs/taylor.md).

    # ------------------------------------------------------------------ helpers
    def lift(self, p: Any) -> Any:
        """Coefficients of a constant: ``p`` then ``K`` zeros."""
        b = self.b
        if isinstance(p, (int, np.integer)) and not isinstance(p, bool):
            p = float(p)  # an integer constant next to a series is a floating constant
        if isinstance(p, (np.generic, np.ndarray)) or not hasattr(p, "dtype"):
            p = b.asarray(p)  # Python and numpy scalars become arrays of the base context
        if self.K == 0:
            return p[None]
        return b.concat([p[None], b.zeros((self.K, *p.shape), dtype=p.dtype)])

    def align(self, c: Any, nd: int) -> Any:
        """Insert unit axes after the coefficient axis so ``c`` has ``nd`` trailing axes."""
        have = c.ndim - 1
        if have >= nd:
            return c
        return self.b.reshape(c, (c.shape[0], *(1,) * (nd - have), *c.shape[1:]))

    def _k(self, like: Any, start: int, stop: int) -> Any:
        """``arange(start, stop)`` as a column broadcasting against ``like[start:stop]``."""
        k = self.b.asarray(np.arange(start, stop), dtype=like.dtype)
        return self.b.reshape(k, (stop - start, *(1,) * (like.ndim - 1)))

    def deriv(self, c: Any) -> Any:
        """Series of ``d/dt``: ``(k+1) c_{k+1}``, the last (unknown) coefficient set to 0."""
        if self.K == 0:
            return self.b.zeros_like(c)
        return self.b.concat([c[1:] * self._k(c, 1, self.K + 1), self.b.zeros_like(c[:1])])

    def integral(self, y0: Any, p: Any) -> Any:
        """Series with constant term ``y0`` whose derivative series is ``p``."""
        if self.K == 0:
            return y0[None]
        return self.b.concat([y0[None], p[:-1] / self._k(p, 1, self.K + 1)])

    @staticmethod
    def _dot(a: Any, items: list[Any]) -> Any:
        """``sum_i a[i] * items[i]`` (``a`` indexable along its leading axis, ``items`` a list)."""
        acc = a[0] * items[0]
        for i in range(1, len(items)):
            acc = acc + a[i] * items[i]
        return acc

    # ------------------------------------------------------------------ products
    def cauchy(self, x: Any, y: Any) -> Any:
        """Product series of two aligned coefficient arrays (same trailing ndim)."""
        return self.bilinear(x, y, lambda u, v: u * v)

    def bilinear(self, x: Any, y: Any, fn: Any, batched: Any = None) -> Any:
        """``C_k = sum_j fn(x_j, y_{k-j})`` for a bilinear ``fn`` of single coefficients.

        ``batched`` is ``fn`` for operands with one more leading (direction) axis;
        only the collapsed context (:mod:`._taylor_collapsed`) needs it.
        """
        out = []
        for k in range(self.K + 1):
            acc = fn(x[0], y[k])
            for j in range(1, k + 1):
                acc = acc + fn(x[j], y[k - j])
            out.append(acc)
        return self.b.stack(out)

    def divide(self, x: Any, y: Any) -> Any:
        """Quotient series ``x / y`` (aligned arrays)."""
        b = self.b
        y0 = y[0]
        c = [x[0] / y0]
        for k in range(1, self.K + 1):
            c.append((x[k] - self._dot(y[1 : k + 1], c[::-1])) / y0)
        return b.stack(c)

    # ------------------------------------------------------------------ elementwise
    def exp(self, u: Any, y0: Any = None) -> Any:
        """``exp(u)``; ``y0`` replaces the constant term (``expm1`` passes ``expm1(u_0)``)."""
        b = self.b
        e = [b.exp(u[0])]
        du = self.deriv(u)
        for k in range(1, self.K + 1):
            e.append(self._dot(du[:k], e[::-1]) / k)
        if y0 is not None:
            e[0] = y0
        return b.stack(e)

    def log(self, u: Any, y0: Any = None) -> Any:
        """``log(u) = log(u_0) + integral(u' / u)``; ``y0`` replaces the constant term."""
        return self.integral(self.b.log(u[0]) if y0 is None else y0, self.divide(self.deriv(u), u))

    def sqrt(self, u: Any) -> Any:
        b = self.b
        y = [b.sqrt(u[0])]
        for k in range(1, self.K + 1):
            acc = u[k]
            if k > 1:
                acc = acc - self._dot(y[1:k], y[k - 1 : 0 : -1])
            y.append(acc / (2.0 * y[0]))
        return b.stack(y)

    def pow_real(self, u: Any, r: Any) -> Any:
        """``u ** r`` for a real (plain) exponent ``r``; singular where ``u_0 = 0``."""
        b = self.b
        u0 = u[0]
        y = [u0**r]
        for k in range(1, self.K + 1):
            j = self._k(u, 1, k + 1)
            w = (r + 1.0) * j - float(k)
            y.append(self._dot(w * u[1 : k + 1], y[::-1]) / (k * u0))
        return b.stack(y)

    def pow_int(self, u: Any, n: int) -> Any:
        """``u ** n`` for an integer ``n`` by repeated squaring (exact at ``u_0 = 0`` if n >= 0)."""
        if n < 0:
            return self.divide(self.lift(self.b.ones_like(u[0])), self.pow_int(u, -n))
        result = None
        base = u
        while n:
            if n & 1:
                result = base if result is None else self.cauchy(result, base)
            n >>= 1
            if n:
                base = self.cauchy(base, base)
        return self.lift(self.b.ones_like(u[0])) if result is None else result

    def sincos(self, u: Any, hyperbolic: bool = False) -> tuple[Any, Any]:
        """``(sin u, cos u)`` jointly (``(sinh u, cosh u)`` if ``hyperbolic``)."""
        b = self.b
        if hyperbolic:
            s, c = [b.sinh(u[0])], [b.cosh(u[0])]
        else:
            s, c = [b.sin(u[0])], [b.cos(u[0])]
        sgn = 1.0 if hyperbolic else -1.0
        du = self.deriv(u)
        for k in range(1, self.K + 1):
            dk = du[:k]
            s_k = self._dot(dk, c[::-1]) / k
            c_k = self._dot(dk, s[::-1]) * (sgn / k)
            s.append(s_k)
            c.append(c_k)
        return b.stack(s), b.stack(c)

    def tan(self, u: Any, hyperbolic: bool = False) -> Any:
        """``tan u`` from ``y' = u' (1 + y^2)`` (``tanh``: ``y' = u' (1 - y^2)``)."""
        b = self.b
        sgn = -1.0 if hyperbolic else 1.0
        y = [b.tanh(u[0]) if hyperbolic else b.tan(u[0])]
        g = [1.0 + sgn * y[0] * y[0]]
        du = self.deriv(u)
        for k in range(1, self.K + 1):
            y.append(self._dot(du[:k], g[::-1]) / k)
            g.append(sgn * self._dot(y, y[::-1]))
        return b.stack(y)

    def atan2(self, cy: Any, cx: Any) -> Any:
        """``atan2(y, x)`` from ``d atan2 = (x y' - y x') / (x^2 + y^2)`` (aligned arrays)."""
        num = self.cauchy(cx, self.deriv(cy)) - self.cauchy(cy, self.deriv(cx))
        den = self.cauchy(cx, cx) + self.cauchy(cy, cy)
        return self.integral(self.b.atan2(cy[0], cx[0]), self.divide(num, den))

    def solve(self, a: Any, rhs: Any) -> Any:
        """``X`` with ``A X = B`` as series: ``A_0 X_k = B_k - sum_{j=1}^k A_j X_{k-j}``."""
        b = self.b
        a0 = a[0]
        xs = [b.linalg.solve(a0, rhs[0])]
        for k in range(1, self.K + 1):
            r = rhs[k]
            for i in range(1, k + 1):
                r = r - b.matmul(a[i], xs[k - i])
            xs.append(b.linalg.solve(a0, r))
        return b.stack(xs)

    def compose(self, u: Any, y0: Any, g: Any) -> Any:
        """Series of ``y`` with ``y(0) = y0`` and ``y' = u' g`` (``g`` a series)."""
        return self.integral(y0, self.cauchy(self.deriv(u), g))
