"""ASE and Sella on simdiff's exact derivatives: ASE's LennardJones calculator, ASE's
finite-difference Vibrations, ASE thermochemistry, Sella saddle searches."""

from __future__ import annotations

import numpy as np
import pytest
from _shared import shared_problem
from ase import Atoms
from ase.calculators.lj import LennardJones
from ase.constraints import FixCartesian
from ase.thermochemistry import HarmonicThermo
from ase.units import kB
from ase.vibrations import Vibrations
from sella import Sella

import simdiff
from simdiff.pes import find_minimum, lennard_jones, muller_brown, normal_modes, stationary_index
from simdiff.pes.ase_interface import (
    SimdiffCalculator,
    atoms_box,
    problem_from_atoms,
    sella_hessian_function,
    vibrations_data,
)


@pytest.fixture(scope="module")
def lj7_min():
    p = shared_problem("lj7")
    return p, find_minimum(p).x


def test_energies_and_forces_match_ase_lennard_jones(rng):
    pos = shared_problem("lj13").x0.reshape(13, 3) + 0.03 * rng.standard_normal((13, 3))
    ours = Atoms("Ar13", positions=pos)
    ours.calc = SimdiffCalculator(pair=lennard_jones)
    rc = 50.0  # ASE shifts each pair inside rc by -u(rc); all 78 pairs are inside
    ref = Atoms("Ar13", positions=pos)
    ref.calc = LennardJones(sigma=1.0, epsilon=1.0, rc=rc)
    shift = 78 * 4.0 * (rc**-12 - rc**-6)
    assert ours.get_potential_energy() - shift == pytest.approx(ref.get_potential_energy(),
                                                                rel=1e-13)  # fmt: skip
    np.testing.assert_allclose(ours.get_forces(), ref.get_forces(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_exact_frequencies_agree_with_ase_finite_differences(lj7_min, backend, tmp_path):
    _, x = lj7_min
    atoms = Atoms("Ar7", positions=x.reshape(7, 3))
    atoms.calc = SimdiffCalculator(pair=lennard_jones, backend=backend)
    exact = vibrations_data(atoms).get_frequencies()[6:].real  # cm^-1, 15 internal modes
    # simdiff's own normal modes in the same units (eV, Angstrom, amu)
    nm = normal_modes(problem_from_atoms(atoms, lennard_jones), backend=backend)
    np.testing.assert_allclose(exact, nm.wavenumbers("eV", "angstrom"), rtol=1e-6)
    errors = []
    for delta in (0.01, 0.005):
        vib = Vibrations(atoms, delta=delta, nfree=2, name=str(tmp_path / f"vib{delta}"))
        vib.run()
        fd = np.sort(vib.get_frequencies().real)[6:]
        errors.append(np.abs(fd - exact).max() / exact.max())
    assert errors[0] < 3e-3  # ASE default step 0.01 A is 1 % of sigma here
    # central differences converge like delta^2: halving the step cuts the error ~4x
    assert errors[1] < errors[0] / 3, errors


def test_thermochemistry_through_ase_from_exact_hessian(lj7_min):
    _, x = lj7_min
    atoms = Atoms("Ar7", positions=x.reshape(7, 3))
    atoms.calc = SimdiffCalculator(pair=lennard_jones)
    vib = vibrations_data(atoms)
    energies = vib.get_energies()[6:].real  # eV
    T = 40.0
    F = HarmonicThermo(energies, potentialenergy=0.0).get_helmholtz_energy(T, verbose=False)
    expected = np.sum(0.5 * energies + kB * T * np.log1p(-np.exp(-energies / (kB * T))))
    assert F == pytest.approx(expected, rel=1e-10)
    assert vib.get_zero_point_energy() == pytest.approx(0.5 * energies.sum(), rel=1e-6)


def test_sella_with_exact_hessians_reaches_muller_brown_saddle():
    mb = muller_brown()
    calc = SimdiffCalculator(mb, components=[0, 1])
    # one atom moving in (x, y): z fixed; periodic cell so Sella does not project rotations
    atoms = Atoms("H", positions=[[-0.7, 0.7, 0.0]], cell=[50, 50, 50], pbc=True)
    atoms.set_constraint(FixCartesian(0, mask=(False, False, True)))
    atoms.calc = calc
    opt = Sella(atoms, order=1, hessian_function=sella_hessian_function(calc), diag_every_n=1,
                logfile=None)  # fmt: skip
    assert opt.run(fmax=1e-6, steps=100)
    xy = atoms.positions[0, :2]
    np.testing.assert_allclose(xy, [-0.82200156, 0.6243128], atol=1e-6)
    assert stationary_index(mb, xy)[0] == 1
    assert calc.counts["hessian"] >= 1


def _sella_lj7(start):
    atoms = Atoms("Ar7", positions=start.reshape(7, 3))
    calc = SimdiffCalculator(pair=lennard_jones)
    atoms.calc = calc
    opt = Sella(atoms, order=1, hessian_function=sella_hessian_function(calc), diag_every_n=1,
                logfile=None)  # fmt: skip
    assert opt.run(fmax=1e-6, steps=100)
    assert calc.counts["hessian"] >= 1
    return atoms


def test_sella_with_exact_hessians_reaches_lj7_saddle(lj7_min):
    """From the minimum nudged along its softest mode Sella reaches an index-1 saddle; from near
    the saddle simdiff's P-RFO finds, it reaches that one.  (LJ7's softest mode is doubly
    degenerate, so which saddle a climb along "mode 0" reaches depends on rounding: the two
    searches are not compared from the minimum.)"""
    p, x = lj7_min
    u = normal_modes(p, x).displacements[:, 0]
    atoms = _sella_lj7(x + 0.1 * u / np.linalg.norm(u))
    assert stationary_index(p, atoms.positions.reshape(-1))[0] == 1
    assert atoms.get_potential_energy() > float(p.evaluate(x)) + 0.1
    saddle = simdiff.pes.find_saddle(p, x, mode=0)  # P-RFO on the exact Hessian
    assert saddle.converged and saddle.index == 1
    near = saddle.x + 0.005 * np.random.default_rng(7).standard_normal(saddle.x.shape)
    atoms = _sella_lj7(near)
    assert atoms.get_potential_energy() == pytest.approx(saddle.energy, abs=1e-9)
    assert stationary_index(p, atoms.positions.reshape(-1))[0] == 1


def test_bad_calculator_input():
    with pytest.raises(simdiff.errors.InputError, match="exactly one of problem= and pair="):
        SimdiffCalculator()
    with pytest.raises(simdiff.errors.InputError, match="orthorhombic"):
        atoms_box(Atoms("Ar", cell=[[5, 1, 0], [0, 5, 0], [0, 0, 5]], pbc=True))
    calc = SimdiffCalculator(muller_brown())
    atoms = Atoms("H", positions=[[0.0, 0.5, 0.0]])
    atoms.calc = calc
    with pytest.raises(simdiff.ShapeError, match="pass components="):
        atoms.get_potential_energy()
    with pytest.raises(simdiff.errors.InputError, match="SimdiffCalculator"):
        vibrations_data(Atoms("H"), calc=LennardJones())
