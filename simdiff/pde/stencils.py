"""Finite-difference derivative stencils of selectable order over ``ops``.

Weights come from Fornberg's algorithm (exact rationals up to rounding).
Periodic grids apply the central stencil with ``ops.roll``; Dirichlet grids
append the boundary values with ``ops.concat`` and switch to one-sided
stencils of the same order of accuracy at the nodes whose central stencil
would leave the domain, so the order holds up to the boundary.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from simdiff.backends import Ops
from simdiff.errors import InputError, ShapeError
from simdiff.pde.grid import Grid

__all__ = [
    "ORDERS",
    "central_stencil",
    "fd_derivative",
    "fd_laplacian",
    "fd_weights",
    "stencil_spectral_radius",
]

#: Supported orders of accuracy.
ORDERS = (2, 4, 6)


def fd_weights(offsets: Any, deriv: int) -> np.ndarray:
    """Finite-difference weights for the ``deriv``-th derivative at 0 from nodes ``offsets``.

    Fornberg (1988)'s recursion; the result ``w`` satisfies
    ``f^(deriv)(0) ~ sum_j w[j] f(offsets[j])`` (unit spacing), with
    accuracy ``len(offsets) - deriv`` for general node sets.

    Examples
    --------
    >>> from simdiff.pde import fd_weights
    >>> fd_weights([-1, 0, 1], 2)
    array([ 1., -2.,  1.])

    References
    ----------
    B. Fornberg, "Generation of finite difference formulas on arbitrarily
    spaced grids", Math. Comp. 51 (1988) 699-706.
    """
    z = np.asarray(offsets, dtype=np.float64)
    n, m = z.size, int(deriv)
    if m < 0 or n <= m:
        raise InputError(f"need more than deriv={deriv} nodes and deriv >= 0; got {n} nodes")
    c = np.zeros((n, m + 1))
    c1, c4 = 1.0, z[0]
    c[0, 0] = 1.0
    for i in range(1, n):
        mn = min(i, m)
        c2, c5, c4 = 1.0, c4, z[i]
        for j in range(i):
            c3 = z[i] - z[j]
            c2 *= c3
            if j == i - 1:
                for k in range(mn, 0, -1):
                    c[i, k] = c1 * (k * c[i - 1, k - 1] - c5 * c[i - 1, k]) / c2
                c[i, 0] = -c1 * c5 * c[i - 1, 0] / c2
            for k in range(mn, 0, -1):
                c[j, k] = (c4 * c[j, k] - k * c[j, k - 1]) / c3
            c[j, 0] = c4 * c[j, 0] / c3
        c1 = c2
    return c[:, m]


def _check(deriv: int, order: int) -> None:
    if order not in ORDERS:
        raise InputError(f"stencil order must be one of {ORDERS}; got {order!r}")
    if deriv not in (1, 2, 3, 4):
        raise InputError(f"stencil derivative must be 1, 2, 3 or 4; got {deriv!r}")


@cache
def central_stencil(deriv: int, order: int) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Offsets and weights of the central stencil of ``deriv`` with accuracy ``order``.

    Examples
    --------
    >>> from simdiff.pde import central_stencil
    >>> offsets, weights = central_stencil(1, 4)
    >>> offsets, [round(w * 12, 12) for w in weights]
    ((-2, -1, 0, 1, 2), [1.0, -8.0, 0.0, 8.0, -1.0])
    """
    _check(deriv, order)
    h = (deriv - 1) // 2 + order // 2
    offsets = tuple(range(-h, h + 1))
    w = fd_weights(offsets, deriv)
    w[np.abs(w) < 1e-13 * np.abs(w).max()] = 0.0
    return offsets, tuple(float(v) for v in w)


def stencil_spectral_radius(deriv: int, order: int, spacing: float) -> float:
    """``max |sum_m w_m exp(i m theta)| / spacing**deriv``: the largest eigenvalue
    modulus of the periodic stencil (used by the explicit stability checks).

    Examples
    --------
    >>> from simdiff.pde import stencil_spectral_radius
    >>> stencil_spectral_radius(2, 2, 0.5)
    16.0
    """
    offsets, w = central_stencil(deriv, order)
    theta = np.linspace(0.0, np.pi, 2049)
    symbol = np.exp(1j * np.outer(theta, offsets)) @ np.asarray(w)
    return float(np.abs(symbol).max() / spacing**deriv)


def _sl(ndim: int, axis: int, start: int, stop: int) -> tuple[slice, ...]:
    idx = [slice(None)] * ndim
    idx[axis] = slice(start, stop)
    return tuple(idx)


