"""The ASE calculator on cells as ASE has them: stress (exact strain derivative), per-atom
energies, triclinic cells, slabs, cells shorter than twice the cutoff; cell relaxation with
FrechetCellFilter; energy conservation in ase.md."""

from __future__ import annotations

import numpy as np
import pytest
from ase import Atoms, units
from ase.build import bulk
from ase.calculators.calculator import PropertyNotImplementedError
from ase.calculators.lj import LennardJones
from ase.filters import FrechetCellFilter
from ase.md.verlet import VelocityVerlet
from ase.neighborlist import primitive_neighbor_list
from ase.optimize import BFGS
from scipy.optimize import brentq

from simdiff.errors import InputError
from simdiff.pes import lennard_jones, smooth_cutoff
from simdiff.pes.ase_interface import SimdiffCalculator

#: fcc with a = 1.6 has shells at 1.131, 1.6, 1.960, 2.263, 2.530: none in [r_on, r_cut], so
#: the switched potential is plain LJ on every pair and agrees with ASE's (smooth=False, rc)
GAP = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.2)
SHIFT = 4.0 * (2.2**-12 - 2.2**-6)  # ASE's LennardJones shifts each pair inside rc by -u(rc)


def _cells() -> dict[str, Atoms]:
    slab = bulk("Ar", "fcc", a=1.6, cubic=True).repeat((3, 3, 2))
    slab.center(vacuum=3.0, axis=2)
    slab.pbc = (True, True, False)
    return {
        "cubic-108": bulk("Ar", "fcc", a=1.6, cubic=True).repeat(3),
        "cubic-4 (replicas)": bulk("Ar", "fcc", a=1.6, cubic=True),
        "primitive-1 (triclinic, replicas)": bulk("Ar", "fcc", a=1.6),
        "triclinic-27": bulk("Ar", "fcc", a=1.6).repeat(3),
        "slab (pbc T,T,F)": slab,
    }


CELLS = _cells()


@pytest.mark.parametrize("name", list(CELLS))
def test_forces_stress_energies_match_ase_lennard_jones(name):
    """Where the two potentials agree (no pair in the switching region), forces, stress and
    per-atom energies equal those of ASE's LennardJones (its shift u(rc) per pair added back),
    on orthorhombic, triclinic, slab and small cells."""
    ours = CELLS[name].copy()
    ours.rattle(0.005, seed=3)
    ref = ours.copy()
    ours.calc = SimdiffCalculator(pair=GAP)
    ref.calc = LennardJones(sigma=1.0, epsilon=1.0, rc=2.2, smooth=False)
    scale = np.abs(ref.get_forces()).max() + 1.0
    np.testing.assert_allclose(ours.get_forces(), ref.get_forces(), rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(ours.get_stress(), ref.get_stress(), rtol=0,
                               atol=1e-12 * np.abs(ref.get_stress()).max())  # fmt: skip
    i = primitive_neighbor_list("i", ours.pbc, ours.cell, ours.positions, 2.2)
    neighbours = np.bincount(i, minlength=len(ours))  # pairs within rc, counted from each atom
    expected = ref.get_potential_energies() + 0.5 * SHIFT * neighbours
    np.testing.assert_allclose(ours.get_potential_energies(), expected, rtol=1e-13)
    assert ours.get_potential_energies().sum() == pytest.approx(ours.get_potential_energy(),
                                                                rel=1e-13)  # fmt: skip


def _strained(atoms: Atoms, voigt: np.ndarray) -> Atoms:
    xx, yy, zz, yz, xz, xy = voigt
    eps = np.array([[xx, xy / 2, xz / 2], [xy / 2, yy, yz / 2], [xz / 2, yz / 2, zz]])
    out = atoms.copy()
    out.set_cell(atoms.cell[:] @ (np.eye(3) + eps).T, scale_atoms=True)
    out.calc = atoms.calc
    return out


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_stress_is_the_strain_derivative_of_the_energy(backend):
    """sigma = (1/V) dE/d(eps) against central differences of the energy of strained cells, on
    a triclinic cell with pairs inside the switching region (r_on = 1.5): the error of the
    differences falls like h^2, so the step-h/2 error is about a quarter of the step-h one."""
    pair = smooth_cutoff(lennard_jones, r_on=1.5, r_cut=2.3)
    atoms = bulk("Ar", "fcc", a=1.58).repeat((2, 2, 2))
    atoms.rattle(0.02, seed=4)
    atoms.calc = SimdiffCalculator(pair=pair, backend=backend)
    stress = atoms.get_stress()
    volume = atoms.get_volume()

    def central(h):
        fd = np.empty(6)
        for k in range(6):
            e = np.zeros(6)
            e[k] = h
            fd[k] = (_strained(atoms, e).get_potential_energy()
                     - _strained(atoms, -e).get_potential_energy()) / (2 * h * volume)  # fmt: skip
        return fd

    err = [np.abs(central(h) - stress).max() for h in (4e-4, 2e-4)]
    assert err[0] < 1e-4 * np.abs(stress).max(), err
    assert err[1] < err[0] / 3, err


def test_backends_agree_on_stress_forces_energies():
    atoms = CELLS["triclinic-27"].copy()
    atoms.rattle(0.03, seed=5)
    pair = smooth_cutoff(lennard_jones, r_on=1.5, r_cut=2.3)
    got = {}
    for backend in ("jax", "torch"):
        a = atoms.copy()
        a.calc = SimdiffCalculator(pair=pair, backend=backend)
        got[backend] = (a.get_forces(), a.get_stress(), a.get_potential_energies())
    for x, y in zip(got["jax"], got["torch"], strict=True):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * (1 + np.abs(y).max()))


