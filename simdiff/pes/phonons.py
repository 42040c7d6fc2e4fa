r"""Exact phonons of a periodic crystal: the dynamical matrix from the exact force constants.

A crystal's pair energy is a sum over the image pairs ``(i, j, S)`` of its
unit cell (:class:`~simdiff.pes._ase_pairs.CellPairs`), each depending on the
positions through :math:`d_t = R_j - R_i + S_t C` alone.  The force constant
between atom ``i`` of the home cell and atom ``j`` of the cell at lattice
vector :math:`S C` is therefore :math:`-B_t` with the exact block
:math:`B_t = \partial^2 \phi / \partial d_t^2`, and the on-site block of atom
``i`` is the sum of the blocks of all its pairs (the acoustic sum rule holds
by construction, not by a correction).  The dynamical matrix at the wave
vector :math:`q` (scaled: in units of the reciprocal lattice vectors) is

.. math::

    D_{ij}(q) = \frac{1}{\sqrt{m_i m_j}} \Bigl( \delta_{ij} \sum_{t \ni i} B_t
        - \sum_{t = (i, j, S)} B_t\, e^{-2\pi i\, q \cdot S}
        - \sum_{t = (j, i, S)} B_t\, e^{+2\pi i\, q \cdot S} \Bigr),

ASE's convention (:meth:`ase.phonons.Phonons.compute_dynamical_matrix`: the
phase on the lattice vector, force constants in eV/Å², masses in amu).  No
supercell is built and nothing is displaced: the result is that of an
infinite crystal, where finite differences on a supercell are exact only
when the supercell holds the whole cutoff sphere of every atom.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import pi, sqrt
from typing import Any

import numpy as np
from ase import Atoms, units

from simdiff.errors import InputError
from simdiff.pes._ase_pairs import CellPairs
from simdiff.pes.potentials import PairPotential

__all__ = ["PhononBands", "phonons"]

#: ``sqrt(eV / Å^2 / amu)`` in eV (``hbar omega``): ASE's factor in ``Phonons.band_structure``.
HBAR_OMEGA = units._hbar * 1e10 / sqrt(units._e * units._amu)
#: eV in cm^-1.
EV_TO_CM = units._e / (units._hplanck * units._c * 100.0)


@dataclass(frozen=True)
class PhononBands:
    """Phonon frequencies of a crystal at a set of wave vectors (:func:`phonons`).

    Attributes
    ----------
    q : ndarray, shape ``(K, 3)``
        The wave vectors, scaled (units of the reciprocal lattice vectors, as ASE's ``kpts``).
    omega2 : ndarray, shape ``(K, 3N)``
        Eigenvalues of the dynamical matrix, ascending, in eV/(Å² amu).
    energies : ndarray, shape ``(K, 3N)``
        ``hbar omega`` in eV, ascending: what
        :meth:`ase.phonons.Phonons.band_structure` returns (an unstable mode,
        ``omega2 < 0``, as ``-hbar sqrt(|omega2|)``).
    dynamical_matrices : ndarray, shape ``(K, 3N, 3N)``, complex
        :math:`D(q)`, Hermitian; rows and columns ``3 i + a`` (atom ``i``, axis ``a``).
    path : ase.dft.kpoints.BandPath or None
        The band path the wave vectors came from, if one was given.
    modes : ndarray, shape ``(K, 3N, N, 3)``, complex, or None
        With ``modes=True``: mode ``l`` at ``q`` as displacements of the
        atoms, ASE's convention (the unit eigenvector of :math:`D(q)` divided
        by ``sqrt(m)`` per atom, so its squared norm is ``1 / m_eff``, in
        1/sqrt(amu)); in the order of ``energies``.
    """

    q: np.ndarray
    omega2: np.ndarray
    energies: np.ndarray
    dynamical_matrices: np.ndarray
    path: Any = None
    modes: np.ndarray | None = None

    @property
    def wavenumbers(self) -> np.ndarray:
        """``energies`` in cm^-1, shape ``(K, 3N)``."""
        return self.energies * EV_TO_CM

    def band_structure(self) -> Any:
        """An :class:`ase.spectrum.band_structure.BandStructure` of ``energies`` on :attr:`path`.

        As :meth:`ase.phonons.Phonons.get_band_structure` returns; raises
        :class:`~simdiff.errors.InputError` if the wave vectors were not given
        as a band path.
        """
        if self.path is None:
            raise InputError(
                "band_structure needs the wave vectors as a band path: pass "
                "q=atoms.cell.bandpath(...) or a path string such as 'GXWKGLUWLK' to phonons()"
            )
        from ase.spectrum.band_structure import BandStructure

        return BandStructure(self.path, energies=self.energies[None])


def _wave_vectors(atoms: Atoms, q: Any, npoints: int | None) -> tuple[np.ndarray, Any]:
    """The scaled wave vectors ``(K, 3)`` and the band path (or None) that ``q`` names."""
    from ase.dft.kpoints import BandPath

    if isinstance(q, str):
        path = atoms.cell.bandpath(q, npoints=npoints)
        return np.asarray(path.kpts, dtype=np.float64), path
    if isinstance(q, BandPath):
        return np.asarray(q.kpts, dtype=np.float64), q
    arr = np.asarray(q, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise InputError(f"q must have shape (K, 3) (scaled wave vectors); got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise InputError("q must be finite")
    return arr, None


def _pair_of(atoms: Atoms, pair: PairPotential | None) -> PairPotential:
    if pair is not None:
        return pair
    calc_pair = getattr(atoms.calc, "pair", None)
    if calc_pair is None:
        raise InputError(
            "phonons needs a pair potential: pass pair=, or attach "
            "SimdiffCalculator(pair=...) to the atoms"
        )
    return calc_pair


def phonons(
    atoms: Atoms,
    q: Any,
    *,
    pair: PairPotential | None = None,
    npoints: int | None = None,
    modes: bool = False,
    backend: str = "jax",
) -> PhononBands:
    r"""Exact phonon frequencies of a 3-D periodic crystal at the wave vectors ``q``.

    Parameters
    ----------
    atoms : ase.Atoms
        The unit cell (any cell, any number of atoms; periodic in all three
        directions), normally at a minimum of the energy.  Masses from the Atoms (amu).
    q : array_like, shape ``(K, 3)`` or ``(3,)``; BandPath; or str
        Wave vectors scaled by the reciprocal lattice vectors (ASE's ``kpts``);
        or an :class:`ase.dft.kpoints.BandPath`; or a path of special points
        such as ``"GXWKGLUWLK"`` (``atoms.cell.bandpath(q, npoints=npoints)``).
    pair : callable, optional
        A pair potential ``pair(r, ops)`` with a cutoff (``r_cut``,
        :func:`~simdiff.pes.smooth_cutoff`), energies in eV and lengths in Å.
        Default: the ``pair`` of ``atoms.calc`` (a
        :class:`~simdiff.pes.ase_interface.SimdiffCalculator`).
    npoints : int, optional
        With a path string: the number of points along it (ASE's default if omitted).
    modes : bool
        Also return the modes (:attr:`PhononBands.modes`), as
        ``Phonons.band_structure(q, modes=True)`` does.
    backend : {"jax", "torch"}

    Returns
    -------
    PhononBands
        ``energies`` (eV, as :meth:`ase.phonons.Phonons.band_structure`),
        ``omega2``, ``wavenumbers`` (cm^-1), ``dynamical_matrices``.

    Raises
    ------
    InputError
        Atoms not periodic in all three directions; a cell of zero volume; no
        pair potential; a pair potential without a cutoff; ``q`` of the wrong shape.

    Notes
    -----
    One exact ``3 x 3`` block per image pair of the unit cell within the
    cutoff (all blocks in one vectorised call), then one phase sum and one
    ``eigvalsh`` per wave vector.  Finite differences
    (:class:`ase.phonons.Phonons`) displace each atom of the unit cell six
    times in a supercell that must hold the cutoff sphere; their error is
    :math:`O(\delta^2)` in the displacement, plus aliasing when the supercell is too small.

    Examples
    --------
    >>> from functools import partial
    >>> from ase.build import bulk
    >>> from simdiff.pes import lennard_jones, smooth_cutoff
    >>> lj = smooth_cutoff(partial(lennard_jones, epsilon=0.0104, sigma=3.40), r_on=6.7,
    ...                    r_cut=10.2)
    >>> bands = phonons(bulk("Ar", "fcc", a=5.26), [[0, 0, 0], [0.5, 0, 0.5]], pair=lj)
    >>> bands.energies.shape, bool(abs(bands.energies[0]).max() < 1e-6)
    ((2, 3), True)
    >>> (bands.energies[1] * 1000).round(2)   # meV at X: two transverse, one longitudinal
    array([5.72, 5.72, 8.37])
    """
    pbc = np.asarray(atoms.pbc, dtype=bool)
    if not pbc.all():
        raise InputError(
            f"phonons need a crystal periodic in all three directions; got pbc={pbc.tolist()}"
        )
    pair = _pair_of(atoms, pair)
    if getattr(pair, "r_cut", None) is None:
        raise InputError(
            "phonons of a periodic crystal need a pair potential with a cutoff (an r_cut "
            "attribute); wrap it with simdiff.pes.smooth_cutoff"
        )
    qs, path = _wave_vectors(atoms, q, npoints)
    pos = atoms.get_positions()
    cell = np.asarray(atoms.cell[:], dtype=np.float64)
    pairs = CellPairs(pair, skin=0.0, backend=backend)
    blocks = pairs.pair_hessians(pos, cell, pbc)  # (m, 3, 3)
    i, j, s = pairs.i, pairs.j, pairs.shifts
    n = len(atoms)
    k = qs.shape[0]
    phase = np.exp(-2j * pi * (qs @ s.T))  # (K, m)
    b = blocks[:, None]  # (m, 1, 3, 3)
    d = np.zeros((n * n, k, 3, 3), dtype=np.complex128)  # block (i, j) at row i * n + j
    # off-diagonal blocks: (i, j) with e^{-2 pi i q.S}, (j, i) with its conjugate (B_t symmetric)
    np.add.at(d, i * n + j, -phase.T[:, :, None, None] * b)
    np.add.at(d, j * n + i, -phase.T.conj()[:, :, None, None] * b)
    onsite = np.zeros((n, 3, 3))
    np.add.at(onsite, i, blocks)
    np.add.at(onsite, j, blocks)
    d[np.arange(n) * (n + 1)] += onsite[:, None]
    d = d.transpose(1, 0, 2, 3)
    inv_sqrt_m = atoms.get_masses() ** -0.5
    d = d.reshape(k, n, n, 3, 3) * np.multiply.outer(inv_sqrt_m, inv_sqrt_m)[None, :, :, None, None]
    dyn = d.transpose(0, 1, 3, 2, 4).reshape(k, 3 * n, 3 * n)
    dyn = 0.5 * (dyn + dyn.conj().transpose(0, 2, 1))  # Hermitian to the last bit
    vectors = None
    if modes:
        omega2, u = np.linalg.eigh(dyn)  # ascending; columns the unit eigenvectors
        u = np.repeat(inv_sqrt_m, 3)[None, :, None] * u
        vectors = u.transpose(0, 2, 1).reshape(k, 3 * n, n, 3)
    else:
        omega2 = np.linalg.eigvalsh(dyn)
    energies = HBAR_OMEGA * np.sign(omega2) * np.sqrt(np.abs(omega2))
    return PhononBands(q=qs, omega2=omega2, energies=energies, dynamical_matrices=dyn, path=path,
                       modes=vectors)  # fmt: skip
