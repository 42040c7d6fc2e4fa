"""cluster_problem on cells shorter than twice the cutoff: image pairs, against the ASE
calculator's image pairs and ASE's LennardJones, on cells of 1 to 4 atoms."""

from __future__ import annotations

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.calculators.lj import LennardJones
from ase.neighborlist import primitive_neighbor_list

import simdiff
from simdiff.errors import NeighbourListError
from simdiff.pes import (
    Cell,
    cluster_problem,
    find_minimum,
    lennard_jones,
    normal_modes,
    smooth_cutoff,
)
from simdiff.pes.ase_interface import SimdiffCalculator, problem_from_atoms
from simdiff.pes.images import ImagePairEnergy

EPS = float(np.finfo(np.float64).eps)
#: fcc with a = 1.6 has no shell in [2.0, 2.2]: the switched potential is plain LJ on every pair
GAP = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.2)
SHIFT = 4.0 * (2.2**-12 - 2.2**-6)  # ASE's LennardJones shifts each pair inside rc by -u(rc)
#: a switching region with pairs in it, for the derivative checks
SWITCHED = smooth_cutoff(lennard_jones, r_on=1.5, r_cut=2.2)


def _cells() -> dict[str, Atoms]:
    slab = bulk("Ar", "fcc", a=1.6, cubic=True)
    slab.center(vacuum=3.0, axis=2)
    slab.pbc = (True, True, False)
    return {
        "primitive-1 (triclinic)": bulk("Ar", "fcc", a=1.6),
        "triclinic-2": bulk("Ar", "fcc", a=1.6).repeat((2, 1, 1)),
        "hcp-2": bulk("Ar", "hcp", a=1.13, c=1.85),
        "cubic-4": bulk("Ar", "fcc", a=1.6, cubic=True),
        "slab-4 (pbc T,T,F)": slab,
    }


CELLS = _cells()


def _rattled(name: str) -> Atoms:
    atoms = CELLS[name].copy()
    atoms.rattle(0.005, seed=3)
    return atoms


def _tol(m: int, scale: float) -> float:
    """m image-pair terms summed in other orders: 2 m eps times the sum of their magnitudes
    (bounded by m times the largest, <= scale + m for LJ pair energies >= -1)."""
    return 2.0 * m * EPS * (scale + m)


@pytest.mark.parametrize("name", ["primitive-1 (triclinic)", "hcp-2", "slab-4 (pbc T,T,F)"])
def test_energy_forces_hessian_equal_the_calculators_image_pairs(name, backend):
    atoms = _rattled(name)
    p = problem_from_atoms(atoms, SWITCHED)
    assert isinstance(p.fn, ImagePairEnergy)
    calc = SimdiffCalculator(pair=SWITCHED, backend=backend)
    atoms.calc = calc
    m = p.fn.n_terms
    e = float(p.evaluate())
    assert abs(e - atoms.get_potential_energy()) <= _tol(m, abs(e))
    g = simdiff.grad(p, backend=backend).reshape(-1, 3)
    f = atoms.get_forces()
    np.testing.assert_allclose(-g, f, rtol=0, atol=_tol(m, np.abs(f).max()))
    h = simdiff.hessian(p, backend=backend)
    h_ref = calc.get_hessian(atoms)
    np.testing.assert_allclose(h, h_ref, rtol=0, atol=_tol(m, np.abs(h_ref).max()))


@pytest.mark.parametrize("name", [c for c in CELLS if c != "hcp-2"])
def test_energy_and_forces_equal_ase_lennard_jones(name):
    """Where the potentials agree (fcc a = 1.6: no shell in the switching region [2.0, 2.2]):
    ASE's energy plus its shift u(rc) per pair within rc."""
    atoms = _rattled(name)
    p = problem_from_atoms(atoms, GAP)
    ref = atoms.copy()
    ref.calc = LennardJones(sigma=1.0, epsilon=1.0, rc=2.2, smooth=False)
    i = primitive_neighbor_list("i", atoms.pbc, atoms.cell, atoms.positions, 2.2)
    pairs = i.size / 2  # ordered pairs within rc, each pair twice
    m = p.fn.n_terms
    e = float(p.evaluate())
    assert abs(e - (ref.get_potential_energy() + SHIFT * pairs)) <= _tol(m, abs(e))
    f = ref.get_forces()
    np.testing.assert_allclose(-simdiff.grad(p).reshape(-1, 3), f, rtol=0,
                               atol=_tol(m, np.abs(f).max()))  # fmt: skip


