"""The ``taylor`` context: univariate Taylor propagation over a base context.

``TaylorOps(base_ops, order)`` is an ``ops`` namespace whose arrays are
:class:`~simdiff.backends.taylor.array.TaylorArray` objects carrying the
truncated Taylor coefficients of ``t -> f(x + t v)``.  Its rules live by
concept: plumbing in :mod:`~simdiff.backends.taylor.base`, elementwise rules in
:mod:`~simdiff.backends.taylor.elementwise`, reductions and shapes in
:mod:`~simdiff.backends.taylor.shape`, linear algebra, FFTs and JAX loops in
:mod:`~simdiff.backends.taylor.linear`, the coefficient recurrences in
:mod:`~simdiff.backends.taylor.series`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simdiff.backends.taylor import linear
from simdiff.backends.taylor.base import is_taylor, primal_of
from simdiff.backends.taylor.elementwise import ElementwiseRules
from simdiff.backends.taylor.shape import ShapeRules

__all__ = ["TaylorOps"]


class TaylorOps(ElementwiseRules, ShapeRules):
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

    # ------------------------------------------------------------------ linear
    def matmul(self, x1: Any, x2: Any) -> Any:
        return linear.matmul(self, x1, x2)

    def vecdot(self, x1: Any, x2: Any, axis: int = -1) -> Any:
        if not (is_taylor(x1) or is_taylor(x2)):
            return self.base.vecdot(x1, x2, axis=axis)
        return self.sum(self.multiply(x1, x2), axis=axis)

    def einsum(self, subscripts: str, *operands: Any) -> Any:
        return linear.einsum(self, subscripts, *operands)

    # ------------------------------------------------------------------ creation (plain arrays)
    def asarray(self, x: Any, dtype: Any = None) -> Any:
        """Plain arrays go to the base context; a TaylorArray is returned as it is."""
        if is_taylor(x):
            return x if dtype is None else self.wrap(self.base.asarray(x.coeffs, dtype=dtype))
        return self.base.asarray(x, dtype=dtype)

    def zeros(self, shape: Any, dtype: Any = None) -> Any:
        return self.base.zeros(shape, dtype=dtype)

    def ones(self, shape: Any, dtype: Any = None) -> Any:
        return self.base.ones(shape, dtype=dtype)

    def full(self, shape: Any, fill_value: Any, dtype: Any = None) -> Any:
        return self.base.full(shape, fill_value, dtype=dtype)

    def zeros_like(self, x: Any) -> Any:
        return self.base.zeros_like(primal_of(x))

    def ones_like(self, x: Any) -> Any:
        return self.base.ones_like(primal_of(x))

    def full_like(self, x: Any, fill_value: Any) -> Any:
        return self.base.full_like(primal_of(x), fill_value)

    def arange(self, start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Any:
        return self.base.arange(start, stop, step, dtype=dtype)

    def linspace(self, start: Any, stop: Any, num: int, endpoint: bool = True) -> Any:
        return self.base.linspace(start, stop, num, endpoint=endpoint)

    def eye(self, n: int, m: int | None = None, k: int = 0) -> Any:
        return self.base.eye(n, m, k=k)

    # ------------------------------------------------------------------ control
    def stop_gradient(self, x: Any) -> Any:
        """Keep the value, drop the higher coefficients (they become zeros)."""
        if not is_taylor(x):
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
            return super().cond(primal_of(pred), true_fn, false_fn, *operands)
        return linear.jax_cond(self, pred, true_fn, false_fn, *operands)
