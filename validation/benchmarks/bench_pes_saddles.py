"""Saddle searches on LJ7 and LJ13 with exact Hessians: simdiff's P-RFO, Sella given
simdiff's Hessian, and Sella with its default (iterative, quasi-Newton) Hessian.

Every search starts from the same point: the global minimum (found by
``simdiff.pes.find_minimum``) displaced by 0.05 sigma along a fixed random
direction (``default_rng(2)``).  Not along the
minimum's softest mode: for LJ7 and LJ13 it is degenerate, so that start (and
the saddle reached) moved with rounding.  Each reports whether it converged
(gradient norm / largest force below 1e-6), its steps, energy-and-gradient
evaluations and exact Hessians, the saddle's energy and index (negative
curvatures, rigid-body modes removed) and the wall time (one run each,
including JAX compilation on first use).

    python -m validation.benchmarks.bench_pes_saddles
"""

from __future__ import annotations

import numpy as np

from simdiff.evidence._timing import first_call


def _calls(problem, kind: str) -> int:
    from simdiff.core.derivatives import cached_derivatives

    info = cached_derivatives(problem, "jax").cache_info()
    return sum(r["calls"] for r in info if r["kind"] == kind)


def _hessian_calls(problem) -> int:
    # the term Hessians run on a term-sum problem shared by equal terms: count differences
    return sum(r["calls"] for r in problem.fn.structured_cache_info("jax"))


def run(name: str, fmax: float = 1e-6) -> list[dict]:
    from ase import Atoms
    from sella import Sella

    import problems
    from simdiff.pes import find_minimum, find_saddle, lennard_jones
    from simdiff.pes import stationary_index as index
    from simdiff.pes.ase_interface import SimdiffCalculator, sella_hessian_function

    p = problems.get(name)
    m = find_minimum(p)
    d = np.random.default_rng(2).standard_normal(p.n)
    start = m.x + 0.05 * d / np.linalg.norm(d)
    n_atoms = p.n // 3
    rows = []

    q = problems.get(name)  # a fresh problem: its own derivative counters
    v0, h0 = _calls(q, "value_and_grad"), _hessian_calls(q)
    s, seconds = first_call(lambda: find_saddle(q, start, mode=0, gtol=fmax))
    rows.append({"system": name, "method": "simdiff P-RFO (exact Hessian)",
                 "converged": s.converged,
                 "steps": s.nit, "energy_grad": _calls(q, "value_and_grad") - v0,
                 "hessians": _hessian_calls(q) - h0, "energy": s.energy, "index": s.index,
                 "seconds": seconds})  # fmt: skip
    for exact in (True, False):
        calc = SimdiffCalculator(pair=lennard_jones)
        atoms = Atoms(f"Ar{n_atoms}", positions=start.reshape(-1, 3))
        atoms.calc = calc
        kw = {"hessian_function": sella_hessian_function(calc), "diag_every_n": 1} if exact else {}

        def sella(atoms: Atoms = atoms, kw: dict = kw) -> tuple[Sella, bool]:
            opt = Sella(atoms, order=1, logfile=None, **kw)
            return opt, opt.run(fmax=fmax, steps=1000)

        (opt, ok), seconds = first_call(sella)
        x = atoms.positions.reshape(-1)
        rows.append({"system": name,
                     "method": "Sella + simdiff Hessian" if exact else "Sella default",
                     "converged": bool(ok), "steps": opt.nsteps,
                     "energy_grad": calc.counts["energy_and_forces"],
                     "hessians": calc.counts["hessian"], "energy": atoms.get_potential_energy(),
                     "index": index(calc.problem_for(atoms), x)[0],
                     "seconds": seconds})  # fmt: skip
    return rows


def main() -> list[dict]:
    rows = run("lj7") + run("lj13")
    print("| system | method | converged | steps | energy+gradient calls | exact Hessians "
          "| saddle energy | index | wall (s) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['system']} | {r['method']} | {r['converged']} | {r['steps']} "
              f"| {r['energy_grad']} | {r['hessians']} | {r['energy']:.6f} | {r['index']} "
              f"| {r['seconds']:.2f} |")  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