def test_one_atom_cell_energy_is_the_lattice_sum():
    """One atom in the fcc primitive cell: E = (1/2) sum over lattice vectors within rc of
    phi(|L|), the atom's pairs with its own images (forces exactly zero)."""
    atoms = bulk("Ar", "fcc", a=1.6)
    p = problem_from_atoms(atoms, GAP)
    cell = atoms.cell[:]
    k = np.stack(np.meshgrid(*[np.arange(-3, 4)] * 3, indexing="ij"), -1).reshape(-1, 3)
    r = np.linalg.norm(k @ cell, axis=1)
    r = r[(r > 0) & (r < 2.2)]
    lattice_sum = 0.5 * float(np.sum(4 * (r**-12 - r**-6)))
    assert float(p.evaluate()) == pytest.approx(lattice_sum, rel=_tol(r.size, 1.0))
    np.testing.assert_array_equal(simdiff.grad(p), 0.0)


def test_the_list_follows_the_atoms_and_a_lattice_translation_changes_nothing():
    atoms = _rattled("cubic-4")
    p = cluster_problem(SWITCHED, atoms.positions, box=np.diag(atoms.cell[:]).copy())
    assert isinstance(p.fn, ImagePairEnergy)
    moved = atoms.copy()
    moved.positions[2] += [0.3, -0.2, 0.1]  # 0.37 > skin / 2 = 0.11
    moved.calc = SimdiffCalculator(pair=SWITCHED)
    e = float(p.evaluate(moved.positions.ravel()))
    assert p.fn.rebuilds == 1
    m = p.fn.n_terms
    assert abs(e - moved.get_potential_energy()) <= _tol(m, abs(e))
    lattice = moved.positions + atoms.cell[0] - 2 * atoms.cell[2]
    assert abs(float(p.evaluate(lattice.ravel())) - e) <= _tol(m, abs(e)) + 64 * EPS * abs(e)
    fixed = cluster_problem(SWITCHED, atoms.positions, box=np.diag(atoms.cell[:]).copy(),
                            rebuild=False)  # fmt: skip
    with pytest.raises(NeighbourListError, match="atom 2 has moved 0.374"):
        simdiff.grad(fixed, moved.positions.ravel())


def test_a_cell_object_and_a_short_box_are_accepted_with_their_images():
    cell = Cell([[1.6, 0, 0], [0.8, 1.4, 0], [0, 0, 9.0]], [True, True, False])
    pos = np.array([[0.1, 0.2, 4.0], [0.9, 0.7, 4.6]])
    p = cluster_problem(SWITCHED, pos, box=cell)
    atoms = Atoms("Ar2", positions=pos, cell=cell.matrix, pbc=cell.pbc)
    atoms.calc = SimdiffCalculator(pair=SWITCHED)
    e = float(p.evaluate())
    assert abs(e - atoms.get_potential_energy()) <= _tol(p.fn.n_terms, abs(e))
    assert p.fn.neighbour_list()["pairs"] == p.fn.n_terms > 2


def test_find_minimum_and_normal_modes_on_a_small_cell():
    """A rattled 4-atom cubic cell (shorter than 2 r_cut) relaxes to the perfect lattice: energy
    4 times the 1-atom lattice sum, index 0, three zero (translation) modes."""
    atoms = _rattled("cubic-4")
    p = problem_from_atoms(atoms, SWITCHED)
    m = find_minimum(p)
    assert m.converged and m.index == 0
    one = problem_from_atoms(bulk("Ar", "fcc", a=1.6), SWITCHED)
    lattice = 4 * float(one.evaluate())
    # at the minimum E - E_min ~ |g|^2 / (2 k_min); plus the rounding of both sums
    assert abs(m.energy - lattice) <= m.grad_norm**2 + _tol(p.fn.n_terms, abs(lattice))
    nm = normal_modes(p, m.x)
    assert nm.n_rigid == 3
