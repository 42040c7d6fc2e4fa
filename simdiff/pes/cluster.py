"""Lift a pair potential to the energy of N particles and build a :class:`simdiff.Problem`.

The energy is the sum over all pairs ``i < j`` of ``pair(r_ij)``, in free space
or in an orthorhombic periodic box by the minimum-image convention.  The
problem's input is the flat coordinate vector ``x`` of shape ``(N * dim,)``
(particle-major: ``x.reshape(N, dim)`` are the positions).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .._problem import Problem
from ..errors import InputError, ShapeError
from .potentials import PairPotential

__all__ = [
    "ClusterInfo",
    "check_positions",
    "cluster_energy",
    "cluster_info",
    "cluster_problem",
    "minimum_image",
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


def cluster_energy(
    x: Any,
    ops: Any,
    *,
    pair: PairPotential,
    n_particles: int,
    dim: int = 3,
    box: np.ndarray | None = None,
) -> Any:
    r"""Total pair energy :math:`\sum_{i<j} \phi(r_{ij})` of flat coordinates ``x``.

    Parameters
    ----------
    x : array, shape (n_particles * dim,)
    ops : Ops
    pair : callable
        ``pair(r, ops)``, elementwise.
    n_particles, dim : int
    box : ndarray of shape (dim,), optional
        Periodic box lengths (minimum image); ``None`` for free space.

    Returns
    -------
    scalar array
        ``+inf`` if two distinct particles coincide (see Notes).

    Notes
    -----
    All pairs are formed densely as ``R[:, None] - R[None, :]``, whose diagonal
    ``r_ii = 0``.  ``sqrt`` has an infinite derivative at 0, so evaluating the
    pair potential there and masking afterwards would put ``0 * inf = NaN`` into
    every derivative.  The "double where" pattern avoids it: squared distances
    of masked pairs are replaced by 1 *before* ``sqrt`` and ``pair``, and the
    resulting energies are masked again afterwards.

    Distinct particles at distance exactly 0 get an explicit ``+inf`` energy
    whose derivatives are NaN (``inf + sqrt(r2)`` at ``r2 = 0``), so
    :class:`simdiff.Derivatives` (``check_finite=True``) raises
    :class:`~simdiff.errors.NonFiniteError` rather than return a wrong force;
    :func:`check_positions` gives the clearer error beforehand.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pes import lennard_jones
    >>> ops = simdiff.get_ops("numpy")
    >>> x = np.array([0.0, 0.0, 0.0, 2 ** (1 / 6), 0.0, 0.0])
    >>> float(cluster_energy(x, ops, pair=lennard_jones, n_particles=2))
    -1.0
    """
    pos = ops.reshape(x, (n_particles, dim))
    d = pos[:, None, :] - pos[None, :, :]
    if box is not None:
        d = minimum_image(d, ops.asarray(box), ops)
    r2 = ops.sum(d * d, axis=-1)
    offdiag = ops.asarray(~np.eye(n_particles, dtype=bool))
    safe = offdiag & (r2 > 0.0)
    # double where: masked pairs never reach sqrt or the potential (see Notes)
    r = ops.sqrt(ops.where(safe, r2, 1.0))
    energy = 0.5 * ops.sum(ops.where(safe, pair(r, ops), 0.0))
    coincide = offdiag & (r2 == 0.0)
    # explicit +inf for coincident particles, with NaN (not silently 0) derivatives
    blow = ops.inf + ops.sqrt(ops.where(coincide, r2, 1.0))
    return energy + 0.5 * ops.sum(ops.where(coincide, blow, 0.0))


def check_positions(
    x: Any, n_particles: int, dim: int = 3, box: np.ndarray | None = None
) -> np.ndarray:
    """Validate flat coordinates; return positions of shape ``(n_particles, dim)``.

    Raises
    ------
    ShapeError
        ``x`` is not of shape ``(n_particles * dim,)`` or ``(n_particles, dim)``.
    ValueError
        Non-finite coordinates, or two distinct particles at distance 0.

    Examples
    --------
    >>> import numpy as np
    >>> check_positions(np.zeros(6), 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: particles 0 and 1 coincide (distance 0): the energy is +inf and its ...
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
    d = pos[:, None, :] - pos[None, :, :]
    if box is not None:
        d = d - box * np.round(d / box)
    r2 = np.sum(d * d, axis=-1)
    np.fill_diagonal(r2, np.inf)
    if np.any(r2 == 0.0):
        i, j = (int(k) for k in np.argwhere(r2 == 0.0)[0])
        raise InputError(
            f"particles {i} and {j} coincide (distance 0): the energy is +inf and its "
            "derivatives are undefined"
        )
    return pos


def _check_masses(masses: Any, n_particles: int) -> np.ndarray:
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


def _check_box(box: Any, dim: int, pair: PairPotential) -> np.ndarray | None:
    if box is None:
        return None
    b = np.asarray(box, dtype=np.float64)
    if b.ndim == 0:
        b = np.full(dim, float(b))
    if b.shape != (dim,) or not np.all(np.isfinite(b) & (b > 0)):
        raise InputError(f"box must be {dim} positive finite lengths (or one); got {box!r}")
    r_cut = getattr(pair, "r_cut", None)
    if r_cut is None or r_cut > 0.5 * b.min():
        raise InputError(
            "a periodic box needs a pair potential with a cutoff r_cut <= min(box) / 2 "
            f"(minimum image); got r_cut={r_cut}, box={b.tolist()} (wrap the potential with "
            "simdiff.pes.smooth_cutoff)"
        )
    return b


def cluster_problem(
    pair: PairPotential,
    positions: Any,
    *,
    box: Any = None,
    masses: Any = None,
    name: str | None = None,
    exact: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Problem:
    """The energy of N particles interacting by ``pair`` as a :class:`simdiff.Problem`.

    Parameters
    ----------
    pair : callable
        ``pair(r, ops)``, e.g. :func:`~simdiff.pes.lennard_jones` or
        ``functools.partial(morse, a=2.0)``.
    positions : array_like, shape (N, 3) or (3N,)
        Start geometry; becomes ``problem.x0`` (flat, shape ``(3N,)``).
    box : float or array_like of shape (3,), optional
        Orthorhombic periodic box (minimum image).  Needs a potential with a
        cutoff ``r_cut <= min(box) / 2`` (:func:`~simdiff.pes.smooth_cutoff`).
    masses : float or array_like of shape (N,), optional
        Positive particle masses (default 1), used by normal-mode analysis.
    name : str, optional
        Default ``"cluster{N}"``.
    exact, meta : dict, optional
        Passed to :class:`simdiff.Problem`; ``meta["pes"]`` is set to a
        :class:`ClusterInfo` and ``meta["tags"]`` defaults to ``("pes",)``.

    Returns
    -------
    Problem
        Scalar energy of ``x`` with shape ``(3N,)``.

    Raises
    ------
    ShapeError
        ``positions`` is not ``(N, 3)`` or ``(3N,)``, or ``masses`` has the wrong shape.
    ValueError
        No particles, coincident particles, non-positive masses, a bad box.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pes import lennard_jones
    >>> p = cluster_problem(lennard_jones, [[0, 0, 0], [1.2, 0, 0], [0, 1.2, 0]])
    >>> p.n, round(float(p.evaluate()), 6)
    (9, -1.94237)
    >>> forces = -simdiff.grad(p)
    >>> bool(abs(forces.reshape(3, 3).sum(axis=0)).max() < 1e-12)
    True
    """
    dim = 3
    a = np.asarray(positions, dtype=np.float64)
    if a.size == 0:
        raise InputError("a cluster needs at least one particle; got an empty position array")
    if a.ndim == 1 and a.size % dim == 0:
        a = a.reshape(-1, dim)
    if a.ndim != 2 or a.shape[1] != dim:
        raise ShapeError(
            f"positions must have shape (N, {dim}) or ({dim}N,); got shape {np.shape(positions)}"
        )
    n_particles = a.shape[0]
    b = _check_box(box, dim, pair)
    pos = check_positions(a, n_particles, dim, b)
    m = _check_masses(masses, n_particles)
    info = ClusterInfo(n_particles, dim, m, b)
    energy = functools.partial(cluster_energy, pair=pair, n_particles=n_particles, dim=dim, box=b)
    meta = {"tags": ("pes",), **(meta or {}), "pes": info}
    return Problem(energy, pos.reshape(-1), name=name or f"cluster{n_particles}", exact=exact,
                   meta=meta)  # fmt: skip
