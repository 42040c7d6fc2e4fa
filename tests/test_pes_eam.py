"""EAM: splines as ASE's, funcfl/setfl files, against ASE's EAM calculator, structured Hessian, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.interpolate import InterpolatedUnivariateSpline

import simdiff
from simdiff.errors import InputError
from simdiff.pes import Cell
from simdiff.pes.ase_interface import SimdiffCalculator
from simdiff.pes.manybody import (
    SiteEnergy,
    SiteEvaluator,
    UniformSpline,
    eam,
    eam_hessian,
    manybody_problem,
    read_eam,
    tabulate_eam,
    write_eam,
)

ase_eam = pytest.importorskip("ase.calculators.eam")
RE, RC, WIDTH = 2.556, 5.0, 0.8  # Å: nearest neighbours of fcc Cu, cutoff, cutoff's width


def psi(r: np.ndarray, rc: float = RC) -> np.ndarray:
    """Cutoff factor x^4 / (1 + x^4), x = (r - rc) / h: zero with three derivatives at rc."""
    x = np.minimum((r - rc) / WIDTH, 0.0)
    return x**4 / (1.0 + x**4)


def tables(nr: int = 2000, nrho: int = 2000, drho: float = 0.025, rc: float = RC):
    """A Cu-Ag-like two-element potential sampled for a setfl file."""
    dens = [lambda r: np.exp(-3.0 * (r / RE - 1.0)) * psi(r, rc),
            lambda r: 0.8 * np.exp(-2.5 * (r / RE - 1.0)) * psi(r, rc)]  # fmt: skip
    emb = [lambda rho: -2.0 * np.sqrt(rho + 0.5) + 0.01 * rho**2,
           lambda rho: -1.5 * np.sqrt(rho + 1.0)]  # fmt: skip

    def pair(a: int, b: int, r: np.ndarray) -> np.ndarray:
        s = (1.0, 1.2)[a] * (1.0, 1.2)[b]
        e = 0.4 * np.exp(-6 * (r / RE - 1)) - 0.3 * np.exp(-3 * (r / RE - 1))
        return s * e * psi(r, rc)

    return tabulate_eam(["Cu", "Ag"], embedding=emb, density=dens, pair=pair, nrho=nrho,
                        drho=drho, nr=nr, dr=0.003, cutoff=rc, numbers=[29, 47],
                        masses=[63.546, 107.8682])  # fmt: skip


def fcc(a: float = 3.615, repeat: int = 2, rattle: float = 0.08, seed: int = 1):
    base = a * np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])
    shifts = a * np.array(np.meshgrid(*[np.arange(repeat)] * 3, indexing="ij")).reshape(3, -1).T
    pos = (shifts[:, None, :] + base[None]).reshape(-1, 3)
    cell = a * repeat * np.eye(3)
    cell[2, 0] += 0.3  # triclinic
    rng = np.random.default_rng(seed)
    return pos + rng.normal(scale=rattle, size=pos.shape), cell


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("eam")
    t = tables()
    alloy = write_eam(d / "CuAg.eam.alloy", t)
    one = type(t)(
        ("Cu",),
        t.numbers[:1],
        t.masses[:1],
        t.lattice_constants[:1],
        t.lattices[:1],
        t.drho,
        t.dr,
        t.cutoff,
        t.embedding[:1],
        t.density[:1],
        np.abs(t.rphi[:1, :1]),
    )  # fmt: skip  (funcfl stores sqrt(r phi): r phi >= 0)
    funcfl = write_eam(d / "Cu.eam", one, form="eam")
    return {"alloy": alloy, "funcfl": funcfl, "dir": d}


def test_spline_is_ases_interpolant() -> None:
    """The not-a-knot cubic through the samples is what InterpolatedUnivariateSpline(k=3) builds."""
    x = 0.1 * np.arange(40)
    y = np.sin(x) * np.exp(-0.2 * x)
    s = UniformSpline(0.0, 0.1, y)
    ref = InterpolatedUnivariateSpline(x, y, k=3)
    at = np.random.default_rng(0).uniform(0.0, 3.9, 200)
    mine = s.derivatives(at)
    for nu in range(3):
        assert np.abs(mine[nu] - ref(at, nu)).max() < 1e-12 * np.abs(ref(at, nu)).max()
    ops = simdiff.get_ops("numpy")
    assert np.abs(s(at, ops) - mine[0]).max() < 1e-14


def test_files_round_trip(files: dict[str, Path]) -> None:
    t = tables()
    back = read_eam(files["alloy"])
    assert back.elements == ("Cu", "Ag") and back.form == "alloy"
    assert np.array_equal(back.embedding, t.embedding)
    assert np.array_equal(back.rphi, t.rphi)
    one = read_eam(files["funcfl"])
    assert one.elements == ("Cu",)
    # funcfl stores Z = sqrt(r phi / 14.4): phi back to rounding
    assert np.abs(one.rphi[0, 0] - np.abs(t.rphi[0, 0])).max() < 1e-13 * np.abs(t.rphi).max()


@pytest.mark.parametrize("kind", ["alloy", "funcfl"])
def test_against_ase_eam(files: dict[str, Path], kind: str) -> None:
    """Energy, forces and stress of a rattled triclinic cell (32 atoms; 4 for funcfl) as ASE's EAM.

    The interpolants coincide (same samples, same not-a-knot cubic); what differs is rounding in
    two evaluations of the same cubics and in two summation orders: ~1e-13 relative."""
    from ase import Atoms

    pos, cell = fcc(repeat=2 if kind == "alloy" else 1)
    symbols = ["Cu"] * len(pos)
    if kind == "alloy":
        for i in np.random.default_rng(2).choice(len(pos), 10, replace=False):
            symbols[i] = "Ag"
    atoms = Atoms(symbols, positions=pos, cell=cell, pbc=True)
    mine = atoms.copy()
    atoms.calc = ase_eam.EAM(potential=str(files[kind]))
    mine.calc = SimdiffCalculator(potential=eam(files[kind]))
    e = atoms.get_potential_energy()
    f = atoms.get_forces()
    s = atoms.get_stress()
    assert mine.get_potential_energy() == pytest.approx(e, rel=1e-10)
    assert np.abs(mine.get_forces() - f).max() < 1e-10 * np.abs(f).max()
    assert np.abs(mine.get_stress() - s).max() < 1e-10 * np.abs(s).max()
    assert mine.get_potential_energies().sum() == pytest.approx(e, rel=1e-12)


def test_structured_hessian_equals_dense_ad(files: dict[str, Path]) -> None:
    """The factored Hessian (pair blocks and one rank-one term per atom) is the AD Hessian."""
    pot = eam(files["alloy"])
    pos, cell = fcc(repeat=1, rattle=0.1, seed=4)
    symbols = ["Cu", "Ag", "Cu", "Cu"]
    h = eam_hessian(pot, pos, cell, symbols=symbols)
    p = manybody_problem(pot, pos, cell=cell, symbols=symbols)
    dense = np.asarray(simdiff.hessian(p, p.x0, backend="jax", method="fwd-rev"))
    scale = np.abs(dense).max()
    assert np.abs(h.toarray() - dense).max() < 1e-12 * scale
    # simdiff.hessian of the problem assembles the same factored Hessian (its structured path)
    auto = simdiff.hessian(p, p.x0, backend="jax", sparse=True)
    assert np.abs(auto.toarray() - dense).max() < 1e-12 * scale
    v = np.random.default_rng(5).normal(size=dense.shape[0])
    assert np.abs(h.matvec(v) - dense @ v).max() < 1e-12 * scale * np.abs(v).sum()
    # translations are zero modes: each row sums to zero per axis
    assert np.abs(h.matvec(np.tile([1.0, 0.0, 0.0], len(pos)))).max() < 1e-12 * scale


def test_analytic_eam_hessian_in_free_space() -> None:
    """Analytic functions written against ops: radial derivatives by AD; a free cluster."""
    rc = 4.0

    def cut(r, ops):
        x = ops.minimum((r - rc) / 1.0, 0.0)
        return x**4 / (1.0 + x**4)

    pot = eam(embedding=lambda rho, ops: -ops.sqrt(rho + 1.0),
              density=lambda r, ops: ops.exp(-r) * cut(r, ops),
              pair=lambda r, ops: ops.exp(-2.0 * (r - 2.0)) * cut(r, ops), cutoff=rc)  # fmt: skip
    pos = np.array([[0.0, 0, 0], [2.4, 0.1, 0], [0.2, 2.5, 0.1], [1.1, 1.2, 2.0]])
    h = eam_hessian(pot, pos)
    p = manybody_problem(pot, pos)
    dense = np.asarray(simdiff.hessian(p, p.x0, backend="jax", method="fwd-rev"))
    assert np.abs(h.toarray() - dense).max() < 1e-12 * np.abs(dense).max()


def test_file_layout_errors(files: dict[str, Path]) -> None:
    d = files["dir"]
    text = files["alloy"].read_text().split("\n")
    (d / "short.eam.alloy").write_text("\n".join(text[:-40]))
    with pytest.raises(InputError, match=r"short\.eam\.alloy: the file ends inside r\*phi"):
        read_eam(d / "short.eam.alloy")
    (d / "long.eam.alloy").write_text("\n".join([*text, "1.0 2.0"]))
    with pytest.raises(InputError, match=r"long\.eam\.alloy: 2 numbers left"):
        read_eam(d / "long.eam.alloy")
    bad = list(text)
    bad[4] = bad[4].replace(bad[4].split()[0], "many", 1)
    (d / "word.eam.alloy").write_text("\n".join(bad))
    with pytest.raises(InputError, match=r"word\.eam\.alloy: nrho must be an integer"):
        read_eam(d / "word.eam.alloy")
    with pytest.raises(InputError, match="cannot tell the EAM layout"):
        read_eam(d / "x.fs")


def test_missing_element_is_named(files: dict[str, Path]) -> None:
    pos, cell = fcc(repeat=1, rattle=0.0)
    with pytest.raises(InputError, match=r"atom 2 is Ni, an element missing from .*CuAg"):
        manybody_problem(eam(files["alloy"]), pos, cell=cell, symbols=["Cu", "Cu", "Ni", "Ag"])


def test_outside_the_tables_is_an_error(files: dict[str, Path]) -> None:
    d = files["dir"]
    # distances tabulated up to (nr - 1) dr = 3.6 < cutoff 5: a pair at 3.615 is outside
    short = write_eam(d / "short_r.eam.alloy", tables(nr=1201))
    pos, cell = fcc(repeat=1, rattle=0.0)
    with pytest.raises(InputError, match=r"atoms 0 and \d+ are 3\.615 apart, outside the "
                                         r"distances \[0\.003, 3\.6\]"):  # fmt: skip
        manybody_problem(eam(short), pos, cell=cell, symbols=["Cu"] * 4)
    # densities up to 99 * 0.025 = 2.475: the crystal's density is higher
    low = write_eam(d / "low_rho.eam.alloy", tables(nrho=100))
    pot = eam(low)
    with pytest.raises(InputError, match=r"atom 0 has the electron density [\d.]+, outside the "
                                         r"densities \[0, 2\.475\]"):  # fmt: skip
        manybody_problem(pot, pos, cell=cell, symbols=["Cu"] * 4)
    with pytest.raises(InputError, match="atom 0 has the electron density"):
        SiteEvaluator(pot).evaluate(pos, cell, np.ones(3, bool), ["Cu"] * 4)
    # evaluated past the host check (as inside a compiled function): NaN, not extrapolated
    fn = SiteEnergy(pot, pos, Cell(cell, [True] * 3), np.zeros(4, np.int64), skin=0.1)
    assert np.isnan(fn(pos.reshape(-1), simdiff.get_ops("numpy")))


def test_phonons_against_ase_finite_differences(files: dict[str, Path]) -> None:
    """fcc Cu, one atom per cell, cutoff 3.2 Å (nearest neighbours; force constants reach 6.4 Å
    through the embedding): ASE's Phonons on a 2x2x2 supercell with ASE's EAM.  At wave vectors
    commensurate with the supercell its force constants fold exactly (all images summed), so
    they differ from the exact ones by the central-difference error alone, O(delta^2): on a
    3x3x3 supercell 2.9e-4 of the largest energy at delta = 0.01 Å and 8e-5 at 0.005 Å (a
    factor 3.5 for half the step) on this potential."""
    from ase.build import bulk
    from ase.phonons import Phonons

    from simdiff.pes.manybody.phonons import site_phonons

    t = tables(nr=1200, rc=3.2)
    one = type(t)(("Cu",), t.numbers[:1], t.masses[:1], t.lattice_constants[:1],
                  t.lattices[:1], t.drho, t.dr, t.cutoff, t.embedding[:1], t.density[:1],
                  t.rphi[:1, :1])  # fmt: skip
    path = write_eam(files["dir"] / "Cu_short.eam.alloy", one)
    atoms = bulk("Cu", "fcc", a=3.615)
    ph = Phonons(atoms, ase_eam.EAM(potential=str(path)), supercell=(2, 2, 2), delta=0.005,
                 name=str(files["dir"] / "phonon"))  # fmt: skip
    ph.run()
    ph.read(acoustic=False, symmetrize=0)
    q = np.array([[0.0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 1, 1]]) / 2.0
    ref = ph.band_structure(q)
    exact = site_phonons(atoms, q, eam(path)).energies
    assert np.abs(exact - ref).max() < 2e-4 * np.abs(ref).max()
    assert np.abs(exact[0]).max() < 1e-9  # acoustic sum rule by construction
