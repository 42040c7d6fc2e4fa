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

The parts live beside it: :mod:`simdiff.pes.term_checks` validates the index,
the positions and the term function; :mod:`simdiff.pes.term_hessians`
computes the term Hessians; :mod:`simdiff.pes.hessian_layout` places their
blocks in the dense or sparse Hessian.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse

from simdiff.core.config import Config
from simdiff.core.fingerprint import Versioned
from simdiff.core.problem import Problem
from simdiff.errors import InputError, NeighbourListError, NonFiniteError, ShapeError
from simdiff.pes.geometry import (
    Cell,
    ClusterInfo,
    check_masses,
    image_displacement,
    image_displacement_np,
    pair_index,
)
from simdiff.pes.hessian_layout import BlockAssembly, Displacements, PairLayout
from simdiff.pes.term_checks import check_index, check_term, term_positions
from simdiff.pes.term_hessians import TermHessians

__all__ = ["TermEnergy", "check_index", "structured_hessian", "term_energy"]

#: Terms per vectorised call of the term Hessian (larger sums are computed in batches of this).
TERM_CHUNK = 2**18

#: Pair blocks per vectorised call on the dense pairwise path: each batch is checked, summed
#: into the diagonal blocks and written into the output while it is still in cache.
PAIR_CHUNK = 2**15

