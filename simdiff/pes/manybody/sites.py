r"""Energies that are sums of site energies over per-atom neighbour tables.

.. math:: E = \sum_i \varepsilon_{s_i}\bigl(d_{i1}, \dots, d_{iK}\bigr),
          \qquad d_{ik} = R_{j_{ik}} - R_i + S_{ik} C

(:mod:`simdiff.pes.manybody.table`).  The embedded-atom method
(:class:`~simdiff.pes.manybody.EAM`: :math:`\varepsilon_i = F(\sum_k f(r_{ik}))
+ \frac12 \sum_k \phi(r_{ik})`) and Stillinger-Weber
(:class:`~simdiff.pes.manybody.StillingerWeber`: half of each pair energy plus
the angle terms centred on the atom) are of this form.  A *site potential* is
an object with

- ``cutoff`` (float) and ``elements`` (tuple of element names, or ``None``
  for a potential that treats every atom alike);
- ``site_energies(d, ops, centre, neighbours)``: the site energies, shape
  ``(B,)``, of rows ``d`` of shape ``(B, K, 3)``, with one-hot element
  weights ``centre`` ``(B, S)`` and ``neighbours`` ``(B, K, S)``; a slot whose
  displacement is longer than ``cutoff`` contributes exactly nothing;
- ``check(d, valid, codes, table)``: raise :class:`~simdiff.errors.InputError`
  naming the atom where the energy is undefined (outside tabulated ranges).

Two ways to evaluate one:

- :class:`SiteEnergy`, the ``fn`` of a :class:`simdiff.Problem` of the flat
  positions (:func:`manybody_problem`), whose table follows the atoms: every
  derivative of the API (gradients, dense Hessians, HVPs, Taylor) by AD
  through the gathers;
- :class:`SiteEvaluator`, the engine of the ASE calculator: a problem of the
  displacements themselves, with per-atom weights and a strain, whose one
  reverse pass gives the energy, the forces, the exact stress and the per-atom
  energies; the table is an input, so a rebuilt table reuses the compiled
  derivative.  Its Hessian is assembled from one dense ``3K x 3K`` block per
  atom (``3K`` Hessian-vector products of the sum over atoms, whose Hessian in
  the displacements is block-diagonal), and the phonons of a crystal from the
  same blocks with Bloch phases.
"""

from __future__ import annotations

from math import pi
from typing import Any

import numpy as np
import scipy.sparse

from simdiff.core.cache import RecentlyUsed
from simdiff.core.derivatives import cached_derivatives
from simdiff.core.problem import Problem
from simdiff.errors import InputError, NeighbourListError, NonFiniteError, ShapeError
from simdiff.pes.geometry import Cell, ClusterInfo, check_masses
from simdiff.pes.manybody.table import SiteTable, site_table

__all__ = [
    "SiteEnergy",
    "SiteEvaluator",
    "StrainedSites",
    "manybody_problem",
    "species_codes",
]


def species_codes(potential: Any, symbols: Any, n: int) -> np.ndarray:
    """Element index (into ``potential.elements``) of each of ``n`` atoms; zeros if it has none.

    Raises :class:`~simdiff.errors.InputError` naming the first atom whose element the
    potential does not have.
    """
    elements = getattr(potential, "elements", None)
    if elements is None:
        return np.zeros(n, dtype=np.int64)
    if symbols is None:
        if len(elements) == 1:
            return np.zeros(n, dtype=np.int64)
        raise InputError(f"{potential!r} has the elements {list(elements)}: pass the atoms' "
                         "chemical symbols")  # fmt: skip
    symbols = list(symbols)
    if len(symbols) != n:
        raise ShapeError(f"expected {n} chemical symbols; got {len(symbols)}")
    codes = np.empty(n, dtype=np.int64)
    for a, sym in enumerate(symbols):
        if sym not in elements:
            raise InputError(
                f"atom {a} is {sym}, an element missing from {potential.source} (which has "
                f"{', '.join(elements)})"
            )
        codes[a] = elements.index(sym)
    return codes


