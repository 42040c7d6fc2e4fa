r"""Pair energies of ASE cells: image pairs, energy, forces, strain derivative, per-atom energies.

The engine behind :class:`simdiff.pes.ase_interface.SimdiffCalculator` with
``pair=``.  Any cell ASE has: orthorhombic or triclinic, periodic in all,
some or none of the three directions, and cells shorter than twice the
cutoff (an atom then interacts with several images of another, and with its
own images).  The pairs are those of :func:`ase.neighborlist.primitive_neighbor_list`
within ``r_cut + skin``, each once, as ``(i, j, S)`` with the displacement

.. math:: d_t = R_j - R_i + S_t \cdot C

(``C`` the cell, rows the cell vectors).  The energy of a symmetric strain
:math:`\varepsilon` applied to positions and cell alike is

.. math:: E(\varepsilon) = \sum_t w_t\, \phi\bigl(\lvert (I + \varepsilon)\, d_t \rvert\bigr),

a simdiff problem of the displacements, the weights :math:`w_t` (1 for a
pair, 0 for padding) and the six strain components.  One reverse pass at
:math:`\varepsilon = 0` gives the energy, :math:`\partial E / \partial d_t`
(forces, by a scatter over atoms), :math:`\partial E / \partial w_t = \phi_t`
(per-pair energies, split half to each atom) and
:math:`\partial E / \partial \varepsilon` (the stress times the volume).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ase.neighborlist import primitive_neighbor_list

from simdiff.core.cache import RecentlyUsed
from simdiff.core.config import Config
from simdiff.core.derivatives import cached_derivatives
from simdiff.core.fingerprint import _digest
from simdiff.core.problem import Problem
from simdiff.errors import InputError, NonFiniteError, _Opaque
from simdiff.pes.cluster import PairTerm
from simdiff.pes.potentials import PairPotential
from simdiff.pes.term_hessians import TermHessians, bucket_size
from simdiff.pes.terms import TERM_CHUNK, TermEnergy

__all__ = ["CellPairs", "StrainedPairSum", "image_pairs", "voigt_stress"]


class StrainedPairSum:
    r"""``sum_t w_t pair(|(I + eps) d_t|)`` of ``y = [d (rows, 3), w (rows,), eps (6,)]``.

    ``eps`` in Voigt order ``xx, yy, zz, yz, xz, xy`` with engineering shears
    (the tensor's off-diagonal entries are half of them), so that
    :math:`\partial E / \partial \varepsilon_k` at 0 is the volume times ASE's
    stress component ``k``.  A class so that its problem is shared (and its
    derivatives compiled once) per pair potential and number of rows.
    """

    def __init__(self, pair: PairPotential, rows: int) -> None:
        self.term = PairTerm(pair)
        self.rows = int(rows)
        self.__name__ = f"{self.term.__name__}_strained_sum{rows}"

    def __call__(self, y: Any, ops: Any) -> Any:
        m = self.rows
        d = ops.reshape(y[: 3 * m], (m, 3))
        w = y[3 * m : 4 * m]
        e = y[4 * m :]
        dx, dy, dz = d[:, 0], d[:, 1], d[:, 2]
        # (I + eps) d with eps symmetric: diagonal e[0..2], shears e[3..5] / 2
        sx = (1.0 + e[0]) * dx + 0.5 * e[5] * dy + 0.5 * e[4] * dz
        sy = 0.5 * e[5] * dx + (1.0 + e[1]) * dy + 0.5 * e[3] * dz
        sz = 0.5 * e[4] * dx + 0.5 * e[3] * dy + (1.0 + e[2]) * dz
        strained = ops.stack([sx, sy, sz], axis=-1)
        return ops.sum(w * self.term.of_difference(strained, ops))


_SHARED: RecentlyUsed[tuple[Any, int], Problem] = RecentlyUsed(32)


def pair_key(pair: PairPotential) -> Any:
    """What identifies a pair potential for sharing compiled code: its fingerprint digest.

    Two ``functools.partial(lennard_jones, epsilon=..., sigma=...)`` made
    separately with equal parameters are different objects with the same
    definition: they share one problem (one compilation).  A potential that
    cannot be fingerprinted is identified by itself.
    """
    try:
        return ("digest", _digest(pair))
    except (_Opaque, RecursionError):
        return pair


def _strained_problem(pair: PairPotential, key: Any, rows: int) -> Problem:
    def build() -> Problem:
        y0 = np.concatenate([np.tile([1.0, 0.0, 0.0], rows), np.ones(rows), np.zeros(6)])
        return Problem(StrainedPairSum(pair, rows), y0, name=f"strained_pairs{rows}")

    try:
        return _SHARED.get((key, rows), build)
    except TypeError:  # an unhashable pair potential: a problem of its own
        return build()


class CellPairs:
    """The interacting image pairs of a set of atoms in a cell, and their energy (a Verlet list).

    Parameters
    ----------
    pair : callable
        ``pair(r, ops)``.  Periodic directions need a cutoff (an ``r_cut``
        attribute, :func:`~simdiff.pes.smooth_cutoff`); without one every pair
        of a free cluster interacts.
    skin : float
        The list holds the image pairs closer than ``r_cut + skin``; it is
        rebuilt when an atom has moved more than ``skin / 2`` (Euclidean) from
        where it was built, when a change of the cell could bring a pair
        outside it within reach (:meth:`_needs_rebuild`), or when the
        periodicity changed.
    backend : {"jax", "torch"}

    Notes
    -----
    *Exactness.*  A pair left out was at least ``r_cut + skin`` apart (in
    every image); while no atom has moved more than ``skin / 2`` it is still
    at least ``r_cut`` apart, where the switched potential and its first two
    derivatives vanish.  The rows are padded to :func:`~simdiff.pes.term_hessians.bucket_size`
    with weight 0, so one compiled derivative serves every list length in a
    bucket: a rebuild recompiles only when the list leaves its bucket.
    """

    def __init__(self, pair: PairPotential, *, skin: float, backend: str = "jax") -> None:
        if not skin >= 0.0:
            raise InputError(f"skin must be a non-negative length; got {skin}")
        self.pair = pair
        self._key = pair_key(pair)
        self.r_cut = getattr(pair, "r_cut", None)
        self.skin = float(skin)
        self.backend = backend
        self.rebuilds = 0
        self._ref: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.i = self.j = np.zeros(0, dtype=np.int64)
        self.shifts = np.zeros((0, 3))

    # ------------------------------------------------------------------ the list
    def _needs_rebuild(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray) -> bool:
        """Whether a pair outside the list may be within ``r_cut`` at ``(pos, cell)`` (see Notes).

        Same cell: an atom moved more than ``skin / 2``.  A new cell ``C'``
        (a cell filter's or a barostat's step): with ``G = C^-1 C'`` every
        image displacement becomes ``d G`` plus the atoms' own fractional
        moves, so a pair that was at least ``r_cut + skin`` apart is still at
        least ``sigma_min(G) (r_cut + skin) - 2 max_i |(f'_i - f_i) C'|``
        apart (``f`` fractional coordinates); the list holds while that is at
        least ``r_cut``.
        """
        if self._ref is None:
            return True
        ref_pos, ref_cell, ref_pbc = self._ref
        if ref_pos.shape != pos.shape or not np.array_equal(ref_pbc, pbc):
            return True
        if self.r_cut is None:  # all pairs of a free cluster: valid everywhere
            return False
        if np.array_equal(ref_cell, cell):
            moved2 = np.einsum("ij,ij->i", pos - ref_pos, pos - ref_pos)
            return bool(moved2.max(initial=0.0) > (0.5 * self.skin) ** 2)
        if abs(np.linalg.det(ref_cell)) == 0.0 or abs(np.linalg.det(cell)) == 0.0:
            return True
        inv_ref, inv = np.linalg.inv(ref_cell), np.linalg.inv(cell)
        sigma = float(np.linalg.svd(inv_ref @ cell, compute_uv=False).min())
        own = (pos @ inv - ref_pos @ inv_ref) @ cell
        moved = float(np.sqrt(np.einsum("ij,ij->i", own, own).max(initial=0.0)))
        return sigma * (self.r_cut + self.skin) - 2.0 * moved < self.r_cut

    def update(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray) -> bool:
        """Rebuild the list at ``pos`` if it does not hold there; True if rebuilt.

        Raises :class:`~simdiff.errors.InputError` naming the first atom with a
        non-finite position, or a periodic cell vector of length 0.
        """
        if not np.isfinite(pos).all():
            bad = int(np.flatnonzero(~np.isfinite(pos).all(axis=1))[0])
            raise InputError(f"positions must be finite; atom {bad} is at {pos[bad].tolist()}")
        if not self._needs_rebuild(pos, cell, pbc):
            return False
        self.i, self.j, self.shifts = image_pairs(pos, cell, pbc, self.r_cut, self.skin)
        self._ref = (pos.copy(), cell.copy(), pbc.copy())
        self.rebuilds += 1
        return True

    def _displacements(self, pos: np.ndarray, cell: np.ndarray) -> np.ndarray:
        """``d_t`` of the listed pairs; coincident atoms (``d_t = 0``) raise ``InputError``."""
        d = pos[self.j] - pos[self.i] + self.shifts @ cell
        zero = np.flatnonzero(np.einsum("ij,ij->i", d, d) == 0.0)
        if zero.size:
            t = int(zero[0])
            image = "" if not self.shifts[t].any() else f" (image {self.shifts[t].astype(int)})"
            raise InputError(
                f"atoms {self.i[t]} and {self.j[t]}{image} coincide (distance 0): the energy is "
                "+inf and its derivatives are undefined"
            )
        return d

    # ------------------------------------------------------------------ the energy
    def evaluate(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray) -> dict[str, Any]:
        """Energy, forces ``(N, 3)``, ``dE/deps`` (Voigt, ``(6,)``), per-atom energies ``(N,)``."""
        pos = np.asarray(pos, dtype=np.float64)
        cell = np.asarray(cell, dtype=np.float64)
        pbc = np.asarray(pbc, dtype=bool)
        self.update(pos, cell, pbc)
        n, m = pos.shape[0], self.i.size
        if m == 0:
            return {"energy": 0.0, "forces": np.zeros((n, 3)), "strain_derivative": np.zeros(6),
                    "energies": np.zeros(n)}  # fmt: skip
        d = self._displacements(pos, cell)
        rows = bucket_size(m)
        y = np.empty(4 * rows + 6)
        y[: 3 * m] = d.reshape(-1)
        y[3 * m : 3 * rows] = np.tile(d[0], rows - m)  # padding: a copy of pair 0, weight 0
        y[3 * rows : 3 * rows + m] = 1.0
        y[3 * rows + m : 4 * rows] = 0.0
        y[4 * rows :] = 0.0
        problem = _strained_problem(self.pair, self._key, rows)
        e, g = cached_derivatives(problem, self.backend).value_and_grad(y)
        g = np.asarray(g)
        gd = g[: 3 * m].reshape(m, 3)
        phi = g[3 * rows : 3 * rows + m]
        forces = np.empty((n, 3))
        for a in range(3):  # F = -dE/dR: +g on atom i, -g on atom j
            forces[:, a] = np.bincount(self.i, gd[:, a], n) - np.bincount(self.j, gd[:, a], n)
        energies = 0.5 * (np.bincount(self.i, phi, n) + np.bincount(self.j, phi, n))
        return {"energy": float(e), "forces": forces, "strain_derivative": g[4 * rows :].copy(),
                "energies": energies}  # fmt: skip

    def pair_hessians(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray) -> np.ndarray:
        """``B_t = d^2 phi / d d_t^2`` of every listed image pair ``t``, shape ``(m, 3, 3)``.

        The pairs are :attr:`i`, :attr:`j`, :attr:`shifts` after the list is
        brought up to date at ``(pos, cell)``, an atom's pairs with its own
        images included; all blocks in one vectorised call
        (:class:`~simdiff.pes.term_hessians.TermHessians`).  Raises
        :class:`~simdiff.errors.NonFiniteError` naming the first pair whose
        block is not finite.
        """
        pos = np.asarray(pos, dtype=np.float64)
        cell = np.asarray(cell, dtype=np.float64)
        pbc = np.asarray(pbc, dtype=bool)
        self.update(pos, cell, pbc)
        m = self.i.size
        if m == 0:
            return np.zeros((0, 3, 3))
        d = self._displacements(pos, cell)
        # the blocks depend on d alone: the term Hessians of the pair term at the m displacements
        hessians = TermHessians(PairTerm(self.pair), 2, 3)
        blocks = hessians.stacked("difference", d, Config(backend=self.backend), TERM_CHUNK)
        if not np.all(np.isfinite(blocks)):
            t = int(np.flatnonzero(~np.isfinite(blocks).reshape(m, -1).all(axis=1))[0])
            raise NonFiniteError(
                f"the Hessian of pair {t} (atoms {self.i[t]}, {self.j[t]}, image "
                f"{self.shifts[t].astype(int).tolist()}) is not finite"
            )
        return blocks

    def hessian(self, pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray) -> np.ndarray:
        """The exact Hessian with respect to the positions, ``(3N, 3N)``, from one block per pair.

        The energy of image pair ``t`` depends on the positions through
        ``d_t`` alone, so its Hessian is ``[[B, -B], [-B, B]]`` at atoms
        ``(i, j)`` with :math:`B_t = \\partial^2 \\phi / \\partial d_t^2`
        (:meth:`pair_hessians`); images of the same pair add up, and an atom's
        pairs with its own images (constant ``d``) contribute nothing.
        """
        blocks = self.pair_hessians(pos, cell, pbc)
        n = np.asarray(pos).shape[0]
        other = self.i != self.j
        if not other.any():
            return np.zeros((3 * n, 3 * n))
        i, j = self.i[other], self.j[other]
        energy = TermEnergy(PairTerm(self.pair), np.stack([i, j], axis=1), n, 3)
        layout = energy.assembly()  # repeated pairs (several images) summed by a sparse product
        summed = np.asarray(layout.assembler @ blocks[other].reshape(-1, 9)).reshape(-1, 3, 3)
        return layout.dense(summed)


def image_pairs(
    pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray, r_cut: float | None, skin: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(i, j, S)`` of every image pair closer than ``r_cut + skin``, each once.

    ``d = R_j - R_i + S C``; each pair once: ``i < j``, or an atom and its own
    image with ``S > 0`` (lexicographically).  Without a cutoff, all pairs of a
    free cluster (a periodic direction then raises :class:`InputError`).
    """
    n = pos.shape[0]
    if r_cut is None:
        if pbc.any():
            raise InputError(
                f"a periodic cell (pbc={pbc.tolist()}) needs a pair potential with a cutoff "
                "(an r_cut attribute); wrap it with simdiff.pes.smooth_cutoff"
            )
        i, j = np.triu_indices(n, k=1)
        return i.astype(np.int64), j.astype(np.int64), np.zeros((i.size, 3))
    _check_cell(cell, pbc)
    radius = r_cut + skin
    small = _small_cell_pairs(pos, cell, pbc, radius)
    if small is not None:
        i, j, s = small
    else:
        i, j, s = primitive_neighbor_list("ijS", pbc, cell, pos, radius,
                                          self_interaction=False)  # fmt: skip
    first = np.where(s[:, 0] != 0, s[:, 0], np.where(s[:, 1] != 0, s[:, 1], s[:, 2]))
    keep = (i < j) | ((i == j) & (first > 0))
    return i[keep].astype(np.int64), j[keep].astype(np.int64), s[keep].astype(np.float64)


#: Candidate image pairs (atom pairs times lattice shifts) up to which a small 3-D periodic
#: cell's list is built by one vectorised distance test instead of ASE's binning.
SMALL_CELL_CANDIDATES = 200_000


def _small_cell_pairs(
    pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(i, j, S)`` of every ordered image pair closer than ``radius``, for a small cell.

    As :func:`ase.neighborlist.primitive_neighbor_list` (``self_interaction=False``)
    but by testing every lattice shift ``S`` with ``|S_c| <= ceil(radius / h_c
    + span_c)`` (``h_c`` the cell's heights, ``span_c`` the spread of the atoms'
    fractional coordinates, so unwrapped positions are covered): the binning
    of ASE costs milliseconds on a cell of one atom and many images.  ``None``
    when the cell is not periodic in all three directions or the test would
    exceed :data:`SMALL_CELL_CANDIDATES` candidates.
    """
    if not pbc.all():
        return None
    n = pos.shape[0]
    inv = np.linalg.inv(cell)
    heights = 1.0 / np.linalg.norm(inv, axis=0)  # the columns of C^-1 are the reciprocal vectors
    frac = pos @ inv
    reach = np.ceil(radius / heights + frac.max(axis=0) - frac.min(axis=0)).astype(np.int64)
    if int(np.prod(2 * reach + 1)) * n * n > SMALL_CELL_CANDIDATES:
        return None
    grids = np.meshgrid(*[np.arange(-r, r + 1) for r in reach], indexing="ij")
    shifts = np.stack([g.ravel() for g in grids], axis=1)  # (s, 3)
    d = pos[None, None, :, :] - pos[None, :, None, :] + (shifts @ cell)[:, None, None, :]
    close = np.einsum("sija,sija->sij", d, d) < radius * radius
    same = (shifts == 0).all(axis=1)
    close[same, np.arange(n), np.arange(n)] = False  # no atom with itself
    t, i, j = np.nonzero(close)
    return i.astype(np.int64), j.astype(np.int64), shifts[t]


def _check_cell(cell: np.ndarray, pbc: np.ndarray) -> None:
    """Periodic directions need a cell vector of positive length, and a 3-D periodic cell volume."""
    names = "abc"
    for k in np.flatnonzero(pbc):
        if not np.linalg.norm(cell[k]) > 0.0:
            raise InputError(
                f"cell vector {names[k]} is periodic (pbc[{k}] = True) but has length 0: "
                f"cell = {cell.round(6).tolist()}"
            )
    if pbc.all() and not abs(np.linalg.det(cell)) > 0.0:
        raise InputError(
            f"the periodic cell has zero volume (its vectors are linearly dependent): "
            f"cell = {cell.round(6).tolist()}"
        )


def voigt_stress(strain_derivative: np.ndarray, cell: np.ndarray) -> np.ndarray:
    """ASE's stress (Voigt ``xx, yy, zz, yz, xz, xy``, energy / length^3): ``(1/V) dE/deps``."""
    volume = abs(float(np.linalg.det(cell)))
    if not volume > 0.0:
        raise InputError(f"stress needs a cell of positive volume; got cell {cell.tolist()}")
    return np.asarray(strain_derivative) / volume
