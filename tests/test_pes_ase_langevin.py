"""ase.md.langevin.Langevin with the calculator: the mean kinetic temperature is the set one
within a statistical bound, and the trajectory is ASE's LennardJones one for the same seeds."""

from __future__ import annotations

import numpy as np
from ase import Atoms, units
from ase.build import bulk
from ase.calculators.lj import LennardJones
from ase.md.langevin import Langevin
from ase.neighborlist import primitive_neighbor_list

from simdiff.pes import lennard_jones, smooth_cutoff
from simdiff.pes.ase_interface import SimdiffCalculator

EPS = float(np.finfo(np.float64).eps)
#: fcc with a = 1.6 has no shell in [2.0, 2.2]: plain LJ on every pair, as ASE's smooth=False
GAP = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.2)
#: the LJ time unit here (sigma = 1 A, epsilon = 1 eV, 39.9 amu) is 64 fs; the fastest phonon
#: period about 20 fs
DT = 0.5 * units.fs


def _crystal() -> Atoms:
    return bulk("Ar", "fcc", a=1.6, cubic=True).repeat(2)  # 32 atoms, box 3.2 < 2 r_cut


def _langevin(atoms: Atoms, calc, temperature_k: float, friction: float, steps: int,
              seed: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Temperatures and positions after each of ``steps`` Langevin steps from Maxwell-Boltzmann
    momenta at ``temperature_k`` (``default_rng(seed)``; the thermostat's noise from seed + 1)."""
    atoms = atoms.copy()
    atoms.calc = calc
    rng = np.random.default_rng(seed)
    kt = units.kB * temperature_k
    masses = atoms.get_masses()[:, None]
    atoms.set_momenta(rng.standard_normal((len(atoms), 3)) * np.sqrt(masses * kt))
    dyn = Langevin(atoms, DT, temperature_K=temperature_k, friction=friction, fixcm=False,
                   rng=np.random.default_rng(seed + 1))  # fmt: skip
    temps, pos = [], []

    def record() -> None:
        temps.append(atoms.get_temperature())
        pos.append(atoms.positions.copy())

    dyn.attach(record, interval=1)
    dyn.run(steps)
    return np.array(temps[1:]), np.array(pos[1:])  # record() also runs before the first step


def test_mean_temperature_is_the_set_one():
    """Canonical sampling: the kinetic temperature T_k = 2 K / (3 N k_B) of N atoms has mean T
    and standard deviation T sqrt(2 / 3N).  Langevin friction gamma decorrelates momenta in
    1/gamma; counting one independent sample per 1/gamma (conservative: kinetic energy
    decorrelates in 1/(2 gamma)), the mean over n steps of dt has standard error
    T sqrt(2 / 3N) / sqrt(n dt gamma); the test allows five of them.  The first 20/gamma are
    equilibration (the lattice starts at its minimum, so kinetic energy flows into potential).
    The step is small (gamma dt = 0.05, a fortieth of the fastest phonon period) so that the
    integrator's own temperature error stays well below the bound (at dt = 2 fs one run gave
    0.94 T, four standard errors low)."""
    atoms = _crystal()
    temperature = 0.3 / units.kB  # k_B T = 0.3 epsilon: a solid
    gamma = 0.1 / units.fs
    steps, skip = 1200, int(20 / (gamma * DT))
    temps, _ = _langevin(atoms, SimdiffCalculator(pair=GAP), temperature, gamma, steps, seed=7)
    kept = temps[skip:]
    samples = kept.size * DT * gamma
    error = temperature * np.sqrt(2.0 / (3 * len(atoms))) / np.sqrt(samples)
    assert abs(kept.mean() - temperature) < 5.0 * error
    assert kept.std() > 0.3 * temperature * np.sqrt(2.0 / (3 * len(atoms)))  # not frozen


def test_trajectory_equals_ase_lennard_jones_for_the_same_seeds():
    """Same seeds, same potential (no pair enters the switching region, checked): positions
    agree to rounding.  Forces agree to ~1e-14 relative; each step adds an error of a few ulp
    of the positions, growing at most linearly over a short, cold run, so the bound is
    16 eps |R|max per step."""
    atoms = _crystal()
    atoms.rattle(0.01, seed=2)
    temperature = 0.002 / units.kB
    gamma = 0.02 / units.fs
    steps = 100
    _, ours = _langevin(atoms, SimdiffCalculator(pair=GAP), temperature, gamma, steps, seed=5)
    ase_lj = LennardJones(sigma=1.0, epsilon=1.0, rc=2.2, smooth=False)
    _, theirs = _langevin(atoms, ase_lj, temperature, gamma, steps, seed=5)
    for p in ours:  # the premise: every pair below r_on or beyond r_cut
        d = primitive_neighbor_list("d", atoms.pbc, atoms.cell, p, 2.3)
        assert not ((d >= 2.0) & (d <= 2.2)).any()
    bound = 16 * EPS * np.abs(theirs).max() * np.arange(1, steps + 1)
    np.testing.assert_array_less(np.abs(ours - theirs).max(axis=(1, 2)), bound)
    assert np.abs(ours[-1] - atoms.positions).max() > 1e-3  # the atoms moved
