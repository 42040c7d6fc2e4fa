"""Exact phonons of a crystal: the nearest-neighbour fcc closed form, ASE's finite-difference
Phonons, zone folding between the primitive and the cubic cell, and the errors."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.calculators.lj import LennardJones
from ase.phonons import Phonons

from simdiff.errors import InputError
from simdiff.pes import lennard_jones, smooth_cutoff
from simdiff.pes.ase_interface import SimdiffCalculator
from simdiff.pes.phonons import HBAR_OMEGA, phonons

EPS, SIG = 0.0104, 3.40
#: fcc with a = 5.26: first shell 3.719, second 5.26; the switch lies in between, so only
#: nearest neighbours interact, through plain LJ (ASE: truncated at 4.4, smooth=False)
NN = smooth_cutoff(partial(lennard_jones, epsilon=EPS, sigma=SIG), r_on=4.0, r_cut=4.8)
A = 5.26
#: fcc special points of ASE's primitive cell (scaled), and an arbitrary point
Q = {"G": [0, 0, 0], "X": [0.5, 0, 0.5], "L": [0.5, 0.5, 0.5], "W": [0.5, 0.25, 0.75],
     "any": [0.13, -0.21, 0.37]}  # fmt: skip


def _lj_derivatives(r: float) -> tuple[float, float]:
    """phi'(r), phi''(r) of LJ by hand."""
    s6 = (SIG / r) ** 6
    d1 = 4 * EPS * (-12 * s6**2 + 6 * s6) / r
    d2 = 4 * EPS * (156 * s6**2 - 42 * s6) / r**2
    return d1, d2


def _analytic_omega2(a: float, q_scaled: np.ndarray) -> np.ndarray:
    """Eigenvalues of the nearest-neighbour central-force fcc dynamical matrix.

    D_ab(q) = (1/m) sum_R [(phi'' - phi'/R) R_a R_b / R^2 + delta_ab phi'/R] (1 - cos q.R),
    over the 12 neighbours R = a/2 (+-1, +-1, 0) and permutations.
    """
    atoms = bulk("Ar", "fcc", a=a)
    mass = atoms.get_masses()[0]
    q = 2 * np.pi * atoms.cell.reciprocal()[:].T @ q_scaled  # Cartesian, rad / A
    r0 = a / np.sqrt(2)
    d1, d2 = _lj_derivatives(r0)
    neighbours = []
    for x, y in [(1, 1), (1, -1), (-1, 1), (-1, -1)]:
        neighbours += [(x, y, 0), (x, 0, y), (0, x, y)]
    dm = np.zeros((3, 3))
    for v in neighbours:
        rv = np.array(v) * a / 2
        k = np.outer(rv, rv) / r0**2 * (d2 - d1 / r0) + np.eye(3) * d1 / r0
        dm += k * (1 - np.cos(q @ rv)) / mass
    return np.linalg.eigvalsh(dm)


@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("a", [2 ** (1 / 6) * SIG * np.sqrt(2), A], ids=["at-r0", "a=5.26"])
def test_nearest_neighbour_fcc_closed_form(a: float, backend: str) -> None:
    qs = np.array(list(Q.values()), dtype=float)
    bands = phonons(bulk("Ar", "fcc", a=a), qs, pair=NN, backend=backend)
    expected = np.array([_analytic_omega2(a, q) for q in qs])
    scale = np.abs(expected).max()
    # both sides sum a dozen O(scale) terms in float64: agreement to ~100 ulp of the scale
    np.testing.assert_allclose(
        bands.omega2, expected, rtol=0, atol=100 * np.finfo(float).eps * scale
    )
    # Gamma: three acoustic modes at zero, by the acoustic sum rule (exactly, not by a fit)
    assert np.abs(bands.omega2[0]).max() <= 100 * np.finfo(float).eps * scale
    assert np.allclose(bands.energies, HBAR_OMEGA * np.sqrt(np.clip(bands.omega2, 0, None)))


def test_closed_form_at_x_for_a_pure_spring() -> None:
    """At the LJ minimum distance phi' = 0: at X, omega_L^2 = 8 phi''/m, omega_T^2 = 4 phi''/m."""
    a = 2 ** (1 / 6) * SIG * np.sqrt(2)
    atoms = bulk("Ar", "fcc", a=a)
    kappa = _lj_derivatives(a / np.sqrt(2))[1]
    m = atoms.get_masses()[0]
    bands = phonons(atoms, Q["X"], pair=NN)
    np.testing.assert_allclose(bands.omega2[0], [4 * kappa / m, 4 * kappa / m, 8 * kappa / m],
                               rtol=1e-12)  # fmt: skip