#: Floats of intermediates per term and tangent in the dense AD Hessian, per coordinate of a
#: term: above what JAX's compiled executable and torch.func's forward-over-reverse Hessian
#: hold for Lennard-Jones pairs (all pairs and with a cutoff; measured by
#: ``python -m validation.benchmarks.bench_pes_memory``, docs/pes.md section 7), so the
#: memory guard chunks or refuses before either runs out.
_DENSE_FLOATS_PER_TERM_COORD = 12


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
        #: the term-Hessian computations this energy ran (and their records)
        self.hessians = TermHessians(term, self.k, self.dim)

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
        self._assembly: BlockAssembly | None = None
        self._pair_layout: PairLayout | None = None

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

    def structured_cache_info(
        self,
        backend: str | None = None,
        dtype: Any = None,
        compile: bool | str | None = None,
        *,
        config: Config | None = None,
    ) -> list[dict[str, Any]]:
        """``cache_info()`` of the term-Hessian computations this energy ran with these settings.

        ``config`` (or the keywords, which win where given) names the
        settings; see :meth:`TermHessians.cache_info`.
        """
        config = Config.of(config, backend=backend, dtype=dtype, compile=compile)
        return self.hessians.cache_info(config)

    def term_hessians(self, x: np.ndarray, config: Config) -> np.ndarray:
        """Hessians of every term at ``x`` (shape ``(n,)`` or ``(B, n)``): ``(B*m, kd, kd)``.

        ``k dim`` Hessian-vector products of the sum of the terms (block-diagonal
        Hessian) in one (on JAX jit-compiled) call of the backend, per batch of
        :data:`TERM_CHUNK` terms; ``config``: the backend, dtype and compile policy.
        """
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.n_particles * self.dim)
        kd = self.k * self.dim
        if self.n_terms == 0:
            return np.zeros((0, kd, kd))
        self._check_fresh(x)
        r = x[:, self.coords].reshape(-1, kd)  # (B*m, kd)
        return self.hessians.stacked("term", r, config, TERM_CHUNK)

    def block_values(self, x: np.ndarray, config: Config) -> np.ndarray:
        """Per-term blocks at one point ``x``, shape ``(sources, dim * dim)``.

        For a pairwise term (``term.of_difference``) one symmetric block
        :math:`B_t = \\partial^2 \\varepsilon_t / \\partial d^2` per pair (``m``
        sources, ``dim`` HVPs of the sum of the pair terms over displacements);
        otherwise the ``k^2`` blocks of each term Hessian (``m k^2`` sources).
        """
        dd = self.dim
        if not self.pairwise:
            h = self.term_hessians(x, config)
            h = h.reshape(self.n_terms, self.k, dd, self.k, dd)
            return h.transpose(0, 1, 3, 2, 4).reshape(-1, dd * dd)
        self._check_fresh(x)
        pos = x.reshape(self.n_particles, dd)
        disp = Displacements(pos, self._first, self._second)
        b = self.hessians.stacked("difference", disp, config, TERM_CHUNK)
        return b.reshape(-1, dd * dd)  # symmetric (see TermHessians.batches)

    def _pair_hessian(self, x: np.ndarray, config: Config, sparse: bool = False) -> Any:
        """Hessian of a pairwise term with distinct pairs: blocks placed, not summed.

        Dense: batches of :data:`PAIR_CHUNK` pair blocks :math:`B_t`; each is
        checked (``config.check_finite``), summed onto the diagonal blocks and written
        into the output while in cache (:class:`~simdiff.pes.hessian_layout.PairLayout`), so no
        ``(m, dim, dim)`` array of all blocks is kept.  Sparse: the blocks
        ``-B_t`` and the diagonal blocks (the cached incidence matrix of atoms and
        pairs times the ``B_t``) gathered into the CSR values by one cached
        permutation (:class:`~simdiff.pes.hessian_layout.PairCSR`); no BSR, no
        sum over repeated blocks.
        """
        layout, dd, big = self.pair_layout(), self.dim, self.n_particles
        self._check_fresh(x)
        pos = x.reshape(big, dd)
        disp = Displacements(pos, self._first, self._second)
        if sparse:  # -B_t per pair into one array, the diagonal by the incidence product
            csr, m = layout.csr(), self.n_terms
            src = np.empty((m + big, dd, dd))
            batches = self.hessians.batches("difference", disp, config, TERM_CHUNK)
            for s, b in batches:
                if config.check_finite:
                    self._check_finite(b.reshape(-1, dd * dd), start=s)
                np.negative(b, out=src[s : s + b.shape[0]])
            src[m:] = np.negative(csr.incidence @ src[:m].reshape(m, dd * dd)).reshape(big, dd, dd)
            return csr.matrix(src)
        out = np.zeros((big, dd, big, dd))
        diag = np.zeros((big, dd, dd))
        batches = self.hessians.batches("difference", disp, config, PAIR_CHUNK)
        for s, b in batches:
            if config.check_finite:
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

    def pair_layout(self) -> PairLayout:
        """Where a pairwise term's blocks go in the Hessian (built once per energy)."""
        if self._pair_layout is None:
            self._pair_layout = PairLayout(self.index, self.n_particles, self.dim)
        return self._pair_layout

    def assembly(self) -> BlockAssembly:
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
            self._assembly = BlockAssembly(rows, cols, source, coef, n_sources,
                                            self.n_particles)  # fmt: skip
        return self._assembly

    def structured_hessian(
        self,
        x: np.ndarray,
        backend: str | None = None,
        dtype: Any = None,
        *,
        sparse: bool = False,
        check_finite: bool | None = None,
        compile: bool | str | None = None,
        expected_calls: int | None = None,
        config: Config | None = None,
    ) -> Any:
        """Hessian at ``x`` assembled from per-term blocks (see :func:`structured_hessian`).

        ``config`` (or the keywords, which win where given) says how: with
        ``check_finite`` a non-finite term Hessian raises
        :class:`~simdiff.errors.NonFiniteError` naming the term and its atoms
        (checked on the ``O(m)`` blocks, not on the dense output); ``compile``
        and ``expected_calls`` (the number of Hessians the caller will ask
        for) are the compile policy of the term-Hessian computation
        (:class:`simdiff.Derivatives`); :meth:`structured_cache_info` reports
        the path it ran.
        """
        config = Config.of(config, backend=backend, dtype=dtype, check_finite=check_finite,
                           compile=compile, expected_calls=expected_calls)  # fmt: skip
        return self._structured(np.asarray(x, dtype=np.float64), config, sparse)

    def _structured(self, x: np.ndarray, config: Config, sparse: bool) -> Any:
        """:meth:`structured_hessian` at ``x`` (float64, ``(n,)`` or ``(..., n)``)."""
        n, dd = self.n_particles * self.dim, self.dim
        batch = x.shape[:-1]
        if sparse and batch:
            raise ShapeError("sparse=True assembles one Hessian: x must have shape (n,)")
        if batch:
            flat = x.reshape(-1, n)
            calls = config.expected_calls
            each = config.replace(expected_calls=None if calls is None else calls * len(flat))
            out = np.stack([self._structured(p, each, False) for p in flat])
            return out.reshape(*batch, n, n)
        if self.n_terms == 0:
            return scipy.sparse.csr_array((n, n)) if sparse else np.zeros((n, n))
        if self.pairwise and self.pair_layout().distinct:  # blocks placed
            return self._pair_hessian(x, config, sparse)
        # repeated pairs, other terms: blocks summed by a sparse product
        a = self.assembly()
        values = self.block_values(x, config)
        if config.check_finite:
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
    pos = term_positions(positions, dim)
    n_particles = pos.shape[0]
    idx = check_index(index, n_particles)
    check_term(term, idx, pos)
    fn = TermEnergy(term, idx, n_particles, dim)
    info = ClusterInfo(n_particles, dim, check_masses(masses, n_particles), None)
    return Problem(fn, pos.reshape(-1), name=name or f"{fn.__name__}{n_particles}",
                   meta={"tags": ("pes",), "pes": info})  # fmt: skip


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
    return fn.structured_hessian(x, config=Config(backend=backend), sparse=sparse)
