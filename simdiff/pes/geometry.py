"""Geometry of a particle system: positions, masses, periodic box, minimum image.

Shared by every energy of :mod:`simdiff.pes` (pair clusters, sums of terms)
and by the analyses (normal modes, optimisation) that need to know the
particles behind a flat coordinate vector.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.spatial

from .._problem import Problem
from ..errors import InputError, ShapeError

__all__ = [
    "ClusterInfo",
    "check_box",
    "check_masses",
    "check_positions",
    "cluster_info",
    "minimum_image",
    "pair_index",
]


class ClusterInfo:
    """What a cluster problem knows about its particles (``problem.meta["pes"]``).

    Attributes
    ----------
    n_particles : int
    dim : int
        Spatial dimension (3 for clusters; normal-mode analysis needs 3).
    masses : ndarray, shape (n_particles,)
    box : ndarray of shape (dim,) or None
        Orthorhombic box lengths for periodic systems, ``None`` in free space.
    """

    def __init__(self, n_particles: int, dim: int, masses: np.ndarray, box: np.ndarray | None):
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
    x: Any, n_particles: int, dim: int = 3, box: np.ndarray | None = None
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
    # candidates by a k-d tree (O(N log N), not N^2 distances), within a radius far above
    # rounding; then the exact test, distance 0 by minimum image, on those pairs only
    scale = max(1.0, float(np.abs(pos).max(initial=0.0)))
    if box is None:
        tree = scipy.spatial.cKDTree(pos)
    else:
        scale = max(scale, float(np.max(box)))
        tree = scipy.spatial.cKDTree(np.mod(pos, box), boxsize=box)
    near = tree.query_pairs(1e-9 * scale, output_type="ndarray")
    if near.size:
        near = np.sort(near, axis=1)
        near = near[np.lexsort((near[:, 1], near[:, 0]))]
        d = pos[near[:, 0]] - pos[near[:, 1]]
        if box is not None:
            d = d - box * np.round(d / box)
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


def check_box(box: Any, dim: int, pair: Any) -> np.ndarray | None:
    """Box lengths of shape ``(dim,)`` or ``None``; the pair cutoff must be at most half the box."""
    if box is None:
        return None
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
    if r_cut > 0.5 * b.min():
        k = int(np.argmin(b))
        raise InputError(
            "a periodic box needs a pair potential with a cutoff r_cut <= min(box) / 2 "
            f"(minimum image); got r_cut={r_cut}, box={b.tolist()}: box vector {'xyz'[k]} "
            f"(length {b[k]:.6g}) is shorter than 2 r_cut = {2 * r_cut:.6g}, so an atom would "
            "interact with more than one image of another. Use a larger box, or "
            "simdiff.pes.ase_interface.SimdiffCalculator(pair=...), whose image pairs cover "
            "small cells"
        )
    return b


def pair_index(positions: Any, r_cut: float | None = None, box: Any = None) -> np.ndarray:
    """Pairs ``(i, j)``, ``i < j``: all of them, or those closer than ``r_cut``; shape ``(m, 2)``.

    Distances are minimum-image distances in a periodic ``box``.  The search
    is a k-d tree (:class:`scipy.spatial.cKDTree`), ``O(N log N)``.

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
    if box is None:
        tree = scipy.spatial.cKDTree(pos)
    else:
        b = np.asarray(box, dtype=np.float64)
        tree = scipy.spatial.cKDTree(np.mod(pos, b), boxsize=b)
    pairs = tree.query_pairs(float(r_cut), output_type="ndarray").astype(np.int64)
    pairs.sort(axis=1)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
