"""Fourier spectral derivatives on periodic grids with ``ops.fft``.

1-D fields use ``rfft``/``irfft``; 2-D fields ``rfft`` along the last axis and
``fft`` along the first.  Multipliers are complex numpy constants converted
with ``ops.asarray``, so physical parameters never multiply a complex array
(JAX's strict dtype promotion forbids float-by-complex products).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends import Ops
from simdiff.core.cache import RecentlyUsed
from simdiff.errors import InputError, ShapeError, UnsupportedError
from simdiff.pde.grid import Grid

__all__ = [
    "as_complex",
    "from_fourier",
    "laplacian_symbol",
    "spectral_derivative",
    "spectral_laplacian",
    "spectral_multiplier",
    "to_fourier",
]

_ZERO_J = np.zeros((), dtype=np.complex128)

#: The Fourier symbols of the grids in use (numpy), by (what, grid, orders, scale).
_SYMBOLS: RecentlyUsed[tuple[Any, ...], np.ndarray] = RecentlyUsed(64)


def kept_symbol(grid: Grid, orders: tuple[int, ...] | int, scale: float = 1.0) -> np.ndarray:
    """``scale`` times the complex Fourier symbol, computed once per ``(grid, orders, scale)``.

    ``orders`` a tuple: :func:`spectral_multiplier` (derivative orders per
    axis); an int ``power``: ``laplacian_symbol(grid) ** power``.  The array is
    shared by every later call: do not write to it.
    """

    def build() -> np.ndarray:
        if isinstance(orders, tuple):
            sym = spectral_multiplier(grid, orders)
        else:
            sym = laplacian_symbol(grid) ** int(orders) + 0j
        return np.asarray(scale * sym, dtype=np.complex128)

    key = ("tuple" if isinstance(orders, tuple) else "power", grid, orders, float(scale))
    return _SYMBOLS.get(key, build)


def as_complex(a: Any, ops: Ops) -> Any:
    """``a`` (real) as a complex array of the context, differentiably.

    A cast by ``ops.asarray(a, dtype=...)`` to the context's complex dtype
    (the ops namespace has no ``astype``, and JAX's strict promotion rejects
    ``a + 0j``), times a complex one made with the builtin ``complex``, which
    Dynamo (torch 2.13) cannot trace: **a deliberate graph break**.  Inductor
    differentiates a real-to-complex cast wrongly at second order when the
    result multiplies an ``rfft`` (compiled Hessian of ``heat_diffusivity``
    0.75 of the exact one; ``python -m validation.benchmarks.probe_inductor_complex_cast``),
    so a compiled derivative must not contain it: ``compile=True`` compiles
    around it (right values, tests/test_pde_compile.py), ``compile="auto"``
    (fullgraph) runs eager and says why.  Only a solve whose linear operator
    depends on a differentiated parameter reaches it (ETDRK4 coefficients or
    ``e^{TL}`` of a traced ``L``).  (A length-1 ``ops.fft.fft`` meets the
    same Inductor error when traced, and costs a transform per element.)

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import as_complex
    >>> as_complex(np.array([1.0, 2.0]), simdiff.get_ops("numpy"))
    array([1.+0.j, 2.+0.j])
    """
    one = ops.asarray(np.ones((), complex))  # builtin complex: the graph break, see above
    return ops.asarray(a, dtype=ops.asarray(_ZERO_J).dtype) * one


def check_periodic_field(grid: Grid, u: Any) -> int:
    """Raise unless ``grid`` is periodic and ``u`` ends with its shape; the number of
    leading (batch) axes."""
    if not grid.periodic:
        raise UnsupportedError(
            f"spectral derivatives need a periodic grid; this grid is {grid.boundary!r} "
            "(use method='fd')"
        )
    nd = u.ndim
    if tuple(u.shape[nd - grid.ndim :]) != grid.shape:
        raise ShapeError(
            f"field must end with the grid shape {grid.shape}; got shape {tuple(u.shape)}"
        )
    return nd - grid.ndim


def to_fourier(u: Any, ops: Ops, grid: Grid) -> Any:
    """Forward transform over the spatial axes: ``rfft`` on the last, ``fft`` on the first."""
    lead = check_periodic_field(grid, u)
    uh = ops.fft.rfft(u, axis=-1)
    if grid.ndim == 2:
        uh = ops.fft.fft(uh, axis=lead)
    return uh


def from_fourier(uh: Any, ops: Ops, grid: Grid) -> Any:
    """Inverse of :func:`to_fourier` (real output of shape ``(..., *grid.shape)``)."""
    if grid.ndim == 2:
        uh = ops.fft.ifft(uh, axis=uh.ndim - 2)
    return ops.fft.irfft(uh, n=grid.shape[-1], axis=-1)


def spectral_multiplier(grid: Grid, orders: tuple[int, ...]) -> np.ndarray:
    """The Fourier symbol ``prod_a (i k_a)^orders[a]`` on the transform grid (complex numpy).

    For odd orders the Nyquist wavenumber of an even-length axis is zeroed
    (its derivative is not representable by a real field).
    """
    if len(orders) != grid.ndim:
        raise InputError(f"need one derivative order per axis ({grid.ndim}); got {orders!r}")
    ks = grid.wavenumbers()
    sym = np.ones((), dtype=np.complex128)
    for axis, (k, m) in enumerate(zip(ks, orders, strict=True)):
        f = (1j * k) ** int(m)
        if m % 2 == 1 and grid.shape[axis] % 2 == 0:
            nyq = grid.shape[axis] // 2
            f = f.copy()
            f[nyq] = 0.0
        shape = [1] * grid.ndim
        shape[axis] = k.size
        sym = sym * f.reshape(shape)
    return np.asarray(sym, dtype=np.complex128)


def spectral_derivative(u: Any, ops: Ops, grid: Grid, deriv: int = 1, axis: int = 0) -> Any:
    """The ``deriv``-th derivative of periodic ``u`` along ``axis``, spectrally exact
    for trigonometric polynomials the grid resolves.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, spectral_derivative
    >>> g = Grid((16,), (2 * np.pi,))
    >>> x = g.coords()[0]
    >>> du = spectral_derivative(np.sin(3 * x), simdiff.get_ops("numpy"), g, 1)
    >>> bool(np.allclose(du, 3 * np.cos(3 * x)))
    True
    """
    orders = derivative_orders(grid, deriv, axis)
    return apply_symbol(u, ops, grid, lambda: ops.asarray(kept_symbol(grid, orders)))


def derivative_orders(grid: Grid, deriv: int, axis: int) -> tuple[int, ...]:
    """Derivative orders per axis of the ``deriv``-th derivative along ``axis`` (checked)."""
    if not 0 <= axis < grid.ndim:
        raise InputError(f"axis must be in [0, {grid.ndim}) for a {grid.ndim}-D grid; got {axis}")
    return tuple(int(deriv) if a == axis else 0 for a in range(grid.ndim))


def apply_symbol(u: Any, ops: Ops, grid: Grid, symbol: Callable[[], Any]) -> Any:
    """``F^-1 [symbol() * F u]`` for periodic ``u`` (checked first, then ``symbol()`` asked)."""
    check_periodic_field(grid, u)
    return from_fourier(to_fourier(u, ops, grid) * symbol(), ops, grid)


def spectral_laplacian(u: Any, ops: Ops, grid: Grid, power: int = 1) -> Any:
    """``(Laplacian)^power u`` spectrally (``power=2``: the biharmonic operator).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, spectral_laplacian
    >>> g = Grid((16, 8), (2 * np.pi, 2 * np.pi))
    >>> X, Y = g.mesh()
    >>> lap = spectral_laplacian(np.sin(2 * X) * np.cos(Y), simdiff.get_ops("numpy"), g)
    >>> bool(np.allclose(lap, -5 * np.sin(2 * X) * np.cos(Y)))
    True
    """
    return apply_symbol(u, ops, grid, lambda: ops.asarray(kept_symbol(grid, int(power))))


def laplacian_symbol(grid: Grid) -> np.ndarray:
    """``-|k|^2`` on the transform grid (real numpy array)."""
    ks = grid.wavenumbers()
    out = np.zeros(())
    for axis, k in enumerate(ks):
        shape = [1] * grid.ndim
        shape[axis] = k.size
        out = out - k.reshape(shape) ** 2
    return out
