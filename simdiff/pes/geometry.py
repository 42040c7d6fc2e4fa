"""Geometry of a particle system: positions, masses, periodic box, minimum image.

Shared by every energy of :mod:`simdiff.pes` (pair clusters, sums of terms)
and by the analyses (normal modes, optimisation) that need to know the
particles behind a flat coordinate vector.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simdiff.core.problem import Problem
from simdiff.errors import InputError, ShapeError

__all__ = [
    "Cell",
    "ClusterInfo",
    "check_box",
    "check_masses",
    "check_positions",
    "cluster_info",
    "fits_minimum_image",
    "image_displacement",
    "image_displacement_np",
    "image_pair_index",
    "minimum_image",
    "pair_index",
]


#: Up to this many particles :func:`check_positions` tests every pair for coincidence.
_ALL_PAIRS = 512


def _kdtree(*args: Any, **kwargs: Any) -> Any:
    """``scipy.spatial.cKDTree(*args, **kwargs)``, imported here, not at import: listing the
    catalogue (which imports this module) must stay cheap."""
    import scipy.spatial

    return scipy.spatial.cKDTree(*args, **kwargs)


class ClusterInfo:
    """What a cluster problem knows about its particles (``problem.meta["pes"]``).

    Attributes
    ----------
    n_particles : int
    dim : int
        Spatial dimension (3 for clusters; normal-mode analysis needs 3).
    masses : ndarray, shape (n_particles,)
    box : ndarray of shape (dim,), Cell or None
        Orthorhombic box lengths for periodic systems, a :class:`Cell`
        (triclinic, or periodic in some directions only), ``None`` in free space.
    """

    def __init__(self, n_particles: int, dim: int, masses: np.ndarray,
                 box: np.ndarray | Cell | None) -> None:  # fmt: skip
        self.n_particles = n_particles
        self.dim = dim
        self.masses = masses
        self.box = box

    def positions(self, x: Any) -> np.ndarray:
        """Flat ``x`` of shape ``(N * dim,)`` as positions of shape ``(N, dim)``."""
        return np.asarray(x, dtype=np.float64).reshape(self.n_particles, self.dim)

    def __repr__(self) -> str:
        return f"ClusterInfo(n_particles={self.n_particles}, dim={self.dim}, box={self.box})"


def cluster_info(problem: Problem) -> ClusterInfo | None:
    """The :class:`ClusterInfo` of a problem built by :func:`cluster_problem`, else ``None``."""
    info = problem.meta.get("pes")
    return info if isinstance(info, ClusterInfo) else None


class Cell:
    """A periodic cell as ASE has them: any three cell vectors, periodic in some directions.

    Parameters
    ----------
    matrix : array_like, shape (3, 3)
        Rows are the cell vectors ``a, b, c`` (linearly independent; a
        non-periodic direction's vector only completes the basis).
    pbc : array_like of bool, shape (3,)
        Periodic directions (``(True, True, False)``: a slab).

    Notes
    -----
    The minimum image rounds fractional coordinates,
    :math:`d - \\lfloor d C^{-1} \\rceil C` over the periodic directions.
    For a displacement shorter than half the shortest cell height
    (:meth:`heights`) this is the nearest image (each fractional component of
    such a vector is below 1/2); a pair potential with ``r_cut`` at most half
    the shortest periodic height therefore sees the nearest image of every
    pair within reach, and a farther image contributes zero whatever the
    rounding gives.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> cell = Cell([[4.0, 0, 0], [2.0, 4.0, 0], [0, 0, 10.0]], [True, True, False])
    >>> cell.heights().round(6).tolist()
    [3.577709, 4.0, 10.0]
    >>> cell.minimum_image(np.array([3.5, 3.9, 7.0]), simdiff.get_ops("numpy")).round(12)
    array([ 1.5, -0.1,  7. ])
    """

    def __init__(self, matrix: Any, pbc: Any) -> None:
        m = np.asarray(matrix, dtype=np.float64)
        p = np.asarray(pbc, dtype=bool)
        if m.shape != (3, 3) or p.shape != (3,):
            raise ShapeError(f"a cell is a (3, 3) matrix and (3,) pbc; got {m.shape} and {p.shape}")
        if not np.all(np.isfinite(m)):
            raise InputError(f"cell vectors must be finite; got {m.tolist()}")
        names = "abc"
        for k in range(3):
            if not np.linalg.norm(m[k]) > 0.0:
                raise InputError(f"cell vector {names[k]} has length 0: cell = {m.tolist()}")
        volume = abs(float(np.linalg.det(m)))
        if not volume > 1e-12 * float(np.prod(np.linalg.norm(m, axis=1))):
            raise InputError(f"the cell has zero volume (its vectors are linearly dependent): "
                             f"cell = {m.round(6).tolist()}")  # fmt: skip
        self.matrix, self.pbc = m, p
        self.inverse = np.linalg.inv(m)
        self.mask = p.astype(np.float64)

    def heights(self) -> np.ndarray:
        """Distances between opposite faces, ``V / |b x c|``, ``V / |c x a|``, ``V / |a x b|``."""
        a, b, c = self.matrix
        volume = abs(float(np.linalg.det(self.matrix)))
        crosses = np.array([np.cross(b, c), np.cross(c, a), np.cross(a, b)])
        return volume / np.linalg.norm(crosses, axis=1)

    def minimum_image(self, d: Any, ops: Any) -> Any:
        """Image displacements of ``d`` (shape ``(..., 3)``), in any context (see Notes).

        The shift, a lattice vector, is under ``ops.stop_gradient``: the
        derivative with respect to ``d`` is exactly the identity.
        """
        inv, mat = ops.asarray(self.inverse), ops.asarray(self.matrix)
        f = ops.sum(d[..., :, None] * inv, axis=-2)  # fractional coordinates d C^-1
        k = 2.0 * math.pi
        wrapped = ops.atan2(ops.sin(f * k), ops.cos(f * k)) / k
        shift = (f - wrapped) * ops.asarray(self.mask)  # integers in the periodic directions
        return d - ops.stop_gradient(ops.sum(shift[..., :, None] * mat, axis=-2))

    def minimum_image_np(self, d: np.ndarray) -> np.ndarray:
        """:meth:`minimum_image` in numpy (``np.round``)."""
        f = d @ self.inverse
        return d - (self.mask * np.round(f)) @ self.matrix

    def wrap(self, pos: np.ndarray) -> np.ndarray:
        """Positions moved into the cell along its periodic directions."""
        f = pos @ self.inverse
        return (f - self.mask * np.floor(f)) @ self.matrix

    def _key(self) -> tuple[tuple[float, ...], tuple[bool, ...]]:
        return (tuple(self.matrix.ravel().tolist()), tuple(self.pbc.tolist()))

    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the cell: its vectors and periodic directions."""
        return {"matrix": self.matrix, "pbc": self.pbc}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cell) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Cell({self.matrix.round(6).tolist()}, pbc={self.pbc.tolist()})"


