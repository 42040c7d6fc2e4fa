r"""Tabulated EAM potentials: the DYNAMO ``funcfl`` and ``setfl`` files that ASE and LAMMPS read.

Two layouts, told apart by the file name as ASE does (``.eam``: funcfl,
``.alloy``: setfl):

- *funcfl* (one element): a comment line; ``Z mass a lattice``;
  ``nrho drho nr dr cutoff``; ``nrho`` values of the embedding energy
  :math:`F(\rho)`; ``nr`` values of the effective charge :math:`Z(r)`;
  ``nr`` values of the density :math:`f(r)`.  The pair energy is
  :math:`\phi(r) = 27.2 \cdot 0.529\, Z(r)^2 / r` (Hartree times Bohr, ASE's
  constants).
- *setfl* (``eam/alloy``): three comment lines; ``n_elements element ...``;
  ``nrho drho nr dr cutoff``; per element ``Z mass a lattice``, ``F`` and
  ``f``; then :math:`r \phi(r)` for each pair of elements ``(i, j)``,
  ``j <= i``.

Grids: :math:`\rho_k = k\,\Delta\rho`, :math:`r_k = k\,\Delta r` from 0.
:func:`read_eam` checks the layout (the count of numbers, the header fields)
and raises :class:`~simdiff.errors.InputError` naming the file and what is
wrong; :func:`write_eam` writes both layouts (for potentials tabulated from
analytic forms by :func:`tabulate_eam`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simdiff.errors import InputError

__all__ = ["EAMTables", "read_eam", "tabulate_eam", "write_eam"]

#: Chemical symbols by atomic number (index 0 unused), to name a funcfl file's element.
SYMBOLS = (
    "X H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga "
    "Ge As Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd "
    "Pm Sm Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac "
    "Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts "
    "Og"
).split()

#: ASE's Hartree * Bohr (eV Å), the factor of :math:`Z^2` in a funcfl pair energy.
HARTREE_BOHR = 27.211386024367243 * 0.5291772105638411


@dataclass(frozen=True)
class EAMTables:
    """The samples of a tabulated EAM potential (the content of a funcfl or setfl file).

    Attributes
    ----------
    elements : tuple of str
    numbers, masses, lattice_constants : ndarray, shape (S,)
        Atomic numbers, masses (amu) and lattice constants (Å) per element.
    lattices : tuple of str
        Lattice names (``"fcc"``), informative.
    drho, dr, cutoff : float
        Grid spacings of the density and the distance, and the cutoff (Å).
    embedding : ndarray, shape (S, nrho)
        :math:`F_a(\\rho_k)`, eV.
    density : ndarray, shape (S, nr)
        :math:`f_a(r_k)`, the density an atom of element ``a`` contributes.
    rphi : ndarray, shape (S, S, nr)
        :math:`r_k \\phi_{ab}(r_k)`, eV Å, symmetric in ``a, b``.
    form : {"eam", "alloy"}
        The file layout (funcfl or setfl).
    source : str
        Where the tables came from (a file name), for error messages.
    """

    elements: tuple[str, ...]
    numbers: np.ndarray
    masses: np.ndarray
    lattice_constants: np.ndarray
    lattices: tuple[str, ...]
    drho: float
    dr: float
    cutoff: float
    embedding: np.ndarray
    density: np.ndarray
    rphi: np.ndarray
    form: str = "alloy"
    source: str = "<tables>"

    @property
    def nrho(self) -> int:
        """Samples of the embedding energy."""
        return int(self.embedding.shape[1])

    @property
    def nr(self) -> int:
        """Samples of the density and pair functions."""
        return int(self.density.shape[1])


def _form_of(path: Path, form: str | None) -> str:
    if form is not None:
        if form not in ("eam", "alloy"):
            raise InputError(
                f"{path}: form must be 'eam' (funcfl) or 'alloy' (setfl); got {form!r}"
            )
        return form
    suffix = path.suffix.lower()
    if suffix == ".eam":
        return "eam"
    if suffix in (".alloy", ".setfl"):
        return "alloy"
    raise InputError(
        f"{path}: cannot tell the EAM layout from the file name (ASE's rule: '.eam' is funcfl, "
        f"'.alloy' is setfl; '.fs' and '.adp' are not supported); pass form='eam' or 'alloy'"
    )


class _Numbers:
    """The whitespace-separated fields of a file after its comment lines, read in order."""

    def __init__(self, path: Path, fields: list[str]) -> None:
        self.path, self.fields, self.at = path, fields, 0

    def take(self, count: int, what: str) -> list[str]:
        if self.at + count > len(self.fields):
            raise InputError(
                f"{self.path}: the file ends inside {what}: {count} fields needed from field "
                f"{self.at}, only {len(self.fields) - self.at} left (a wrong layout, or nrho/nr "
                "not matching the tables)"
            )
        out = self.fields[self.at : self.at + count]
        self.at += count
        return out

    def floats(self, count: int, what: str) -> np.ndarray:
        raw = self.take(count, what)
        try:
            values = np.array(raw, dtype=np.float64)
        except ValueError:
            bad = next(s for s in raw if not _is_float(s))
            raise InputError(f"{self.path}: {what} holds {bad!r}, not a number") from None
        if not np.isfinite(values).all():
            k = int(np.flatnonzero(~np.isfinite(values))[0])
            raise InputError(f"{self.path}: {what} value {k} is {values[k]}")
        return values

    def integer(self, what: str) -> int:
        (raw,) = self.take(1, what)
        try:
            value = int(raw)
        except ValueError:
            raise InputError(f"{self.path}: {what} must be an integer; got {raw!r}") from None
        return value

    def number(self, what: str) -> float:
        return float(self.floats(1, what)[0])


def _is_float(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _grid(numbers: _Numbers) -> tuple[int, float, int, float, float]:
    nrho = numbers.integer("nrho")
    drho = numbers.number("drho")
    nr = numbers.integer("nr")
    dr = numbers.number("dr")
    cutoff = numbers.number("cutoff")
    if nrho < 4 or nr < 5 or not (drho > 0 and dr > 0 and cutoff > 0):
        raise InputError(
            f"{numbers.path}: the grid line must give nrho >= 4, drho > 0, nr >= 5, dr > 0, "
            f"cutoff > 0; got nrho={nrho}, drho={drho}, nr={nr}, dr={dr}, cutoff={cutoff}"
        )
    return nrho, drho, nr, dr, cutoff


def read_eam(path: str | Path, *, form: str | None = None) -> EAMTables:
    """Read a funcfl (``.eam``) or setfl (``.alloy``) file.

    Parameters
    ----------
    path : str or Path
    form : {"eam", "alloy"}, optional
        The layout; default from the file name as ASE decides it.

    Raises
    ------
    InputError
        Naming the file: an unknown layout, a field that is not a number, a
        grid line out of range, fewer or more numbers than the header
        announces.
    """
    p = Path(path)
    layout = _form_of(p, form)
    try:
        lines = p.read_text().splitlines()
    except OSError as exc:
        raise InputError(f"{p}: cannot read the EAM file ({exc})") from exc
    skip = 1 if layout == "eam" else 3
    if len(lines) <= skip:
        raise InputError(f"{p}: {len(lines)} lines; a {_NAMES[layout]} file has {skip} comment "
                         "lines and then the tables")  # fmt: skip
    numbers = _Numbers(p, " ".join(lines[skip:]).split())
    if layout == "eam":
        z = numbers.integer("the atomic number (line 2)")
        mass = numbers.number("the mass (line 2)")
        a = numbers.number("the lattice constant (line 2)")
        (lattice,) = numbers.take(1, "the lattice name (line 2)")
        nrho, drho, nr, dr, cutoff = _grid(numbers)
        embedding = numbers.floats(nrho, "F(rho)")[None]
        charge = numbers.floats(nr, "Z(r)")
        density = numbers.floats(nr, "f(r)")[None]
        rphi = (HARTREE_BOHR * charge**2)[None, None]
        if not 0 < z < len(SYMBOLS):
            raise InputError(f"{p}: atomic number {z} (line 2) is not an element")
        elements: tuple[str, ...] = (SYMBOLS[z],)
        zs, masses, consts, lattices = [z], [mass], [a], [lattice]
    else:
        count = numbers.integer("the number of elements (line 4)")
        if count < 1:
            raise InputError(f"{p}: the number of elements (line 4) must be positive; got {count}")
        elements = tuple(numbers.take(count, "the element names (line 4)"))
        nrho, drho, nr, dr, cutoff = _grid(numbers)
        zs, masses, consts, lattices = [], [], [], []
        emb, dens = [], []
        for name in elements:
            zs.append(numbers.integer(f"the atomic number of {name}"))
            masses.append(numbers.number(f"the mass of {name}"))
            consts.append(numbers.number(f"the lattice constant of {name}"))
            lattices.append(numbers.take(1, f"the lattice of {name}")[0])
            emb.append(numbers.floats(nrho, f"F(rho) of {name}"))
            dens.append(numbers.floats(nr, f"f(r) of {name}"))
        embedding, density = np.array(emb), np.array(dens)
        rphi = np.zeros((count, count, nr))
        for i in range(count):
            for j in range(i + 1):
                rphi[i, j] = rphi[j, i] = numbers.floats(
                    nr, f"r*phi(r) of {elements[i]}-{elements[j]}"
                )
    left = len(numbers.fields) - numbers.at
    if left:
        raise InputError(
            f"{p}: {left} numbers left after the tables the header announces (nrho={nrho}, "
            f"nr={nr}, {len(elements)} element(s)): not a {_NAMES[layout]} file of this layout"
        )
    return EAMTables(elements, np.array(zs), np.array(masses, dtype=np.float64),
                     np.array(consts, dtype=np.float64), tuple(lattices), drho, dr, cutoff,
                     embedding, density, rphi, form=layout, source=str(p))  # fmt: skip


_NAMES = {"eam": "funcfl", "alloy": "setfl"}


def write_eam(path: str | Path, tables: EAMTables, *, form: str | None = None) -> Path:
    """Write ``tables`` as a funcfl (one element) or setfl file; returns the path.

    Five numbers a line in ``%.17e``: read back, the samples are the same
    floats.  A funcfl file stores :math:`Z(r) = \\sqrt{r \\phi(r) / 14.4}`,
    which needs :math:`r \\phi \\ge 0`.
    """
    p = Path(path)
    layout = _form_of(p, form)
    out = [f"# {len(tables.elements)}-element EAM tables written by simdiff"]
    grid = f"{tables.nrho} {tables.drho:.17e} {tables.nr} {tables.dr:.17e} {tables.cutoff:.17e}"

    def block(values: np.ndarray) -> None:
        for s in range(0, values.size, 5):
            out.append(" ".join(f"{v:.17e}" for v in values[s : s + 5]))

    def element(a: int) -> str:
        return (f"{int(tables.numbers[a])} {tables.masses[a]:.17g} "
                f"{tables.lattice_constants[a]:.17g} {tables.lattices[a]}")  # fmt: skip

    if layout == "eam":
        if len(tables.elements) != 1:
            raise InputError(f"{p}: a funcfl file holds one element; got {tables.elements}")
        z2 = tables.rphi[0, 0] / HARTREE_BOHR
        if (z2 < 0).any():
            raise InputError(f"{p}: funcfl stores sqrt(r phi / 14.4): r phi must be >= 0")
        out += [element(0), grid]
        block(tables.embedding[0])
        block(np.sqrt(z2))
        block(tables.density[0])
    else:
        out += ["#", "#", f"{len(tables.elements)} {' '.join(tables.elements)}", grid]
        for a in range(len(tables.elements)):
            out.append(element(a))
            block(tables.embedding[a])
            block(tables.density[a])
        for i in range(len(tables.elements)):
            for j in range(i + 1):
                block(tables.rphi[i, j])
    p.write_text("\n".join(out) + "\n")
    return p


def tabulate_eam(
    elements: Sequence[str],
    *,
    embedding: Sequence[Callable[[np.ndarray], np.ndarray]],
    density: Sequence[Callable[[np.ndarray], np.ndarray]],
    pair: Callable[[int, int, np.ndarray], np.ndarray],
    nrho: int,
    drho: float,
    nr: int,
    dr: float,
    cutoff: float,
    numbers: Sequence[int],
    masses: Sequence[float],
    lattice_constants: Sequence[float] | None = None,
    lattices: Sequence[str] | None = None,
) -> EAMTables:
    """Sample analytic EAM functions (numpy callables) on the grids of a setfl file.

    Parameters
    ----------
    elements : sequence of str
    embedding, density : sequences of callables, one per element
        ``F_a(rho)`` and ``f_a(r)`` on numpy arrays.
    pair : callable
        ``pair(a, b, r)``: :math:`\\phi_{ab}(r)` for ``r > 0``.
    nrho, drho, nr, dr, cutoff :
        The grids (from 0) and the cutoff.
    numbers, masses : sequences, one per element
        Atomic numbers and masses (amu).
    lattice_constants, lattices : optional
        Per element (informative); default 0 and ``"fcc"``.
    """
    s = len(elements)
    zs, ms = list(numbers), list(masses)
    rho = drho * np.arange(nrho)
    r = dr * np.arange(nr)
    rphi = np.zeros((s, s, nr))
    for a in range(s):
        for b in range(s):
            rphi[a, b, 1:] = r[1:] * np.asarray(pair(a, b, r[1:]))
    return EAMTables(
        tuple(elements),
        np.array(zs),
        np.array(ms, dtype=np.float64),
        np.zeros(s) if lattice_constants is None else np.asarray(lattice_constants, float),
        tuple(["fcc"] * s if lattices is None else lattices),
        float(drho),
        float(dr),
        float(cutoff),
        np.array([np.asarray(f(rho), dtype=np.float64) for f in embedding]),
        np.array([np.asarray(f(r), dtype=np.float64) for f in density]),
        rphi,
    )