def _ase_phonons(atoms: Atoms, qs: np.ndarray, delta: float, tmp_path) -> np.ndarray:
    calc = LennardJones(epsilon=EPS, sigma=SIG, rc=4.4, smooth=False)
    ph = Phonons(atoms, calc, supercell=(3, 3, 3), delta=delta, name=str(tmp_path / f"ph{delta}"))
    ph.run()
    ph.read(acoustic=True)
    return ph.band_structure(qs, verbose=False)


def test_against_ase_finite_difference_phonons(tmp_path) -> None:
    atoms = bulk("Ar", "fcc", a=A)
    qs = np.array([Q["X"], Q["L"], Q["W"], Q["any"]], dtype=float)
    exact = phonons(atoms, qs, pair=NN).energies
    coarse = _ase_phonons(atoms, qs, 0.02, tmp_path)
    fine = _ase_phonons(atoms, qs, 0.01, tmp_path)
    # central differences: error ~ c delta^2, so |fine - exact| ~ |coarse - fine| / 3; allow 1x
    fd_error = np.abs(coarse - fine)
    assert np.all(np.abs(fine - exact) <= fd_error + 1e-12)
    # and the exact result is not trivially inside: the FD error is resolved
    assert np.all(np.abs(coarse - exact) > np.abs(fine - exact))


def test_cubic_cell_at_gamma_folds_the_primitive_bands() -> None:
    """The 4-atom cubic cell's Gamma holds the primitive cell's Gamma and its three X points."""
    prim = bulk("Ar", "fcc", a=A)
    cubic = bulk("Ar", "fcc", a=A, cubic=True)
    g_cubic = 2 * np.pi / A * np.eye(3)  # the cubic reciprocal vectors, Cartesian
    q_prim = np.vstack([np.zeros(3), g_cubic @ prim.cell[:].T / (2 * np.pi)])
    folded = np.sort(phonons(prim, q_prim, pair=NN).omega2.ravel())
    at_gamma = phonons(cubic, [0, 0, 0], pair=NN).omega2[0]
    np.testing.assert_allclose(at_gamma, folded, rtol=0, atol=1e-12 * folded.max())


def test_hermitian_real_and_stable_at_the_minimum() -> None:
    atoms = bulk("Ar", "fcc", a=2 ** (1 / 6) * SIG * np.sqrt(2), cubic=True)
    rng = np.random.default_rng(0)
    qs = rng.uniform(-0.5, 0.5, (6, 3))
    bands = phonons(atoms, qs, pair=NN)
    dyn = bands.dynamical_matrices
    scale = np.abs(dyn).max()
    assert np.abs(dyn - dyn.conj().transpose(0, 2, 1)).max() == 0.0  # Hermitian by construction
    minus = phonons(atoms, -qs, pair=NN).dynamical_matrices
    assert np.abs(minus - dyn.conj()).max() <= 10 * np.finfo(float).eps * scale  # D(-q) = D(q)*
    assert bands.omega2.min() > 0.0  # a stable crystal: no imaginary mode away from Gamma
    assert bands.energies.shape == (6, 12)


def test_pair_from_the_calculator_and_a_band_path() -> None:
    atoms = bulk("Ar", "fcc", a=A)
    atoms.calc = SimdiffCalculator(pair=NN)
    bands = phonons(atoms, "GXL", npoints=7)
    assert bands.q.shape == (7, 3) and bands.energies.shape == (7, 3)
    bs = bands.band_structure()
    np.testing.assert_array_equal(bs.energies[0], bands.energies)
    np.testing.assert_allclose(bands.wavenumbers, bands.energies * 8065.544, rtol=1e-6)  # CODATA
    with pytest.raises(InputError, match="band path"):
        phonons(atoms, [[0, 0, 0]]).band_structure()


@pytest.mark.parametrize(
    "atoms, match",
    [
        (Atoms("Ar2", positions=[[0, 0, 0], [3.7, 0, 0]]), r"periodic in all three.*False, False"),
        (Atoms("Ar", cell=[5, 5, 20], pbc=[True, True, False]), r"pbc=\[True, True, False\]"),
        (Atoms("Ar", cell=[[5, 0, 0], [5, 0, 0], [0, 0, 5]], pbc=True), "zero volume"),
        (Atoms("Ar", positions=[[np.nan, 0, 0]], cell=[5, 5, 5], pbc=True), "atom 0 is at"),
    ],
    ids=["cluster", "slab", "flat-cell", "nan-position"],
)
def test_non_periodic_or_degenerate_input_is_refused(atoms: Atoms, match: str) -> None:
    with pytest.raises(InputError, match=match):
        phonons(atoms, [0, 0, 0], pair=NN)


