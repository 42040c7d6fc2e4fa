"""Periodic cells beyond orthorhombic boxes in simdiff's own problems: triclinic cells and slabs
(minimum image by fractional coordinates), checked against the ASE calculator's independent image
pairs, ASE's LennardJones and the all-pairs energy; errors that name the cell vector."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from ase.build import bulk
from ase.calculators.lj import LennardJones

import simdiff
from simdiff.errors import InputError
from simdiff.pes import (
    Cell,
    NeighbourList,
    cluster_energy,
    cluster_problem,
    lennard_jones,
    smooth_cutoff,
)
from simdiff.pes.ase_interface import SimdiffCalculator, atoms_cell, problem_from_atoms

PAIR = smooth_cutoff(lennard_jones, r_on=1.4, r_cut=1.75)


def _triclinic():
    atoms = bulk("Ar", "fcc", a=1.6).repeat(4)  # 64 atoms, every height 3.70 >= 2 r_cut
    atoms.rattle(0.03, seed=1)
    return atoms


def _slab():
    atoms = bulk("Ar", "fcc", a=1.6, cubic=True).repeat((3, 3, 2))
    atoms.center(vacuum=3.0, axis=2)
    atoms.pbc = (True, True, False)
    atoms.rattle(0.03, seed=2)
    return atoms


@pytest.mark.parametrize("make", [_triclinic, _slab], ids=["triclinic", "slab"])
def test_cell_problem_equals_the_calculators_image_pairs(make, backend):
    """Energy, forces and the structured Hessian of cluster_problem(box=Cell) against the ASE
    calculator (pairs from ASE's neighbour list with explicit image shifts: another code path)."""
    atoms = make()
    box = atoms_cell(atoms)
    assert isinstance(box, Cell)
    p = problem_from_atoms(atoms, PAIR)
    ref = atoms.copy()
    ref.calc = SimdiffCalculator(pair=PAIR, backend=backend)
    e, g = simdiff.value_and_grad(p, backend=backend)
    assert float(e) == pytest.approx(ref.get_potential_energy(), rel=1e-13)
    np.testing.assert_allclose(-g.reshape(-1, 3), ref.get_forces(), rtol=0, atol=1e-12)
    h = simdiff.hessian(p, backend=backend)
    scale = np.abs(h).max()
    np.testing.assert_allclose(h, ref.calc.get_hessian(ref), rtol=0, atol=1e-13 * scale)


def test_structured_hessian_of_a_slab_equals_the_dense_ad_hessian():
    p = problem_from_atoms(_slab(), PAIR)
    h = simdiff.hessian(p)
    np.testing.assert_allclose(h, simdiff.hessian(p, method="fwd-rev"), rtol=0,
                               atol=1e-13 * np.abs(h).max())  # fmt: skip


def test_triclinic_energy_matches_ase_lennard_jones_and_all_pairs():
    """Where the potentials agree (fcc a = 1.6, no shell in [2.0, 2.2]), energy and forces of a
    triclinic cell equal ASE's LennardJones (its shift per pair added back); at random points
    inside the skin the listed energy equals the dense all-pairs minimum-image energy."""
    from simdiff.pes import pair_index

    gap = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.2)
    atoms = bulk("Ar", "fcc", a=1.6).repeat(5)
    atoms.rattle(0.005, seed=3)
    p = problem_from_atoms(atoms, gap, skin=0.3)
    ref = atoms.copy()
    ref.calc = LennardJones(sigma=1.0, epsilon=1.0, rc=2.2, smooth=False)
    box = atoms_cell(atoms)
    shift = 4.0 * (2.2**-12 - 2.2**-6) * len(pair_index(atoms.positions, 2.2, box))
    e, g = simdiff.value_and_grad(p)
    assert float(e) - shift == pytest.approx(ref.get_potential_energy(), rel=1e-13)
    np.testing.assert_allclose(-g.reshape(-1, 3), ref.get_forces(), rtol=0, atol=1e-12)
    full = simdiff.Problem(partial(cluster_energy, pair=gap, n_particles=len(atoms), box=box), p.x0)
    x = p.x0 + 0.08 * np.random.default_rng(4).uniform(-1, 1, p.n)
    assert p.fn.stale(x) is None
    np.testing.assert_allclose(p.evaluate(x), full.evaluate(x), rtol=1e-13)
    np.testing.assert_allclose(simdiff.grad(p, x), simdiff.grad(full, x), atol=1e-11)


