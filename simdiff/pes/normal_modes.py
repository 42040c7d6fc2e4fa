r"""Normal-mode analysis: mass-weighted Hessian, rigid-body projection, frequencies.

Units
-----
Frequencies are angular frequencies :math:`\omega = \sqrt{\lambda}` of the
mass-weighted Hessian :math:`M^{-1/2} H M^{-1/2}`, in the units the energy,
length and masses of the problem imply: :math:`\sqrt{E / (m L^2)}`.  In reduced
Lennard-Jones units (:math:`\epsilon = \sigma = m = 1`) that is
:math:`1/\tau` with :math:`\tau = \sigma\sqrt{m/\epsilon}`.  For molecules with
energies in eV, Hartree, kcal/mol or kJ/mol, lengths in Ångström or Bohr and
masses in amu (unified atomic mass units), :meth:`NormalModes.wavenumbers`
converts to :math:`\tilde\nu = \omega / (2\pi c)` in cm\ :sup:`-1`.
Imaginary frequencies (negative eigenvalues) are reported as negative numbers.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.core.kinds import grad as _grad
from simdiff.core.kinds import hessian as _hessian
from simdiff.core.problem import Problem
from simdiff.errors import InputError, ShapeError, StationarityWarning
from simdiff.pes.geometry import check_positions, cluster_info
from simdiff.pes.terms import TermEnergy

__all__ = [
    "NormalModes",
    "internal_basis",
    "mass_weighted_hessian",
    "normal_modes",
    "rigid_body_basis",
    "warn_if_not_stationary",
    "wavenumber_factor",
]

# CODATA 2018 exact or recommended values (SI).
_ENERGY_J = {
    "eV": 1.602176634e-19,
    "hartree": 4.3597447222071e-18,
    "kcal/mol": 4184.0 / 6.02214076e23,
    "kJ/mol": 1000.0 / 6.02214076e23,
}
_LENGTH_M = {"angstrom": 1e-10, "bohr": 0.529177210903e-10}
_AMU_KG = 1.66053906660e-27
_C_CM_S = 2.99792458e10


def wavenumber_factor(energy: str = "eV", length: str = "angstrom") -> float:
    r"""cm\ :sup:`-1` per unit of :math:`\omega = \sqrt{E/(\mathrm{amu}\, L^2)}`.

    Parameters
    ----------
    energy : {"eV", "hartree", "kcal/mol", "kJ/mol"}
    length : {"angstrom", "bohr"}

    Examples
    --------
    >>> round(wavenumber_factor("eV", "angstrom"), 2)
    521.47
    >>> round(wavenumber_factor("hartree", "bohr"), 1)
    5140.5
    """
    if energy not in _ENERGY_J:
        raise InputError(f"unknown energy unit {energy!r}; expected one of {list(_ENERGY_J)}")
    if length not in _LENGTH_M:
        raise InputError(f"unknown length unit {length!r}; expected one of {list(_LENGTH_M)}")
    omega = math.sqrt(_ENERGY_J[energy] / (_LENGTH_M[length] ** 2 * _AMU_KG))
    return omega / (2.0 * math.pi * _C_CM_S)


def _coordinate_masses(problem: Problem, masses: Any) -> np.ndarray:
    info = cluster_info(problem)
    if masses is None:
        return np.repeat(info.masses, info.dim) if info is not None else np.ones(problem.n)
    m = np.asarray(masses, dtype=np.float64)
    if info is not None and m.shape == (info.n_particles,):
        m = np.repeat(m, info.dim)
    if m.shape != (problem.n,):
        raise ShapeError(f"masses must have shape (N,) per particle or ({problem.n},) per "
                         f"coordinate; got {m.shape}")  # fmt: skip
    if not np.all(np.isfinite(m) & (m > 0)):
        i = int(np.flatnonzero(~(np.isfinite(m) & (m > 0)))[0])
        raise InputError(f"masses must be finite and positive; coordinate mass [{i}] = {m[i]}")
    return m


def mass_weighted_hessian(hessian: Any, masses: Any) -> Any:
    r""":math:`M^{-1/2} H M^{-1/2}` for per-coordinate masses ``masses`` (shape ``(n,)``).

    A ``scipy.sparse`` Hessian gives a sparse result.

    Examples
    --------
    >>> mass_weighted_hessian(np.eye(2), np.array([1.0, 4.0]))
    array([[1.  , 0.  ],
           [0.  , 0.25]])
    """
    import scipy.sparse

    s = 1.0 / np.sqrt(np.asarray(masses, dtype=np.float64))
    if scipy.sparse.issparse(hessian):
        if hessian.shape != (s.size, s.size):
            raise ShapeError(f"hessian must have shape ({s.size}, {s.size}); got {hessian.shape}")
        d = scipy.sparse.diags_array(s)
        return (d @ hessian @ d).tocsr()
    h = np.asarray(hessian, dtype=np.float64)
    if h.shape != (s.size, s.size):
        raise ShapeError(f"hessian must have shape ({s.size}, {s.size}); got {h.shape}")
    return s[:, None] * h * s[None, :]


def warn_if_not_stationary(
    problem: Problem, x: np.ndarray, gtol: float, what: str, backend: str = "jax"
) -> float:
    """Warn (:class:`~simdiff.errors.StationarityWarning`) if ``|grad E(x)| > gtol``; return it.

    Examples
    --------
    >>> import warnings
    >>> from simdiff.pes import cluster_problem, morse
    >>> p = cluster_problem(morse, [[0, 0, 0], [1.0, 0, 0]])
    >>> warn_if_not_stationary(p, p.x0, 1e-8, "normal modes")
    0.0
    """
    g = float(np.linalg.norm(np.asarray(_grad(problem, x, backend=backend))))
    if g > gtol:
        warnings.warn(
            f"{what} of {problem.name!r} assume a stationary point, but |grad E(x)| = {g:.3g} "
            f"> gtol = {gtol:.3g}: the harmonic analysis at x mixes in the gradient's effect "
            "(minimise first, e.g. simdiff.pes.find_minimum, or pass a larger gtol)",
            StationarityWarning,
            stacklevel=3,
        )
    return g


def rigid_body_basis(
    positions: Any, masses: Any = None, *, periodic: bool = False, mass_weighted: bool = True
) -> np.ndarray:
    """Orthonormal basis of rigid translations and rotations, shape ``(3N, k)``.

    ``k`` is 6 for a non-linear arrangement, 5 for a linear one, 3 for one
    particle, and 3 (translations only) for a periodic box.  Rotations are
    about the centre of mass.  With ``mass_weighted=True`` the vectors live in
    mass-weighted coordinates (``sqrt(m_i) * displacement``), the space of
    :func:`mass_weighted_hessian`.

    Notes
    -----
    The 6 generators are orthonormalised by an SVD; singular values below
    ``1e-8`` times the largest are dropped (a linear molecule's rotation about
    its axis).

    Examples
    --------
    >>> rigid_body_basis(np.array([[0.0, 0, 0], [1, 0, 0]])).shape
    (6, 5)
    >>> rigid_body_basis(np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0]])).shape
    (9, 6)
    """
    pos = np.asarray(positions, dtype=np.float64)
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ShapeError(f"positions must have shape (N, 3); got {pos.shape}")
    n = pos.shape[0]
    m = np.ones(n) if masses is None else np.asarray(masses, dtype=np.float64)
    w = np.sqrt(m) if mass_weighted else np.ones(n)
    com = (m[:, None] * pos).sum(axis=0) / m.sum()
    rel = pos - com
    gens = []
    for axis in np.eye(3):
        gens.append((w[:, None] * axis[None, :]).reshape(-1))
        if not periodic:
            gens.append((w[:, None] * np.cross(axis[None, :], rel)).reshape(-1))
    g = np.stack(gens, axis=1)
    u, s, _ = np.linalg.svd(g, full_matrices=False)
    return u[:, s > 1e-8 * s.max()]


def internal_basis(basis: np.ndarray) -> np.ndarray:
    """Orthonormal complement of ``basis`` (shape ``(n, k)``), shape ``(n, n - k)``.

    Examples
    --------
    >>> internal_basis(np.array([[1.0], [0.0]]))
    array([[0.],
           [1.]])
    """
    n, k = basis.shape
    if k == 0:
        return np.eye(n)
    u, _, _ = np.linalg.svd(basis, full_matrices=True)
    return u[:, k:]


@dataclass(frozen=True)
class NormalModes:
    """Result of :func:`normal_modes`.

    Attributes
    ----------
    frequencies : ndarray, shape (m,)
        Angular frequencies ``sqrt(eigenvalue)``, ascending; imaginary ones as negative numbers.
    eigenvalues : ndarray, shape (m,)
        Eigenvalues of the projected mass-weighted Hessian.
    modes : ndarray, shape (n, m)
        Orthonormal eigenvectors in mass-weighted coordinates.
    displacements : ndarray, shape (n, m)
        Cartesian displacements ``M^{-1/2} modes``: the derivative of ``x`` with
        respect to the mass-weighted normal coordinate of each mode.
    n_rigid : int
        Rigid-body modes projected out (6, 5, 3 or 0).
    """

    frequencies: np.ndarray
    eigenvalues: np.ndarray
    modes: np.ndarray
    displacements: np.ndarray
    n_rigid: int

    def wavenumbers(self, energy: str = "eV", length: str = "angstrom") -> np.ndarray:
        """Frequencies in cm^-1 for energies in ``energy``, lengths in ``length``, masses in amu."""
        return self.frequencies * wavenumber_factor(energy, length)


def normal_modes(
    problem: Problem,
    x: Any = None,
    *,
    backend: str = "jax",
    masses: Any = None,
    project: bool = True,
    hessian: Any = None,
    k: int | None = None,
    gtol: float = 1e-6,
) -> NormalModes:
    """Harmonic frequencies and normal modes at ``x`` (normally a minimum).

    Parameters
    ----------
    problem : Problem
        Scalar energy.  For a :func:`~simdiff.pes.cluster_problem` the
        rigid-body modes are projected out and the masses default to the
        cluster's; for other problems nothing is projected and masses default to 1.
    x : array_like, shape (n,), optional
        Geometry (default ``problem.x0``).
    backend : {"jax", "torch"}
        Backend computing the Hessian.
    masses : array_like, optional
        Per particle ``(N,)`` or per coordinate ``(n,)``, positive.
    project : bool
        Remove rigid-body modes (default True).
    hessian : array_like or scipy.sparse array, shape (n, n), optional
        A precomputed Hessian at ``x``.
    k : int, optional
        Only the ``k`` lowest modes, by :func:`scipy.sparse.linalg.eigsh` on the
        sparse Hessian (assembled from the terms of a sum-of-terms problem,
        :func:`~simdiff.pes.structured_hessian`): for large systems, where the
        dense eigendecomposition (``O(n^3)``) is the bottleneck.
    gtol : float
        Warn (:class:`~simdiff.errors.StationarityWarning`) when the gradient
        norm at ``x`` exceeds ``gtol``: the harmonic analysis assumes a
        stationary point (``numpy.inf`` switches the check off).

    Returns
    -------
    NormalModes
        ``m = n - n_rigid`` modes (``k`` with ``k``).

    Notes
    -----
    The mass-weighted Hessian is restricted to the orthogonal complement ``Q``
    of the rigid-body basis (:func:`rigid_body_basis`) and ``Q^T H_m Q`` is
    diagonalised, so the rigid-body modes are removed exactly rather than
    appearing as near-zero frequencies.  See the module docstring for units.

    With ``k``, Lanczos (``eigsh``, smallest algebraic) runs on the operator
    :math:`P H_m P + \alpha R R^T` with :math:`P = I - R R^T` the projector
    off the rigid-body basis :math:`R` and :math:`\alpha` the largest absolute
    row sum of :math:`H_m` (a bound on its spectrum): the rigid-body modes move
    to the top of the spectrum and the ``k`` lowest eigenpairs are those of
    :math:`Q^T H_m Q`.  Each iteration is one sparse product, ``O(terms)``.
    Lanczos can miss a copy of a degenerate eigenvalue (a symmetric cluster's
    modes come in pairs and triples: LJ38's lowest after one are a triple),
    so the search is repeated on the operator with the modes found shifted
    up, for one eigenpair, until none lies below the ``k``-th found: a mode
    below it replaces the highest, and the search repeats.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.pes import cluster_problem, morse
    >>> p = cluster_problem(morse, [[0, 0, 0], [1.0, 0, 0]])
    >>> nm = normal_modes(p)
    >>> nm.n_rigid, nm.frequencies.round(6)   # sqrt(2 D a^2 / mu), mu = 1/2
    (5, array([2.]))
    """
    x = problem.x0 if x is None else np.asarray(x, dtype=np.float64)
    info = cluster_info(problem)
    if info is not None:
        x = check_positions(x, info.n_particles, info.dim, info.box).reshape(-1)
    _coordinate_masses(problem, masses)  # bad input is an error before any warning
    warn_if_not_stationary(problem, x, gtol, "normal modes", backend)
    return _normal_modes(problem, x, backend, masses, project, hessian, k)


def _normal_modes(
    problem: Problem,
    x: np.ndarray,
    backend: str,
    masses: Any = None,
    project: bool = True,
    hessian: Any = None,
    k: int | None = None,
) -> NormalModes:
    """:func:`normal_modes` at a checked point, without the stationarity check."""
    import scipy.sparse

    info = cluster_info(problem)
    m = _coordinate_masses(problem, masses)
    if project and info is not None:
        pos = x.reshape(info.n_particles, info.dim)
        rigid = rigid_body_basis(pos, m[:: info.dim], periodic=info.box is not None)
    else:
        rigid = np.zeros((problem.n, 0))
    if k is not None:
        return _lowest_modes(problem, x, backend, m, rigid, hessian, k)
    h = _hessian(problem, x, backend=backend) if hessian is None else hessian
    if scipy.sparse.issparse(h):
        h = h.toarray()
    hm = mass_weighted_hessian(h, m)
    q = internal_basis(rigid)
    lam, v = np.linalg.eigh(q.T @ hm @ q)
    return _modes_result(lam, q @ v, m, rigid.shape[1])


def _modes_result(lam: np.ndarray, modes: np.ndarray, m: np.ndarray, n_rigid: int) -> NormalModes:
    freqs = np.sign(lam) * np.sqrt(np.abs(lam))
    return NormalModes(freqs, lam, modes, modes / np.sqrt(m)[:, None], n_rigid)


def _lowest_modes(problem, x, backend, m, rigid, hessian, k) -> NormalModes:
    import scipy.sparse
    import scipy.sparse.linalg

    n_int = problem.n - rigid.shape[1]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < n_int:
        raise InputError(f"k must be an integer in 1..{n_int - 1} (fewer than the {n_int} "
                         f"internal modes; use k=None for all); got {k!r}")  # fmt: skip
    if hessian is None:
        if isinstance(problem.fn, TermEnergy):
            hessian = problem.fn.structured_hessian(x, backend, sparse=True)
        else:
            hessian = _hessian(problem, x, backend=backend)
    hm = mass_weighted_hessian(hessian, m)
    alpha = (
        float(abs(hm).sum(axis=1).max())
        if scipy.sparse.issparse(hm)
        else float(np.abs(hm).sum(axis=1).max())
    )

    def matvec(v: np.ndarray) -> np.ndarray:
        v = np.ravel(v)
        c = rigid.T @ v
        pv = v - rigid @ c
        hp = hm @ pv
        return hp - rigid @ (rigid.T @ hp) + alpha * (rigid @ c)

    op = scipy.sparse.linalg.LinearOperator((problem.n, problem.n), matvec=matvec,
                                            dtype=np.float64)  # fmt: skip
    rng = np.random.default_rng(0)  # reproducible start vectors
    lam, v = scipy.sparse.linalg.eigsh(
        op, k=int(k), which="SA", v0=rng.standard_normal(problem.n), tol=1e-12
    )
    # Lanczos may have missed a copy of a degenerate eigenvalue: the lowest eigenpair of
    # the operator with the found modes moved up by more than the spectrum's width is
    # then below the k-th found.  It replaces the highest, until none is (k rounds at most).
    # ``v`` is updated in place below, so the operator always shifts the current modes.
    shift = 4.0 * alpha + 1.0

    def deflated(u: np.ndarray) -> np.ndarray:
        u = np.ravel(u)
        return matvec(u) + shift * (v @ (v.T @ u))

    dop = scipy.sparse.linalg.LinearOperator((problem.n, problem.n), matvec=deflated,
                                             dtype=np.float64)  # fmt: skip
    for _ in range(int(k)):
        mu, u = scipy.sparse.linalg.eigsh(
            dop, k=1, which="SA", v0=rng.standard_normal(problem.n), tol=1e-12
        )
        if not mu[0] < lam.max() - 1e-10 * alpha:
            break
        u = u[:, 0] - v @ (v.T @ u[:, 0])  # orthogonal to the found modes, to rounding
        top = int(np.argmax(lam))
        lam[top], v[:, top] = mu[0], u / np.linalg.norm(u)
    order = np.argsort(lam)
    return _modes_result(lam[order], v[:, order], m, rigid.shape[1])
