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
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._api import hessian as _hessian
from .._problem import Problem
from ..errors import InputError, ShapeError
from .cluster import check_positions, cluster_info

__all__ = [
    "NormalModes",
    "internal_basis",
    "mass_weighted_hessian",
    "normal_modes",
    "rigid_body_basis",
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


def mass_weighted_hessian(hessian: Any, masses: Any) -> np.ndarray:
    r""":math:`M^{-1/2} H M^{-1/2}` for per-coordinate masses ``masses`` (shape ``(n,)``).

    Examples
    --------
    >>> mass_weighted_hessian(np.eye(2), np.array([1.0, 4.0]))
    array([[1.  , 0.  ],
           [0.  , 0.25]])
    """
    h = np.asarray(hessian, dtype=np.float64)
    s = 1.0 / np.sqrt(np.asarray(masses, dtype=np.float64))
    if h.shape != (s.size, s.size):
        raise ShapeError(f"hessian must have shape ({s.size}, {s.size}); got {h.shape}")
    return s[:, None] * h * s[None, :]


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
    hessian : array_like, shape (n, n), optional
        A precomputed Hessian at ``x``.

    Returns
    -------
    NormalModes
        ``m = n - n_rigid`` modes.

    Notes
    -----
    The mass-weighted Hessian is restricted to the orthogonal complement ``Q``
    of the rigid-body basis (:func:`rigid_body_basis`) and ``Q^T H_m Q`` is
    diagonalised, so the rigid-body modes are removed exactly rather than
    appearing as near-zero frequencies.  See the module docstring for units.

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
        pos = check_positions(x, info.n_particles, info.dim, info.box)
        x = pos.reshape(-1)
    m = _coordinate_masses(problem, masses)
    h = _hessian(problem, x, backend=backend) if hessian is None else hessian
    hm = mass_weighted_hessian(h, m)
    if project and info is not None:
        rigid = rigid_body_basis(pos, m[:: info.dim], periodic=info.box is not None)
    else:
        rigid = np.zeros((problem.n, 0))
    q = internal_basis(rigid)
    lam, v = np.linalg.eigh(q.T @ hm @ q)
    modes = q @ v
    freqs = np.sign(lam) * np.sqrt(np.abs(lam))
    return NormalModes(freqs, lam, modes, modes / np.sqrt(m)[:, None], rigid.shape[1])
