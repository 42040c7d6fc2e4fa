"""simdiff's ASE calculator against ASE's own LennardJones: MD, BFGS, cell relaxation, switching.

fcc argon (epsilon = 0.0104 eV, sigma = 3.40 A, a = 5.26 A), 108 atoms in a
cubic box of 15.78 A, which is shorter than twice the cutoff: both calculators
sum over periodic images.

- *MD*: NVE Velocity Verlet, 100 steps of 5 fs from Maxwell-Boltzmann
  velocities at 60 K (``default_rng(0)``).  simdiff: ``smooth_cutoff(lj,
  r_on=0.66 rc, r_cut=rc)`` with ``rc = 3 sigma`` (ASE's default cutoff and
  onset), skin ``0.1 rc``; ASE: ``LennardJones(rc=rc, smooth=True)`` (its
  continuous-force mode), the same cutoff and onset.  Wall time (the first
  simdiff round includes JAX compilation; the median is over rounds) and
  the largest deviation of the total energy from its start.
- *BFGS*: the crystal rattled by 0.05 A (``rattle(seed=1)``), positions
  relaxed to fmax 1e-4 eV/A with ``ase.optimize.BFGS``.
- *cell*: a 4-atom cubic cell (a = 5.30 A, rattled by 0.02 A), relaxed with
  ``FrechetCellFilter`` + BFGS to fmax 1e-8 eV/A.  Here simdiff switches
  between 8.5 and 8.9 A and ASE truncates at 8.7 A (``smooth=False``): no
  fcc shell lies between 8.32 and 9.11 A, so both are the same potential
  there (truncated LJ over five shells) and must reach the same lattice
  constant.
- *switch*: simdiff's C2 switch against ASE's ``smooth=True`` cutoff
  function on the same ``[r_on, r_cut]``: the largest differences of the
  pair energy and force, and of the crystal's energy per atom and forces
  at the BFGS start.

Rounds alternate simdiff and ASE in one process, so the ratios hold on a
loaded machine; one BLAS thread (``OPENBLAS_NUM_THREADS=1``) keeps BFGS's
small dense algebra from oversubscribing the cores.

    OPENBLAS_NUM_THREADS=1 python -m validation.benchmarks.bench_pes_ase [--rounds 3]
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np

from simdiff.evidence._timing import first_call

EPSILON, SIGMA, A = 0.0104, 3.40, 5.26
RC = 3.0 * SIGMA
RO = 0.66 * RC


def _simdiff_calc(r_on: float = RO, r_cut: float = RC):
    from simdiff.pes import lennard_jones, smooth_cutoff
    from simdiff.pes.ase_interface import SimdiffCalculator

    pair = smooth_cutoff(partial(lennard_jones, epsilon=EPSILON, sigma=SIGMA), r_on=r_on,
                         r_cut=r_cut)  # fmt: skip
    return SimdiffCalculator(pair=pair)


def _ase_calc(smooth: bool = True, rc: float = RC):
    from ase.calculators.lj import LennardJones

    return LennardJones(epsilon=EPSILON, sigma=SIGMA, rc=rc, ro=RO, smooth=smooth)


def _crystal():
    from ase.build import bulk

    return bulk("Ar", "fcc", a=A, cubic=True).repeat(3)


def md(calc, steps: int = 100) -> dict:
    from ase import units
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
    from ase.md.verlet import VelocityVerlet

    atoms = _crystal()
    MaxwellBoltzmannDistribution(atoms, temperature_K=60, rng=np.random.default_rng(0))
    atoms.calc = calc
    e0 = atoms.get_total_energy()
    dyn = VelocityVerlet(atoms, 5 * units.fs)

    def run() -> float:
        drift = 0.0
        for _ in range(steps // 10):
            dyn.run(10)
            drift = max(drift, abs(atoms.get_total_energy() - e0))
        return drift

    drift, seconds = first_call(run)
    return {"seconds": seconds, "drift": drift}


def bfgs(calc) -> dict:
    from ase.optimize import BFGS

    atoms = _crystal()
    atoms.rattle(0.05, seed=1)
    atoms.calc = calc
    opt = BFGS(atoms, logfile=None)
    ok, seconds = first_call(lambda: opt.run(fmax=1e-4, steps=500))
    return {"seconds": seconds, "steps": opt.nsteps, "converged": bool(ok),
            "energy": atoms.get_potential_energy()}  # fmt: skip


def cell(calc) -> dict:
    from ase.build import bulk
    from ase.filters import FrechetCellFilter
    from ase.optimize import BFGS

    atoms = bulk("Ar", "fcc", a=5.30, cubic=True)
    atoms.rattle(0.02, seed=2)
    atoms.calc = calc
    opt = BFGS(FrechetCellFilter(atoms), logfile=None)
    ok, seconds = first_call(lambda: opt.run(fmax=1e-8, steps=500))
    par = atoms.cell.cellpar()
    return {"seconds": seconds, "steps": opt.nsteps, "converged": bool(ok),
            "a": float(np.mean(par[:3])), "a_spread": float(np.ptp(par[:3])),
            "angle_dev": float(np.abs(par[3:] - 90).max())}  # fmt: skip


def switch() -> dict:
    from ase.calculators.lj import cutoff_function, d_cutoff_function

    import simdiff
    from simdiff.pes import lennard_jones, switch_c2

    ops = simdiff.get_ops("numpy")
    r = np.linspace(RO, RC, 20001)
    lj = lennard_jones(r, ops, epsilon=EPSILON, sigma=SIGMA)
    dlj = EPSILON * 4 * (-12 * SIGMA**12 / r**13 + 6 * SIGMA**6 / r**7)
    ours = switch_c2(r, ops, r_on=RO, r_cut=RC)
    h = 1e-6
    dours = (switch_c2(r + h, ops, r_on=RO, r_cut=RC) - switch_c2(r - h, ops, r_on=RO,
                                                                   r_cut=RC)) / (2 * h)  # fmt: skip
    theirs = cutoff_function(r * r, RC * RC, RO * RO)
    dtheirs = d_cutoff_function(r * r, RC * RC, RO * RO) * 2 * r
    de = np.abs(lj * (ours - theirs))
    df = np.abs(dlj * (ours - theirs) + lj * (dours - dtheirs))
    atoms = _crystal()
    atoms.rattle(0.05, seed=1)  # the BFGS start
    a, b = atoms.copy(), atoms.copy()
    a.calc, b.calc = _simdiff_calc(), _ase_calc(smooth=True)
    return {"pair_energy": float(de.max()), "pair_energy_at": float(r[de.argmax()]),
            "pair_force": float(df.max()), "pair_force_at": float(r[df.argmax()]),
            "crystal_energy_per_atom": (a.get_potential_energy() - b.get_potential_energy())
            / len(atoms),
            "crystal_force": float(np.abs(a.get_forces() - b.get_forces()).max()),
            "lj_at_ro": float(lennard_jones(np.asarray(RO), ops, epsilon=EPSILON,
                                            sigma=SIGMA))}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    rows: dict[str, list[dict]] = {k: [] for k in ("md-s", "md-a", "bfgs-s", "bfgs-a")}
    for _ in range(rounds):  # interleaved
        rows["md-s"].append(md(_simdiff_calc()))
        rows["md-a"].append(md(_ase_calc()))
        rows["bfgs-s"].append(bfgs(_simdiff_calc()))
        rows["bfgs-a"].append(bfgs(_ase_calc()))
    med = {k: float(np.median([r["seconds"] for r in v])) for k, v in rows.items()}
    print(f"rounds: {rounds} (median wall time over rounds; simdiff's first round compiles)")
    print("| task | simdiff (s) | ASE LennardJones (s) | ASE / simdiff | simdiff | ASE |")
    print("|---|---|---|---|---|---|")
    ds, da = rows["md-s"][-1]["drift"], rows["md-a"][-1]["drift"]
    print(f"| MD, 108 atoms, 100 steps | {med['md-s']:.3f} | {med['md-a']:.3f} | "
          f"{med['md-a'] / med['md-s']:.2f} | drift {ds:.2e} eV | drift {da:.2e} eV |")  # fmt: skip
    bs, ba = rows["bfgs-s"][-1], rows["bfgs-a"][-1]
    print(f"| BFGS, 108 atoms rattled 0.05 A, fmax 1e-4 | {med['bfgs-s']:.3f} | "
          f"{med['bfgs-a']:.3f} | {med['bfgs-a'] / med['bfgs-s']:.2f} | {bs['steps']} steps, "
          f"E {bs['energy']:.8f} | {ba['steps']} steps, E {ba['energy']:.8f} |")  # fmt: skip
    first = rows["md-s"][0]["seconds"]
    print(f"first simdiff MD round (compiles, unless JAX has the executable cached): {first:.3f} s")
    runs: dict[str, list[dict]] = {"simdiff": [], "ASE LennardJones": []}
    for _ in range(2):  # interleaved; simdiff's first run compiles for the new potential
        runs["simdiff"].append(cell(_simdiff_calc(r_on=8.5, r_cut=8.9)))
        runs["ASE LennardJones"].append(cell(_ase_calc(smooth=False, rc=8.7)))
    print(
        "\n| cell relaxation (4 atoms, FrechetCellFilter + BFGS, fmax 1e-8) | a (A) | steps | "
        "first run (s) | second run (s) |\n|---|---|---|---|---|"
    )
    for name, (c, c2) in runs.items():
        print(f"| {name} | {c['a']:.10f} | {c['steps']} | {c['seconds']:.2f} | "
              f"{c2['seconds']:.2f} |")  # fmt: skip
    cs, ca = runs["simdiff"][0], runs["ASE LennardJones"][0]
    print(
        f"|a_simdiff - a_ASE| = {abs(cs['a'] - ca['a']):.1e} A; "
        f"cell edge spread {cs['a_spread']:.1e}, angle deviation {cs['angle_dev']:.1e} deg"
    )
    s = switch()
    print(
        f"\nswitch on [{RO:.3f}, {RC:.2f}] A: pair energy differs by up to "
        f"{s['pair_energy']:.3e} eV (at r = {s['pair_energy_at']:.3f}; LJ(r_on) = "
        f"{s['lj_at_ro']:.3e} eV), pair force by up to {s['pair_force']:.3e} eV/A (at r = "
        f"{s['pair_force_at']:.3f}); the BFGS start: energy per atom "
        f"{s['crystal_energy_per_atom']:.3e} eV, forces up to {s['crystal_force']:.3e} eV/A"
    )


if __name__ == "__main__":
    main()
