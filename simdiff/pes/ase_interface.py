"""ASE and Sella with exact derivatives: a Calculator, vibrations and a Sella Hessian function.

Needs the optional extra ``ase`` (``pip install "simdiff[ase]"``, which brings
``ase`` and ``sella``).  Units are those of the simdiff problem: ASE expects
energies in eV and lengths in Å, so a pair potential used here should have
its parameters in those units (e.g. ``functools.partial(lennard_jones,
epsilon=0.0104, sigma=3.40)`` for argon); masses come from the Atoms (amu).

- :class:`SimdiffCalculator` gives ASE energies and forces (and exact
  Hessians) from a simdiff problem, or, for a pair potential or a many-body
  potential (EAM, Stillinger-Weber: :mod:`simdiff.pes.manybody`), energy,
  forces, stress and per-atom energies on any cell ASE has (triclinic, slabs,
  cells shorter than twice the cutoff).
- :func:`vibrations_data` hands the exact Hessian to
  :class:`ase.vibrations.VibrationsData`: frequencies, modes, zero-point energy
  and, through :mod:`ase.thermochemistry`, thermochemistry.
- :func:`sella_hessian_function` is a ``hessian_function`` for
  :class:`sella.Sella`, so its saddle search runs on exact Hessians.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.core.kinds import hessian as _hessian
from simdiff.core.kinds import value_and_grad as _value_and_grad
from simdiff.core.problem import Problem
from simdiff.errors import BackendUnavailable, InputError, ShapeError
from simdiff.errors import PropertyUnavailable as _PropertyUnavailable
from simdiff.pes._ase_pairs import CellPairs, voigt_stress
from simdiff.pes.cluster import PairTerm, cluster_problem
from simdiff.pes.geometry import Cell, cluster_info
from simdiff.pes.images import ImagePairEnergy
from simdiff.pes.manybody.sites import SiteEvaluator, manybody_problem
from simdiff.pes.potentials import PairPotential
from simdiff.pes.terms import TermEnergy

try:
    from ase import Atoms
    from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes
    from ase.vibrations import VibrationsData
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise BackendUnavailable(
        f"simdiff.pes.ase_interface needs ASE ({exc}); install it with: "
        'pip install "simdiff[ase]" (or pip install ase sella)'
    ) from exc

__all__ = [
    "PropertyUnavailable",
    "SimdiffCalculator",
    "atoms_box",
    "atoms_cell",
    "problem_from_atoms",
    "sella_hessian_function",
    "vibrations_data",
]


class PropertyUnavailable(_PropertyUnavailable, PropertyNotImplementedError):
    """A property the calculator's problem cannot give; the message says why.

    The ASE-facing form of :class:`simdiff.errors.PropertyUnavailable` (a
    :class:`~simdiff.errors.UnsupportedError`): also ASE's
    ``PropertyNotImplementedError``, so ASE code that probes for a property
    sees the usual error.  It is defined here, not in :mod:`simdiff.errors`,
    because naming ASE's class there would import ``ase`` with every
    ``import simdiff``; catch either class.
    """


def problem_pair(problem: Problem) -> tuple[PairPotential, float] | str:
    """``(pair, skin)`` of a problem whose energy is a sum of one pair potential over its pairs
    (built by :func:`~simdiff.pes.cluster_problem`), else the reason it is not one."""
    fn = problem.fn
    if isinstance(fn, ImagePairEnergy):
        return fn.term.pair, 2.0 * fn.max_shift
    if isinstance(fn, TermEnergy):
        if fn.pairwise and isinstance(fn.term, PairTerm):
            return fn.term.pair, 0.0 if fn.max_shift is None else 2.0 * fn.max_shift
        return (f"its energy is a sum of terms of {fn.k} atoms ({fn.__name__}), not of one pair "
                "potential, so it has no split into pair energies and no known dependence on a "
                "cell strain")  # fmt: skip
    return (f"its energy ({type(fn).__name__} {getattr(fn, '__name__', '')!r}) is a function of "
            "the coordinates alone: its dependence on a cell strain and its split into atoms are "
            "unknown")  # fmt: skip


def _problem_cell(problem: Problem) -> tuple[np.ndarray | None, np.ndarray]:
    """The cell vectors (rows; ``None`` in free space) and periodic directions of a problem."""
    info = cluster_info(problem)
    box = None if info is None else info.box
    if box is None:
        return None, np.zeros(3, dtype=bool)
    if isinstance(box, Cell):
        return box.matrix, box.pbc
    return np.diag(box), np.ones(3, dtype=bool)


def atoms_box(atoms: Atoms) -> np.ndarray | None:
    """The orthorhombic box of periodic Atoms (lengths, shape ``(3,)``), ``None`` if not periodic.

    Raises
    ------
    InputError
        Periodic in some directions only, or a non-orthorhombic cell.

    Examples
    --------
    >>> from ase import Atoms
    >>> atoms_box(Atoms("Ar2", positions=[[0, 0, 0], [1, 0, 0]])) is None
    True
    >>> atoms_box(Atoms("Ar", cell=[5, 6, 7], pbc=True))
    array([5., 6., 7.])
    """
    pbc = np.asarray(atoms.pbc, dtype=bool)
    if not pbc.any():
        return None
    cell = np.asarray(atoms.cell[:], dtype=np.float64)
    if not pbc.all() or not np.allclose(cell, np.diag(np.diag(cell))):
        raise InputError(
            f"simdiff's periodic pair energies need an orthorhombic cell periodic in all three "
            f"directions; got pbc={pbc.tolist()} and cell={cell.round(6).tolist()}"
        )
    return np.diag(cell).copy()


def atoms_cell(atoms: Atoms) -> np.ndarray | Cell | None:
    """The periodic cell of ``atoms`` for :func:`~simdiff.pes.cluster_problem`'s ``box``.

    ``None`` if not periodic; the lengths (shape ``(3,)``) of an orthorhombic
    cell periodic in all directions; else a :class:`~simdiff.pes.Cell`
    (triclinic, slabs, wires; a missing cell vector of a non-periodic
    direction is completed by ASE's ``Cell.complete``).

    Examples
    --------
    >>> from ase import Atoms
    >>> atoms_cell(Atoms("Ar", cell=[5, 6, 7], pbc=True))
    array([5., 6., 7.])
    >>> atoms_cell(Atoms("Ar", cell=[[5, 0, 0], [2, 5, 0], [0, 0, 9]], pbc=[1, 1, 0]))
    Cell([[5.0, 0.0, 0.0], [2.0, 5.0, 0.0], [0.0, 0.0, 9.0]], pbc=[True, True, False])
    """
    pbc = np.asarray(atoms.pbc, dtype=bool)
    if not pbc.any():
        return None
    cell = np.asarray(atoms.cell.complete()[:], dtype=np.float64)
    if pbc.all() and np.array_equal(cell, np.diag(np.diag(cell))):
        return np.diag(cell).copy()
    return Cell(cell, pbc)


def problem_from_atoms(atoms: Atoms, pair: PairPotential, *, skin: float | None = None) -> Problem:
    """The pair energy of ``atoms`` as a simdiff problem (positions, masses and cell from Atoms).

    Any cell (:func:`atoms_cell`); in one shorter than twice the cutoff the
    energy sums over image pairs (:func:`~simdiff.pes.cluster_problem`).

    Examples
    --------
    >>> from ase import Atoms
    >>> from simdiff.pes import lennard_jones
    >>> p = problem_from_atoms(Atoms("Ar2", positions=[[0, 0, 0], [2 ** (1 / 6), 0, 0]]),
    ...                        lennard_jones)
    >>> float(p.evaluate()), p.meta["pes"].masses.round(3)
    (-1.0, array([39.948, 39.948]))
    """
    return cluster_problem(pair, atoms.get_positions(), masses=atoms.get_masses(),
                           box=atoms_cell(atoms), skin=skin,
                           name=f"{atoms.get_chemical_formula()}")  # fmt: skip


class SimdiffCalculator(Calculator):
    """An ASE calculator whose energy, forces, stress and Hessian are simdiff's exact derivatives.

    Parameters
    ----------
    problem : Problem, optional
        An energy of the flat Cartesian coordinates ``atoms.positions.ravel()``
        (shape ``(3N,)``), or of the components ``components`` of it: gives
        ``energy``, ``free_energy`` and ``forces``; where the problem is a pair
        potential over its pairs (:func:`~simdiff.pes.cluster_problem`,
        :func:`problem_from_atoms`) also ``stress`` and ``energies``, for Atoms
        in the problem's cell.  Other energies raise
        :class:`PropertyUnavailable` for those two, saying why.
    pair : callable, optional
        Instead of ``problem``: a pair potential, evaluated for whatever Atoms
        the calculator is given (any cell: orthorhombic or triclinic, periodic
        in all, some or none of the directions, and cells shorter than twice
        the cutoff, whose atoms interact with several images of each other).
        Gives ``energy``, ``free_energy``, ``forces``, ``stress`` (exact, the
        strain derivative of the energy) and ``energies`` (per atom).  A
        periodic direction needs a cutoff (:func:`~simdiff.pes.smooth_cutoff`).
    potential : EAM or StillingerWeber, optional
        Instead of ``problem`` or ``pair``: a many-body site potential
        (:func:`simdiff.pes.eam`, :func:`simdiff.pes.stillinger_weber`),
        evaluated for whatever Atoms the calculator is given (any cell, as
        with ``pair=``; the chemical symbols select the elements of an EAM
        alloy).  Gives ``energy``, ``free_energy``, ``forces``, ``stress``
        (exact) and ``energies`` (per atom: EAM's embedding energy plus half
        its pair energies, Stillinger-Weber's half pair terms plus the angle
        terms at the atom), and the exact Hessian
        (:class:`~simdiff.pes.manybody.SiteEvaluator`).
    skin : float, optional
        With ``potential=``: the neighbour table's margin (default ``0.1 *
        cutoff``; rebuilt when an atom has moved more than ``skin / 2`` or the
        cell changed).  With ``pair=`` and a cutoff: the neighbour list holds the image pairs
        closer than ``r_cut + skin`` and is rebuilt when an atom has moved more
        than ``skin / 2``, or when a change of the cell could bring a pair
        outside it within ``r_cut`` (default ``0.1 * r_cut``).
    backend : {"jax", "torch"}
    components : array_like of int, optional
        Indices into ``positions.ravel()`` that are the problem's coordinates
        (e.g. ``[0, 1]`` for a 2-D surface such as Müller–Brown on one atom);
        forces and Hessian entries of the other components are zero.
    **kwargs
        Passed to :class:`ase.calculators.calculator.Calculator`.

    Notes
    -----
    With ``pair=``, the energy of the image pairs ``(i, j, S)`` of the list
    (displacements :math:`d_t = R_j - R_i + S_t C`) under a symmetric strain
    :math:`\\varepsilon` of positions and cell, :math:`E(\\varepsilon) = \\sum_t
    \\phi(\\lvert (I + \\varepsilon) d_t \\rvert)`, is differentiated in one reverse
    pass at :math:`\\varepsilon = 0`: the forces, ASE's stress
    :math:`\\sigma = V^{-1} \\partial E / \\partial \\varepsilon` (Voigt order
    ``xx, yy, zz, yz, xz, xy``, energy per length cubed) and the per-pair
    energies (half to each atom) come out together.  The compiled derivative
    serves every list length within a bucket of sizes, so a rebuilt list rarely
    recompiles.  ``get_hessian`` assembles the exact Hessian from one
    ``3 x 3`` block per image pair, on any cell.

    Examples
    --------
    >>> from ase import Atoms
    >>> from simdiff.pes import lennard_jones
    >>> atoms = Atoms("Ar2", positions=[[0, 0, 0], [1.0, 0, 0]])
    >>> atoms.calc = SimdiffCalculator(pair=lennard_jones)
    >>> atoms.get_potential_energy(), atoms.get_forces()[1].round(6)
    (0.0, array([24.,  0.,  0.]))
    """

    implemented_properties = ["energy", "free_energy", "forces", "stress", "energies"]  # noqa: RUF012
    nolabel = True

    def __init__(
        self,
        problem: Problem | None = None,
        *,
        pair: PairPotential | None = None,
        potential: Any = None,
        skin: float | None = None,
        backend: str = "jax",
        components: Any = None,
        **kwargs: Any,
    ) -> None:
        if sum(x is not None for x in (problem, pair, potential)) != 1:
            raise InputError(
                "SimdiffCalculator needs exactly one of problem= and pair= (or, for a "
                "many-body potential, potential=)"
            )
        if problem is not None and not isinstance(problem, Problem):
            raise InputError(f"problem must be a simdiff.Problem; got {type(problem).__name__}")
        super().__init__(**kwargs)
        self.problem = problem
        self.pair = pair
        self.potential = potential
        self.sites = (None if potential is None
                      else SiteEvaluator(potential, skin=skin, backend=backend))  # fmt: skip
        self.backend = backend
        self.components = None if components is None else np.asarray(components, dtype=np.int64)
        self._key: tuple | None = None
        self.pairs: CellPairs | None = None
        if pair is not None:
            r_cut = getattr(pair, "r_cut", None)
            default = 0.0 if r_cut is None else 0.1 * float(r_cut)
            self.pairs = CellPairs(pair, skin=default if skin is None else float(skin),
                                   backend=backend)  # fmt: skip
        self.counts = {"energy_and_forces": 0, "hessian": 0}
        self._problem_pairs: CellPairs | None = None

    # ------------------------------------------------------------------ problem and point
    def problem_for(self, atoms: Atoms) -> Problem:
        """The simdiff problem this calculator evaluates for ``atoms``."""
        if self.potential is not None:  # a new problem at these positions and cell
            pos, cell, pbc, symbols = self._site_args(atoms)
            skin = None if self.sites is None else self.sites.skin
            return manybody_problem(self.potential, pos, cell=cell if pbc.any() else None,
                                    pbc=pbc, symbols=symbols, masses=atoms.get_masses(),
                                    skin=skin)  # fmt: skip
        if self.pair is None:
            assert self.problem is not None  # __init__ requires a problem or a pair
            return self.problem
        key = (len(atoms), atoms.get_masses().tobytes(), np.asarray(atoms.cell[:]).tobytes(),
               tuple(atoms.pbc))  # fmt: skip
        fn = None if self.problem is None else self.problem.fn
        # a list that follows the atoms rebuilds itself (and keeps the problem); a fixed one
        # is replaced by a problem built at these positions
        stale = (isinstance(fn, TermEnergy) and not fn.follow
                 and fn.stale(atoms.get_positions()) is not None)  # fmt: skip
        if key != self._key or stale:
            skin = None if self.pairs is None else self.pairs.skin
            self.problem = problem_from_atoms(atoms, self.pair, skin=skin)
            self._key = key
        assert self.problem is not None
        return self.problem

    def _x(self, atoms: Atoms, problem: Problem) -> np.ndarray:
        flat = atoms.get_positions().reshape(-1)
        x = flat if self.components is None else flat[self.components]
        if x.shape != (problem.n,):
            raise ShapeError(
                f"the Atoms give {x.size} coordinates but problem {problem.name!r} takes "
                f"{problem.n} (pass components= to select them)"
            )
        return x

    def _embed(self, g: np.ndarray, n_atoms: int) -> np.ndarray:
        if self.components is None:
            return g
        out = np.zeros((3 * n_atoms,) * g.ndim)
        out[np.ix_(*[self.components] * g.ndim)] = g
        return out

    # ------------------------------------------------------------------ ASE interface
    def calculate(
        self, atoms: Atoms | None = None, properties: Any = None, system_changes: Any = all_changes
    ) -> None:
        """Energy, forces (and with ``pair=`` stress and per-atom energies) in one reverse pass."""
        super().calculate(atoms, properties, system_changes)
        atoms = self.atoms
        self.counts["energy_and_forces"] += 1
        if self.sites is not None:
            self._calculate_sites(atoms)
            return
        if self.pairs is not None:
            cell = np.asarray(atoms.cell[:], dtype=np.float64)
            out = self.pairs.evaluate(atoms.get_positions(), cell, np.asarray(atoms.pbc))
            self.results = {"energy": out["energy"], "free_energy": out["energy"],
                            "forces": out["forces"], "energies": out["energies"]}  # fmt: skip
            if atoms.cell.rank == 3:  # no lattice, no stress (as ASE's own calculators)
                self.results["stress"] = voigt_stress(out["strain_derivative"], cell)
            return
        p = self.problem_for(atoms)
        e, g = _value_and_grad(p, self._x(atoms, p), backend=self.backend)
        forces = -self._embed(np.asarray(g), len(atoms)).reshape(-1, 3)
        self.results = {"energy": float(e), "free_energy": float(e), "forces": forces + 0.0}
        wanted = [k for k in ("stress", "energies") if k in (properties or ())]
        if wanted:
            out = self._pairs_of_problem(p, atoms, wanted[0]).evaluate(
                atoms.get_positions(),
                np.asarray(atoms.cell[:], dtype=np.float64),
                np.asarray(atoms.pbc),
            )
            self.results["energies"] = out["energies"]
            if atoms.cell.rank == 3:
                self.results["stress"] = voigt_stress(out["strain_derivative"], atoms.cell[:])

    def _pairs_of_problem(self, problem: Problem, atoms: Atoms, prop: str) -> CellPairs:
        """The image pairs of the problem's pair potential, for ``stress`` and ``energies``.

        Raises :class:`PropertyUnavailable` where the problem is not a pair
        potential over its pairs, and :class:`~simdiff.errors.InputError` where
        the Atoms' cell or periodicity is not the problem's (the problem's
        energy would not be the one whose strain derivative is asked for).
        """
        found = problem_pair(problem)
        why = found if isinstance(found, str) else None
        if why is None and self.components is not None:
            why = "the calculator evaluates only some components of the positions"
        if why is not None:
            raise PropertyUnavailable(
                f"SimdiffCalculator(problem={problem.name!r}) cannot give {prop!r}: {why}. "
                "Build the problem with simdiff.pes.cluster_problem (or problem_from_atoms), or "
                "use SimdiffCalculator(pair=...)"
            )
        assert not isinstance(found, str)
        matrix, pbc = _problem_cell(problem)
        cell = np.asarray(atoms.cell[:], dtype=np.float64)
        same = np.array_equal(pbc, np.asarray(atoms.pbc, dtype=bool)) and (
            matrix is None or np.allclose(cell[pbc], matrix[pbc], rtol=1e-12, atol=0.0)
        )
        if not same:
            raise InputError(
                f"SimdiffCalculator(problem={problem.name!r}): the Atoms' cell "
                f"{cell.round(6).tolist()} (pbc {np.asarray(atoms.pbc).tolist()}) is not the "
                f"problem's ({None if matrix is None else matrix.round(6).tolist()}, pbc "
                f"{pbc.tolist()}); a problem's cell is fixed (for a changing cell, e.g. "
                "FrechetCellFilter, use SimdiffCalculator(pair=...))"
            )
        pair, skin = found
        if self._problem_pairs is None or self._problem_pairs.pair is not pair:
            self._problem_pairs = CellPairs(pair, skin=skin, backend=self.backend)
        return self._problem_pairs

    def _site_args(self, atoms: Atoms) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
        """Positions, cell, periodicity and (for a potential of named elements) symbols."""
        symbols = (None if getattr(self.potential, "elements", None) is None
                   else atoms.get_chemical_symbols())  # fmt: skip
        return (atoms.get_positions(), np.asarray(atoms.cell[:], dtype=np.float64),
                np.asarray(atoms.pbc, dtype=bool), symbols)  # fmt: skip

    def _calculate_sites(self, atoms: Atoms) -> None:
        """Energy, forces, per-atom energies and stress of a site potential, one reverse pass."""
        assert self.sites is not None
        pos, cell, pbc, symbols = self._site_args(atoms)
        out = self.sites.evaluate(pos, cell, pbc, symbols)
        self.results = {"energy": out["energy"], "free_energy": out["energy"],
                        "forces": out["forces"], "energies": out["energies"]}  # fmt: skip
        if atoms.cell.rank == 3:
            self.results["stress"] = voigt_stress(out["strain_derivative"], cell)

    def get_hessian(self, atoms: Atoms | None = None) -> np.ndarray:
        """The exact Hessian at ``atoms`` (default: the last ones), shape ``(3N, 3N)``, eV/Å²."""
        atoms = self.atoms if atoms is None else atoms
        if atoms is None:
            raise InputError("get_hessian needs Atoms (none given and none calculated yet)")
        self.counts["hessian"] += 1
        if self.sites is not None:  # EAM's factored Hessian, else one block per atom
            return np.asarray(self.sites.hessian(*self._site_args(atoms)))
        if self.pairs is not None:  # any cell: one block per image pair
            cell = np.asarray(atoms.cell[:], dtype=np.float64)
            return self.pairs.hessian(atoms.get_positions(), cell, np.asarray(atoms.pbc))
        p = self.problem_for(atoms)
        h = np.asarray(_hessian(p, self._x(atoms, p), backend=self.backend))
        return self._embed(h, len(atoms))


def vibrations_data(atoms: Atoms, calc: SimdiffCalculator | None = None) -> VibrationsData:
    """Exact-Hessian :class:`ase.vibrations.VibrationsData` for ``atoms`` (at their positions).

    Frequencies (``get_frequencies()``, cm^-1), energies (``get_energies()``,
    eV), modes, zero-point energy; pass ``get_energies()`` to
    :class:`ase.thermochemistry.HarmonicThermo` or ``IdealGasThermo`` for
    thermochemistry.  ASE's own :class:`ase.vibrations.Vibrations` gets the same
    object by ``6N`` finite-difference force calls.

    Parameters
    ----------
    atoms : ase.Atoms
        Normally at a minimum.
    calc : SimdiffCalculator, optional
        Default ``atoms.calc``.

    Examples
    --------
    >>> from ase import Atoms
    >>> from simdiff.pes import morse
    >>> atoms = Atoms("H2", positions=[[0, 0, 0], [1.0, 0, 0]])
    >>> atoms.calc = SimdiffCalculator(pair=morse)
    >>> vib = vibrations_data(atoms)
    >>> round(float(abs(vib.get_frequencies()[-1])), 1)   # sqrt(2 D a^2 / mu) in cm^-1
    1038.8
    """
    calc = atoms.calc if calc is None else calc
    if not isinstance(calc, SimdiffCalculator):
        raise InputError(
            f"vibrations_data needs a SimdiffCalculator (atoms.calc or calc=); got "
            f"{type(calc).__name__}"
        )
    return VibrationsData.from_2d(atoms, calc.get_hessian(atoms))


def sella_hessian_function(calc: SimdiffCalculator) -> Callable[[Atoms], np.ndarray]:
    """A ``hessian_function`` for :class:`sella.Sella`: the exact Hessian from ``calc``.

    Use with ``Sella(atoms, order=1, hessian_function=sella_hessian_function(calc),
    diag_every_n=1)`` to have Sella take the exact Hessian at every step instead
    of its iterative diagonalisation and quasi-Newton updates.

    Examples
    --------
    >>> from ase import Atoms
    >>> from simdiff.pes import lennard_jones
    >>> calc = SimdiffCalculator(pair=lennard_jones)
    >>> f = sella_hessian_function(calc)
    >>> f(Atoms("Ar2", positions=[[0, 0, 0], [1.2, 0, 0]])).shape
    (6, 6)
    """
    if not isinstance(calc, SimdiffCalculator):
        raise InputError(f"expected a SimdiffCalculator; got {type(calc).__name__}")
    return calc.get_hessian
