"""Exact phonons (``simdiff.pes.phonons.phonons``) against ASE's finite-difference Phonons.

fcc argon (epsilon = 0.0104 eV, sigma = 3.40 A, a = 5.26 A), the one-atom
primitive cell, 20 wave vectors on ASE's fcc path ``GXWKGLUWLK``.  simdiff
switches LJ off between 10.0 and 10.4 A; ASE's ``LennardJones`` truncates at
its default cutoff ``3 sigma = 10.2`` A (``smooth=False``).  No fcc shell lies
between 9.84 and 10.52 A, so both are the same potential (LJ over seven
shells) at every pair, and within any displacement used here, and must give
the same phonons.

- *simdiff*: the exact ``3 x 3`` block of each image pair of the unit cell
  within the cutoff, then the phase sums and ``eigvalsh`` at the 20 points
  (no supercell).
- *ASE*: ``Phonons(atoms, LennardJones(...), supercell=(N, N, N), delta=0.01)``,
  ``run()`` (7 force calls on the ``N^3``-atom supercell, cached as JSON in a
  temporary directory), ``read(acoustic=True)``, ``band_structure(q)``.  Its
  finite-difference error is estimated by Richardson from a second run with
  ``delta = 0.02`` (error of the ``0.01`` run ~ ``|E_0.01 - E_0.02| / 3``);
  a supercell too small for the cutoff sphere aliases the force constants
  (the deviation from the exact result then exceeds the FD error; "within"
  means at most 1.5 times the estimate).

Rounds alternate simdiff and ASE in one process (median wall time over
rounds; simdiff's first call, which compiles, is reported apart).

    OPENBLAS_NUM_THREADS=1 python -m validation.benchmarks.bench_pes_phonons [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from functools import partial

import numpy as np

from simdiff.evidence._timing import first_call

EPSILON, SIGMA, A = 0.0104, 3.40, 5.26
RC = 3.0 * SIGMA  # ASE's default cutoff


def _setup():
    from ase.build import bulk

    from simdiff.pes import lennard_jones, smooth_cutoff

    atoms = bulk("Ar", "fcc", a=A)
    pair = smooth_cutoff(partial(lennard_jones, epsilon=EPSILON, sigma=SIGMA), r_on=10.0,
                         r_cut=10.4)  # fmt: skip
    q = atoms.cell.bandpath("GXWKGLUWLK", npoints=20).kpts
    return atoms, pair, q


def simdiff_run(atoms, pair, q) -> tuple[float, np.ndarray]:
    from simdiff.pes.phonons import phonons

    energies, seconds = first_call(lambda: phonons(atoms, q, pair=pair).energies)
    return seconds, energies


def ase_run(atoms, q, n: int, delta: float = 0.01) -> tuple[float, np.ndarray]:
    from ase.calculators.lj import LennardJones
    from ase.phonons import Phonons

    calc = LennardJones(epsilon=EPSILON, sigma=SIGMA, rc=RC, smooth=False)
    with tempfile.TemporaryDirectory() as tmp:

        def run() -> np.ndarray:
            name = os.path.join(tmp, "ph")
            ph = Phonons(atoms, calc, supercell=(n, n, n), delta=delta, name=name)
            ph.run()
            ph.read(acoustic=True)
            return ph.band_structure(q, verbose=False)

        energies, seconds = first_call(run)
        return seconds, energies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--supercells", type=int, nargs="+", default=[4, 5, 6, 7])
    args = parser.parse_args(argv)
    atoms, pair, q = _setup()
    first, exact = simdiff_run(atoms, pair, q)
    ase_run(atoms, q, 2)  # ASE's imports and first-call costs, outside the timings
    print(f"fcc Ar, primitive cell, {len(q)} q-points on GXWKGLUWLK; rounds: {args.rounds} "
          "(median wall time)")  # fmt: skip
    print(f"simdiff first call (compiles unless JAX has it cached): {first:.3f} s; "
          f"largest energy {exact.max() * 1e3:.4f} meV")  # fmt: skip
    print()
    print("| ASE supercell | atoms | simdiff (s) | ASE Phonons (s) | ASE / simdiff | "
          "max abs(ASE - exact) (meV) | ASE FD error estimate (meV) | "
          "exact within FD error |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for n in args.supercells:
        t_s, t_a = [], []
        for _ in range(args.rounds):
            t, e_s = simdiff_run(atoms, pair, q)
            t_s.append(t)
            t, e_a = ase_run(atoms, q, n)
            t_a.append(t)
        assert np.array_equal(e_s, exact)
        _, coarse = ase_run(atoms, q, n, delta=0.02)
        dev = np.abs(e_a - exact).max() * 1e3
        fd = np.abs(coarse - e_a).max() / 3 * 1e3
        ms, ma = float(np.median(t_s)), float(np.median(t_a))
        within = "yes" if dev <= 1.5 * fd else "no (aliased)"
        print(f"| {n}x{n}x{n} | {n**3} | {ms:.4f} | {ma:.3f} | {ma / ms:.0f} | {dev:.2e} | "
              f"{fd:.2e} | {within} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
