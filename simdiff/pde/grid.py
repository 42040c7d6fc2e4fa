"""Uniform grids in one and two dimensions with periodic or Dirichlet boundaries.

A grid stores only numbers (numpy); the fields living on it are arrays of
the active ``ops`` context with shape :attr:`Grid.shape`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.backends import Ops
from simdiff.errors import InputError, InputTypeError, ShapeError, UnsupportedError

__all__ = ["BOUNDARIES", "Grid"]

#: Supported boundary conditions.
BOUNDARIES = ("periodic", "dirichlet")


@dataclass(frozen=True)
class Grid:
    """A uniform grid on ``[origin, origin + length]`` along each of one or two axes.

    Parameters
    ----------
    shape : tuple of int
        Unknowns per axis, ``(n,)`` or ``(nx, ny)``.
    lengths : tuple of float
        Domain length per axis (same number of entries as ``shape``).
    boundary : {"periodic", "dirichlet"}
        ``"periodic"``: nodes ``origin + j*dx``, ``j = 0..n-1``, ``dx = length/n``.
        ``"dirichlet"``: the unknowns are the interior nodes ``origin + (j+1)*dx``,
        ``j = 0..n-1``, ``dx = length/(n+1)``; the boundary nodes hold the fixed
        values ``boundary_values``.
    boundary_values : tuple of float
        ``(low, high)``: the Dirichlet values at the low and high end of every
        axis (default ``(0.0, 0.0)``); ignored for periodic grids.
    origin : float
        Left end of every axis (default 0).

    Examples
    --------
    >>> from simdiff.pde import Grid
    >>> g = Grid((8,), (2.0,))
    >>> g.dx, g.size, g.coords()[0][:3]
    (0.25, 8, array([0.  , 0.25, 0.5 ]))
    >>> Grid((4,), (1.0,), boundary="dirichlet").coords()[0]
    array([0.2, 0.4, 0.6, 0.8])
    """

    shape: tuple[int, ...]
    lengths: tuple[float, ...]
    boundary: str = "periodic"
    boundary_values: tuple[float, float] = (0.0, 0.0)
    origin: float = 0.0

    def __post_init__(self) -> None:
        shape = tuple(self.shape) if isinstance(self.shape, (tuple, list)) else (self.shape,)
        lengths = (
            tuple(self.lengths) if isinstance(self.lengths, (tuple, list)) else (self.lengths,)
        )
        if len(shape) not in (1, 2):
            raise ShapeError(f"Grid supports 1-D and 2-D grids; got shape {shape}")
        if any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) for n in shape):
            raise InputTypeError(f"Grid shape must be integers; got {shape!r}")
        if any(int(n) < 4 for n in shape):
            raise ShapeError(f"Grid needs at least 4 points per axis; got shape {shape}")
        if len(lengths) != len(shape):
            raise ShapeError(
                f"Grid lengths must have one entry per axis ({len(shape)}); got {lengths!r}"
            )
        # math, not numpy: Dynamo traces host numpy as tensors and cannot branch on them
        if not all(math.isfinite(float(L)) and float(L) > 0 for L in lengths):
            raise InputError(f"Grid lengths must be positive and finite; got {lengths!r}")
        if self.boundary not in BOUNDARIES:
            raise UnsupportedError(
                f"unsupported boundary {self.boundary!r}; expected one of {list(BOUNDARIES)}"
            )
        bv = tuple(float(v) for v in self.boundary_values)
        if len(bv) != 2 or not all(math.isfinite(v) for v in bv):
            raise InputError(
                "boundary_values must be two finite numbers (low, high); "
                f"got {self.boundary_values!r}"
            )
        object.__setattr__(self, "shape", tuple(int(n) for n in shape))
        object.__setattr__(self, "lengths", tuple(float(L) for L in lengths))
        object.__setattr__(self, "boundary_values", bv)
        object.__setattr__(self, "origin", float(self.origin))

    # ------------------------------------------------------------------ facts
    @property
    def ndim(self) -> int:
        """Number of spatial dimensions (1 or 2)."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of unknowns, ``prod(shape)``."""
        return int(np.prod(self.shape))

    @property
    def periodic(self) -> bool:
        """Whether the boundary is periodic."""
        return self.boundary == "periodic"

    @property
    def spacings(self) -> tuple[float, ...]:
        """Grid spacing per axis."""
        extra = 0 if self.periodic else 1
        return tuple(L / (n + extra) for n, L in zip(self.shape, self.lengths, strict=True))

    @property
    def dx(self) -> float:
        """Spacing along the first axis (``spacings[0]``)."""
        return self.spacings[0]

    def coords(self) -> tuple[np.ndarray, ...]:
        """Node coordinates per axis (1-D numpy arrays of the unknowns' positions)."""
        first = 0 if self.periodic else 1
        return tuple(
            self.origin + h * np.arange(first, first + n)
            for n, h in zip(self.shape, self.spacings, strict=True)
        )

    def mesh(self) -> tuple[np.ndarray, ...]:
        """Coordinates broadcast to :attr:`shape` (``indexing="ij"``)."""
        return tuple(np.meshgrid(*self.coords(), indexing="ij"))

    def wavenumbers(self) -> tuple[np.ndarray, ...]:
        """Angular wavenumbers per axis in numpy's FFT order (periodic grids only).

        The last axis has the ``rfft`` wavenumbers ``2*pi*rfftfreq(n, dx)``,
        the others the full ``fft`` ones.
        """
        if not self.periodic:
            raise UnsupportedError(
                f"Fourier wavenumbers need a periodic grid; this grid is {self.boundary!r}"
            )
        ks = []
        for axis, (n, h) in enumerate(zip(self.shape, self.spacings, strict=True)):
            # numpy's rfftfreq/fftfreq written out (the same operations, the same values):
            # Dynamo's numpy emulation computes np.fft.rfftfreq in float32
            if axis == self.ndim - 1:
                index = np.arange(0, n // 2 + 1)
            else:
                index = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
            ks.append(2 * np.pi * (index * (1.0 / (n * h))))
        return tuple(ks)

    # ------------------------------------------------------------------ checks
    def check_field(self, u: Any, what: str = "field", n_fields: int = 1) -> None:
        """Raise :class:`~simdiff.ShapeError` unless ``u`` has the grid's shape.

        ``n_fields > 1`` expects a leading axis of that length (``(n_fields, *shape)``).
        """
        expected = self.shape if n_fields == 1 else (n_fields, *self.shape)
        got = tuple(int(s) for s in np.shape(u))
        if got != expected and got != (int(np.prod(expected)),):
            raise ShapeError(
                f"{what} must have shape {expected} (or flat ({int(np.prod(expected))},)) "
                f"to match the grid; got {got}"
            )

    def integrate(self, u: Any, ops: Ops) -> Any:
        """Rectangle-rule integral of ``u`` over the domain (exact for trig. polynomials
        on periodic grids); ``u`` of shape :attr:`shape`.

        Examples
        --------
        >>> import numpy as np, simdiff
        >>> from simdiff.pde import Grid
        >>> g = Grid((16,), (2 * np.pi,))
        >>> round(float(g.integrate(np.cos(g.coords()[0]) ** 2, simdiff.get_ops("numpy"))), 10)
        3.1415926536
        """
        return ops.sum(u) * float(np.prod(self.spacings))
