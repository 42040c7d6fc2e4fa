"""Stillinger-Weber silicon: energy, lattice constant, forces, exact stress, Hessian, neighbour table."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import simdiff
from simdiff.errors import InputError, NeighbourListError
from simdiff.pes.manybody import SiteEvaluator, manybody_problem, stillinger_weber

A0 = 5.431  # Å, the diamond lattice constant of SW silicon
VOIGT = [(0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1)]


def primitive(a: float) -> tuple[np.ndarray, np.ndarray]:
    cell = 0.5 * a * (1.0 - np.eye(3))
    return np.array([[0.0, 0, 0], [0.25, 0.25, 0.25]]) @ cell, cell


def conventional(a: float) -> tuple[np.ndarray, np.ndarray]:
    fcc = np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])
    frac = np.concatenate([fcc, fcc + 0.25])
    return frac * a, a * np.eye(3)


def phi2(r: float) -> float:
    """The SW pair term by hand (numpy), the independent reference of the diamond energy."""
    eps, sigma, a, big_a, big_b = 2.1683, 2.0951, 1.8, 7.049556277, 0.6022245584
    return big_a * eps * (big_b * (sigma / r) ** 4 - 1.0) * np.exp(sigma / (r - a * sigma))


@pytest.fixture(scope="module")
def rattled() -> dict:
    """Eight atoms in a sheared cubic cell, rattled; the problem, the evaluator and its results."""
    pos, cell = conventional(A0)
    cell = cell.copy()
    cell[1, 0] += 0.4  # triclinic
    pos = pos + np.random.default_rng(7).normal(scale=0.06, size=pos.shape)
    sw = stillinger_weber()
    ev = SiteEvaluator(sw, backend="jax")
    pbc = np.ones(3, dtype=bool)
    return {"pos": pos, "cell": cell, "pbc": pbc, "evaluator": ev,
            "out": ev.evaluate(pos, cell, pbc),
            "problem": manybody_problem(sw, pos, cell=cell)}  # fmt: skip


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_diamond_energy_per_atom(backend: str) -> None:
    pos, cell = primitive(A0)
    p = manybody_problem(stillinger_weber(), pos, cell=cell)
    e, g = simdiff.value_and_grad(p, p.x0, backend=backend)
    # each atom: four bonds of r1 = a sqrt(3) / 4, half of each; the angle terms vanish
    exact = 2.0 * phi2(A0 * np.sqrt(3.0) / 4.0)
    assert float(e) / 2 == pytest.approx(exact, rel=1e-12)
    assert round(float(e) / 2, 4) == -4.3366
    assert np.abs(g).max() < 1e-12  # every atom at a centre of symmetry


def test_lattice_minimum_near_5431() -> None:
    sw = stillinger_weber()

    def per_atom(a: float) -> float:
        pos, cell = primitive(a)
        return float(manybody_problem(sw, pos, cell=cell).evaluate()) / 2

    best = minimize_scalar(per_atom, bracket=(5.40, 5.43, 5.46), tol=1e-10)
    assert abs(best.x - A0) < 0.005
    # the conventional cell gives the same energy per atom as the primitive one
    pos, cell = conventional(A0)
    assert float(manybody_problem(sw, pos, cell=cell).evaluate()) / 8 == pytest.approx(
        per_atom(A0), rel=1e-13
    )


def test_forces_and_per_atom_energies_against_ad(rattled: dict) -> None:
    p, out = rattled["problem"], rattled["out"]
    e, g = simdiff.value_and_grad(p, p.x0, backend="jax")
    assert out["energy"] == pytest.approx(float(e), rel=1e-13)
    scale = np.abs(g).max()
    assert np.abs(out["forces"] + np.asarray(g).reshape(-1, 3)).max() < 1e-12 * scale
    assert out["energies"].sum() == pytest.approx(out["energy"], rel=1e-13)
    assert np.abs(out["forces"].sum(axis=0)).max() < 1e-12 * scale  # no net force


def test_stress_is_the_strain_derivative(rattled: dict) -> None:
    """Central differences of the energy under a strain of positions and cell, step h = 1e-5:
    truncation ~ h^2 |E'''| (~1e-8 here) and rounding ~ 1e-16 |E| / h (~1e-10)."""
    pos, cell, pbc, ev = rattled["pos"], rattled["cell"], rattled["pbc"], rattled["evaluator"]
    h = 1e-5
    fd = []
    for a, b in VOIGT:
        eps = np.zeros((3, 3))
        eps[a, b] += h if a == b else h / 2
        eps[b, a] += 0.0 if a == b else h / 2
        up = ev.evaluate(pos @ (np.eye(3) + eps).T, cell @ (np.eye(3) + eps).T, pbc)["energy"]
        down = ev.evaluate(pos @ (np.eye(3) - eps).T, cell @ (np.eye(3) - eps).T, pbc)["energy"]
        fd.append((up - down) / (2 * h))
    exact = rattled["out"]["strain_derivative"]
    assert np.abs(exact - np.array(fd)).max() < 1e-6 * np.abs(exact).max()


def test_hessian_from_site_blocks_equals_dense_ad(rattled: dict) -> None:
    """simdiff.hessian of the problem assembles one 3K x 3K block per atom (its structured
    path, the evaluator's Hessian-vector products); the dense AD Hessian through the gathers
    is the reference."""
    p = rattled["problem"]
    h = np.asarray(simdiff.hessian(p, p.x0, backend="jax"))
    dense = np.asarray(simdiff.hessian(p, p.x0, backend="jax", method="fwd-rev"))
    assert np.abs(h - dense).max() < 1e-12 * np.abs(dense).max()
    assert np.array_equal(h, h.T)
    assert np.array_equal(simdiff.hessian(p, p.x0, backend="jax", sparse=True).toarray(), h)


def test_slab_forces_and_translation() -> None:
    """A (001) slab, periodic in x and y only: forces by AD match the evaluator's, and a rigid
    translation (across the periodic boundary too) changes nothing."""
    pos, cell = conventional(A0)
    pos = np.concatenate([pos, pos + np.array([0, 0, A0])])  # two cells thick
    cell = np.diag([A0, A0, 30.0])
    pos = pos + np.random.default_rng(3).normal(scale=0.05, size=pos.shape)
    pbc = np.array([True, True, False])
    sw = stillinger_weber()
    ev = SiteEvaluator(sw, backend="jax")
    out = ev.evaluate(pos, cell, pbc)
    moved = ev.evaluate(pos + np.array([0.7 * A0, -0.3, 2.0]), cell, pbc)
    assert moved["energy"] == pytest.approx(out["energy"], rel=1e-13)
    assert np.abs(moved["forces"] - out["forces"]).max() < 1e-12 * np.abs(out["forces"]).max()
    p = manybody_problem(sw, pos, cell=cell, pbc=pbc)
    g = np.asarray(simdiff.grad(p, p.x0, backend="jax")).reshape(-1, 3)
    assert np.abs(out["forces"] + g).max() < 1e-12 * np.abs(g).max()


def test_table_follows_the_atoms() -> None:
    pos, cell = conventional(A0)
    sw = stillinger_weber()
    p = manybody_problem(sw, pos, cell=cell, skin=0.2)
    x = p.x0.copy()
    x[:3] += [0.3, 0.1, 0.0]  # farther than skin / 2
    fresh = manybody_problem(sw, x.reshape(-1, 3), cell=cell, skin=0.2)
    assert float(p.evaluate(x)) == pytest.approx(float(fresh.evaluate()), rel=1e-14)
    assert p.fn.rebuilds == 1
    fixed = manybody_problem(sw, pos, cell=cell, skin=0.2, follow=False)
    with pytest.raises(NeighbourListError, match="atom 0 has moved"):
        fixed.evaluate(x)


def test_evaluator_rebuild_reuses_the_compiled_derivative(rattled: dict) -> None:
    """The table is an input of the evaluator's problem: a rebuilt table of the same width (the
    width is kept when the new one fits) runs the derivative compiled before."""
    pos, cell, pbc, ev = rattled["pos"], rattled["cell"], rattled["pbc"], rattled["evaluator"]
    ev.evaluate(pos, cell, pbc)
    before, compiled = ev.rebuilds, ev.compilations
    moved = pos.copy()
    moved[3] += [0.25, -0.1, 0.05]  # farther than skin / 2 = 0.19
    out = ev.evaluate(moved, cell, pbc)
    assert ev.rebuilds == before + 1
    assert ev.compilations == compiled
    fresh = manybody_problem(stillinger_weber(), moved, cell=cell).evaluate()
    assert out["energy"] == pytest.approx(float(fresh), rel=1e-13)


def test_coincident_atoms_are_named() -> None:
    pos, cell = conventional(A0)
    pos[5] = pos[2]
    with pytest.raises(InputError, match="atoms 2 and 5 coincide"):
        manybody_problem(stillinger_weber(), pos, cell=cell)


def test_unknown_parameter() -> None:
    with pytest.raises(InputError, match="unknown Stillinger-Weber parameters"):
        stillinger_weber(sigmaa=2.0)


def test_ase_calculator_and_md(rattled: dict) -> None:
    """SimdiffCalculator(potential=...) gives the evaluator's energy, forces, stress and per-atom
    energies, the exact Hessian for vibrations, and velocity Verlet conserves its energy."""
    from ase import Atoms, units
    from ase.md.verlet import VelocityVerlet

    from simdiff.pes.ase_interface import SimdiffCalculator, vibrations_data

    pos, cell, out = rattled["pos"], rattled["cell"], rattled["out"]
    atoms = Atoms("Si8", positions=pos, cell=cell, pbc=True)
    atoms.calc = SimdiffCalculator(potential=stillinger_weber())
    assert atoms.get_potential_energy() == pytest.approx(out["energy"], rel=1e-13)
    assert np.abs(atoms.get_forces() - out["forces"]).max() < 1e-12 * np.abs(out["forces"]).max()
    stress = out["strain_derivative"] / abs(np.linalg.det(cell))
    assert np.abs(atoms.get_stress() - stress).max() < 1e-12 * np.abs(stress).max()
    assert np.abs(atoms.get_potential_energies() - out["energies"]).max() < 1e-12
    vib = vibrations_data(atoms)
    assert vib.get_hessian_2d().shape == (24, 24)

    def energy_error(dt: float, steps: int) -> float:
        moving = Atoms("Si8", positions=pos, cell=cell, pbc=True)
        moving.calc = atoms.calc
        start = moving.get_total_energy()
        VelocityVerlet(moving, dt * units.fs).run(steps)
        return moving.get_total_energy() - start

    # velocity Verlet on exact forces: the energy error over the same 10 fs is O(dt^2)
    # (measured 2.49e-3, 6.23e-4, 1.56e-4 eV at 1, 0.5, 0.25 fs)
    ratio = energy_error(1.0, 10) / energy_error(0.5, 20)
    assert 3.6 < ratio < 4.4


def test_phonons_at_gamma_and_x_against_ase_finite_differences(tmp_path) -> None:
    """Diamond silicon, 2 atoms per primitive cell: ASE's Phonons (central differences of the
    calculator's forces, delta = 0.005 A, on a 2x2x2 supercell) against the exact phonons of
    the per-atom Hessian blocks at Gamma and X, which are commensurate with that supercell (its
    force constants fold exactly there), so they differ by the O(delta^2) error alone."""
    from ase.build import bulk
    from ase.phonons import Phonons

    from simdiff.pes.ase_interface import SimdiffCalculator
    from simdiff.pes.manybody.phonons import site_phonons

    atoms = bulk("Si", "diamond", a=5.431)
    ph = Phonons(atoms, SimdiffCalculator(potential=stillinger_weber()), supercell=(2, 2, 2),
                 delta=0.005, name=str(tmp_path / "phonon"))  # fmt: skip
    ph.run()
    ph.read(acoustic=False, symmetrize=0)
    q = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.5]])  # Gamma, X (primitive reciprocal basis)
    ref = ph.band_structure(q)
    exact = site_phonons(atoms, q, stillinger_weber()).energies
    # measured: 7.0e-6 of the largest energy at delta = 0.005 A, 2.8e-5 at 0.01 (O(delta^2))
    assert np.abs(exact - ref).max() < 3e-5 * np.abs(ref).max()
    assert np.abs(exact[0, :3]).max() < 1e-9  # the acoustic modes at Gamma
    assert np.abs(exact[0, 3:]).min() > 0.05  # the optical ones do not vanish (eV)
