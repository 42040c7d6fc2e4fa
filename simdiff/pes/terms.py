r"""Energies that are sums of terms over small groups of atoms: pairs, triples, quadruples.

.. math:: E(x) = \sum_{t=1}^{m} \varepsilon\bigl(R_{a_{t,1}}, \dots, R_{a_{t,k}}\bigr)

with positions :math:`R = x` reshaped to ``(N, dim)`` and an index array
``index`` of shape ``(m, k)`` (bonds ``k = 2``, angles ``k = 3``, dihedrals
``k = 4``).  The term function is written once against ``ops`` like any
problem, over a leading batch of terms: ``term(r, ops)`` takes ``r`` of shape
``(..., k, dim)`` and returns shape ``(...)`` (index with ``r[..., i, :]``,
reduce with ``axis=-1``), so the same function gives all ``m`` energies at once
and the energy of one term.

Its derivatives are assembled from per-term derivatives: the gradient and
Hessian-vector products by AD of the sum (``O(m)`` each), the Hessian from the
``m`` term Hessians of shape ``(k dim, k dim)``, computed in one vmapped call
of the backend and scattered into the ``(n, n)`` matrix (``O(m)`` work plus the
output; ``scipy.sparse`` on request).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from simdiff.backends import get_backend
from simdiff.core.derivatives import cached_derivatives
from simdiff.core.cache import RecentlyUsed
from simdiff.core.fingerprint import Versioned
from simdiff.core.problem import Problem
from simdiff.errors import (
    InputError,
    InvalidIndexError,
    NeighbourListError,
    NonFiniteError,
    ShapeError,
)
from simdiff.pes.geometry import (
    Cell,
    ClusterInfo,
    check_masses,
    image_displacement,
    image_displacement_np,
    pair_index,
)

if TYPE_CHECKING:
    import scipy.sparse

__all__ = ["TermEnergy", "check_index", "structured_hessian", "term_energy"]

#: Terms per vectorised call of the term Hessian (larger sums are computed in batches of this).
TERM_CHUNK = 2**18

#: Pair blocks per vectorised call on the dense pairwise path: each batch is checked, summed
#: into the diagonal blocks and written into the output while it is still in cache.
PAIR_CHUNK = 2**15

#: Rows and columns of the tiles in which a dense Hessian of many pairs is mirrored (a
#: multiple of 3; two tiles of 384^2 doubles stay in cache; 35 vs 60 ms for the lower
#: triangle of LJ-2000 written block by block).
MIRROR_TILE = 384

#: Shortest run of pairs ``(i, j), (i, j + 1), ...`` written into a dense Hessian by two
#: slice assignments; pairs outside such runs are written by one scattered assignment.
RUN_MIN = 16

#: Floats of intermediates per term and tangent in the dense AD Hessian, per coordinate of a
#: term.  Measured for Lennard-Jones pairs, all pairs and with a cutoff, N = 38..150
#: (``python -m validation.benchmarks.bench_pes_memory``, docs/pes.md section 7): JAX's compiled
#: executable holds 2.2-2.5 (its own memory analysis); torch.func's forward-over-reverse
#: Hessian adds 4.0-9.5 to the resident set at N = 150 and 8.9-14.4 at N = 75, where its
#: fixed cost of about 73 MB is a third of the peak (allocator slack included).  12 is above
#: both at the largest size, where the guard matters, so it chunks or refuses before either
#: runs out.
_DENSE_FLOATS_PER_TERM_COORD = 12


def check_index(index: Any, n_particles: int, what: str = "index") -> np.ndarray:
    """Validate an index array of atoms per term; return it as int64 of shape ``(m, k)``.

    Raises
    ------
    ShapeError
        Not of shape ``(m, k)`` with ``k >= 1``.
    InvalidIndexError
        Not integers, an atom out of ``0..n_particles-1``, or one atom twice in a term;
        the message names the term (row) and the atom.

    Examples
    --------
    >>> check_index([[0, 1], [1, 2]], 3).tolist()
    [[0, 1], [1, 2]]
    >>> check_index([[0, 1], [2, 2]], 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    simdiff.errors.InvalidIndexError: index: term 1 has atom 2 twice (atoms [2, 2]); the atoms ...
    """
    a = np.asarray(index)
    if a.ndim != 2 or a.shape[1] < 1:
        raise ShapeError(f"{what} must have shape (m, k): m terms of k atoms; got shape {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        else:
            raise InvalidIndexError(f"{what} must hold integer atom numbers; got dtype {a.dtype}")
    a = a.astype(np.int64)
    bad = np.argwhere((a < 0) | (a >= n_particles))
    if bad.size:
        t, j = (int(v) for v in bad[0])
        raise InvalidIndexError(
            f"{what}: term {t} refers to atom {a[t, j]} ({what}[{t}, {j}]), out of range for "
            f"{n_particles} atoms (valid 0..{n_particles - 1})"
        )
    if a.shape[1] > 1 and a.shape[0]:
        s = np.sort(a, axis=1)
        rep = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
        if rep.size:
            t = int(rep[0])
            atom = int(s[t, 1:][s[t, 1:] == s[t, :-1]][0])
            raise InvalidIndexError(
                f"{what}: term {t} has atom {atom} twice (atoms {a[t].tolist()}); the atoms "
                "of a term must be distinct"
            )
    return a


class _TermSum:
    """The sum of ``rows`` terms as a problem function of their ``rows * k * dim`` coordinates.

    The Hessian of this sum is block-diagonal: block ``t`` is the Hessian of
    term ``t`` alone (picklable).
    """

    def __init__(self, term: Callable[[Any, Any], Any], rows: int, k: int, dim: int) -> None:
        self.term, self.rows, self.k, self.dim = term, rows, k, dim
        self.__name__ = f"{getattr(term, '__name__', 'term')}_sum{rows}"

    def __call__(self, y: Any, ops: Any) -> Any:
        return ops.sum(self.term(ops.reshape(y, (self.rows, self.k, self.dim)), ops))


class _DifferenceSum:
    """The sum of ``rows`` pair terms as a function of their displacements ``r_1 - r_0``.

    Block-diagonal Hessian, block ``t`` the ``dim x dim`` one of pair ``t`` (picklable).
    """

    def __init__(self, term: Any, rows: int, dim: int) -> None:
        self.term, self.rows, self.dim = term, rows, dim
        self.__name__ = f"{getattr(term, '__name__', 'term')}_of_difference_sum{rows}"

    def __call__(self, d: Any, ops: Any) -> Any:
        return ops.sum(self.term.of_difference(ops.reshape(d, (self.rows, self.dim)), ops))


#: Term-sum problems shared by every energy with an equal term function (their compiled
#: Hessian-vector products with them): rebuilding a problem at a new geometry, with a
#: term count in the same bucket (:func:`bucket_size`), does not recompile.
_SHARED_MAX = 64
_SHARED: RecentlyUsed[tuple[Any, ...], Problem] = RecentlyUsed(_SHARED_MAX)


def _shared_problem(kind: str, term: Any, k: int, dim: int, rows: int) -> Problem:
    key = (kind, term, k, dim, rows)
    try:
        hash(key)
    except TypeError:  # an unhashable term: a problem of its own
        return _make_problem(kind, term, k, dim, rows)
    return _SHARED.get(key, lambda: _make_problem(kind, term, k, dim, rows))


def _make_problem(kind: str, term: Any, k: int, dim: int, rows: int) -> Problem:
    name = getattr(term, "__name__", "term")
    if kind == "difference":
        return Problem(_DifferenceSum(term, rows, dim), np.ones(rows * dim), name=name)
    # a placeholder point of one term, generic (distinct atoms, not collinear: an angle or
    # a dihedral is defined there), for the problem's shape check
    y0 = np.random.default_rng(0).standard_normal((k, dim))
    return Problem(_TermSum(term, rows, k, dim), np.tile(y0.reshape(-1), rows), name=name)


#: Unit tangents tiled over the rows, ``(w, rows * w)``, per ``(rows, w)`` (see ``_tangents``).
_TANGENTS: RecentlyUsed[tuple[int, int], np.ndarray] = RecentlyUsed(_SHARED_MAX)


def _tangents(rows: int, w: int) -> np.ndarray:
    """``w`` directions, direction ``j`` the unit vector ``e_j`` in every row (cached)."""

    def build() -> np.ndarray:
        v = np.zeros((w, rows, w))
        v[np.arange(w), :, np.arange(w)] = 1.0
        return v.reshape(w, rows * w)

    return _TANGENTS.get((rows, w), build)


def bucket_size(m: int) -> int:
    """The smallest size ``>= m`` of the form ``s * 2**e`` with ``s`` in 4..7 (at most 1.25x ``m``).

    Batches of term Hessians are padded to these sizes, so that a compiled
    vectorised call serves every number of terms in its bucket: a neighbour list
    whose length changes with the geometry does not recompile each time.

    Examples
    --------
    >>> [bucket_size(m) for m in (1, 5, 9, 100, 1000)]
    [4, 5, 10, 112, 1024]
    """
    if m <= 4:
        return 4
    e = max(int(m - 1).bit_length() - 3, 0)
    return -(-m // 2**e) * 2**e


class _BlockAssembly:
    """How per-term ``dim x dim`` blocks add up to the Hessian's nonzero blocks (cached).

    ``rows``, ``cols``: block coordinates of the distinct nonzero blocks, sorted
    row-major; ``assembler``: a sparse ``(blocks, sources)`` matrix of
    coefficients, so that the blocks are ``assembler @ values`` for the
    ``(sources, dim * dim)`` per-term values; ``indptr``: block-row pointers.
    """

    def __init__(self, rows: np.ndarray, cols: np.ndarray, source: np.ndarray,
                 coef: np.ndarray, n_sources: int, n_particles: int) -> None:  # fmt: skip
        import scipy.sparse

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


class _PairLayout:
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
        self._csr: _PairCSR | None = None
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
    def csr(self) -> _PairCSR:
        """The CSR layout of the Hessian (built once per index array)."""
        if self._csr is None:
            self._csr = _PairCSR(self.lo, self.hi, self.n_particles, self.dim)
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


class _Displacements:
    """``pos[second] - pos[first]``, rows gathered when a batch asks for them.

    Sliced like the ``(m, dim)`` array it stands for: a batch's displacements
    are made while it runs (in cache; ``np.take``: a quarter of the time of
    fancy indexing all ``m`` rows at once).
    """

    def __init__(self, pos: np.ndarray, first: np.ndarray, second: np.ndarray) -> None:
        self.pos, self.first, self.second = pos, first, second
        self.shape = (first.size, pos.shape[1])

    def __getitem__(self, rows: slice) -> np.ndarray:
        pos = self.pos
        return np.take(pos, self.second[rows], axis=0) - np.take(pos, self.first[rows], axis=0)


class _PairCSR:
    """The CSR structure of the Hessian of distinct pairs and where each entry comes from.

    The values are gathered from one array ``src`` of ``m + N`` blocks: ``-B_t``
    of pair ``t`` (placed at ``(lo, hi)``, and transposed at ``(hi, lo)``), then
    the diagonal block of each atom.  ``perm[e]``: the flat position in ``src``
    of CSR entry ``e`` (canonical CSR: rows in order, sorted column indices);
    ``incidence``: the ``(N, m)`` 0/1 matrix of atoms and pairs, so that the
    diagonal blocks are ``incidence @ B`` (each the sum of its atom's pair blocks).
    """

    def __init__(self, lo: np.ndarray, hi: np.ndarray, n_particles: int, dim: int) -> None:
        import scipy.sparse

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
        self.perm = np.empty(nnz, dtype=np.intp)  # np.take converts any other type: 10x slower
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
        import scipy.sparse

        data = np.take(src.reshape(-1), self.perm)
        h = scipy.sparse.csr_array((data, self.indices.copy(), self.indptr.copy()),
                                   shape=self.shape)  # fmt: skip
        h.has_sorted_indices = True
        return h


class TermEnergy(Versioned):
    r"""The energy :math:`\sum_t` ``term(R[index[t]])`` of flat coordinates: a problem's ``fn``.

    Build it with :func:`term_energy` (validated) and pass it to
    :class:`simdiff.Problem`; :func:`simdiff.pes.cluster_problem` builds one of
    Lennard-Jones or Morse pairs.

    Attributes
    ----------
    term : callable
        ``term(r, ops)``, ``r`` of shape ``(..., k, dim)`` -> shape ``(...)``.
    index : ndarray of int64, shape (m, k)
    n_particles, dim : int
    reference : ndarray of shape (n_particles, dim) or None
        Geometry at which the current cutoff neighbour list was built (the
        first of :attr:`references`; ``None``: the index holds every term,
        valid everywhere).
    references : ndarray of shape (R, n_particles, dim) or None
        The geometries the current list was built for (``R > 1`` after a
        rebuild for a batch of points: the list is the union of their lists).
    max_shift : float or None
        With a neighbour list, the largest displacement of any atom from a
        reference for which the list still holds every interacting term
        (half the skin).
    box : ndarray of shape (dim,), Cell or None
        Periodic box (lengths) or cell: displacements from ``reference`` are minimum-image ones.
    list_radius : float or None
        ``r_cut + skin``: the list holds the pairs closer than this at its
        references (:func:`~simdiff.pes.pair_index`).
    follow : bool
        Whether the list follows the atoms: at a point beyond :attr:`max_shift`
        :meth:`check_points` rebuilds it there (:attr:`rebuilds` counts them);
        otherwise it raises :class:`~simdiff.errors.NeighbourListError`.

    Notes
    -----
    Every derivative call of the problem runs :meth:`check_points` at its
    concrete points, outside any traced or compiled function
    (:meth:`simdiff.Problem.check_points`), so within one evaluation the list
    is a constant and every derivative is exact; a rebuild changes
    :attr:`version`, and the problem's compiled derivatives are rebuilt for
    the new list.  A traced call of ``fn`` itself (under the user's own
    ``jax.jit``) cannot rebuild: at a point beyond the skin its energy is NaN
    (a factor on the energy, so every derivative order is NaN too), never a
    silently wrong number.
    """

    def __init__(
        self,
        term: Callable[[Any, Any], Any],
        index: np.ndarray,
        n_particles: int,
        dim: int = 3,
        *,
        reference: np.ndarray | None = None,
        max_shift: float | None = None,
        box: np.ndarray | Cell | None = None,
        list_radius: float | None = None,
        follow: bool = False,
    ) -> None:
        self.term = term
        self.n_particles = int(n_particles)
        self.dim = int(dim)
        self.max_shift = max_shift
        self.box = box
        self.list_radius = list_radius
        if follow and (reference is None or list_radius is None or max_shift is None):
            raise InputError("a neighbour list that follows the atoms needs reference, "
                             "max_shift and list_radius")  # fmt: skip
        self.follow = bool(follow)
        #: Neighbour-list rebuilds so far; :attr:`version` changes with each.
        self.rebuilds = 0
        self.version = 0
        self.k = int(index.shape[1])
        self.__name__ = getattr(term, "__name__", "term_energy")
        #: a pair term that depends on its atoms only through r_1 - r_0 (``of_difference``):
        #: its Hessian is [[B, -B], [-B, B]], one dim x dim block B per pair
        self.pairwise = self.k == 2 and callable(getattr(term, "of_difference", None))
        refs = None if reference is None else np.asarray(reference, dtype=np.float64)[None]
        self._defined = (index, refs)  # what the energy was defined with (its fingerprint)
        self._set_list(index, refs)
        #: the Derivatives of the term sums this energy used: (backend, dtype, compile, rows)
        self._pieces: dict[tuple[str, str, str, int], tuple[Any, tuple[int, ...]]] = {}
        self._piece_calls: dict[tuple[str, str, str, int], int] = {}

    def _set_list(self, index: np.ndarray, references: np.ndarray | None) -> None:
        """Make ``index`` the terms (and ``references`` the geometries it holds for)."""
        m, k = index.shape
        dim = self.dim
        self.index = index
        self.references = references
        self.reference = None if references is None else references[0]
        self.n_terms = int(m)
        self.coords = (index[:, :, None] * dim + np.arange(dim)).reshape(m, k * dim)
        if self.pairwise:  # contiguous atom columns for the energy's gathers
            self._first, self._second = index[:, 0].copy(), index[:, 1].copy()
        self._assembly: _BlockAssembly | None = None
        self._pair_layout: _PairLayout | None = None

    # ------------------------------------------------------------------ energy
    def __call__(self, x: Any, ops: Any) -> Any:
        pos = ops.reshape(x, (self.n_particles, self.dim))
        if self.n_terms == 0:
            return ops.sum(pos) * 0.0
        if self.pairwise:  # two gathers of (m, dim): a backward without (m, 2, dim) zeros
            d = ops.take(pos, self._second, axis=0) - ops.take(pos, self._first, axis=0)
            pair: Any = self.term
            energy = ops.sum(pair.of_difference(d, ops))
        else:
            r = ops.take(pos, self.index, axis=0)  # (m, k, dim)
            energy = ops.sum(self.term(r, ops))
        if self.references is None:
            return energy
        refs = self.references
        moved = pos[None] - ops.asarray(refs)  # (R, N, dim)
        if self.box is not None:
            moved = image_displacement(moved, self.box, ops)
        # squared Euclidean displacement of the farthest atom from the nearest reference
        shift2 = ops.min(ops.max(ops.sum(moved * moved, axis=-1), axis=-1))
        # a stale neighbour list gives NaN, never a silently wrong energy (see class docstring):
        # a factor (1 or NaN) on the energy, so every derivative order is NaN there too
        assert self.max_shift is not None  # a list with references has a skin
        return energy * ops.where(shift2 > self.max_shift**2, float("nan"), 1.0)

    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the energy: the term, the list it was built with and the list's rules.

        Not the current list of a list that follows the atoms: rebuilt at
        another geometry it gives the same energy (:attr:`version` tells the
        derivative cache that compiled derivatives must be rebuilt).
        """
        return {"term": self.term, "n_particles": self.n_particles, "dim": self.dim,
                "index": self._defined[0], "references": self._defined[1],
                "max_shift": self.max_shift, "box": self.box, "list_radius": self.list_radius,
                "follow": self.follow}  # fmt: skip

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the built derivatives of the term sums."""
        state = dict(self.__dict__)
        state["_pieces"], state["_piece_calls"] = {}, {}
        return state

    # ------------------------------------------------------------------ structure
    def stale(self, x: np.ndarray) -> tuple[int, float] | None:
        """``(atom, displacement)`` of the first atom beyond ``max_shift``, else ``None``.

        ``x`` of shape ``(n,)`` or ``(B, n)``; the displacement of an atom is
        its (minimum-image) Euclidean distance from the nearest reference
        geometry of the list: two atoms that each moved less than ``skin / 2``
        came closer by less than ``skin``, whatever the directions.
        """
        if self.references is None:
            return None
        pos = np.asarray(x, dtype=np.float64).reshape(-1, 1, self.n_particles, self.dim)
        moved = pos - self.references  # (B, R, N, dim)
        if self.box is not None:
            moved = image_displacement_np(moved, self.box)
        # a point is covered by the reference nearest to it (the list is their union)
        far = np.sqrt(np.einsum("brnd,brnd->brn", moved, moved))  # (B, R, N)
        best = far.max(axis=-1).argmin(axis=-1)  # (B,)
        far = far[np.arange(far.shape[0]), best].max(axis=0)  # (N,): worst over the points
        bad = np.flatnonzero(far > self.max_shift)
        return (int(bad[0]), float(far[bad[0]])) if bad.size else None

    def check_points(self, xs: np.ndarray) -> bool:
        """Make the neighbour list hold at the points ``xs`` (shape ``(B, n)``): True if rebuilt.

        A list that follows the atoms (:attr:`follow`) is rebuilt when an atom
        has moved beyond :attr:`max_shift` from the list's references: the
        pairs closer than :attr:`list_radius` at any of the points, with the
        points as the new references.  Otherwise such a point raises
        :class:`~simdiff.errors.NeighbourListError` naming the atom, its
        displacement and the skin.  Run by :meth:`simdiff.Problem.check_points`
        at every evaluated point.
        """
        xs = np.asarray(xs, dtype=np.float64).reshape(-1, self.n_particles * self.dim)
        where = self.stale(xs)
        if where is None:
            return False
        if not self.follow:
            assert self.max_shift is not None
            raise NeighbourListError(
                f"the neighbour list of this energy does not hold here: atom {where[0]} has "
                f"moved {where[1]:.4g} from where the list was built, more than half the skin "
                f"(skin {2 * self.max_shift:.4g}, limit {self.max_shift:.4g}), so pairs outside "
                "the list may interact; build the problem with rebuild=True (the list then "
                "follows the atoms) or again at this geometry (simdiff.pes.cluster_problem)"
            )
        self.rebuild(xs)
        return True

    def rebuild(self, xs: np.ndarray) -> None:
        """Rebuild the neighbour list at the points ``xs`` (shape ``(B, n)``): their union.

        Positions are wrapped into a periodic box (:func:`~simdiff.pes.pair_index`),
        so a rigidly translated box gets the list of the original.
        """
        pos = np.asarray(xs, dtype=np.float64).reshape(-1, self.n_particles, self.dim)
        lists = [pair_index(p, self.list_radius, self.box) for p in pos]
        index = lists[0] if len(lists) == 1 else np.unique(np.concatenate(lists), axis=0)
        self._set_list(index.astype(np.int64), pos.copy())
        self.rebuilds += 1
        self.version += 1

    def neighbour_list(self) -> dict[str, Any] | None:
        """The neighbour list's account (None without a cutoff list).

        ``pairs`` (terms in the list now), ``rebuilds`` (since construction),
        ``follow``, ``skin`` and ``radius`` (``r_cut + skin``).
        """
        if self._defined[1] is None:
            return None
        assert self.max_shift is not None
        return {"pairs": self.n_terms, "rebuilds": self.rebuilds, "follow": self.follow,
                "skin": 2 * self.max_shift, "radius": self.list_radius}  # fmt: skip

    def _check_fresh(self, x: np.ndarray) -> None:
        self.check_points(np.asarray(x).reshape(-1, self.n_particles * self.dim))

    def _hessian_batches(self, kind: str, y: np.ndarray | _Displacements, backend: str, dtype: Any,
                         chunk: int = TERM_CHUNK, compile: bool | str = False,
                         expected_calls: int | None = None,
                         ) -> Iterator[tuple[int, np.ndarray]]:  # fmt: skip
        """``(start, hessians)`` of one term (``kind`` "term" or "difference") at the rows of ``y``.

        As the backend computes many small Hessians fastest
        (``Backend.term_hessians``): ``"batched"`` (JAX), one call of
        :meth:`simdiff.Derivatives.hessian` of one term at a batch of points;
        ``"hvp-sum"`` (torch), ``w`` Hessian-vector products of the sum of the
        terms over the rows, whose Hessian is block-diagonal with the term
        Hessians as blocks (direction ``j``: ``e_j`` in every row), one call of
        :meth:`simdiff.Derivatives.hvp`.  The rows are split into equal batches of at most ``chunk``
        rows, each padded (with copies of its first row) to :func:`bucket_size`,
        so one compilation serves a range of term counts and memory stays
        bounded.  ``compile`` and ``expected_calls`` are the caller's compile
        policy (:class:`simdiff.Derivatives`), applied to these HVPs.
        """
        dtype = "float64" if dtype is None else dtype  # one cache entry for the default
        total, w = y.shape
        batches = -(-total // chunk)  # equal batches, padded to a bucket: little padding
        size = min(bucket_size(-(-total // batches)), chunk)
        be = get_backend(backend)
        batched = be.term_hessians == "batched"  # else w HVPs of the sum of the terms
        problem = _shared_problem(kind, self.term, self.k, self.dim, 1 if batched else size)
        if not be.optional_compiler:
            compile = False  # JAX always compiles: one cache entry, one trace
        d = cached_derivatives(problem, backend, dtype=dtype, check_finite=False, compile=compile)
        key = (backend, dtype, str(compile), size)
        self._pieces[key] = (d, (size, w) if batched else (size * w,))  # and its x's shape
        self._piece_calls[key] = self._piece_calls.get(key, 0) + 1
        d.expect_calls(None if expected_calls is None else expected_calls * batches)
        v = None if batched else _tangents(size, w)
        for s in range(0, total, size):
            part = y[s : s + size]
            rows = part.shape[0]
            if rows < size:
                part = np.concatenate([part, np.repeat(part[:1], size - rows, 0)])
            if v is None:  # the Hessian of one term at a batch of points
                h = np.asarray(d.hessian(part))[:rows]
            else:
                hv = np.asarray(d.hvp(v, part.reshape(-1))).reshape(w, size, w)
                h = hv.transpose(1, 2, 0)[:rows]  # [t, i, j] = (H e_j)[t, i]
            yield s, 0.5 * (h + h.transpose(0, 2, 1))  # symmetric to the last bit

    def _batched_hessian(self, kind: str, y: np.ndarray | _Displacements, backend: str, dtype: Any,
                         compile: bool | str = False,
                         expected_calls: int | None = None) -> np.ndarray:  # fmt: skip
        """Term Hessians at the rows of ``y``, ``(rows, w, w)`` (see :meth:`_hessian_batches`)."""
        total, w = y.shape
        out = np.empty((total, w, w))
        batches = self._hessian_batches(kind, y, backend, dtype, TERM_CHUNK, compile,
                                        expected_calls)  # fmt: skip
        for s, h in batches:
            out[s : s + h.shape[0]] = h
        return out

    def structured_cache_info(self, backend: str, dtype: Any = None,
                              compile: bool | str = False) -> list[dict[str, Any]]:  # fmt: skip
        """``cache_info()`` of the term-Hessian computations this energy ran with these settings.

        One record per bucket of term counts; each says the path that ran
        (``"jit"``, ``"eager"``, ``"compiled"``) and, under the compile policy,
        why (see :meth:`simdiff.Derivatives.cache_info`).  ``calls`` counts this
        energy's calls, ``shared_calls`` those of every energy with an equal
        term (they share the computation, compiled once).
        """
        dtype = "float64" if dtype is None else dtype
        if not get_backend(backend).optional_compiler:
            compile = False
        out = []
        for key, (d, shape) in self._pieces.items():
            if key[:3] == (backend, dtype, str(compile)):
                own = {"piece": f"term Hessians ({key[3]} rows)", "calls": self._piece_calls[key]}
                out += [{**r, **own, "shared_calls": r["calls"]} for r in d.cache_info()
                        if tuple(r.get("shape", shape)) == shape]  # fmt: skip
        return out

    def term_hessians(self, x: np.ndarray, backend: str, dtype: Any = None,
                      compile: bool | str = False,
                      expected_calls: int | None = None) -> np.ndarray:  # fmt: skip
        """Hessians of every term at ``x`` (shape ``(n,)`` or ``(B, n)``): ``(B*m, kd, kd)``.

        ``k dim`` Hessian-vector products of the sum of the terms (block-diagonal
        Hessian) in one (on JAX jit-compiled) call of the backend, per batch of
        :data:`TERM_CHUNK` terms; ``compile``: the policy for that call.
        """
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.n_particles * self.dim)
        kd = self.k * self.dim
        if self.n_terms == 0:
            return np.zeros((0, kd, kd))
        self._check_fresh(x)
        r = x[:, self.coords].reshape(-1, kd)  # (B*m, kd)
        return self._batched_hessian("term", r, backend, dtype, compile, expected_calls)

    def block_values(self, x: np.ndarray, backend: str, dtype: Any = None,
                     compile: bool | str = False,
                     expected_calls: int | None = None) -> np.ndarray:  # fmt: skip
        """Per-term blocks at one point ``x``, shape ``(sources, dim * dim)``.

        For a pairwise term (``term.of_difference``) one symmetric block
        :math:`B_t = \\partial^2 \\varepsilon_t / \\partial d^2` per pair (``m``
        sources, ``dim`` HVPs of the sum of the pair terms over displacements);
        otherwise the ``k^2`` blocks of each term Hessian (``m k^2`` sources).
        """
        dd = self.dim
        if not self.pairwise:
            h = self.term_hessians(x, backend, dtype, compile, expected_calls)
            h = h.reshape(self.n_terms, self.k, dd, self.k, dd)
            return h.transpose(0, 1, 3, 2, 4).reshape(-1, dd * dd)
        self._check_fresh(x)
        pos = x.reshape(self.n_particles, dd)
        disp = _Displacements(pos, self._first, self._second)
        b = self._batched_hessian("difference", disp, backend, dtype, compile, expected_calls)
        return b.reshape(-1, dd * dd)  # symmetric (see _hessian_batches)

    def _pair_hessian(self, x: np.ndarray, backend: str, dtype: Any, check_finite: bool,
                      compile: bool | str = False, expected_calls: int | None = None,
                      sparse: bool = False) -> Any:  # fmt: skip
        """Hessian of a pairwise term with distinct pairs: blocks placed, not summed.

        Dense: batches of :data:`PAIR_CHUNK` pair blocks :math:`B_t`; each is
        checked (``check_finite``), summed onto the diagonal blocks and written
        into the output while in cache (:class:`_PairLayout`), so no
        ``(m, dim, dim)`` array of all blocks is kept.  Sparse: the blocks
        ``-B_t`` and the diagonal blocks (the cached incidence matrix of atoms and
        pairs times the ``B_t``) gathered into the CSR values by one cached
        permutation (:class:`_PairCSR`); no BSR, no sum over repeated blocks.
        """
        layout, dd, big = self.pair_layout(), self.dim, self.n_particles
        self._check_fresh(x)
        pos = x.reshape(big, dd)
        disp = _Displacements(pos, self._first, self._second)
        if sparse:  # -B_t per pair into one array, the diagonal by the incidence product
            csr, m = layout.csr(), self.n_terms
            src = np.empty((m + big, dd, dd))
            batches = self._hessian_batches("difference", disp, backend, dtype, TERM_CHUNK,
                                            compile, expected_calls)  # fmt: skip
            for s, b in batches:
                if check_finite:
                    self._check_finite(b.reshape(-1, dd * dd), start=s)
                np.negative(b, out=src[s : s + b.shape[0]])
            src[m:] = np.negative(csr.incidence @ src[:m].reshape(m, dd * dd)).reshape(big, dd, dd)
            return csr.matrix(src)
        out = np.zeros((big, dd, big, dd))
        diag = np.zeros((big, dd, dd))
        batches = self._hessian_batches("difference", disp, backend, dtype, PAIR_CHUNK, compile,
                                        expected_calls)  # fmt: skip
        for s, b in batches:
            if check_finite:
                self._check_finite(b.reshape(-1, dd * dd), start=s)
            layout.add_diagonal(diag, b, s)
            layout.put_dense(out, b, s)
        d = 0.5 * (diag + diag.transpose(0, 2, 1))
        return layout.finish_dense(out, d)

    def _check_finite(self, values: np.ndarray, start: int = 0) -> None:
        if np.isfinite(values.sum()):  # a NaN or inf anywhere makes the sum non-finite
            return
        bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
        if bad.size:
            t = start + (int(bad[0]) if self.pairwise else int(bad[0]) // (self.k * self.k))
            raise NonFiniteError(
                f"the Hessian of term {t} (atoms {self.index[t].tolist()}) of "
                f"{self.__name__!r} is not finite ({bad.size} non-finite blocks); the term is "
                "singular at this geometry (coincident atoms?)"
            )

    def pair_layout(self) -> _PairLayout:
        """Where a pairwise term's blocks go in the Hessian (built once per energy)."""
        if self._pair_layout is None:
            self._pair_layout = _PairLayout(self.index, self.n_particles, self.dim)
        return self._pair_layout

    def assembly(self) -> _BlockAssembly:
        """The block layout of the Hessian (built once per energy, from :attr:`index`)."""
        if self._assembly is None:
            m, k, idx = self.n_terms, self.k, self.index
            if self.pairwise:  # B at (i, i) and (j, j), -B at (i, j) and (j, i)
                i, j = idx[:, 0], idx[:, 1]
                rows, cols = np.concatenate([i, j, i, j]), np.concatenate([j, i, i, j])
                source = np.tile(np.arange(m), 4)
                coef = np.repeat([-1.0, -1.0, 1.0, 1.0], m)
                n_sources = m
            else:  # block (a, b) of term t at (index[t, a], index[t, b])
                rows = np.repeat(idx, k, axis=1).ravel()
                cols = np.tile(idx, (1, k)).ravel()
                source = np.arange(m * k * k)
                coef = np.ones(m * k * k)
                n_sources = m * k * k
            self._assembly = _BlockAssembly(rows, cols, source, coef, n_sources,
                                            self.n_particles)  # fmt: skip
        return self._assembly

    def structured_hessian(
        self,
        x: np.ndarray,
        backend: str,
        dtype: Any = None,
        *,
        sparse: bool = False,
        check_finite: bool = True,
        compile: bool | str = False,
        expected_calls: int | None = None,
    ) -> Any:
        """Hessian at ``x`` assembled from per-term blocks (see :func:`structured_hessian`).

        With ``check_finite`` a non-finite term Hessian raises
        :class:`~simdiff.errors.NonFiniteError` naming the term and its atoms
        (checked on the ``O(m)`` blocks, not on the dense output).  ``compile``
        and ``expected_calls`` (the number of Hessians the caller will ask
        for) are the compile policy of the term-Hessian computation
        (:class:`simdiff.Derivatives`); :meth:`structured_cache_info` reports
        the path it ran.
        """
        import scipy.sparse

        x = np.asarray(x, dtype=np.float64)
        n, dd = self.n_particles * self.dim, self.dim
        batch = x.shape[:-1]
        if sparse and batch:
            raise ShapeError("sparse=True assembles one Hessian: x must have shape (n,)")
        if batch:
            flat = x.reshape(-1, n)
            each = None if expected_calls is None else expected_calls * len(flat)
            out = np.stack([self.structured_hessian(p, backend, dtype, check_finite=check_finite,
                                                    compile=compile, expected_calls=each)
                            for p in flat])  # fmt: skip
            return out.reshape(*batch, n, n)
        if self.n_terms == 0:
            return scipy.sparse.csr_array((n, n)) if sparse else np.zeros((n, n))
        if self.pairwise and self.pair_layout().distinct:  # blocks placed
            return self._pair_hessian(x, backend, dtype, check_finite, compile, expected_calls,
                                      sparse)  # fmt: skip
        # repeated pairs, other terms: blocks summed by a sparse product
        a = self.assembly()
        values = self.block_values(x, backend, dtype, compile, expected_calls)
        if check_finite:
            self._check_finite(values)
        blocks = np.asarray(a.assembler @ values).reshape(-1, dd, dd)
        if sparse:
            return scipy.sparse.bsr_array((blocks, a.cols, a.indptr), shape=(n, n)).tocsr()
        return a.dense(blocks)

    def dense_hessian_bytes(self, n: int) -> int:
        """Estimated bytes held by the dense AD Hessian: ``n`` tangents through all terms."""
        return 8 * n * max(self.n_terms, 1) * self.k * self.dim * _DENSE_FLOATS_PER_TERM_COORD

    def __repr__(self) -> str:
        return (f"TermEnergy({self.__name__}, terms={self.n_terms}, k={self.k}, "
                f"n_particles={self.n_particles})")  # fmt: skip


def term_energy(
    term: Callable[[Any, Any], Any],
    index: Any,
    positions: Any,
    *,
    dim: int = 3,
    masses: Any = None,
    name: str | None = None,
) -> Problem:
    r"""A :class:`simdiff.Problem` whose energy is a sum of terms over groups of atoms.

    Parameters
    ----------
    term : callable
        ``term(r, ops)``: ``r`` of shape ``(..., k, dim)`` (the positions of
        the ``k`` atoms of each term) -> energies of shape ``(...)``.  Written
        with ``r[..., i, :]`` and reductions over ``axis=-1``, it serves both
        all terms at once and one term at a time.
    index : array_like of int, shape (m, k)
        The atoms of each term, distinct within a term.
    positions : array_like, shape (N, dim) or (N * dim,)
        Start geometry (``problem.x0``).
    dim : int
        Spatial dimension.
    masses : float or array_like of shape (N,), optional
        Particle masses for normal-mode analysis (default 1).
    name : str, optional

    Returns
    -------
    Problem
        ``problem.fn`` is a :class:`TermEnergy`: ``simdiff.hessian(problem)``
        assembles the Hessian from the ``m`` term Hessians; ``method="fwd-rev"``
        (or ``"rev-rev"``, ``"fwd-fwd"``) gives the dense AD Hessian instead.

    Raises
    ------
    ShapeError, InvalidIndexError
        Bad ``index`` (see :func:`check_index`) or ``positions``.
    InputError
        ``term`` does not return one finite energy per term at ``positions``
        (the message names the first offending term and its atoms).

    Examples
    --------
    Harmonic bonds along a chain of four atoms:

    >>> import numpy as np, simdiff
    >>> def bond(r, ops):
    ...     d = r[..., 1, :] - r[..., 0, :]
    ...     return 0.5 * (ops.sqrt(ops.sum(d * d, axis=-1)) - 1.0) ** 2
    >>> p = term_energy(bond, [[0, 1], [1, 2], [2, 3]], np.arange(12.0).reshape(4, 3) / 3)
    >>> h = simdiff.hessian(p)                       # assembled from three 6x6 blocks
    >>> bool(np.allclose(h, simdiff.hessian(p, method="fwd-rev")))
    True
    """
    pos = _positions(positions, dim)
    n_particles = pos.shape[0]
    idx = check_index(index, n_particles)
    check_term(term, idx, pos)
    fn = TermEnergy(term, idx, n_particles, dim)
    info = ClusterInfo(n_particles, dim, check_masses(masses, n_particles), None)
    return Problem(fn, pos.reshape(-1), name=name or f"{fn.__name__}{n_particles}",
                   meta={"tags": ("pes",), "pes": info})  # fmt: skip


def _positions(positions: Any, dim: int) -> np.ndarray:
    a = np.asarray(positions, dtype=np.float64)
    if a.ndim == 1 and a.size % dim == 0:
        a = a.reshape(-1, dim)
    if a.ndim != 2 or a.shape[1] != dim or a.shape[0] == 0:
        raise ShapeError(f"positions must have shape (N, {dim}) or ({dim}N,) with N >= 1; got "
                         f"shape {np.shape(positions)}")  # fmt: skip
    if not np.all(np.isfinite(a)):
        i = int(np.flatnonzero(~np.isfinite(a).all(axis=1))[0])
        raise InputError(f"positions must be finite; particle {i} is at {a[i]}")
    return a


def check_term(term: Callable[[Any, Any], Any], index: np.ndarray, positions: np.ndarray) -> None:
    """Evaluate ``term`` in numpy on all terms and on one; raise :class:`InputError` if it fails.

    The term must return shape ``(m,)`` for ``r`` of shape ``(m, k, dim)``,
    shape ``()`` for one term's ``(k, dim)``, and finite energies at ``positions``.
    """
    if index.shape[0] == 0:
        return
    ops = get_backend("numpy").ops()
    name = getattr(term, "__name__", repr(term))
    r = positions[index]
    with np.errstate(all="ignore"):  # non-finite energies are reported below, by term
        e = np.asarray(term(r, ops))
        one = np.asarray(term(r[0], ops))
    if e.shape != (index.shape[0],):
        raise InputError(
            f"term function {name} must return one energy per term: for r of shape {r.shape} "
            f"(m terms, k atoms, dim) it returned shape {e.shape}, expected ({index.shape[0]},)"
        )
    if one.shape != ():
        raise InputError(
            f"term function {name} must return a scalar for one term: term 0 (atoms "
            f"{index[0].tolist()}) gave shape {one.shape}; index r with r[..., i, :] and reduce "
            "with axis=-1"
        )
    bad = np.flatnonzero(~np.isfinite(e))
    if bad.size:
        t = int(bad[0])
        raise InputError(
            f"term function {name} is not finite at the given positions: term {t} (atoms "
            f"{index[t].tolist()}) has energy {e[t]}"
        )
    _check_independent(term, index, r, e, ops, name)


def _check_independent(term: Callable[[Any, Any], Any], index: np.ndarray, r: np.ndarray,
                       e: np.ndarray, ops: Any, name: str) -> None:  # fmt: skip
    """Refuse a term function whose terms are coupled (it reduces over the term axis).

    The structured Hessian assumes that term ``t`` depends on ``r[t]`` alone.
    Every pair of terms is probed, with ``2 ceil(log2 m)`` evaluations: for
    each bit ``b`` of the term number, the inputs of the terms whose bit
    ``b`` is 1 (then 0) are moved (by ``1e-3 (1 + |r|)`` in a random
    direction), and the energies of the others must not change.  Two
    different terms differ in some bit, so in one of these evaluations one
    is moved and the other is not: a term that reads another's input (a
    sum, mean, max or any other reduction over the term axis, or a shift
    along it) changes by more than ``16 eps max|e|`` (rounding of the same
    elementwise operations), and :class:`InputError` names both terms.
    """
    m = index.shape[0]
    if m < 2:
        return
    rng = np.random.default_rng(20261203)
    tol = 16 * np.finfo(np.float64).eps * max(float(np.max(np.abs(e))), 1e-300)
    numbers = np.arange(m)
    for bit in range(int(m - 1).bit_length()):
        for value in (1, 0):
            moving = ((numbers >> bit) & 1) == value
            moved = r.copy()
            step = 1e-3 * (1.0 + np.abs(r[moving])) * rng.uniform(-1.0, 1.0, r[moving].shape)
            moved[moving] += step
            with np.errstate(all="ignore"):
                e1 = np.asarray(term(moved, ops), dtype=np.float64)
            change = np.where(moving, 0.0, np.abs(e1 - e))
            s = int(np.argmax(change))
            if change[s] > tol:
                # the moved term that reads: the one whose own move changes term s
                t = _culprit(term, r, e, ops, s, np.flatnonzero(moving), tol, rng)
                raise InputError(
                    f"term function {name} couples its terms: moving the atoms of term {t} "
                    f"(atoms {index[t].tolist()}) changed the energy of term {s} (atoms "
                    f"{index[s].tolist()}) by {change[s]:.3g}. Each term must depend on its own "
                    "atoms only (no sum, mean or other reduction over the term axis, axis 0 of "
                    "r[..., k, dim]); reduce over axis=-1 within a term, or write the coupled "
                    "energy as a simdiff.Problem"
                )


def _culprit(term: Callable[[Any, Any], Any], r: np.ndarray, e: np.ndarray, ops: Any, s: int,
             moved: np.ndarray, tol: float, rng: np.random.Generator) -> int:  # fmt: skip
    """A term among ``moved`` whose input, moved alone, changes term ``s`` (by halving)."""
    while len(moved) > 1:
        half = moved[: len(moved) // 2]
        trial = r.copy()
        trial[half] += 1e-3 * (1.0 + np.abs(r[half])) * rng.uniform(-1.0, 1.0, r[half].shape)
        with np.errstate(all="ignore"):
            changed = abs(float(np.asarray(term(trial, ops), dtype=np.float64)[s]) - e[s]) > tol
        moved = half if changed else moved[len(moved) // 2 :]
    return int(moved[0])


def structured_hessian(
    problem: Problem, x: Any = None, *, backend: str = "jax", sparse: bool = False
) -> Any:
    """Hessian of a sum-of-terms problem assembled from its term Hessians; dense or sparse.

    Parameters
    ----------
    problem : Problem
        Its ``fn`` a :class:`TermEnergy` (:func:`term_energy`,
        :func:`simdiff.pes.cluster_problem`).
    x : array_like, shape (n,), optional
        Default ``problem.x0``.
    backend : {"jax", "torch"}
    sparse : bool
        Return a ``scipy.sparse.csr_array`` (``O(m)`` memory) instead of a dense
        ``(n, n)`` numpy array.

    Notes
    -----
    Cost: one vmapped Hessian of ``m`` terms (``k dim`` HVPs of one term each),
    then a scatter-add of ``m (k dim)^2`` numbers; the dense result adds the
    ``n^2`` output.  The dense AD Hessian instead pushes ``n`` tangents through
    all ``m`` terms: ``O(n m)``.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.pes import cluster_problem, lennard_jones
    >>> p = cluster_problem(lennard_jones, [[0, 0, 0], [1.1, 0, 0], [0, 1.1, 0]])
    >>> h = structured_hessian(p, sparse=True)
    >>> h.shape, h.nnz
    ((9, 9), 81)
    """
    fn = problem.fn
    if not isinstance(fn, TermEnergy):
        raise InputError(
            f"structured_hessian needs a sum-of-terms problem (simdiff.pes.term_energy or "
            f"cluster_problem); {problem.name!r} has fn {type(fn).__name__}"
        )
    x = problem.x0 if x is None else np.asarray(x, dtype=np.float64)
    if x.shape != (problem.n,):
        raise ShapeError(f"x for problem {problem.name!r} must have shape ({problem.n},); "
                         f"got {x.shape}")  # fmt: skip
    problem.require(backend)
    return fn.structured_hessian(x, backend, sparse=sparse)
