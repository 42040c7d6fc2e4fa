r"""Exact phonons of a crystal under a site potential (EAM, Stillinger-Weber).

The energy of the crystal is a sum of site energies of its unit cell's atoms
(:mod:`simdiff.pes.manybody.sites`), atom ``i``'s a function of its row of
displacements :math:`d_{ik} = R_{j_{ik}} - R_i + S_{ik} C`.  Under a Bloch
displacement :math:`u_{j,S} = e_j\, e^{2\pi i\, q \cdot S} / \sqrt{m_j}`, the
row changes by :math:`A_i(q)\, e` (slot ``k``: the phase
:math:`e^{-2\pi i\, q \cdot S_{ik}}` on atom :math:`j_{ik}`, minus atom ``i``),
so the dynamical matrix is

.. math:: D(q) = \sum_i A_i(q)^H\, H_i\, A_i(q),

with :math:`H_i` the exact ``3K x 3K`` Hessian of atom ``i``'s site energy
(:meth:`~simdiff.pes.manybody.SiteEvaluator.site_hessians`), in ASE's
convention (:mod:`simdiff.pes.phonons`).  This holds the couplings between
atoms that share a neighbour (the embedding of EAM, the angles of
Stillinger-Weber), at twice the cutoff, with no supercell and no displacement.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ase import Atoms

from simdiff.errors import InputError
from simdiff.pes.manybody.sites import SiteEvaluator
from simdiff.pes.phonons import HBAR_OMEGA, PhononBands

__all__ = ["site_phonons"]


def site_phonons(
    atoms: Atoms,
    q: Any,
    potential: Any,
    *,
    npoints: int | None = None,
    backend: str = "jax",
) -> PhononBands:
    """Exact phonon energies of a 3-D periodic crystal under a site potential.

    Parameters
    ----------
    atoms : ase.Atoms
        The unit cell (periodic in all three directions), normally at a
        minimum of the energy; masses from the Atoms (amu).
    q : array_like, shape (K, 3) or (3,), or str
        Wave vectors scaled by the reciprocal lattice vectors (ASE's
        ``kpts``), or a path of special points (``"GXL"``) for
        ``atoms.cell.bandpath(q, npoints=npoints)``.
    potential : EAM or StillingerWeber
    npoints : int, optional
        Points along a path string.
    backend : {"jax", "torch"}

    Returns
    -------
    PhononBands
        As :func:`simdiff.pes.phonons.phonons`: ``energies`` in eV (what
        :meth:`ase.phonons.Phonons.band_structure` returns), ``omega2``,
        ``dynamical_matrices``.

    Examples
    --------
    >>> from ase.build import bulk
    >>> from simdiff.pes.manybody import stillinger_weber
    >>> bands = site_phonons(bulk("Si", "diamond", a=5.431), [[0, 0, 0]], stillinger_weber())
    >>> (bands.energies[0, 3:] * 1000).round(1)    # optical modes at Gamma, meV
    array([73.7, 73.7, 73.7])
    """
    pbc = np.asarray(atoms.pbc, dtype=bool)
    if not pbc.all():
        raise InputError(
            f"phonons need a crystal periodic in all three directions; got pbc={pbc.tolist()}"
        )
    path = None
    if isinstance(q, str):
        path = atoms.cell.bandpath(q, npoints=npoints)
        qs = np.asarray(path.kpts, dtype=np.float64)
    else:
        qs = np.atleast_2d(np.asarray(q, dtype=np.float64))
    if qs.ndim != 2 or qs.shape[1] != 3 or not np.isfinite(qs).all():
        raise InputError(f"q must be finite with shape (K, 3); got shape {qs.shape}")
    symbols = None if getattr(potential, "elements", None) is None else atoms.get_chemical_symbols()
    evaluator = SiteEvaluator(potential, skin=0.0, backend=backend)
    dyn = evaluator.dynamical_matrices(atoms.get_positions(), np.asarray(atoms.cell[:]),
                                       atoms.get_masses(), qs, symbols)  # fmt: skip
    omega2 = np.linalg.eigvalsh(dyn)
    energies = HBAR_OMEGA * np.sign(omega2) * np.sqrt(np.abs(omega2))
    return PhononBands(q=qs, omega2=omega2, energies=energies, dynamical_matrices=dyn, path=path)
