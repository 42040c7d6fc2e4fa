"""The Taylor rules of the elementwise operations: arithmetic, elementary functions, selection.

Products and the elementary functions cost a number of base operations
quadratic in the order (the recurrences of
:class:`~simdiff.backends.taylor.series.Series`); sums, scalings and
selections are linear in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends.taylor.base import TaylorBase, is_taylor, ndim_of, primal_of
from simdiff.errors import InputTypeError

__all__ = ["ElementwiseRules"]


class ElementwiseRules(TaylorBase):
    """Arithmetic, elementary functions, ``where`` and ``clip`` on Taylor arrays.

    Comparisons, ``where``, ``abs``, ``sign``, ``maximum``/``minimum`` and
    ``clip`` select on the primal ``c_0`` (see :class:`TaylorOps`).
    """

    # ------------------------------------------------------------------ binary arithmetic
    def add(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (is_taylor(x) or is_taylor(y)):
            return self.base.add(x, y)
        if is_taylor(x) and is_taylor(y):
            a, c = self._pair(x, y)
            return self.wrap(a + c)
        t, p = (x, y) if is_taylor(x) else (y, x)
        c = self.coeffs(t, max(t.ndim, ndim_of(p)))
        c0 = c[0] + p if is_taylor(x) else p + c[0]
        rest = self.base.broadcast_to(c[1:], (self.rows - 1, *c0.shape))
        return self.wrap(self.base.concat([c0[None], rest]))

    def subtract(self, x: Any, y: Any) -> Any:
        if not (is_taylor(x) or is_taylor(y)):
            return self.base.subtract(x, y)
        return self.add(x, self.negative(y) if is_taylor(y) else -y)

    def multiply(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (is_taylor(x) or is_taylor(y)):
            return self.base.multiply(x, y)
        if is_taylor(x) and is_taylor(y):
            return self.wrap(self.s.cauchy(*self._pair(x, y)))
        if is_taylor(x):
            return self._scaled(x, y, lambda c, p: c * p)
        return self._scaled(y, x, lambda c, p: p * c)

    def divide(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (is_taylor(x) or is_taylor(y)):
            return self.base.divide(x, y)
        if not is_taylor(y):
            return self._scaled(x, y, lambda c, p: c / p)
        return self.wrap(self.s.divide(*self._pair(x, y)))

    def pow(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (is_taylor(x) or is_taylor(y)):
            return self.base.pow(x, y)
        if is_taylor(y):  # x ** y = exp(y log x)
            return self.exp(self.multiply(y, self.log(x if is_taylor(x) else self.base.asarray(x))))
        if isinstance(y, (int, float, np.integer, np.floating)) and not isinstance(y, bool):
            r = float(y)
            if r.is_integer() and abs(r) <= 1024:
                return self.wrap(self.s.pow_int(x.coeffs, int(r)))
            if r == 0.5:
                return self.sqrt(x)
        return self._scaled(x, y, self.s.pow_real)

    def atan2(self, y: Any, x: Any) -> Any:
        y, x = self._plain(y, x)
        if not (is_taylor(x) or is_taylor(y)):
            return self.base.atan2(y, x)
        return self.wrap(self.s.atan2(*self._pair(y, x)))

    def maximum(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (is_taylor(x) or is_taylor(y)):
            return self.base.maximum(x, y)
        return self._select_tie(primal_of(x) > primal_of(y), primal_of(x) < primal_of(y), x, y)

    def minimum(self, x: Any, y: Any) -> Any:
        x, y = self._plain(x, y)
        if not (is_taylor(x) or is_taylor(y)):
            return self.base.minimum(x, y)
        return self._select_tie(primal_of(x) < primal_of(y), primal_of(x) > primal_of(y), x, y)

    def _select_tie(self, pick_x: Any, pick_y: Any, x: Any, y: Any) -> Any:
        """``x`` where ``pick_x``, ``y`` where ``pick_y``, their mean at a tie (neither).

        At a tie the values agree and every higher coefficient is the mean of
        the two series: the derivative of ``maximum``/``minimum`` at a tie is
        split equally between the arguments, as JAX and torch do in nested AD.
        """
        nd = max(ndim_of(x), ndim_of(y))
        cx, cy = self.coeffs(x, nd), self.coeffs(y, nd)
        b = self.base
        return self.wrap(b.where(pick_x, cx, b.where(pick_y, cy, (cx + cy) * 0.5)))

    # ------------------------------------------------------------------ unary
    def _unary(self, name: str, x: Any, rule: Callable[[Any], Any]) -> Any:
        if not is_taylor(x):
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
        return self.base.isfinite(primal_of(x))

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
        if is_taylor(condition):
            raise InputTypeError(
                "ops.where: the condition must be a boolean array, got a TaylorArray"
            )
        condition, x1, x2 = self._plain(condition, x1, x2)
        if not (is_taylor(x1) or is_taylor(x2)):
            return self.base.where(condition, x1, x2)
        nd = max(ndim_of(condition), ndim_of(x1), ndim_of(x2))
        return self.wrap(self.base.where(condition, self.coeffs(x1, nd), self.coeffs(x2, nd)))

    def clip(self, x: Any, min: Any = None, max: Any = None) -> Any:
        x, min, max = self._plain(x, min, max)
        if not (is_taylor(x) or is_taylor(min) or is_taylor(max)):
            return self.base.clip(x, min, max)
        out = x
        if min is not None:
            out = self.where(primal_of(out) < primal_of(min), min, out)
        if max is not None:
            out = self.where(primal_of(out) > primal_of(max), max, out)
        return out if is_taylor(out) else self.wrap(self.s.lift(out))
