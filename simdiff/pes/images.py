r"""Pair energies of cells shorter than twice the cutoff: a sum over image pairs.

Where ``r_cut`` exceeds half the shortest periodic height of a cell, an atom
interacts with several images of another atom, and with its own images; the
minimum image is not enough.  :class:`ImagePairEnergy` sums over the image
pairs ``(i, j, S)`` within reach, with the displacement

.. math:: d_t = R_{j_t} - R_{i_t} + S_t C

(``C`` the cell, rows the cell vectors; :func:`~simdiff.pes.geometry.image_pair_index`),
a Verlet list that follows the atoms as :class:`~simdiff.pes.TermEnergy`'s
does.  :func:`~simdiff.pes.cluster_problem` builds it for such cells.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simdiff.errors import InputError, NeighbourListError
from simdiff.pes.geometry import Cell, image_pair_index

__all__ = ["ImagePairEnergy"]


class ImagePairEnergy:
    """The energy :math:`\\sum_t` ``term.of_difference(d_t)`` over image pairs: a problem's ``fn``.

    Parameters
    ----------
    term : PairTerm
        The pair term in free space (no minimum image: the shifts are explicit).
    n_particles : int
    cell : Cell
    positions : ndarray, shape (n_particles, 3)
        Where the list is built first.
    r_cut, skin : float
        The list holds the image pairs closer than ``r_cut + skin``.
    follow : bool
        Rebuild the list at a point where an atom has moved more than
        ``skin / 2`` from where it was built (else raise
        :class:`~simdiff.errors.NeighbourListError` there).

    Notes
    -----
    Exact as the cutoff list of :func:`~simdiff.pes.cluster_problem`: an image
    pair left out was at least ``r_cut + skin`` apart; while no atom has moved
    more than ``skin / 2`` (straight-line distance; the lattice shifts are
    constants), it is at least ``r_cut`` apart.  An atom's pairs with its own
    images have constant displacements: they add a constant to the energy and
    nothing to the derivatives.  As for :class:`~simdiff.pes.TermEnergy`, every
    derivative call checks its concrete points first (``check_points``), and a
    traced call beyond the skin is NaN.  The Hessian is the dense AD Hessian
    (cells of a few atoms).
    """

    def __init__(
        self,
        term: Any,
        n_particles: int,
        cell: Cell,
        positions: np.ndarray,
        *,
        r_cut: float,
        skin: float,
        follow: bool = True,
    ) -> None:
        self.term = term
        self.n_particles = int(n_particles)
        self.dim = 3
        self.cell = cell
        self.r_cut = float(r_cut)
        self.max_shift = 0.5 * float(skin)
        self.list_radius = self.r_cut + float(skin)
        self.follow = bool(follow)
        self.rebuilds = 0
        self.version = 0
        self.__name__ = f"{getattr(term, '__name__', 'pair')}_image_pairs"
        self._defined = np.asarray(positions, dtype=np.float64).copy()
        self._set_list(self._defined[None])

    def _set_list(self, pos: np.ndarray) -> None:
        found = [image_pair_index(p, self.list_radius, self.cell) for p in pos]
        rows = np.concatenate([np.column_stack([i, j, s]) for i, j, s in found])
        if len(found) > 1:
            rows = np.unique(rows, axis=0)
        self.first = rows[:, 0].astype(np.int64)
        self.second = rows[:, 1].astype(np.int64)
        self.shifts = rows[:, 2:5]
        self.offsets = self.shifts @ self.cell.matrix
        self.references = pos.copy()
        self.n_terms = int(rows.shape[0])

    # ------------------------------------------------------------------ energy
    def __call__(self, x: Any, ops: Any) -> Any:
        pos = ops.reshape(x, (self.n_particles, self.dim))
        if self.n_terms == 0:
            return ops.sum(pos) * 0.0
        d = ops.take(pos, self.second, axis=0) - ops.take(pos, self.first, axis=0)
        energy = ops.sum(self.term.of_difference(d + ops.asarray(self.offsets), ops))
        moved = pos[None] - ops.asarray(self.references)
        shift2 = ops.min(ops.max(ops.sum(moved * moved, axis=-1), axis=-1))
        # beyond the skin the list may miss pairs: NaN, never a silently wrong energy
        return energy * ops.where(shift2 > self.max_shift**2, float("nan"), 1.0)

    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the energy: the term, the cell, the start geometry and the list's rules."""
        return {"term": self.term, "n_particles": self.n_particles, "cell": self.cell,
                "positions": self._defined, "list_radius": self.list_radius,
                "max_shift": self.max_shift, "follow": self.follow}  # fmt: skip

    # ------------------------------------------------------------------ the list
    def stale(self, x: np.ndarray) -> tuple[int, float] | None:
        """``(atom, displacement)`` of the first atom beyond ``skin / 2`` at ``x`` or None."""
        pos = np.asarray(x, dtype=np.float64).reshape(-1, 1, self.n_particles, self.dim)
        moved = pos - self.references
        far = np.sqrt(np.einsum("brnd,brnd->brn", moved, moved))
        best = far.max(axis=-1).argmin(axis=-1)
        far = far[np.arange(far.shape[0]), best].max(axis=0)
        bad = np.flatnonzero(far > self.max_shift)
        return (int(bad[0]), float(far[bad[0]])) if bad.size else None

    def check_points(self, xs: np.ndarray) -> bool:
        """Make the list hold at the points ``xs`` (shape ``(B, n)``); True if rebuilt."""
        xs = np.asarray(xs, dtype=np.float64).reshape(-1, self.n_particles * self.dim)
        if not np.isfinite(xs).all():
            raise InputError("coordinates must be finite")
        where = self.stale(xs)
        if where is None:
            return False
        if not self.follow:
            raise NeighbourListError(
                f"the neighbour list of this energy does not hold here: atom {where[0]} has "
                f"moved {where[1]:.4g} from where the list was built, more than half the skin "
                f"(skin {2 * self.max_shift:.4g}, limit {self.max_shift:.4g}); build the problem "
                "with rebuild=True (the list then follows the atoms)"
            )
        self._set_list(xs.reshape(-1, self.n_particles, self.dim))
        self.rebuilds += 1
        self.version += 1
        return True

    def neighbour_list(self) -> dict[str, Any]:
        """``pairs`` (image pairs now), ``rebuilds``, ``follow``, ``skin``, ``radius``."""
        return {"pairs": self.n_terms, "rebuilds": self.rebuilds, "follow": self.follow,
                "skin": 2 * self.max_shift, "radius": self.list_radius}  # fmt: skip

    def __repr__(self) -> str:
        return f"ImagePairEnergy({self.term!r}, {self.n_terms} image pairs, {self.cell!r})"
