"""What ``solver="auto"`` decides on the catalogue, what the decision costs, and why Rodas3 at
loose tolerances.

Two tables:

- for each catalogue ODE (its own rtol, atol and max_steps), the solver ``"auto"``
  chooses, the pilot's verdict numbers (stability-limited steps, median ``h rho / s``,
  attempted steps, time reached), the cost of the decision (median of ``--repeats``
  constructions: pilot plus spectral radius) against one numpy solve with the
  chosen solver;
- attempted steps and numpy solve time of Rodas3 and Rodas5P on three stiff
  problems over a range of rtol (atol = rtol / 1000): where the stiff choice
  switches from Rodas3 to Rodas5P.

    python -m validation.benchmarks.probe_ode_auto --repeats 5
"""

from __future__ import annotations

import argparse
import os

import problems
from simdiff.evidence._timing import median_time
from simdiff.ode import ODEProblem, Rodas3, Rodas5P
from simdiff.ode.auto import LOOSE_RTOL

CATALOGUE = ("van_der_pol_stiff", "robertson", "hires", "lorenz63", "lotka_volterra")
STIFF = ("van_der_pol_stiff", "robertson", "hires")
RTOLS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-8)


def _auto(name: str) -> ODEProblem:
    p = problems.get(name)
    s = p.solver
    return ODEProblem(
        p.rhs, p.y0, p.t_span, p.params, save_at=p.save_at, observable=p.observable,
        solver="auto", rtol=s.rtol, atol=s.atol, max_steps=s.max_steps,
    )  # fmt: skip


def _seconds(fn, repeats: int) -> float:
    return median_time(fn, repeats)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"load {os.getloadavg()}; median of {args.repeats} runs")
    print()
    print("| problem | rtol | chosen | limited steps | median h*rho/s | pilot steps | pilot t "
          "| rho0 (T-t0)/s | decision (ms) | one numpy solve (ms) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in CATALOGUE:
        q = _auto(name)
        c = q.solver_choice
        assert c is not None
        decide = _seconds(lambda n=name: _auto(n), args.repeats)
        solve = _seconds(lambda q=q: q.solve_info(), args.repeats)
        cells = [name, f"{q.solver.rtol:g}", c.solver, str(c.limited_steps),
                 f"{c.stiffness_ratio:.2f}", str(c.pilot_steps), f"{c.t_reached:.4g}",
                 f"{c.explicit_steps_at_start:.3g}", f"{1e3 * decide:.1f}",
                 f"{1e3 * solve:.1f}"]  # fmt: skip
        print("| " + " | ".join(cells) + " |")
    print()
    print(f"stiff choice: Rodas3 at rtol >= {LOOSE_RTOL:g}, Rodas5P below")
    print()
    print("| problem | rtol | Rodas3 steps | Rodas3 (ms) | Rodas5P steps | Rodas5P (ms) |")
    print("|---|---|---|---|---|---|")
    for name in STIFF:
        p = problems.get(name)
        for rtol in RTOLS:
            row = []
            for method in (Rodas3, Rodas5P):
                q = ODEProblem(
                    p.rhs, p.y0, p.t_span, p.params, save_at=p.save_at,
                    solver=method(rtol=rtol, atol=rtol * 1e-3, max_steps=100_000),
                )  # fmt: skip
                info = q.solve_info()
                steps = info["n_accepted"] + info["n_rejected"]
                reps = max(1, args.repeats // 2) if rtol < 1e-6 else args.repeats
                row += [str(steps), f"{1e3 * _seconds(q.solve_info, reps):.0f}"]
            print(f"| {name} | {rtol:g} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