def fd_derivative(
    u: Any, ops: Ops, grid: Grid, deriv: int = 1, order: int = 2, axis: int = 0
) -> Any:
    """The ``deriv``-th derivative of ``u`` along spatial ``axis`` by finite differences.

    Parameters
    ----------
    u : array, shape ``(..., *grid.shape)``
        Field values at the grid's unknowns (leading axes, e.g. the components
        of a system, are carried along).
    ops : the ops namespace
    grid : Grid
    deriv : {1, 2, 3, 4}
    order : {2, 4, 6}
        Order of accuracy (global, boundary nodes included).
    axis : int
        Spatial axis (0 or 1 for 2-D grids).

    Returns
    -------
    array of the shape of ``u``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, fd_derivative
    >>> g = Grid((64,), (2 * np.pi,))
    >>> x = g.coords()[0]
    >>> du = fd_derivative(np.sin(x), simdiff.get_ops("numpy"), g, 1, order=6)
    >>> bool(np.abs(du - np.cos(x)).max() < 1e-7)
    True
    """
    _check(deriv, order)
    if not 0 <= axis < grid.ndim:
        raise InputError(f"axis must be in [0, {grid.ndim}) for a {grid.ndim}-D grid; got {axis}")
    nd = u.ndim
    if tuple(u.shape[nd - grid.ndim :]) != grid.shape:
        raise ShapeError(
            f"field must end with the grid shape {grid.shape}; got shape {tuple(u.shape)}"
        )
    ax = nd - grid.ndim + axis
    h = grid.spacings[axis]
    offsets, w = central_stencil(deriv, order)
    scale = 1.0 / h**deriv
    if grid.periodic:
        out: Any = 0.0
        for m, wm in zip(offsets, w, strict=True):
            if wm != 0.0:
                out = out + wm * (u if m == 0 else ops.roll(u, -m, axis=ax))
        return out * scale
    return _dirichlet(u, ops, grid, deriv, order, ax, offsets, w) * scale


def _dirichlet(u, ops, grid, deriv, order, ax, offsets, w):
    nd, n = u.ndim, int(u.shape[ax])
    half = offsets[-1]
    width = deriv + order  # nodes of the one-sided stencils (boundary node included)
    if n + 2 < max(width, 2 * half + 1):
        raise ShapeError(
            f"a Dirichlet stencil of derivative {deriv} and order {order} needs at least "
            f"{max(width, 2 * half + 1) - 2} unknowns along the axis; got {n}"
        )
    edge = u[_sl(nd, ax, 0, 1)] * 0.0
    lo, hi = grid.boundary_values
    ue = ops.concat([edge + lo, u, edge + hi], axis=ax)  # nodes 0..n+1
    central = None
    for m, wm in zip(offsets, w, strict=True):
        if wm != 0.0:
            term = wm * ue[_sl(nd, ax, half + m, n + 2 - half + m)]
            central = term if central is None else central + term
    if half == 1:
        return central
    left, right = [], []
    for e in range(1, half):  # node e (unknown e - 1) and its mirror n + 1 - e
        wl = fd_weights(np.arange(width) - e, deriv)
        wr = fd_weights(np.arange(n + 2 - width, n + 2) - (n + 1 - e), deriv)
        left.append(sum(float(c) * ue[_sl(nd, ax, j, j + 1)] for j, c in enumerate(wl)))
        right.insert(
            0,
            sum(
                float(c) * ue[_sl(nd, ax, n + 2 - width + j, n + 3 - width + j)]
                for j, c in enumerate(wr)
            ),
        )
    return ops.concat([*left, central, *right], axis=ax)


def fd_laplacian(u: Any, ops: Ops, grid: Grid, order: int = 2) -> Any:
    """Sum of second derivatives along every spatial axis (see :func:`fd_derivative`).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, fd_laplacian
    >>> g = Grid((32, 32), (2 * np.pi, 2 * np.pi))
    >>> X, Y = g.mesh()
    >>> lap = fd_laplacian(np.sin(X) * np.cos(Y), simdiff.get_ops("numpy"), g, order=4)
    >>> bool(np.abs(lap + 2 * np.sin(X) * np.cos(Y)).max() < 1e-3)
    True
    """
    out = fd_derivative(u, ops, grid, 2, order, 0)
    for axis in range(1, grid.ndim):
        out = out + fd_derivative(u, ops, grid, 2, order, axis)
    return out
