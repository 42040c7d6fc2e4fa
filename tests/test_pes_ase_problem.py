"""SimdiffCalculator(problem=...): stress and per-atom energies where the problem is a pair
potential over its pairs, equal to those of SimdiffCalculator(pair=...); a clear error where
the problem is not one, or where the Atoms' cell is not the problem's."""

from __future__ import annotations

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.calculators.calculator import PropertyNotImplementedError

from problems.pes import fcc_cluster
from simdiff.errors import InputError, SimdiffError
from simdiff.pes import cluster_problem, lennard_jones, muller_brown, smooth_cutoff, term_energy
from simdiff.pes.ase_interface import PropertyUnavailable, SimdiffCalculator, problem_from_atoms

EPS = float(np.finfo(np.float64).eps)
PAIR = smooth_cutoff(lennard_jones, r_on=1.5, r_cut=2.2)


def _atoms() -> dict[str, Atoms]:
    slab = bulk("Ar", "fcc", a=1.6, cubic=True).repeat((3, 3, 2))
    slab.center(vacuum=3.0, axis=2)
    slab.pbc = (True, True, False)
    return {
        "cubic-108": bulk("Ar", "fcc", a=1.6, cubic=True).repeat(3),
        "cubic-4 (image pairs)": bulk("Ar", "fcc", a=1.6, cubic=True),
        "triclinic-27": bulk("Ar", "fcc", a=1.6).repeat(3),
        "slab": slab,
        "cluster-19": Atoms("Ar19", positions=fcc_cluster(19)),
    }


ATOMS = _atoms()


@pytest.mark.parametrize("name", list(ATOMS))
def test_stress_and_energies_equal_those_of_the_pair_calculator(name):
    atoms = ATOMS[name].copy()
    atoms.rattle(0.01, seed=1)
    ours, ref = atoms.copy(), atoms.copy()
    ours.calc = SimdiffCalculator(problem_from_atoms(atoms, PAIR))
    ref.calc = SimdiffCalculator(pair=PAIR)
    m = 60 * len(atoms)  # pairs within reach, an upper bound: rounding of sums in other orders
    tol = 2 * m * EPS
    e = ref.get_potential_energy()
    assert abs(ours.get_potential_energy() - e) <= tol * (abs(e) + m)
    np.testing.assert_allclose(ours.get_potential_energies(), ref.get_potential_energies(),
                               rtol=0, atol=tol * (np.abs(ref.get_potential_energies()).max()
                                                   + m))  # fmt: skip
    if atoms.cell.rank == 3:
        s = ref.get_stress()
        np.testing.assert_allclose(ours.get_stress(), s, rtol=0, atol=tol * np.abs(s).max())
    assert ours.get_potential_energies().sum() == pytest.approx(e, rel=tol, abs=tol)


def test_energies_of_a_problem_follow_the_atoms():
    """After an MD-like move beyond the skin, stress and energies are those at the new point."""
    atoms = ATOMS["cubic-108"].copy()
    ours, ref = atoms.copy(), atoms.copy()
    ours.calc = SimdiffCalculator(problem_from_atoms(atoms, PAIR))
    ref.calc = SimdiffCalculator(pair=PAIR)
    ours.get_stress()
    moved = atoms.positions + 0.2 * np.random.default_rng(4).standard_normal(atoms.positions.shape)
    ours.positions, ref.positions = moved, moved
    s = ref.get_stress()
    np.testing.assert_allclose(ours.get_stress(), s, rtol=0, atol=1e-10 * np.abs(s).max())


def test_a_problem_that_is_not_a_pair_potential_says_why():
    def bond(r, ops):
        d = r[..., 1, :] - r[..., 0, :]
        return 0.5 * (ops.sqrt(ops.sum(d * d, axis=-1)) - 1.0) ** 2

    atoms = Atoms("Ar3", positions=[[0, 0, 0], [1.1, 0, 0], [0, 1.2, 0]])
    atoms.calc = SimdiffCalculator(term_energy(bond, [[0, 1], [1, 2]], atoms.positions))
    assert np.isfinite(atoms.get_forces()).all()  # energy and forces still work
    with pytest.raises(PropertyUnavailable, match="cannot give 'stress': its energy is a sum of "
                       "terms of 2 atoms"):  # fmt: skip
        atoms.get_stress()
    mb = Atoms("H", positions=[[0.6, 0.03, 0.0]])
    mb.calc = SimdiffCalculator(muller_brown(), components=[0, 1])
    with pytest.raises(PropertyUnavailable, match="cannot give 'energies'") as info:
        mb.get_potential_energies()
    assert isinstance(info.value, SimdiffError) and isinstance(info.value,
                                                              PropertyNotImplementedError)  # fmt: skip


def test_another_cell_than_the_problems_is_refused():
    atoms = ATOMS["cubic-108"].copy()
    atoms.calc = SimdiffCalculator(cluster_problem(PAIR, atoms.positions,
                                                   box=np.diag(atoms.cell[:]).copy()))  # fmt: skip
    atoms.get_stress()
    atoms.set_cell(atoms.cell[:] * 1.01, scale_atoms=True)
    with pytest.raises(InputError, match="a problem's cell is fixed"):
        atoms.get_stress()
