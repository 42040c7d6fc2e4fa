"""Many-body potentials at scale: the structured EAM Hessian, and MD through the calculator vs ASE.

- ``eam-hessian``: :func:`simdiff.pes.manybody.eam_hessian` of an fcc crystal of
  ``N`` atoms (a Cu-like tabulated potential, cutoff 5 Å, written as a setfl
  file): the exact Hessian in factored form (pair blocks plus one rank-one
  term per atom), neighbour table included.  First call reported apart; then
  the median of ``--repeats`` calls.  With ``--check`` (``N <= 256``) it is
  compared with the dense AD Hessian of the same energy.
- ``md``: velocity Verlet (``--steps`` steps of 2 fs, 300 K start) of a
  108-atom cell (3x3x3 conventional cells) with ASE's ``EAM`` calculator and
  with ``SimdiffCalculator(potential=eam(file))`` on the same file: seconds
  per step (the first ``--warmup`` steps, which compile, reported apart) and
  the largest difference of the two trajectories' energies.

    python -m validation.benchmarks.bench_manybody --sizes 256 1000 2000 --repeats 5 --steps 200

Pin the threads of numpy and XLA (``OPENBLAS_NUM_THREADS``, ``XLA_FLAGS``) to
the cores you mean to measure on.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

import simdiff
from simdiff.evidence._timing import Summary, first_call, interleaved, timed
from simdiff.pes.manybody import (
    EAMHessian,
    eam,
    eam_hessian,
    manybody_problem,
    tabulate_eam,
    write_eam,
)

RE, RC, WIDTH = 2.556, 5.0, 0.8


def potential_file(folder: Path) -> Path:
    """A one-element Cu-like EAM potential as a setfl file (exponential density and pair terms,
    a square-root embedding, a cutoff factor zero with three derivatives at 5 Å)."""

    def psi(r: np.ndarray) -> np.ndarray:
        x = np.minimum((r - RC) / WIDTH, 0.0)
        return x**4 / (1.0 + x**4)

    tables = tabulate_eam(
        ["Cu"],
        embedding=[lambda rho: -2.0 * np.sqrt(rho + 0.5) + 0.01 * rho**2],
        density=[lambda r: np.exp(-3.0 * (r / RE - 1.0)) * psi(r)],
        pair=lambda a, b, r: (0.4 * np.exp(-6 * (r / RE - 1)) - 0.3 * np.exp(-3 * (r / RE - 1)))
        * psi(r),
        nrho=2000, drho=0.025, nr=2000, dr=0.003, cutoff=RC, numbers=[29], masses=[63.546],
    )  # fmt: skip
    return write_eam(folder / "Cu_bench.eam.alloy", tables)


def fcc(n_cells: tuple[int, int, int], a: float = 3.615, rattle: float = 0.03, seed: int = 0):
    base = a * np.array([[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])
    grid = np.stack(np.meshgrid(*[np.arange(k) for k in n_cells], indexing="ij"), -1)
    pos = (a * grid.reshape(-1, 1, 3) + base).reshape(-1, 3)
    pos = pos + np.random.default_rng(seed).normal(scale=rattle, size=pos.shape)
    return pos, a * np.diag(np.asarray(n_cells, dtype=float))


def cells_for(n: int) -> tuple[int, int, int]:
    """Conventional cells (4 atoms each) closest to ``n`` atoms, as cubic as possible."""
    m = max(1, round(n / 4))
    best = (1, 1, m)
    for i in range(1, m + 1):
        for j in range(i, m + 1):
            k = round(m / (i * j))
            if k >= j and abs(i * j * k - m) <= abs(best[0] * best[1] * best[2] - m):
                best = (i, j, k)
    return best


def bench_hessian(path: Path, sizes: list[int], repeats: int, check: bool) -> dict:
    pot = eam(path)
    out = {}
    for n in sizes:
        pos, cell = fcc(cells_for(n))

        def call(pos: np.ndarray = pos, cell: np.ndarray = cell) -> EAMHessian:
            return eam_hessian(pot, pos, cell)

        h, first = first_call(call)
        times = interleaved({"eam-hessian": call}, repeats)["eam-hessian"]
        s = Summary.of(times)
        mib = (h.blocks.nbytes + h.vectors.nbytes + h.index.nbytes) / 2**20
        row = {"atoms": len(pos), "slots": int(h.index.shape[1]), "first_s": first,
               "median_s": s.median, "q25_s": s.q25, "q75_s": s.q75, "factor_mib": mib}  # fmt: skip
        if check and len(pos) <= 256:
            p = manybody_problem(pot, pos, cell=cell)
            dense = np.asarray(simdiff.hessian(p, p.x0, backend="jax"))
            row["dense_rel_error"] = float(np.abs(h.toarray() - dense).max() / np.abs(dense).max())
        out[str(n)] = row
        print(json.dumps({"eam-hessian": row}))
    return out


def bench_md(path: Path, steps: int, warmup: int) -> dict:
    from ase import Atoms, units
    from ase.calculators.eam import EAM as AseEAM
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
    from ase.md.verlet import VelocityVerlet

    from simdiff.pes.ase_interface import SimdiffCalculator

    pos, cell = fcc((3, 3, 3), rattle=0.0)
    results: dict[str, object] = {}
    per_step: dict[str, float] = {}
    energies = {}
    for name in ("ase", "simdiff"):
        atoms = Atoms("Cu108", positions=pos, cell=cell, pbc=True)
        rng = np.random.default_rng(1)
        MaxwellBoltzmannDistribution(atoms, temperature_K=300, rng=rng)
        if name == "ase":
            atoms.calc = AseEAM(potential=str(path))
        else:
            atoms.calc = SimdiffCalculator(potential=eam(path))
        dyn = VelocityVerlet(atoms, 2 * units.fs)
        trace: list[float] = []
        _, first = first_call(lambda dyn=dyn: dyn.run(warmup))

        def md_steps(dyn=dyn, atoms=atoms, trace=trace) -> None:
            for _ in range(steps):
                dyn.run(1)
                trace.append(atoms.get_potential_energy() + atoms.get_kinetic_energy())

        per_step[name] = timed(md_steps) / steps
        energies[name] = np.array(trace)
        results[name] = {"warmup_s": first, "per_step_s": per_step[name]}
        print(json.dumps({"md": name, "warmup_s": first, "per_step_s": per_step[name]}))
    results["ratio_simdiff_over_ase"] = per_step["simdiff"] / per_step["ase"]
    results["max_energy_difference_eV"] = float(np.abs(energies["ase"] - energies["simdiff"]).max())
    print(
        json.dumps(
            {
                "md": "ratio",
                "value": results["ratio_simdiff_over_ase"],
                "max_energy_difference_eV": results["max_energy_difference_eV"],
            }
        )
    )
    return results


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--skip-md", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="bench_manybody_"))
    path = potential_file(folder)
    result = {"threads": os.environ.get("OPENBLAS_NUM_THREADS"),
              "hessian": bench_hessian(path, args.sizes, args.repeats, args.check)}  # fmt: skip
    if not args.skip_md:
        result["md"] = bench_md(path, args.steps, args.warmup)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