def image_displacement(d: Any, box: Any, ops: Any) -> Any:
    """Minimum-image ``d`` in an orthorhombic box (lengths) or a :class:`Cell`, in any context."""
    if isinstance(box, Cell):
        return box.minimum_image(d, ops)
    return minimum_image(d, ops.asarray(box), ops)


def image_displacement_np(d: np.ndarray, box: Any) -> np.ndarray:
    """:func:`image_displacement` in numpy."""
    if isinstance(box, Cell):
        return box.minimum_image_np(d)
    return d - box * np.round(d / box)


def minimum_image(d: Any, box: Any, ops: Any) -> Any:
    r"""Minimum-image displacement vectors in an orthorhombic box.

    Returns ``d - L * round(d / L)`` componentwise, written with the ops the
    protocol guarantees in every context: the image shift
    ``d - (L / 2\pi) atan2(sin(2\pi d / L), cos(2\pi d / L))`` is an integer
    multiple of ``L`` (up to rounding) and is put under ``ops.stop_gradient``,
    so the derivative of the result with respect to ``d`` is exactly 1 and all
    higher derivatives are exactly 0, as for ``round``.

    Parameters
    ----------
    d : array, shape (..., dim)
    box : array, shape (dim,)
    ops : Ops

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> ops = simdiff.get_ops("numpy")
    >>> minimum_image(np.array([0.9, -0.7, 0.2]), np.ones(3), ops).round(12)
    array([-0.1,  0.3,  0.2])
    """
    k = (2.0 * math.pi) / box
    wrapped = ops.atan2(ops.sin(d * k), ops.cos(d * k)) / k
    return d - ops.stop_gradient(d - wrapped)