@pytest.mark.slow
def test_frechet_cell_filter_relaxes_fcc_to_the_lattice_sum_minimum():
    """A 4-atom fcc cell (shorter than twice the cutoff: images interact), rattled, relaxed by
    BFGS on FrechetCellFilter: the lattice constant is the minimum of the fcc lattice sum over
    the five shells inside the cutoff (counts 12, 6, 24, 12, 24; no shell in the switching
    region), and equals what ASE's LennardJones reaches with the same interactions."""
    pair = smooth_cutoff(lennard_jones, r_on=2.5, r_cut=2.6)  # shells at 2.44 and 2.68 outside
    counts, k = np.array([12, 6, 24, 12, 24]), np.arange(1, 6)

    def du_da(a):
        r = a / np.sqrt(2) * np.sqrt(k)
        return np.sum(counts * 4 * (-12 * r**-13 + 6 * r**-7) * r / a)

    a0 = brentq(du_da, 1.5, 1.6, xtol=1e-14)
    found = {}
    for name, calc in (("simdiff", SimdiffCalculator(pair=pair)),
                       ("ase", LennardJones(sigma=1.0, epsilon=1.0, rc=2.55))):  # fmt: skip
        atoms = bulk("Ar", "fcc", a=1.555, cubic=True)
        atoms.rattle(0.01, seed=2)
        atoms.calc = calc
        assert BFGS(FrechetCellFilter(atoms), logfile=None).run(fmax=1e-8, steps=200)
        lengths, angles = atoms.cell.cellpar()[:3], atoms.cell.cellpar()[3:]
        np.testing.assert_allclose(angles, 90.0, atol=1e-6)
        found[name] = lengths
    np.testing.assert_allclose(found["simdiff"], a0, atol=1e-8)
    np.testing.assert_allclose(found["simdiff"], found["ase"], atol=1e-8)


