"""Where the blocks of term Hessians go in the Hessian of a sum of terms, dense or sparse.

A sum of ``m`` terms has a Hessian of ``dim x dim`` blocks, one per pair of
atoms that share a term.  :class:`BlockAssembly` sums per-term blocks into
them by one sparse product (any terms, repeated pairs); for distinct pairs of
a pairwise term (``term.of_difference``), :class:`PairLayout` writes the
blocks into a dense output batch by batch and :class:`PairCSR` gathers them
into CSR values by one cached permutation.  Each layout is built once per
index array: ``O(m)`` work and memory, the dense output adding ``n^2``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import scipy.sparse

__all__ = ["MIRROR_TILE", "RUN_MIN", "BlockAssembly", "Displacements", "PairCSR", "PairLayout"]

#: Rows and columns of the tiles in which a dense Hessian of many pairs is mirrored (a
#: multiple of 3, so that two tiles of ``MIRROR_TILE^2`` doubles stay in cache while the
#: lower triangle is written from the upper one).
MIRROR_TILE = 384

#: Shortest run of pairs ``(i, j), (i, j + 1), ...`` written into a dense Hessian by two
#: slice assignments; pairs outside such runs are written by one scattered assignment.
RUN_MIN = 16


class BlockAssembly:
    """How per-term ``dim x dim`` blocks add up to the Hessian's nonzero blocks (cached).

    ``rows``, ``cols``: block coordinates of the distinct nonzero blocks, sorted
    row-major; ``assembler``: a sparse ``(blocks, sources)`` matrix of
    coefficients, so that the blocks are ``assembler @ values`` for the
    ``(sources, dim * dim)`` per-term values; ``indptr``: block-row pointers.
    """

    def __init__(self, rows: np.ndarray, cols: np.ndarray, source: np.ndarray,
                 coef: np.ndarray, n_sources: int, n_particles: int) -> None:  # fmt: skip
        keys = rows * n_particles + cols
        uniq, inv = np.unique(keys, return_inverse=True)
        self.rows, self.cols = uniq // n_particles, uniq % n_particles
        self.assembler = scipy.sparse.csr_array(
            (coef, (inv.ravel(), source)), shape=(uniq.size, n_sources)
        )
        counts = np.bincount(self.rows, minlength=n_particles)
        self.indptr = np.concatenate([[0], np.cumsum(counts)])
        self.n_particles = n_particles
        self._flat: np.ndarray | None = None

    def dense(self, blocks: np.ndarray) -> np.ndarray:
        """The ``(n, n)`` matrix of ``blocks`` (``(len(rows), dim, dim)``): one scattered write."""
        dd = blocks.shape[1]
        n = self.n_particles * dd
        if self._flat is None:  # flat positions of every block entry, cached
            e = np.arange(dd)
            r = self.rows[:, None, None] * dd + e[None, :, None]
            c = self.cols[:, None, None] * dd + e[None, None, :]
            self._flat = (r * n + c).ravel()
        h = np.zeros(n * n)
        h[self._flat] = blocks.ravel()
        return h.reshape(n, n)


class PairLayout:
    """Where the blocks of distinct pairs go in a dense Hessian (built once per index array).

    Each unordered pair ``{a, b}`` occurs once, so its off-diagonal blocks are
    ``-B`` at ``(a, b)`` and ``-B^T`` at ``(b, a)``: written, not scatter-added
    (and symmetric by construction).  Batch by batch, while the blocks are in
    cache: the diagonal blocks are sums over the pairs of each atom (slices
    for runs, ``np.bincount`` for the other pairs); pairs in runs ``(a, b),
    (a, b + 1), ...`` of at least :data:`RUN_MIN` (all pairs of a cluster: one
    run per atom) are written by slices and the others through cached flat
    positions.
    """

    def __init__(self, index: np.ndarray, n_particles: int, dim: int) -> None:
        m = index.shape[0]
        lo, hi = index.min(axis=1), index.max(axis=1)
        self.n_particles, self.dim, self.m = n_particles, dim, m
        self.lo, self.hi = lo, hi
        self.distinct = np.unique(lo * n_particles + hi).size == m
        new = np.flatnonzero((lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1] + 1)) + 1
        starts = np.concatenate([[0], new]).astype(np.int64)
        ends = np.concatenate([new, [m]]).astype(np.int64)
        long = ends - starts >= RUN_MIN
        self.run_start, self.run_end = starts[long], ends[long]
        in_run = np.zeros(m + 1, dtype=np.int64)
        np.add.at(in_run, self.run_start, 1)
        np.add.at(in_run, self.run_end, -1)
        self.short = np.flatnonzero(np.cumsum(in_run)[:m] == 0)
        self._short_flat: np.ndarray | None = None
        self._csr: PairCSR | None = None
        #: pairs on at least a quarter of the blocks above the diagonal: the dense output
        #: gets the upper blocks -B only and its lower triangle by a tiled transposed copy
        #: (sequential writes) instead of -B^T block by block (a 24-byte write per row)
        self.mirror = 8 * m >= n_particles * (n_particles - 1)

    def _runs_in(self, start: int, stop: int) -> Iterator[tuple[int, int, int, int]]:
        """``(s, e, a, b)``: the part ``s..e`` of each run inside pairs ``start..stop``,
        its pairs ``(a, b), (a, b + 1), ...``."""
        first = int(np.searchsorted(self.run_end, start, side="right"))
        last = int(np.searchsorted(self.run_start, stop, side="left"))
        for r in range(first, last):
            s, e = max(int(self.run_start[r]), start), min(int(self.run_end[r]), stop)
            yield s, e, int(self.lo[s]), int(self.hi[s])

    def add_diagonal(self, diag: np.ndarray, blocks: np.ndarray, start: int) -> None:
        """Add ``blocks`` (pairs ``start..``, ``(c, dim, dim)``) onto their atoms' ``diag`` blocks.

        A run adds one sum to its first atom and a slice to the others; the
        other pairs go through ``np.bincount``.
        """
        stop = start + blocks.shape[0]
        for s, e, a, b in self._runs_in(start, stop):
            part = blocks[s - start : e - start]
            diag[a] += part.sum(axis=0)
            diag[b : b + e - s] += part
        k0, k1 = np.searchsorted(self.short, [start, stop])
        if k1 > k0:
            pairs = self.short[k0:k1]
            dd2 = self.dim * self.dim
            e2, n_out = np.arange(dd2), self.n_particles * dd2
            w = blocks[pairs - start].reshape(-1)
            flat = diag.reshape(-1)
            flat += np.bincount((self.lo[pairs, None] * dd2 + e2).ravel(), w, n_out)
            flat += np.bincount((self.hi[pairs, None] * dd2 + e2).ravel(), w, n_out)

    # ------------------------------------------------------------------ sparse
    def csr(self) -> PairCSR:
        """The CSR layout of the Hessian (built once per index array)."""
        if self._csr is None:
            self._csr = PairCSR(self.lo, self.hi, self.n_particles, self.dim)
        return self._csr

    # ------------------------------------------------------------------ dense
    def put_dense(self, h: np.ndarray, blocks: np.ndarray, start: int) -> None:
        """Write ``-B`` / ``-B^T`` of pairs ``start..`` into ``h`` of shape ``(N, dim, N, dim)``.

        With :attr:`mirror` only ``-B`` (above the diagonal); :meth:`finish_dense`
        copies it below.
        """
        stop = start + blocks.shape[0]
        neg = np.negative(blocks)
        for s, e, a, b in self._runs_in(start, stop):
            part = neg[s - start : e - start]
            h[a, :, b : b + e - s, :] = part.transpose(1, 0, 2)  # h[a, p, b+l, q] = -B_l[p, q]
            if not self.mirror:
                h[b : b + e - s, :, a, :] = part.transpose(0, 2, 1)  # h[b+l, q, a, p] = -B_l[p, q]
        k0, k1 = np.searchsorted(self.short, [start, stop])
        if k1 > k0:
            flat = self._short_positions()[k0:k1]
            part = neg[self.short[k0:k1] - start]
            h.reshape(-1)[flat[:, 0]] = part.reshape(k1 - k0, -1)
            if not self.mirror:
                h.reshape(-1)[flat[:, 1]] = part.transpose(0, 2, 1).reshape(k1 - k0, -1)

    def _short_positions(self) -> np.ndarray:
        """Flat positions of the blocks ``(lo, hi)`` and ``(hi, lo)`` of pairs outside runs."""
        if self._short_flat is None:
            dd = self.dim
            n, p = self.n_particles * dd, np.arange(dd)
            lo = self.lo[self.short][:, None, None]
            hi = self.hi[self.short][:, None, None]
            up = (lo * dd + p[:, None]) * n + hi * dd + p
            down = (hi * dd + p[:, None]) * n + lo * dd + p
            self._short_flat = np.stack([up, down], axis=1).reshape(-1, 2, dd * dd)
        return self._short_flat

    def finish_dense(self, h: np.ndarray, diag: np.ndarray) -> np.ndarray:
        """Lower triangle (:attr:`mirror`) and diagonal blocks ``(N, dim, dim)`` in: the matrix."""
        n = self.n_particles * self.dim
        if self.mirror:  # lower triangle = transpose of the upper one, tile by tile
            flat, t = h.reshape(n, n), MIRROR_TILE
            for i in range(0, n, t):
                flat[i : i + t, i : i + t] += flat[i : i + t, i : i + t].T  # zero below
                for j in range(i + t, n, t):
                    flat[j : j + t, i : i + t] = flat[i : i + t, j : j + t].T
        atoms = np.arange(self.n_particles)
        h[atoms, :, atoms, :] = diag
        return h.reshape(n, n)


class Displacements:
    """``pos[second] - pos[first]``, rows gathered when a batch asks for them.

    Sliced like the ``(m, dim)`` array it stands for: a batch's displacements
    are made while it runs (in cache; two ``np.take`` of the batch's rows
    rather than fancy indexing of all ``m`` rows at once).
    """

    def __init__(self, pos: np.ndarray, first: np.ndarray, second: np.ndarray) -> None:
        self.pos, self.first, self.second = pos, first, second
        self.shape = (first.size, pos.shape[1])

    def __getitem__(self, rows: slice) -> np.ndarray:
        pos = self.pos
        return np.take(pos, self.second[rows], axis=0) - np.take(pos, self.first[rows], axis=0)


class PairCSR:
    """The CSR structure of the Hessian of distinct pairs and where each entry comes from.

    The values are gathered from one array ``src`` of ``m + N`` blocks: ``-B_t``
    of pair ``t`` (placed at ``(lo, hi)``, and transposed at ``(hi, lo)``), then
    the diagonal block of each atom.  ``perm[e]``: the flat position in ``src``
    of CSR entry ``e`` (canonical CSR: rows in order, sorted column indices);
    ``incidence``: the ``(N, m)`` 0/1 matrix of atoms and pairs, so that the
    diagonal blocks are ``incidence @ B`` (each the sum of its atom's pair blocks).
    """

    def __init__(self, lo: np.ndarray, hi: np.ndarray, n_particles: int, dim: int) -> None:
        m, big, dd = lo.size, n_particles, dim
        atoms = np.arange(big)
        # every nonzero block: (block row, block col, source block, transposed?)
        brow = np.concatenate([lo, hi, atoms])
        bcol = np.concatenate([hi, lo, atoms])
        bsrc = np.concatenate([np.arange(m), np.arange(m), m + atoms])
        btr = np.concatenate([np.zeros(m, bool), np.ones(m, bool), np.zeros(big, bool)])
        order = np.lexsort((bcol, brow))
        brow, bcol, bsrc, btr = brow[order], bcol[order], bsrc[order], btr[order]
        per_row = np.bincount(brow, minlength=big)  # blocks per block row (>= 1: diagonal)
        bptr = np.concatenate([[0], np.cumsum(per_row)])
        rank = np.arange(brow.size) - bptr[brow]  # place of each block within its block row
        p = np.arange(dd)
        # entry (p, q) of block j of block row a: dd * dd * bptr[a] + p * dd * k_a + dd * j + q
        pos = (dd * dd * bptr[brow][:, None, None] + p[:, None] * dd * per_row[brow][:, None, None]
               + dd * rank[:, None, None] + p[None, None, :])  # fmt: skip
        within = np.where(btr[:, None, None], p[None, :] * dd + p[:, None], p[:, None] * dd + p)
        nnz = brow.size * dd * dd
        itype = np.int32 if nnz < 2**31 else np.int64  # scipy's index type
        self.perm = np.empty(nnz, dtype=np.intp)  # np.take would convert any other type
        self.perm[pos.ravel()] = (dd * dd * bsrc[:, None, None] + within).ravel()
        self.indices = np.empty(nnz, dtype=itype)
        self.indices[pos.ravel()] = np.broadcast_to(dd * bcol[:, None, None] + p, pos.shape).ravel()
        rows_len = np.repeat(dd * per_row, dd)  # entries of each of the n rows
        self.indptr = np.concatenate([[0], np.cumsum(rows_len)]).astype(itype)
        self.incidence = scipy.sparse.csr_array(
            (np.ones(2 * m), (np.concatenate([lo, hi]), np.tile(np.arange(m), 2))), shape=(big, m)
        )
        self.shape = (big * dd, big * dd)

    def matrix(self, src: np.ndarray) -> scipy.sparse.csr_array:
        """The Hessian from ``src`` (``(m + N, dim, dim)``: ``-B_t``, then the diagonal blocks)."""
        data = np.take(src.reshape(-1), self.perm)
        h = scipy.sparse.csr_array((data, self.indices.copy(), self.indptr.copy()),
                                   shape=self.shape)  # fmt: skip
        h.has_sorted_indices = True
        return h