def check_positions(
    x: Any, n_particles: int, dim: int = 3, box: np.ndarray | Cell | None = None
) -> np.ndarray:
    """Validate flat coordinates; return positions of shape ``(n_particles, dim)``.

    Raises
    ------
    ShapeError
        ``x`` is not of shape ``(n_particles * dim,)`` or ``(n_particles, dim)``.
    InputError
        (a ``ValueError``) Non-finite coordinates, or two distinct particles at distance 0.

    Examples
    --------
    >>> import numpy as np
    >>> check_positions(np.zeros(6), 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    simdiff.errors.InputError: particles 0 and 1 coincide (distance 0): the energy is +inf ...
    """
    a = np.asarray(x, dtype=np.float64)
    if a.shape not in ((n_particles * dim,), (n_particles, dim)):
        raise ShapeError(
            f"expected coordinates of shape ({n_particles * dim},) or ({n_particles}, {dim}) for "
            f"{n_particles} particles in {dim} dimensions; got shape {a.shape}"
        )
    pos = a.reshape(n_particles, dim)
    if not np.all(np.isfinite(pos)):
        i = int(np.flatnonzero(~np.isfinite(pos).all(axis=1))[0])
        raise InputError(f"coordinates must be finite; particle {i} is at {pos[i]}")
    # candidates: every pair for a few hundred particles (a k-d tree's import and build cost
    # more there), else by a k-d tree (O(N log N), not N^2 distances) within a radius far
    # above rounding; then the exact test, distance 0 by minimum image, on those pairs only
    scale = max(1.0, float(np.abs(pos).max(initial=0.0)))
    if n_particles <= _ALL_PAIRS and not isinstance(box, Cell):
        near = np.stack(np.triu_indices(n_particles, 1), axis=1)
    elif isinstance(box, Cell):
        scale = max(scale, float(np.abs(box.matrix).max()))
        near = pair_index(pos, 1e-9 * scale, box)
    elif box is None:
        near = _kdtree(pos).query_pairs(1e-9 * scale, output_type="ndarray")
    else:
        scale = max(scale, float(np.max(box)))
        tree = _kdtree(np.mod(pos, box), boxsize=box)
        near = tree.query_pairs(1e-9 * scale, output_type="ndarray")
    if near.size:
        near = np.sort(near, axis=1)
        near = near[np.lexsort((near[:, 1], near[:, 0]))]
        d = pos[near[:, 0]] - pos[near[:, 1]]
        if box is not None:
            d = image_displacement_np(d, box)
        near = near[np.sum(d * d, axis=-1) == 0.0]
    if near.size:
        i, j = (int(k) for k in near[0])
        raise InputError(
            f"particles {i} and {j} coincide (distance 0): the energy is +inf and its "
            "derivatives are undefined"
        )
    return pos


def check_masses(masses: Any, n_particles: int) -> np.ndarray:
    """Particle masses of shape ``(n_particles,)`` (default 1); positive and finite."""
    if masses is None:
        return np.ones(n_particles)
    m = np.asarray(masses, dtype=np.float64)
    if m.ndim == 0:
        m = np.full(n_particles, float(m))
    if m.shape != (n_particles,):
        raise ShapeError(f"masses must be a scalar or of shape ({n_particles},); got {m.shape}")
    if not np.all(np.isfinite(m) & (m > 0)):
        i = int(np.flatnonzero(~(np.isfinite(m) & (m > 0)))[0])
        raise InputError(f"masses must be finite and positive; masses[{i}] = {m[i]}")
    return m


