"""The plumbing of the Taylor context: :class:`TaylorBase`, what every rule builds on.

A Taylor array carries the coefficients ``(K+1, *shape)`` of ``t -> f(x + t v)``
(:class:`~simdiff.backends.taylor.array.TaylorArray`); a plain array of the base
context is a constant.  :class:`TaylorBase` makes and reads them, aligns them
to a common number of trailing axes, and holds the base context, the order and
the coefficient recurrences (:class:`~simdiff.backends.taylor.series.Series`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends._base import Namespace
from simdiff.backends._ops_base import LoopOps
from simdiff.backends.taylor import linear
from simdiff.backends.taylor.array import TaylorArray, register_jax_pytree
from simdiff.backends.taylor.series import Series
from simdiff.errors import InputError

__all__ = ["TaylorBase", "is_taylor", "ndim_of", "primal_of"]


def is_taylor(x: Any) -> bool:
    """Whether ``x`` is a :class:`TaylorArray` (else a plain array of the base context)."""
    return isinstance(x, TaylorArray)


def ndim_of(x: Any) -> int:
    """The number of (trailing) axes of ``x``, a Taylor array, an array or a scalar."""
    return int(getattr(x, "ndim", np.ndim(x)))


def primal_of(x: Any) -> Any:
    """The value ``c_0`` of a Taylor array; a plain ``x`` as it is."""
    return x.coeffs[0] if is_taylor(x) else x


class TaylorBase(LoopOps):
    """The Taylor context's state and plumbing over ``base`` (see :class:`TaylorOps`).

    Parameters
    ----------
    base : Ops
        The context the coefficients are computed in.
    order : int
        Truncation order ``K >= 0``: arrays carry ``c_0 .. c_K``.
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
        return self.base.concrete(primal_of(x))

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
        c = x.coeffs if is_taylor(x) else self.s.lift(x)
        return c if nd is None else self.s.align(c, nd)

    def _plain(self, *xs: Any) -> list[Any]:
        """Host arrays (numpy) as arrays of the base context; everything else as it is."""
        return [self.base.asarray(x) if isinstance(x, np.ndarray) else x for x in xs]

    def _pair(self, x: Any, y: Any) -> tuple[Any, Any]:
        nd = max(ndim_of(x), ndim_of(y))
        return self.coeffs(x, nd), self.coeffs(y, nd)

    def _scaled(self, x: Any, p: Any, op: Callable[[Any, Any], Any]) -> TaylorArray:
        """``op(c, p)`` for Taylor ``x`` and a plain ``p`` acting on each coefficient."""
        return self.wrap(op(self.coeffs(x, max(x.ndim, ndim_of(p))), p))