def _md_drift(dt_fs: float, steps: int) -> tuple[float, int]:
    from functools import partial

    sigma, epsilon = 3.40, 0.0104  # argon, eV and Angstrom
    pair = smooth_cutoff(partial(lennard_jones, epsilon=epsilon, sigma=sigma),
                         r_on=2.0 * sigma, r_cut=2.5 * sigma)  # fmt: skip
    atoms = bulk("Ar", "fcc", a=5.26, cubic=True).repeat(3)  # 108 atoms, box 15.8 < 2 r_cut
    rng = np.random.default_rng(0)
    atoms.set_momenta(rng.standard_normal((108, 3)) * np.sqrt(units.kB * 80.0 * 39.948))
    atoms.calc = calc = SimdiffCalculator(pair=pair, skin=0.3)
    e0 = atoms.get_total_energy()
    dyn = VelocityVerlet(atoms, dt_fs * units.fs)
    drift = 0.0
    for _ in range(steps):
        dyn.run(1)
        drift = max(drift, abs(atoms.get_total_energy() - e0))
    assert calc.pairs is not None
    return drift, calc.pairs.rebuilds


@pytest.mark.slow
def test_velocity_verlet_conserves_energy_like_dt_squared():
    """NVE Velocity Verlet through the calculator, 108 atoms, the list rebuilt on the way: the
    total energy stays within the integrator's O(dt^2) error (halving dt cuts the largest
    deviation by about 4), so no rebuild or cutoff puts a jump into the energy."""
    coarse, rebuilds = _md_drift(8.0, 40)
    fine, _ = _md_drift(4.0, 80)
    assert rebuilds >= 2  # the list followed the atoms
    assert coarse < 2e-3  # eV, 108 atoms at 80 K (kinetic energy about 1.1 eV)
    assert 2.5 < coarse / fine < 6.0, (coarse, fine)


def test_bad_cells_and_missing_stress():
    atoms = Atoms("Ar2", positions=[[0, 0, 0], [1.1, 0, 0]])
    atoms.calc = SimdiffCalculator(pair=GAP)
    assert atoms.get_potential_energy() < 0
    with pytest.raises(PropertyNotImplementedError):
        atoms.get_stress()  # a free cluster has no cell: no stress
    flat = Atoms("Ar2", positions=[[0, 0, 0], [1.1, 0, 0]], cell=[[5, 0, 0], [0, 5, 0], [0, 0, 0]],
                 pbc=True)  # fmt: skip
    flat.calc = SimdiffCalculator(pair=GAP)
    with pytest.raises(InputError, match="cell vector c is periodic"):
        flat.get_potential_energy()
    box = Atoms("Ar2", positions=[[0, 0, 0], [1.1, 0, 0]], cell=[5, 5, 5], pbc=True)
    box.calc = SimdiffCalculator(pair=lennard_jones)
    with pytest.raises(InputError, match="needs a pair potential with a cutoff"):
        box.get_potential_energy()
    nan = Atoms("Ar2", positions=[[0, 0, 0], [np.nan, 0, 0]])
    nan.calc = SimdiffCalculator(pair=GAP)
    with pytest.raises(InputError, match=r"positions must be finite; atom 1 is at \[nan"):
        nan.get_potential_energy()
    same = Atoms("Ar3", positions=[[0, 0, 0], [1.1, 0, 0], [1.1, 0, 0]], cell=[5, 5, 5], pbc=True)
    same.calc = SimdiffCalculator(pair=GAP)
    with pytest.raises(InputError, match=r"atoms 1 and 2 coincide \(distance 0\)"):
        same.get_potential_energy()
    with pytest.raises(InputError, match="skin must be"):
        SimdiffCalculator(pair=GAP, skin=-1.0)


