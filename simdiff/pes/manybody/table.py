r"""Per-atom neighbour tables: every atom's neighbours within reach, with their lattice shifts.

A many-body energy is a sum of *site energies*, one per atom ``i``, each a
function of the displacements to the atom's neighbours (its *row*),

.. math:: d_{ik} = R_{j_{ik}} - R_i + S_{ik}\, C, \qquad k = 1, \dots, K,

(``C`` the cell, rows the cell vectors; :math:`S_{ik}` integer lattice
shifts, zero in non-periodic directions).  :class:`SiteTable` holds
:math:`j_{ik}` and :math:`S_{ik}` for every atom, padded to a common width
``K``; a padding slot points at the atom itself with a fixed displacement far
beyond the cutoff, so it contributes exactly zero to every site energy and
every derivative, whatever the positions.  The pairs come from
:func:`simdiff.pes.geometry.image_pair_index` (any cell: triclinic, periodic
in some directions only, shorter than twice the cutoff).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.errors import InputError
from simdiff.pes.geometry import Cell, image_pair_index, pair_index

__all__ = ["SiteTable", "site_table"]


@dataclass(frozen=True)
class SiteTable:
    """Neighbours of every atom within ``radius`` (a directed list: both ``i -> j`` and ``j -> i``).

    Attributes
    ----------
    index : int ndarray, shape (N, K)
        Neighbour atom of each slot (the atom itself in a padding slot).
    shifts : ndarray, shape (N, K, 3)
        Lattice shifts ``S`` (integers as floats; 0 in a padding slot).
    valid : bool ndarray, shape (N, K)
        Real neighbours (False: padding).
    padding : float
        Length of the fixed displacement of a padding slot (beyond ``radius``).
    radius : float
        The table holds the neighbours closer than this at :attr:`reference`.
    reference : ndarray, shape (N, 3)
        Positions at which the table was built.
    """

    index: np.ndarray
    shifts: np.ndarray
    valid: np.ndarray
    padding: float
    radius: float
    reference: np.ndarray

    @property
    def width(self) -> int:
        """``K``, slots per atom."""
        return int(self.index.shape[1])

    def offsets(self, cell: np.ndarray | None) -> np.ndarray:
        """``S C`` of each slot (Cartesian, ``(N, K, 3)``); a padding slot's far displacement."""
        off = np.zeros(self.shifts.shape) if cell is None else self.shifts @ cell
        off[~self.valid] = (self.padding, 0.0, 0.0)
        return off

    def displacements(self, pos: np.ndarray, cell: np.ndarray | None) -> np.ndarray:
        """:math:`d_{ik}` at ``pos`` (numpy, ``(N, K, 3)``)."""
        return pos[self.index] - pos[:, None, :] + self.offsets(cell)

    def moved(self, pos: np.ndarray) -> tuple[int, float]:
        """``(atom, distance)`` of the atom farthest from :attr:`reference` (straight line)."""
        step = np.einsum("ij,ij->i", pos - self.reference, pos - self.reference)
        k = int(np.argmax(step)) if step.size else 0
        return k, float(np.sqrt(step[k])) if step.size else 0.0


def site_table(
    positions: Any, cell: Cell | None, radius: float, *, width: int | None = None
) -> SiteTable:
    """The neighbours of every atom closer than ``radius`` (minimum width, or ``width`` slots).

    Parameters
    ----------
    positions : array_like, shape (N, 3)
    cell : Cell or None
        ``None`` in free space.
    radius : float
    width : int, optional
        Slots per atom; at least the largest number of neighbours (default: that number,
        at least 1).

    Examples
    --------
    >>> import numpy as np
    >>> t = site_table(np.zeros((1, 3)), Cell(np.eye(3), [True, True, False]), 1.1)
    >>> t.width, t.shifts[0].astype(int).tolist()     # four in-plane images of itself
    (4, [[-1, 0, 0], [0, -1, 0], [0, 1, 0], [1, 0, 0]])
    """
    pos = np.asarray(positions, dtype=np.float64)
    n = pos.shape[0]
    if cell is None or not cell.pbc.any():
        pairs = pair_index(pos, radius, None)
        i, j = pairs[:, 0], pairs[:, 1]
        s = np.zeros((i.size, 3))
    else:
        i, j, s = image_pair_index(pos, radius, cell)
    # both directions: j -> i has the opposite shift
    first = np.concatenate([i, j])
    second = np.concatenate([j, i])
    shift = np.concatenate([s, -s])
    order = np.lexsort((shift[:, 2], shift[:, 1], shift[:, 0], second, first))
    first, second, shift = first[order], second[order], shift[order]
    counts = np.bincount(first, minlength=n)
    most = int(counts.max(initial=0))
    k = max(1, most) if width is None else int(width)
    if k < most:
        raise InputError(f"width {width} is below the {most} neighbours of atom "
                         f"{int(np.argmax(counts))}")  # fmt: skip
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(first.size) - starts[first]
    index = np.repeat(np.arange(n)[:, None], k, axis=1)
    shifts = np.zeros((n, k, 3))
    valid = np.zeros((n, k), dtype=bool)
    index[first, slot] = second
    shifts[first, slot] = shift
    valid[first, slot] = True
    return SiteTable(index, shifts, valid, padding=4.0 * float(radius) + 1.0,
                     radius=float(radius), reference=pos.copy())  # fmt: skip