def check_box(box: Any, dim: int, pair: Any, images: bool = False) -> np.ndarray | Cell | None:
    """Box lengths of shape ``(dim,)``, a :class:`Cell`, or ``None``; the pair cutoff must be at
    most half the box (half the shortest periodic height of a cell) unless ``images``.

    A ``(3, 3)`` matrix is a cell periodic in all directions; a diagonal one
    is the box of its lengths.  With ``images=True`` a cell shorter than twice
    the cutoff passes (its energy sums over image pairs; :func:`fits_minimum_image`
    tells which is which).
    """
    if box is None:
        return None
    if not isinstance(box, Cell) and np.ndim(box) == 2:
        m = np.asarray(box, dtype=np.float64)
        if m.shape == (dim, dim) and np.array_equal(m, np.diag(np.diag(m))):
            box = np.diag(m).copy()
        else:
            box = Cell(m, [True] * 3)
    if isinstance(box, Cell):
        return _check_cell_cutoff(box, pair, images)
    b = np.asarray(box, dtype=np.float64)
    if b.ndim == 0:
        b = np.full(dim, float(b))
    if b.shape != (dim,) or not np.all(np.isfinite(b) & (b > 0)):
        raise InputError(f"box must be {dim} positive finite lengths (or one); got {box!r}")
    r_cut = getattr(pair, "r_cut", None)
    if r_cut is None:
        raise InputError(
            "a periodic box needs a pair potential with a cutoff r_cut <= min(box) / 2 "
            f"(minimum image); got no cutoff, box={b.tolist()} (wrap the potential with "
            "simdiff.pes.smooth_cutoff)"
        )
    if r_cut > 0.5 * b.min() and not images:
        k = int(np.argmin(b))
        raise InputError(
            "a periodic box needs a pair potential with a cutoff r_cut <= min(box) / 2 "
            f"(minimum image); got r_cut={r_cut}, box={b.tolist()}: box vector {'xyz'[k]} "
            f"(length {b[k]:.6g}) is shorter than 2 r_cut = {2 * r_cut:.6g}, so an atom would "
            "interact with more than one image of another (simdiff.pes.cluster_problem sums "
            "over image pairs there)"
        )
    return b


def fits_minimum_image(box: np.ndarray | Cell | None, r_cut: float | None) -> bool:
    """Whether every pair within ``r_cut`` interacts through one image only (the minimum image):
    ``r_cut`` at most half the shortest periodic height (always true in free space)."""
    if box is None or r_cut is None:
        return True
    if isinstance(box, Cell):
        if not box.pbc.any():
            return True
        return bool(r_cut <= 0.5 * np.where(box.pbc, box.heights(), np.inf).min())
    return bool(r_cut <= 0.5 * np.min(box))


def _check_cell_cutoff(cell: Cell, pair: Any, images: bool = False) -> Cell:
    r_cut = getattr(pair, "r_cut", None)
    if not cell.pbc.any():
        return cell
    if r_cut is None:
        raise InputError(
            "a periodic cell needs a pair potential with a cutoff r_cut <= half its shortest "
            f"periodic height; got no cutoff, {cell!r} (wrap the potential with "
            "simdiff.pes.smooth_cutoff)"
        )
    heights = np.where(cell.pbc, cell.heights(), np.inf)
    k = int(np.argmin(heights))
    if r_cut > 0.5 * heights[k] and not images:
        raise InputError(
            f"a periodic cell needs a pair potential with a cutoff r_cut <= half its shortest "
            f"periodic height; got r_cut={r_cut}: the height across cell vector {'abc'[k]} is "
            f"{heights[k]:.6g}, shorter than 2 r_cut = {2 * r_cut:.6g}, so an atom would "
            "interact with more than one image of another (simdiff.pes.cluster_problem sums "
            "over image pairs there)"
        )
    return cell


def _cell_pair_index(pos: np.ndarray, radius: float, cell: Cell) -> np.ndarray:
    """Pairs ``i < j`` with an image closer than ``radius`` in a :class:`Cell` (k-d tree over
    the images within reach)."""
    wrapped = cell.wrap(pos)
    reach = np.where(cell.pbc, np.ceil(radius / cell.heights()), 0).astype(int)
    grid = np.stack(np.meshgrid(*[np.arange(-r, r + 1) for r in reach], indexing="ij"), -1)
    shifts = grid.reshape(-1, 3) @ cell.matrix
    images = (wrapped[None, :, :] + shifts[:, None, :]).reshape(-1, 3)
    found = _kdtree(wrapped).sparse_distance_matrix(
        _kdtree(images), float(radius), output_type="ndarray"
    )
    n = pos.shape[0]
    i, j = found["i"].astype(np.int64), (found["j"] % n).astype(np.int64)
    keep = i != j
    pairs = np.unique(np.sort(np.stack([i[keep], j[keep]], axis=1), axis=1), axis=0)
    return pairs.reshape(-1, 2).astype(np.int64)