def test_missing_pair_cutoff_or_bad_q_is_refused() -> None:
    atoms = bulk("Ar", "fcc", a=A)
    with pytest.raises(InputError, match="needs a pair potential"):
        phonons(atoms, [0, 0, 0])
    with pytest.raises(InputError, match="cutoff"):
        phonons(atoms, [0, 0, 0], pair=lennard_jones)
    with pytest.raises(InputError, match=r"shape \(K, 3\)"):
        phonons(atoms, [[0, 0]], pair=NN)


@pytest.mark.parametrize("cubic", [False, True], ids=["primitive-1", "cubic-4"])
@pytest.mark.parametrize("radius", [2.5, 4.0, 10.4])
def test_small_cell_pair_list_is_ases(cubic: bool, radius: float) -> None:
    """The vectorised list of small cells holds exactly ASE's image pairs (unwrapped atoms too)."""
    from ase.neighborlist import primitive_neighbor_list

    from simdiff.pes._ase_pairs import _small_cell_pairs

    atoms = bulk("Ar", "fcc", a=A, cubic=cubic)
    atoms.rattle(0.3, seed=2)
    atoms.positions += np.random.default_rng(1).normal(0.0, 3.0, (len(atoms), 3))
    pbc = np.array([True, True, True])
    i, j, s = primitive_neighbor_list("ijS", pbc, atoms.cell[:], atoms.positions, radius,
                                      self_interaction=False)  # fmt: skip
    small = _small_cell_pairs(atoms.positions, atoms.cell[:], pbc, radius)
    assert small is not None
    theirs = set(zip(i.tolist(), j.tolist(), map(tuple, s.tolist()), strict=True))
    ours = set(
        zip(small[0].tolist(), small[1].tolist(), map(tuple, small[2].tolist()), strict=True)
    )
    assert ours == theirs and len(small[0]) == len(i)
    assert _small_cell_pairs(atoms.positions, atoms.cell[:], np.array([True, True, False]),
                             radius) is None  # fmt: skip


def test_modes_in_ases_convention(tmp_path) -> None:
    """Modes are D's eigenvectors over sqrt(m): D (sqrt(m) u) = omega^2 (sqrt(m) u), and at a
    nondegenerate band their moduli per atom equal ASE's (the phase of a mode is arbitrary); ASE
    on a 3x3x3 supercell, which holds the nearest-neighbour sphere without aliasing."""
    atoms = bulk("Ar", "fcc", a=A, cubic=True)
    atoms.set_masses([39.948, 20.0, 39.948, 60.0])  # unequal masses: the 1/sqrt(m) is tested
    qs = np.array([[0.1, 0.2, 0.3], [0.25, 0.0, 0.1]])
    bands = phonons(atoms, qs, pair=NN, modes=True)
    assert bands.modes is not None and bands.modes.shape == (2, 12, 4, 3)
    root_m = np.repeat(np.sqrt(atoms.get_masses()), 3)
    for k in range(2):
        v = root_m[:, None] * bands.modes[k].reshape(12, 12).T  # columns sqrt(m) u_l
        residual = bands.dynamical_matrices[k] @ v - v * bands.omega2[k]
        assert np.abs(residual).max() <= 1e-12 * np.abs(bands.dynamical_matrices[k]).max()
        np.testing.assert_allclose(np.linalg.norm(v, axis=0), 1.0, rtol=1e-12)  # unit vectors
    calc = LennardJones(epsilon=EPS, sigma=SIG, rc=4.4, smooth=False)
    ph = Phonons(atoms, calc, supercell=(3, 3, 3), delta=0.01, name=str(tmp_path / "modes"))
    ph.run()
    ph.read(acoustic=True)
    _, ase_modes = ph.band_structure(qs[:1], modes=True, verbose=False)
    gaps = np.diff(bands.omega2[0])
    nondegenerate = [b for b in range(12) if (b == 0 or gaps[b - 1] > 1e-3 * bands.omega2[0, -1])
                     and (b == 11 or gaps[b] > 1e-3 * bands.omega2[0, -1])]  # fmt: skip
    assert nondegenerate, "the test point should have nondegenerate bands"
    for b in nondegenerate:
        ours = np.linalg.norm(bands.modes[0, b], axis=1)
        # ASE's force constants carry a relative FD error ~ 1e-5 (delta 0.01): 1e-3 is loose
        np.testing.assert_allclose(ours, np.linalg.norm(ase_modes[0, b], axis=1), rtol=1e-3)
