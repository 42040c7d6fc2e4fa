r"""Cubic splines on a uniform grid, continuous in their second derivative, in every context.

A tabulated potential (:mod:`simdiff.pes.manybody.tabulated`) is a set of
samples :math:`y_k = g(x_0 + k\,\Delta x)`.  :class:`UniformSpline` is the
interpolating cubic spline with not-a-knot end conditions, the interpolant
that ASE's EAM calculator builds (``scipy.interpolate.InterpolatedUnivariateSpline``
with ``k=3`` puts its knots exactly there), held as one cubic per interval:

.. math:: s(x) = ((c_{k,0}\, t + c_{k,1})\, t + c_{k,2})\, t + c_{k,3},
          \qquad t = x - x_k,\ x_k \le x < x_{k+1}.

The spline and its first two derivatives are continuous, so the derivatives
that AD takes of it up to the Hessian are those of one function, and exact for
the interpolant.  Third derivatives jump at the knots.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.interpolate import CubicSpline

from simdiff.backends import Ops
from simdiff.errors import InputError

__all__ = ["SplineSet", "UniformSpline"]


class UniformSpline:
    """The not-a-knot cubic spline through samples on a uniform grid.

    Parameters
    ----------
    x0 : float
        The first grid point.
    dx : float
        The grid spacing (> 0).
    y : array_like, shape (n,)
        Samples at ``x0 + k dx``, ``n >= 4``; finite.
    name : str
        What the spline is (``"density of Cu"``), for error messages.

    Attributes
    ----------
    lo, hi : float
        The tabulated range ``[x0, x0 + (n - 1) dx]``; evaluations outside it
        are the caller's to refuse (:meth:`outside`), never extrapolated here
        silently: the traced evaluation clamps to the end intervals and
        :class:`~simdiff.pes.manybody.EAM` turns such a point into an error.

    Notes
    -----
    *Traced evaluation.*  :meth:`__call__` finds the interval of each ``x`` by
    a binary search over the knots, ``ceil(log2(n - 1))`` gathers of integer
    indices, the same number for every element (no float-to-integer
    conversion, which not every context offers), then evaluates the interval's
    cubic by Horner's rule.  The index is a constant of the evaluation, so AD
    differentiates the cubic alone.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> s = UniformSpline(0.0, 0.5, np.arange(8.0) ** 3 * 0.125)   # (x)^3 sampled
    >>> float(s(np.asarray(1.3), simdiff.get_ops("numpy")))       # a cubic is reproduced
    2.197
    >>> [round(float(v), 6) for v in s.derivatives(np.asarray(1.3))]
    [2.197, 5.07, 7.8]
    """

    def __init__(self, x0: float, dx: float, y: Any, *, name: str = "spline") -> None:
        values = np.asarray(y, dtype=np.float64)
        if values.ndim != 1 or values.size < 4:
            raise InputError(f"{name}: a cubic spline needs at least 4 samples; got shape "
                             f"{values.shape}")  # fmt: skip
        if not (math.isfinite(dx) and dx > 0.0 and math.isfinite(x0)):
            raise InputError(f"{name}: the grid needs a finite start and a positive spacing; got "
                             f"x0={x0}, dx={dx}")  # fmt: skip
        if not np.isfinite(values).all():
            k = int(np.flatnonzero(~np.isfinite(values))[0])
            raise InputError(f"{name}: sample {k} (x = {x0 + k * dx:.6g}) is {values[k]}")
        self.name = name
        self.x0, self.dx = float(x0), float(dx)
        self.n = values.size
        self.knots = self.x0 + self.dx * np.arange(self.n)
        self.lo, self.hi = float(self.knots[0]), float(self.knots[-1])
        spline = CubicSpline(self.knots, values, bc_type="not-a-knot")
        # one row per interval: (c0, c1, c2, c3) of ((c0 t + c1) t + c2) t + c3
        self.coefficients = np.ascontiguousarray(spline.c.T)
        self.values = values
        self._steps = max(1, math.ceil(math.log2(self.n - 1)))

    # ------------------------------------------------------------------ traced
    def interval(self, x: Any, ops: Ops) -> Any:
        """Index ``k`` of the interval ``[x_k, x_{k+1})`` holding ``x`` (clamped to 0..n-2)."""
        knots = ops.asarray(self.knots)
        shape = tuple(int(s) for s in x.shape)
        lo = ops.asarray(np.zeros(shape, dtype=np.int64))
        hi = ops.asarray(np.full(shape, self.n - 2, dtype=np.int64))
        xs = ops.stop_gradient(x)
        for _ in range(self._steps):  # invariant: lo <= k <= hi
            mid = (lo + hi + 1) // 2
            up = ops.take(knots, mid) <= xs
            lo = ops.where(up, mid, lo)
            hi = ops.where(up, hi, mid - 1)
        return lo

    def __call__(self, x: Any, ops: Ops) -> Any:
        """The spline at ``x`` (any shape, any context; clamped to the end intervals outside)."""
        k = self.interval(x, ops)
        t = x - ops.take(ops.asarray(self.knots), k)
        c = ops.take(ops.asarray(self.coefficients), k, axis=0)
        return ((c[..., 0] * t + c[..., 1]) * t + c[..., 2]) * t + c[..., 3]

    # ------------------------------------------------------------------ host
    def derivatives(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Value, first and second derivative at ``x`` (numpy), from the same cubics."""
        x = np.asarray(x, dtype=np.float64)
        k = np.clip(np.floor((x - self.x0) / self.dx), 0, self.n - 2).astype(np.int64)
        t = x - self.knots[k]
        c = self.coefficients[k]
        c0, c1, c2, c3 = c[..., 0], c[..., 1], c[..., 2], c[..., 3]
        value = ((c0 * t + c1) * t + c2) * t + c3
        first = (3.0 * c0 * t + 2.0 * c1) * t + c2
        second = 6.0 * c0 * t + 2.0 * c1
        return value, first, second

    def outside(self, x: np.ndarray, lo: float | None = None) -> np.ndarray:
        """Mask of the ``x`` outside the tabulated range (``[lo or self.lo, self.hi]``)."""
        low = self.lo if lo is None else lo
        return (x < low) | (x > self.hi)

    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the spline: its grid and samples."""
        return {"x0": self.x0, "dx": self.dx, "y": self.values}

    def __repr__(self) -> str:
        return f"UniformSpline({self.name!r}, {self.n} samples on [{self.lo:.6g}, {self.hi:.6g}])"


class SplineSet:
    """Several :class:`UniformSpline` on one grid, evaluated together: one interval search.

    Parameters
    ----------
    splines : sequence of UniformSpline
        Their knots must lie on the grid of the first (same spacing; a spline
        may start later, as a pair function tabulated from the second point:
        its intervals before its start hold zeros, outside its range).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> a = UniformSpline(0.0, 0.5, np.arange(8.0) ** 2)
    >>> b = UniformSpline(0.5, 0.5, np.arange(1.0, 8.0))
    >>> SplineSet([a, b])(np.asarray([1.25]), simdiff.get_ops("numpy")).round(6).tolist()
    [[6.25], [2.5]]
    """

    def __init__(self, splines: Any) -> None:
        splines = list(splines)
        first = splines[0]
        self.splines = splines
        self.grid = UniformSpline(first.x0, first.dx, np.zeros(first.n))  # knots and search
        stack = np.zeros((first.n - 1, len(splines), 4))
        for m, s in enumerate(splines):
            offset = round((s.x0 - first.x0) / first.dx)
            if s.dx != first.dx or abs(s.x0 - (first.x0 + offset * first.dx)) > 1e-9 * s.dx:
                raise InputError(f"{s.name}: its knots are not on the grid of {first.name}")
            stop = min(first.n - 1, offset + s.n - 1)
            stack[offset:stop, m] = s.coefficients[: stop - offset]
        self.stack = stack.reshape(first.n - 1, -1)

    def __call__(self, x: Any, ops: Ops) -> Any:
        """All the splines at ``x``: shape ``(len(splines), *x.shape)``, by one interval search."""
        grid = self.grid
        k = grid.interval(x, ops)
        t = x - ops.take(ops.asarray(grid.knots), k)
        c = ops.take(ops.asarray(self.stack), k, axis=0)  # (*x.shape, m * 4)
        c = ops.reshape(c, (*tuple(int(s) for s in x.shape), len(self.splines), 4))
        value = ((c[..., 0] * t[..., None] + c[..., 1]) * t[..., None] + c[..., 2]) * t[
            ..., None
        ] + c[..., 3]
        return ops.permute_dims(value, (value.ndim - 1, *range(value.ndim - 1)))

    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the set: its splines."""
        return {"splines": self.splines}