def test_hessian_on_any_cell_against_differences_of_forces():
    """get_hessian from one block per image pair on a small triclinic cell (images of one pair
    add up): central differences of the forces converge to it like h^2; on an orthorhombic
    box it equals the Hessian of simdiff's periodic cluster problem; VibrationsData takes it."""
    import simdiff
    from simdiff.pes.ase_interface import problem_from_atoms, vibrations_data

    pair = smooth_cutoff(lennard_jones, r_on=1.5, r_cut=2.3)
    atoms = bulk("Ar", "fcc", a=1.58).repeat((2, 2, 1))  # 4 atoms, heights < 2 r_cut
    atoms.rattle(0.02, seed=4)
    atoms.calc = calc = SimdiffCalculator(pair=pair)
    h = calc.get_hessian(atoms)
    np.testing.assert_allclose(h, h.T, rtol=0, atol=1e-13 * np.abs(h).max())  # rounding
    x0 = atoms.positions.reshape(-1).copy()

    def central(step):
        out = np.empty_like(h)
        probe = atoms.copy()
        probe.calc = calc
        for k in range(x0.size):
            f = []
            for s in (step, -step):
                x = x0.copy()
                x[k] += s
                probe.positions = x.reshape(-1, 3)
                f.append(probe.get_forces().reshape(-1))
            out[:, k] = -(f[0] - f[1]) / (2 * step)
        return out

    err = [np.abs(central(s) - h).max() / np.abs(h).max() for s in (1e-3, 5e-4)]
    assert err[0] < 1e-4 and err[1] < err[0] / 3, err
    vib = vibrations_data(atoms)
    assert np.sum(np.abs(vib.get_frequencies()) < 1e-3) == 3  # three translations, no rotations
    box = CELLS["cubic-108"].copy()
    box.rattle(0.01, seed=1)
    box.calc = SimdiffCalculator(pair=GAP)
    ref = simdiff.hessian(problem_from_atoms(box, GAP))
    np.testing.assert_allclose(box.calc.get_hessian(box), ref, rtol=0,
                               atol=1e-12 * np.abs(ref).max())  # fmt: skip


def test_translation_and_wrapping_leave_everything_unchanged():
    """A rigid translation of a triclinic cell's atoms, then wrapping them back into the cell
    (positions jump by lattice vectors, the list is rebuilt with new image shifts): energy,
    forces and stress are unchanged to rounding."""
    pair = smooth_cutoff(lennard_jones, r_on=1.5, r_cut=2.3)
    atoms = CELLS["triclinic-27"].copy()
    atoms.rattle(0.03, seed=6)
    atoms.calc = calc = SimdiffCalculator(pair=pair)
    ref = (atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress())
    atoms.positions += [0.7, -1.9, 3.3]
    atoms.wrap()
    got = (atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress())
    assert calc.pairs is not None and calc.pairs.rebuilds == 2
    assert got[0] == pytest.approx(ref[0], rel=1e-13)
    for x, y in zip(got[1:], ref[1:], strict=True):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * np.abs(y).max())


def test_list_survives_small_cell_changes_and_stays_exact():
    """A cell strained step by step keeps its list while the bound allows (no pair outside it
    can come within r_cut) and rebuilds beyond; at every step energy, forces and stress equal a
    fresh calculator's."""
    pair = smooth_cutoff(lennard_jones, r_on=1.5, r_cut=2.3)
    atoms = CELLS["triclinic-27"].copy()
    atoms.rattle(0.02, seed=7)
    atoms.calc = calc = SimdiffCalculator(pair=pair, skin=0.3)
    atoms.get_potential_energy()  # the list of the unstrained cell
    strain = np.array([[1.0, 0.3, -0.2], [0.3, -0.5, 0.1], [-0.2, 0.1, 0.8]])
    counts = []
    for step in range(1, 8):
        strained = atoms.copy()
        strained.set_cell(atoms.cell[:] @ (np.eye(3) + 0.03 * step * strain).T, scale_atoms=True)
        strained.calc = calc
        fresh = strained.copy()
        fresh.calc = SimdiffCalculator(pair=pair, skin=0.3)
        assert strained.get_potential_energy() == pytest.approx(fresh.get_potential_energy(),
                                                                rel=1e-13)  # fmt: skip
        np.testing.assert_allclose(strained.get_forces(), fresh.get_forces(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(strained.get_stress(), fresh.get_stress(), rtol=0, atol=1e-12)
        assert calc.pairs is not None
        counts.append(calc.pairs.rebuilds)
    assert counts[0] == 1  # a 3 % strain keeps the list of the unstrained cell
    assert counts[-1] > 1  # a 21 % one does not