def test_triclinic_list_follows_the_atoms_and_is_image_invariant():
    """Beyond the skin the list is rebuilt and equals a fresh problem's; a rigid translation by
    a lattice vector plus a shift leaves energy and forces unchanged."""
    atoms = _triclinic()
    p = problem_from_atoms(atoms, PAIR)
    e0, g0 = simdiff.value_and_grad(p)
    x = p.x0 + 0.2 * np.random.default_rng(5).uniform(-1, 1, p.n)
    assert p.fn.stale(x) is not None
    fresh = cluster_problem(PAIR, x.reshape(-1, 3), box=atoms_cell(atoms))
    np.testing.assert_allclose(simdiff.grad(p, x), simdiff.grad(fresh), atol=1e-12)
    np.testing.assert_array_equal(p.fn.index, fresh.fn.index)
    moved = atoms.positions + atoms.cell[0] - 2 * atoms.cell[2] + np.array([0.3, -0.7, 0.4])
    e, g = simdiff.value_and_grad(p, moved.reshape(-1))
    np.testing.assert_allclose(e, e0, rtol=1e-13)
    np.testing.assert_allclose(g, g0, atol=1e-12)


def test_minimum_image_derivative_is_the_identity():
    """The image shift is under stop_gradient: the Jacobian of Cell.minimum_image is I."""
    cell = Cell([[4.0, 0, 0], [2.0, 4.0, 0], [0.5, 1.0, 5.0]], [True, True, True])
    d0 = np.array([3.5, 3.9, 7.0])
    prob = simdiff.Problem(lambda d, ops: cell.minimum_image(d, ops), x0=d0)
    np.testing.assert_array_equal(simdiff.jacobian(prob), np.eye(3))
    d = cell.minimum_image_np(d0)
    np.testing.assert_allclose(d, cell.minimum_image(d0, simdiff.get_ops("numpy")), atol=1e-12)
    f = d @ cell.inverse
    assert np.all(np.abs(f) <= 0.5)  # inside the cell centred on the origin
    steps = (d0 - d) @ cell.inverse  # d0 - d is a lattice vector
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-12)
    assert np.abs(steps).sum() > 0


def test_cell_errors_name_the_vector():
    atoms = bulk("Ar", "fcc", a=1.6).repeat(3)  # heights 2.77 < 2 r_cut = 3.5
    with pytest.raises(InputError, match="height across cell vector a is 2.771"):
        NeighbourList(PAIR, box=Cell(atoms.cell[:], [True] * 3))  # minimum image only
    assert type(problem_from_atoms(atoms, PAIR).fn).__name__ == "ImagePairEnergy"
    with pytest.raises(InputError, match="cell vector b has length 0"):
        Cell([[4.0, 0, 0], [0, 0, 0], [0, 0, 5.0]], [True, True, True])
    with pytest.raises(InputError, match="zero volume"):
        Cell([[4.0, 0, 0], [2.0, 0, 0], [0, 0, 5.0]], [True, True, True])
    with pytest.raises(InputError, match="needs a pair potential with a cutoff"):
        cluster_problem(lennard_jones, atoms.positions, box=Cell(atoms.cell[:], [True] * 3))


@pytest.mark.slow
def test_find_minimum_and_normal_modes_on_a_triclinic_crystal():
    """A rattled triclinic fcc crystal relaxes (cell fixed) to the perfect lattice, a minimum
    with three rigid-body modes (translations: no rotations in a periodic cell)."""
    from simdiff.pes import find_minimum, normal_modes

    perfect = bulk("Ar", "fcc", a=1.6).repeat(4)
    atoms = perfect.copy()
    atoms.rattle(0.05, seed=1)
    p = problem_from_atoms(atoms, PAIR)
    m = find_minimum(p)
    assert m.converged and m.index == 0
    assert m.energy == pytest.approx(float(p.evaluate(perfect.positions.reshape(-1))), rel=1e-12)
    nm = normal_modes(p, m.x)
    assert nm.n_rigid == 3 and np.all(nm.frequencies > 0)