def image_pair_index(
    positions: np.ndarray, radius: float, cell: Cell
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Image pairs ``(i, j, S)`` closer than ``radius`` for the positions as given, each once.

    The displacement of pair ``t`` is ``R[j_t] - R[i_t] + S_t C`` (``S_t``
    integers, zero in non-periodic directions), an atom's pairs with its own
    images included: each pair once, ``i < j``, or ``i == j`` with the first
    nonzero component of ``S`` positive.  For cells of any size, also shorter
    than twice ``radius``; a k-d tree over the images within reach of the
    wrapped positions.

    Examples
    --------
    >>> cell = Cell(np.eye(3), [True, True, True])
    >>> i, j, s = image_pair_index(np.zeros((1, 3)), 1.1, cell)   # one atom, six neighbours
    >>> i.tolist(), s.astype(int).tolist()
    ([0, 0, 0], [[0, 0, 1], [0, 1, 0], [1, 0, 0]])
    """
    pos = np.asarray(positions, dtype=np.float64)
    n = pos.shape[0]
    frac = pos @ cell.inverse
    whole = cell.mask * np.floor(frac)  # wrapped = pos - whole @ C
    wrapped = pos - whole @ cell.matrix
    reach = np.where(cell.pbc, np.ceil(radius / cell.heights()), 0).astype(int)
    grid = np.stack(np.meshgrid(*[np.arange(-r, r + 1) for r in reach], indexing="ij"), -1)
    grid = grid.reshape(-1, 3).astype(np.float64)
    images = (wrapped[None, :, :] + (grid @ cell.matrix)[:, None, :]).reshape(-1, 3)
    found = _kdtree(wrapped).sparse_distance_matrix(
        _kdtree(images), float(radius), output_type="ndarray"
    )
    i = found["i"].astype(np.int64)
    k = found["j"].astype(np.int64)
    j, s = k % n, grid[k // n]
    # the shift for the positions as given: wrapped_j + S C - wrapped_i = R_j - R_i + S' C
    s = s + whole[i] - whole[j]
    first = np.where(s[:, 0] != 0, s[:, 0], np.where(s[:, 1] != 0, s[:, 1], s[:, 2]))
    keep = (i < j) | ((i == j) & (first > 0))
    i, j, s = i[keep], j[keep], s[keep]
    order = np.lexsort((s[:, 2], s[:, 1], s[:, 0], j, i))
    return i[order], j[order], s[order]


def pair_index(positions: Any, r_cut: float | None = None, box: Any = None) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``: all of them, or those closer than ``r_cut``; shape ``(m, 2)``.

    Distances are minimum-image distances in a periodic ``box`` (lengths, or
    a :class:`Cell`: the nearest image).  The search is a k-d tree
    (:class:`scipy.spatial.cKDTree`), ``O(N log N)``.

    Examples
    --------
    >>> pair_index(np.array([[0.0, 0, 0], [1, 0, 0], [3, 0, 0]]), r_cut=1.5).tolist()
    [[0, 1]]
    >>> pair_index(np.zeros((3, 3))).tolist()
    [[0, 1], [0, 2], [1, 2]]
    """
    pos = np.asarray(positions, dtype=np.float64)
    n = pos.shape[0]
    if r_cut is None:
        i, j = np.triu_indices(n, k=1)
        return np.stack([i, j], axis=1).astype(np.int64)
    if isinstance(box, Cell):
        return _cell_pair_index(pos, float(r_cut), box)
    if box is None:
        tree = _kdtree(pos)
    else:
        b = np.asarray(box, dtype=np.float64)
        tree = _kdtree(np.mod(pos, b), boxsize=b)
    pairs = tree.query_pairs(float(r_cut), output_type="ndarray").astype(np.int64)
    pairs.sort(axis=1)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