def one_hot(codes: np.ndarray, table: SiteTable, s: int) -> tuple[np.ndarray, np.ndarray]:
    """``centre`` ``(N, S)`` and ``neighbours`` ``(N, K, S)`` one-hot element weights."""
    centre = np.eye(s)[codes]
    return centre, centre[table.index]


def _width(potential: Any) -> int:
    elements = getattr(potential, "elements", None)
    return 1 if elements is None else len(elements)


class SiteEnergy:
    """The energy of flat positions ``x`` as a sum of site energies: a problem's ``fn``.

    Parameters
    ----------
    potential : site potential
    positions : ndarray, shape (N, 3)
        Where the table is built first.
    cell : Cell or None
    codes : int ndarray, shape (N,)
        Element of each atom (:func:`species_codes`).
    skin : float
        The table holds neighbours closer than ``cutoff + skin``.
    follow : bool
        Rebuild the table at a point where an atom has moved more than
        ``skin / 2`` (else raise :class:`~simdiff.errors.NeighbourListError`).

    Notes
    -----
    *Exactness.*  A neighbour left out of the table was at least
    ``cutoff + skin`` away; while no atom has moved more than ``skin / 2`` it is
    beyond the cutoff, where the site energies and all their derivatives
    vanish.  :meth:`check_points` runs at every concrete point a derivative is
    asked for (:meth:`simdiff.Problem.check_points`), rebuilds the table
    there, and checks the potential's ranges; a traced evaluation beyond the
    skin is NaN, never a silently wrong energy.
    """

    def __init__(
        self,
        potential: Any,
        positions: np.ndarray,
        cell: Cell | None,
        codes: np.ndarray,
        *,
        skin: float,
        follow: bool = True,
    ) -> None:
        self.potential = potential
        self.cell = cell
        self.codes = np.asarray(codes, dtype=np.int64)
        self.n_particles = int(self.codes.size)
        self.skin = float(skin)
        self.follow = bool(follow)
        self.rebuilds = 0
        self.version = 0
        self.__name__ = f"{type(potential).__name__.lower()}_sites"
        self._defined = np.asarray(positions, dtype=np.float64).copy()
        self._evaluators: dict[str, SiteEvaluator] = {}
        self._set_table(self._defined)

    def _set_table(self, pos: np.ndarray) -> None:
        old: SiteTable | None = getattr(self, "table", None)
        width = None if old is None else old.width
        fresh = site_table(pos, self.cell, self.potential.cutoff + self.skin)
        if width is not None and fresh.width <= width:  # keep the width: the same shapes
            fresh = site_table(pos, self.cell, self.potential.cutoff + self.skin, width=width)
        self.table = fresh
        self.offsets = fresh.offsets(None if self.cell is None else self.cell.matrix)
        self.centre, self.neighbours = one_hot(self.codes, fresh, _width(self.potential))

    def __call__(self, x: Any, ops: Any) -> Any:
        n, k = self.n_particles, self.table.width
        pos = ops.reshape(x, (n, 3))
        gathered = ops.take(pos, self.table.index.reshape(-1), axis=0)
        d = ops.reshape(gathered, (n, k, 3)) - pos[:, None, :] + ops.asarray(self.offsets)
        e = self.potential.site_energies(d, ops, ops.asarray(self.centre),
                                         ops.asarray(self.neighbours))  # fmt: skip
        moved = pos - ops.asarray(self.table.reference)
        far = ops.max(ops.sum(moved * moved, axis=-1)) > (0.5 * self.skin) ** 2
        # beyond the skin the table may miss neighbours: NaN, never a silently wrong energy
        return ops.sum(e) * ops.where(far, float("nan"), 1.0)

    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the energy: the potential, cell, elements, start geometry and skin."""
        return {"potential": self.potential, "cell": self.cell, "codes": self.codes,
                "positions": self._defined, "skin": self.skin, "follow": self.follow}  # fmt: skip

    # ------------------------------------------------------------------ structured Hessian
    def structured_hessian(
        self,
        x: np.ndarray,
        backend: str,
        dtype: Any,
        *,
        check_finite: bool = True,
        sparse: bool = False,
        compile: bool | str = False,
        expected_calls: int | None = None,
    ) -> Any:
        """The exact Hessian at ``x`` (``(n,)`` or ``(B, n)``) from the potential's structure.

        What :func:`simdiff.hessian` runs for this energy (the protocol of
        :class:`simdiff.core.structure.StructuredHessian`): the potential's own
        factored Hessian where it has one (EAM: ``hessian``, pair blocks and
        one rank-one term per atom), else one dense ``3K x 3K`` block per atom
        by Hessian-vector products (:meth:`SiteEvaluator.hessian`).  ``dtype``,
        ``compile`` and ``expected_calls`` are accepted for the protocol; the
        pieces are computed in float64 by the evaluator's compiled derivative.
        """
        del dtype, compile, expected_calls
        xs = np.asarray(x, dtype=np.float64)
        points = xs.reshape(-1, self.n_particles, 3)
        if sparse and points.shape[0] != 1:
            raise ShapeError(f"sparse=True needs one point; got {points.shape[0]}")
        matrix = np.zeros((3, 3)) if self.cell is None else self.cell.matrix
        pbc = np.zeros(3, dtype=bool) if self.cell is None else self.cell.pbc
        elements = getattr(self.potential, "elements", None)
        symbols = None if elements is None else [elements[c] for c in self.codes]
        if backend not in self._evaluators:
            self._evaluators[backend] = SiteEvaluator(self.potential, skin=self.skin,
                                                      backend=backend)  # fmt: skip
        evaluator = self._evaluators[backend]
        out = []
        for pos in points:
            h = evaluator.hessian(pos, matrix, pbc, symbols, sparse=sparse)
            values = h.data if sparse else h
            if check_finite and not np.isfinite(values).all():
                raise NonFiniteError(f"the Hessian of {self.__name__} is not finite here")
            out.append(h)
        if sparse:
            return out[0]
        return out[0] if xs.ndim == 1 else np.stack(out)

    def structured_cache_info(
        self, backend: str, dtype: Any, compile: bool | str = False
    ) -> list[dict[str, Any]]:
        """Records of the compiled derivatives behind :meth:`structured_hessian` (one per shape)."""
        del dtype, compile
        evaluator = self._evaluators.get(backend)
        if evaluator is None:
            return []
        return [rec for p in evaluator._problems.values()
                for rec in cached_derivatives(p, backend).cache_info()]  # fmt: skip

    def dense_hessian_bytes(self, n: int) -> int:
        """Intermediates of the dense AD Hessian: ``n`` tangents through the ``N K`` slots."""
        return int(n) * self.n_particles * self.table.width * 3 * 8 * 16

    def check_points(self, xs: np.ndarray) -> bool:
        """Rebuild the table where an atom left the skin, check the ranges; True if rebuilt.

        Run by :meth:`simdiff.Problem.check_points` at each concrete point, outside
        any compiled function.  A batch of points must share one table: a rebuild
        needs them all within ``skin / 2`` of the first.
        """
        xs = np.asarray(xs, dtype=np.float64).reshape(-1, self.n_particles, 3)
        rebuilt = False
        for p in xs:
            atom, step = self.table.moved(p)
            if step > 0.5 * self.skin:
                if not self.follow or rebuilt:
                    raise NeighbourListError(
                        f"the neighbour table does not hold here: atom {atom} has moved "
                        f"{step:.4g} from where it was built, more than half the skin "
                        f"({0.5 * self.skin:.4g})"
                        + ("" if self.follow else "; build the problem with follow=True")
                    )
                self._set_table(p)
                self.rebuilds += 1
                self.version += 1
                rebuilt = True
            d = self.table.displacements(p, None if self.cell is None else self.cell.matrix)
            self.potential.check(d, self.table.valid, self.codes, self.table)
        return rebuilt


def manybody_problem(
    potential: Any,
    positions: Any,
    *,
    cell: Any = None,
    pbc: Any = None,
    symbols: Any = None,
    masses: Any = None,
    skin: float | None = None,
    follow: bool = True,
    name: str | None = None,
) -> Problem:
    """The energy of N atoms under a site potential (EAM, Stillinger-Weber): a Problem.

    Parameters
    ----------
    potential : EAM or StillingerWeber
        From :func:`~simdiff.pes.manybody.eam` or
        :func:`~simdiff.pes.manybody.stillinger_weber`.
    positions : array_like, shape (N, 3)
        Start geometry, becomes ``problem.x0`` (flat).
    cell : array_like, shape (3, 3), or Cell, optional
        Cell vectors (rows); with ``pbc``.  ``None``: free space.
    pbc : array_like of 3 bool, optional
        Periodic directions (default all, with a cell).
    symbols : sequence of str, optional
        Chemical symbols, for a potential with several elements.
    masses : float or array_like, optional
        For normal modes (default 1).
    skin : float, optional
        Table margin (default ``0.1 * cutoff``).
    follow : bool
        The table follows the atoms (see :class:`SiteEnergy`).
    name : str, optional

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pes.manybody import stillinger_weber
    >>> a = 5.431
    >>> basis = np.array([[0, 0, 0], [0.25, 0.25, 0.25]]) @ (0.5 * a * (1 - np.eye(3)))
    >>> p = manybody_problem(stillinger_weber(), basis, cell=0.5 * a * (1 - np.eye(3)))
    >>> round(float(p.evaluate()) / 2, 4)     # eV per atom, diamond silicon
    -4.3366
    """
    pos = np.asarray(positions, dtype=np.float64)
    if pos.ndim == 1 and pos.size % 3 == 0:
        pos = pos.reshape(-1, 3)
    if pos.ndim != 2 or pos.shape[1] != 3 or pos.shape[0] == 0:
        raise ShapeError(f"positions must have shape (N, 3); got {np.shape(positions)}")
    n = pos.shape[0]
    c = as_cell(cell, pbc)
    codes = species_codes(potential, symbols, n)
    skin = 0.1 * float(potential.cutoff) if skin is None else float(skin)
    if not skin >= 0.0:
        raise InputError(f"skin must be a non-negative length; got {skin}")
    fn = SiteEnergy(potential, pos, c, codes, skin=skin, follow=follow)
    fn.check_points(pos.reshape(1, -1))
    info = ClusterInfo(n, 3, check_masses(masses, n), c)
    return Problem(fn, pos.reshape(-1), name=name or f"{fn.__name__}{n}",
                   meta={"tags": ("pes",), "pes": info})  # fmt: skip


def as_cell(cell: Any, pbc: Any) -> Cell | None:
    """A :class:`Cell` from a ``(3, 3)`` matrix and periodic directions; ``None`` in free space."""
    if cell is None or isinstance(cell, Cell):
        return cell
    m = np.asarray(cell, dtype=np.float64)
    if m.shape == (3,):
        m = np.diag(m)
    p = np.ones(3, dtype=bool) if pbc is None else np.asarray(pbc, dtype=bool)
    if not p.any():
        return None
    return Cell(m, p)


class StrainedSites:
    r"""``sum_i w_i eps_i((I + e) d_i)`` of ``y = [d (N, K, 3), w (N,), e (6,), masks]``.

    ``e`` in Voigt order ``xx, yy, zz, yz, xz, xy`` with engineering shears, so
    :math:`\partial E / \partial e` at 0 is the volume times ASE's stress;
    ``masks`` (only for potentials of several elements) the one-hot element
    weights of the centres ``(N, S)`` and of the neighbours ``(N, K, S)``.
    A class so that one problem (one compilation) serves every table of these shapes.
    """

    def __init__(self, potential: Any, n: int, k: int) -> None:
        self.potential = potential
        self.n, self.k, self.s = int(n), int(k), _width(potential)
        self.size = 3 * self.n * self.k + self.n + 6
        if self.s > 1:
            self.size += self.n * self.s + self.n * self.k * self.s
        self.__name__ = f"{type(potential).__name__.lower()}_strained_sites"

    def pack(self, d: np.ndarray, centre: np.ndarray, neighbours: np.ndarray) -> np.ndarray:
        """``y`` at zero strain and unit weights."""
        parts = [d.reshape(-1), np.ones(self.n), np.zeros(6)]
        if self.s > 1:
            parts += [centre.reshape(-1), neighbours.reshape(-1)]
        return np.concatenate(parts)

    def __call__(self, y: Any, ops: Any) -> Any:
        n, k, s = self.n, self.k, self.s
        m = 3 * n * k
        d = ops.reshape(y[:m], (n, k, 3))
        w = y[m : m + n]
        e = y[m + n : m + n + 6]
        dx, dy, dz = d[..., 0], d[..., 1], d[..., 2]
        sx = (1.0 + e[0]) * dx + 0.5 * e[5] * dy + 0.5 * e[4] * dz
        sy = 0.5 * e[5] * dx + (1.0 + e[1]) * dy + 0.5 * e[3] * dz
        sz = 0.5 * e[4] * dx + 0.5 * e[3] * dy + (1.0 + e[2]) * dz
        strained = ops.stack([sx, sy, sz], axis=-1)
        if s > 1:
            at = m + n + 6
            centre = ops.reshape(ops.stop_gradient(y[at : at + n * s]), (n, s))
            neighbours = ops.reshape(ops.stop_gradient(y[at + n * s :]), (n, k, s))
        else:
            centre = ops.asarray(np.ones((n, 1)))
            neighbours = ops.asarray(np.ones((n, k, 1)))
        return ops.sum(w * self.potential.site_energies(strained, ops, centre, neighbours))


#: Evaluator problems by ``(potential, atoms, slots)``: calculators and Hessians of one
#: potential on cells of one shape share their compiled derivatives.
SHARED: RecentlyUsed[tuple[Any, int, int], Problem] = RecentlyUsed(16)


class SiteEvaluator:
    """Energy, forces, stress, per-atom energies, Hessian and phonons of Atoms-like input.

    Parameters
    ----------
    potential : site potential
    skin : float, optional
        Table margin (default ``0.1 * cutoff``); the table is rebuilt when an
        atom has moved more than ``skin / 2``, or the cell, periodicity or
        elements changed.
    backend : {"jax", "torch"}
    """

    def __init__(self, potential: Any, *, skin: float | None = None, backend: str = "jax") -> None:
        self.potential = potential
        self.skin = 0.1 * float(potential.cutoff) if skin is None else float(skin)
        if not self.skin >= 0.0:
            raise InputError(f"skin must be a non-negative length; got {self.skin}")
        self.backend = backend
        self.rebuilds = 0
        self.table: SiteTable | None = None
        self._state: tuple[Any, ...] | None = None
        self._problems: dict[tuple[int, int], Problem] = {}

    @property
    def compilations(self) -> int:
        """Compilations of the evaluator's derivatives so far (one per table shape used)."""
        problems = self._problems.values()
        return sum(cached_derivatives(p, self.backend).compilations for p in problems)

    def update(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray, symbols: Any) -> bool:
        """Bring the table up to date at ``pos``; True if rebuilt."""
        if not np.isfinite(pos).all():
            bad = int(np.flatnonzero(~np.isfinite(pos).all(axis=1))[0])
            raise InputError(f"positions must be finite; atom {bad} is at {pos[bad].tolist()}")
        n = pos.shape[0]
        key = (n, cell.tobytes(), np.asarray(pbc, bool).tobytes(),
               None if symbols is None else tuple(symbols))  # fmt: skip
        if self.table is not None and self._state is not None and self._state[0] == key:
            if self.table.moved(pos)[1] <= 0.5 * self.skin:
                return False
        self.codes = species_codes(self.potential, symbols, n)
        self.cell = as_cell(cell, pbc)
        width = None
        if self.table is not None and self.table.index.shape[0] == n:
            width = self.table.width
        radius = self.potential.cutoff + self.skin
        table = site_table(pos, self.cell, radius)
        if width is not None and table.width <= width:  # same shapes: no recompilation
            table = site_table(pos, self.cell, radius, width=width)
        self.table = table
        self.matrix = None if self.cell is None else self.cell.matrix
        self.centre, self.neighbours = one_hot(self.codes, table, _width(self.potential))
        self._state = (key,)
        self.rebuilds += 1
        return True

    def _problem(self, n: int, k: int, d: np.ndarray) -> Problem:
        if (n, k) not in self._problems:

            def build() -> Problem:
                fn = StrainedSites(self.potential, n, k)
                y0 = fn.pack(d, self.centre, self.neighbours)  # where the energy is defined
                return Problem(fn, y0, name=f"{fn.__name__}{n}x{k}")

            try:  # evaluators of one potential share the problem (its compiled derivatives)
                self._problems[(n, k)] = SHARED.get((self.potential, n, k), build)
            except TypeError:  # an unhashable potential: a problem of its own
                self._problems[(n, k)] = build()
        return self._problems[(n, k)]

    def _point(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray,
               symbols: Any) -> tuple[Problem, StrainedSites, np.ndarray, np.ndarray]:  # fmt: skip
        pos = np.asarray(pos, dtype=np.float64)
        self.update(pos, np.asarray(cell, dtype=np.float64), np.asarray(pbc, bool), symbols)
        assert self.table is not None
        d = self.table.displacements(pos, self.matrix)
        self.potential.check(d, self.table.valid, self.codes, self.table)
        n, k = self.table.index.shape
        problem = self._problem(n, k, d)
        fn = problem.fn
        assert isinstance(fn, StrainedSites)
        return problem, fn, fn.pack(d, self.centre, self.neighbours), d

    def evaluate(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray,
                 symbols: Any = None) -> dict[str, Any]:  # fmt: skip
        """Energy, forces ``(N, 3)``, ``dE/de`` (Voigt ``(6,)``), per-atom energies ``(N,)``."""
        problem, fn, y, _ = self._point(pos, cell, pbc, symbols)
        e, g = cached_derivatives(problem, self.backend).value_and_grad(y)
        g = np.asarray(g)
        n, k = fn.n, fn.k
        gd = g[: 3 * n * k].reshape(n, k, 3)
        assert self.table is not None
        valid = self.table.valid
        forces = np.zeros((n, 3))
        # d_ik = R_j - R_i + S C: dE/dR_j += g_ik, dE/dR_i -= g_ik; F = -dE/dR
        forces += np.where(valid[..., None], gd, 0.0).sum(axis=1)
        for a in range(3):
            forces[:, a] -= np.bincount(self.table.index[valid], gd[..., a][valid], n)
        m = 3 * n * k
        return {"energy": float(e), "forces": forces, "energies": g[m : m + n].copy(),
                "strain_derivative": g[m + n : m + n + 6].copy()}  # fmt: skip

    def site_hessians(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray,
                      symbols: Any = None) -> np.ndarray:  # fmt: skip
        """Hessian of each site energy in its row of displacements, ``(N, 3K, 3K)``.

        The Hessian of :math:`\\sum_i \\varepsilon_i(d_i)` in the displacements is
        block-diagonal with these blocks, so ``3K`` Hessian-vector products (the
        direction: slot ``k``, axis ``a`` of every atom at once) give them all.
        """
        problem, fn, y, _ = self._point(pos, cell, pbc, symbols)
        n, k = fn.n, fn.k
        w = 3 * k
        v = np.zeros((w, fn.size))
        rows = v[:, : 3 * n * k].reshape(w, n, w)
        rows[np.arange(w), :, np.arange(w)] = 1.0
        hv = np.asarray(cached_derivatives(problem, self.backend).hvp(v, y))
        h = hv[:, : 3 * n * k].reshape(w, n, w).transpose(1, 2, 0)  # [i, row, column]
        return 0.5 * (h + h.transpose(0, 2, 1))

    def hessian(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray, symbols: Any = None,
                *, sparse: bool = False) -> Any:  # fmt: skip
        """The exact Hessian in the positions, ``(3N, 3N)`` (``scipy.sparse`` CSR with ``sparse``).

        The potential's own factored Hessian where it has one (a ``hessian``
        method: EAM's pair blocks and rank-one terms), else :meth:`block_hessian`.
        """
        own = getattr(self.potential, "hessian", None)
        if callable(own):
            return own(pos, cell, pbc, symbols, sparse=sparse, evaluator=self)
        return self.block_hessian(pos, cell, pbc, symbols, sparse=sparse)

    def block_hessian(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray,
                      symbols: Any = None, *, sparse: bool = False) -> Any:  # fmt: skip
        """The exact Hessian from one dense block per atom, ``(3N, 3N)`` (CSR with ``sparse``).

        :math:`H = \\sum_i A_i^T H_i A_i` with :math:`H_i` the site blocks
        (:meth:`site_hessians`) and :math:`A_i` the map from positions to atom
        ``i``'s row (``+1`` at each neighbour, ``-1`` at ``i``): per atom a
        dense block over itself and its neighbours.
        """
        blocks = self.site_hessians(pos, cell, pbc, symbols)
        assert self.table is not None
        n, k = self.table.index.shape
        h = blocks.reshape(n, k, 3, k, 3)
        valid = self.table.valid
        h = h * (valid[:, :, None, None, None] & valid[:, None, None, :, None])
        ext = np.zeros((n, k + 1, 3, k + 1, 3))  # atoms [i, j_1, ..., j_K]
        ext[:, 1:, :, 1:, :] = h
        ext[:, 0, :, 1:, :] = -h.sum(axis=1)
        ext[:, 1:, :, 0, :] = -h.sum(axis=3)
        ext[:, 0, :, 0, :] = h.sum(axis=(1, 3))
        atoms = np.concatenate([np.arange(n)[:, None], self.table.index], axis=1)  # (n, k+1)
        comp = (3 * atoms[:, :, None] + np.arange(3)).reshape(n, -1)  # (n, 3(k+1))
        r = np.broadcast_to(comp[:, :, None], ext.reshape(n, 3 * k + 3, 3 * k + 3).shape)
        c = np.broadcast_to(comp[:, None, :], r.shape)
        out = scipy.sparse.coo_array((ext.reshape(-1), (r.reshape(-1), c.reshape(-1))),
                                     shape=(3 * n, 3 * n)).tocsr()  # fmt: skip
        out = (0.5 * (out + out.T)).tocsr()  # symmetric to the last bit
        return out if sparse else out.toarray()

    def dynamical_matrices(self, pos: np.ndarray, cell: np.ndarray, masses: np.ndarray,
                           q: np.ndarray, symbols: Any = None) -> np.ndarray:  # fmt: skip
        r"""Dynamical matrices :math:`D(q)` of a 3-D crystal, ``(Q, 3N, 3N)``, ASE's convention.

        :math:`D(q) = M^{-1/2} \bigl(\sum_i A_i(q)^H H_i A_i(q)\bigr) M^{-1/2}`
        with :math:`A_i(q)` the row map with the Bloch phase
        :math:`e^{-2\pi i\, q \cdot S_{ik}}` on slot ``k`` (``q`` scaled, in
        reciprocal lattice vectors): the force constants of the infinite
        crystal, with no supercell and no displacement.
        """
        pbc = np.ones(3, dtype=bool)
        blocks = self.site_hessians(pos, cell, pbc, symbols)
        assert self.table is not None
        n, k = self.table.index.shape
        valid = self.table.valid
        h = blocks.reshape(n, k, 3, k, 3) * (
            valid[:, :, None, None, None] & valid[:, None, None, :, None]
        )
        qs = np.atleast_2d(np.asarray(q, dtype=np.float64))
        out = np.zeros((qs.shape[0], n, 3, n, 3), dtype=np.complex128)
        inv = np.asarray(masses, dtype=np.float64) ** -0.5
        for a, qv in enumerate(qs):
            phase = np.exp(-2j * pi * (self.table.shifts @ qv)) * valid  # (n, k)
            # A_i e: slot k -> phase_ik e_{j_ik} - e_i
            amap = np.zeros((n, k, n), dtype=np.complex128)
            np.add.at(amap, (np.repeat(np.arange(n), k), np.tile(np.arange(k), n),
                             self.table.index.reshape(-1)), phase.reshape(-1))  # fmt: skip
            amap[:, :, :] -= valid[:, :, None] * np.eye(n)[:, None, :]
            # D = sum_i A_i^H H_i A_i, per axis pair
            dmat = np.einsum("ikp,ikalb,ilq->paqb", amap.conj(), h, amap)
            out[a] = dmat * np.multiply.outer(inv, inv)[:, None, :, None]
        d = out.reshape(qs.shape[0], 3 * n, 3 * n)
        return 0.5 * (d + d.conj().transpose(0, 2, 1))
