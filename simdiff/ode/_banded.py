"""Banded linear solves for the stiff solvers: ``W`` as a block-tridiagonal matrix.

A matrix of lower and upper bandwidth at most ``b`` is block tridiagonal in
blocks of size ``b``: entry ``(i, j)`` with ``|i - j| <= b`` lies in the
diagonal block of row ``i``'s block or in a neighbour.  The block Thomas
algorithm (block LU without pivoting between blocks) factorises it with
``nb = ceil(dim / b)`` inverses of ``b x b`` blocks and two block products each,
about ``6 nb b^3`` flops against ``2/3 dim^3`` for a dense LU (``9 / nb^2`` of
it), and solves with ``2 nb`` block-vector products.

The three block diagonals are stacked arrays ``(nb, b, b)`` (the last block
padded with identity rows when ``b`` does not divide ``dim``), read by one
gather from wherever the entries are: a dense ``W``
(:func:`block_tridiagonal_factor`) or, in the Rosenbrock solvers, the
compressed Jacobian of :func:`~simdiff.ode._sparsity.compressed_rhs_jacobian`
(:func:`banded_w_solver`), so neither ``J`` nor ``W`` is ever a dense
``(dim, dim)`` array and a reverse pass never writes one.  The block sweeps
are ``ops.scan`` loops over the stacked blocks: one loop body, compiled once
on JAX whatever ``nb``.  Everything is ``ops.take``, ``ops.linalg.solve``,
``ops.matmul`` and ``ops.scan``, so it differentiates to every order in every
context.

Without pivoting between blocks the factorisation is stable for block
diagonally dominant matrices, which ``W = I - h gamma J`` of a diffusion
discretisation is; a vanishing pivot block raises (eager contexts) or gives
non-finite stages (JAX), and the step controller shrinks ``h`` (``W -> I``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BlockLayout", "banded_w_solver", "block_layout", "block_tridiagonal_factor"]


@dataclass(frozen=True, eq=False)
class BlockLayout:
    """Where the entries of the three block diagonals of a banded matrix are.

    ``rows`` and ``cols`` are ``(3, nb, b, b)`` integer arrays (diagonal,
    lower and upper blocks: block ``i`` of the lower diagonal is the matrix's
    block ``(i, i - 1)``, of the upper ``(i, i + 1)``), clipped into the
    matrix; ``valid`` says which entries lie inside it and on the pattern (the
    others, the padding and the missing neighbours of the first and last
    blocks, are zero).
    """

    dim: int
    b: int
    nb: int
    rows: np.ndarray
    cols: np.ndarray
    valid: np.ndarray


def block_layout(mask: np.ndarray, bandwidth: int) -> BlockLayout:
    """The :class:`BlockLayout` of a ``(dim, dim)`` boolean pattern in blocks of ``bandwidth``.

    Examples
    --------
    >>> import numpy as np
    >>> lay = block_layout(np.eye(5, dtype=bool) | np.eye(5, k=1, dtype=bool), 2)
    >>> (lay.nb, lay.b, lay.rows.shape)
    (3, 2, (3, 3, 2, 2))
    """
    dim = int(mask.shape[0])
    b = max(1, int(bandwidth))
    nb = -(-dim // b)
    i = np.arange(nb)[:, None, None]
    a = np.arange(b)[None, :, None]
    e = np.arange(b)[None, None, :]
    rows, cols, valid = [], [], []
    for k in (0, -1, 1):
        r = np.broadcast_to(i * b + a, (nb, b, b))
        c = np.broadcast_to((i + k) * b + e, (nb, b, b))
        inside = (r < dim) & (c >= 0) & (c < dim)
        rc, cc = np.clip(r, 0, dim - 1), np.clip(c, 0, dim - 1)
        rows.append(rc)
        cols.append(cc)
        valid.append(inside & mask[rc, cc])
    return BlockLayout(dim, b, nb, np.stack(rows), np.stack(cols), np.stack(valid))


def _blocks(values: Any, index: np.ndarray, valid: np.ndarray, ops: Any) -> Any:
    """``values.ravel()[index]`` where ``valid``, else 0: shape ``index.shape``."""
    got = ops.take(ops.reshape(values, (-1,)), np.ascontiguousarray(index))
    return ops.where(ops.asarray(valid), got, ops.zeros_like(got))


def _solver(D: Any, L: Any, U: Any, dim: int, ops: Any) -> Callable[[Any], Any]:
    """``x -> W^-1 x`` from the stacked blocks ``(nb, b, b)`` of a block-tridiagonal ``W``.

    ``D'_0 = D_0``, ``D'_i = D_i - L_i D'_{i-1}^-1 U_{i-1}``: one scan over the
    blocks here; each call of the returned function is a forward and a
    backward scan (block-vector products).
    """
    nb, b = int(D.shape[0]), int(D.shape[1])
    eye = ops.eye(b)

    def factor(g_prev: Any, x: Any) -> tuple[Any, Any]:
        d, lo, up = x
        d_inv = ops.linalg.solve(d - ops.matmul(lo, g_prev), eye)
        g = ops.matmul(d_inv, up)  # D'_i^-1 U_i
        return g, (d_inv, g)

    _, (d_inv, G) = ops.scan(factor, ops.zeros((b, b)), xs=(D, L, U))
    pad = nb * b - dim

    def solve(r: Any) -> Any:
        rp = ops.concat([r, ops.zeros((pad,))]) if pad else r

        def forward(y_prev: Any, x: Any) -> tuple[Any, Any]:
            di, lo, ri = x
            y = ops.matmul(di, ri - ops.matmul(lo, y_prev))
            return y, y

        def backward(x_next: Any, x: Any) -> tuple[Any, Any]:
            yi, gi = x
            xi = yi - ops.matmul(gi, x_next)
            return xi, xi

        _, Y = ops.scan(forward, ops.zeros((b,)), xs=(d_inv, L, ops.reshape(rp, (nb, b))))
        _, X = ops.scan(backward, ops.zeros((b,)), xs=(ops.flip(Y, axis=0), ops.flip(G, axis=0)))
        return ops.reshape(ops.flip(X, axis=0), (-1,))[:dim]

    return solve


def block_tridiagonal_factor(W: Any, bandwidth: int, ops: Any) -> Callable[[Any], Any]:
    """``x -> W^-1 x`` for a dense ``W`` of lower and upper bandwidth at most ``bandwidth``.

    Only the block-tridiagonal part of ``W`` is read (one gather per block
    diagonal); the factorisation is done here once, each call of the
    returned function is one forward and one backward block sweep.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.backends import get_ops
    >>> W = 4 * np.eye(6) + np.eye(6, k=1) + np.eye(6, k=-1)
    >>> x = block_tridiagonal_factor(W, 2, get_ops("numpy"))(np.arange(6.0))
    >>> bool(np.allclose(W @ x, np.arange(6.0)))
    True
    """
    dim = int(W.shape[0])
    lay = _dense_layout(dim, max(1, int(bandwidth)))
    flat = lay.rows * dim + lay.cols
    D, L, U = (_blocks(W, flat[k], lay.valid[k], ops) for k in range(3))
    pad = np.zeros((lay.nb, lay.b, lay.b))  # identity on the padding rows of the last block
    last = np.arange((lay.nb - 1) * lay.b, lay.nb * lay.b)
    pad[-1][np.arange(lay.b), np.arange(lay.b)] = last >= dim
    return _solver(D + ops.asarray(pad), L, U, dim, ops)


@functools.lru_cache(maxsize=16)
def _dense_layout(dim: int, b: int) -> BlockLayout:
    i, j = np.indices((dim, dim))
    return block_layout(np.abs(i - j) <= b, b)


def banded_w_solver(
    Bc: Any, hg: Any, colours: np.ndarray, lay: BlockLayout, ops: Any
) -> Callable[[Any], Any]:
    """``x -> W^-1 x`` for ``W = I - hg J``, ``J`` compressed: ``J[i, j] = Bc[i, colours[j]]``.

    ``Bc`` is the ``(dim, n_colours)`` compressed Jacobian on the pattern of
    ``lay``; the three block diagonals of ``W`` are gathered from it
    directly (``3 nb b^2`` entries, against ``dim^2`` for a dense ``W``).
    """
    ncol = int(Bc.shape[1])
    flat = lay.rows * ncol + np.asarray(colours)[lay.cols]
    D, L, U = (_blocks(Bc, flat[k], lay.valid[k], ops) for k in range(3))
    # I on the diagonal of every block row, the padding rows of the last block included
    eye = np.tile(np.eye(lay.b), (lay.nb, 1, 1))
    return _solver(ops.asarray(eye) - hg * D, -hg * L, -hg * U, lay.dim, ops)
