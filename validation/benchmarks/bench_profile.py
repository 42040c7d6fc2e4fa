"""Profile likelihoods of the Lotka-Volterra fit: simdiff.profile_likelihood vs brute force.

The fit of docs/sensitivity.md (4 parameters, 24 noisy observations, 240 RK4
steps).  ``profile_likelihood`` traces every profile with exact Hessians
(JAX) to both likelihood-ratio interval ends.  The brute-force reference
re-optimises the other three parameters by ``scipy.optimize.least_squares``
at 20 points per parameter spread over the traced range, warm-started from
the neighbouring point, in two variants: with the exact Jacobian from the
same simdiff ``Derivatives`` ("exact-jac"), and on NumPy with SciPy's
2-point finite differences ("fd", an independent code path).  Agreement: the
profile at those 20 points (``ProfileLikelihood.at``) against both.

Run::

    python -m validation.benchmarks profile_likelihood_lv   # the registry: the lock, this module

Writes docs/results/profile_likelihood_lv.json (atomically).  Times are
warm (compilation done by a first, untimed call that also gives the values
compared), in one interleaved run (``simdiff.evidence._timing.interleaved``:
shuffled order each round), the median of ``ROUNDS`` rounds (``FD_ROUNDS``
for the slow finite-difference variant); the speedups are ratios of medians.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.optimize
import simdiff.problems as problems

import simdiff
from simdiff.environment import _git_revision
from simdiff.evidence._timing import Summary, interleaved
from simdiff.sensitivity import profile_likelihood

OUT = Path(__file__).resolve().parents[2] / "docs" / "results" / "profile_likelihood_lv.json"
#: How the registry runs this module (``python -m validation.benchmarks profile_likelihood_lv``).
COMMAND = "python -m validation.benchmarks.bench_profile "
POINTS = 20
ROUNDS = 7
FD_ROUNDS = 2
JACS = ("exact-jac", "fd")
#: The targets: agreement in L, and the speedup over exact-Jacobian re-optimisation.
TARGETS = {"max_abs_objective_diff": 1e-5, "speedup_exact_jac": 10.0}


def lv_fit():
    model = problems.get("lv4_observations")
    truth, sigma = model.x0, 0.5
    data = model.evaluate(truth) + sigma * np.random.default_rng(1).standard_normal(24)

    def residuals(p, ops):
        return (model.fn(p, ops) - ops.asarray(data)) / sigma

    problem = simdiff.Problem(
        residuals,
        x0=truth * np.array([1.2, 0.8, 1.1, 0.9]),
        name="lv4_residuals",
        meta={"parameters": ("alpha", "beta", "delta", "gamma")},
    )
    return simdiff.least_squares(problem, xtol=1e-12, ftol=1e-12)


def brute_force(fit, i, grid, jac):
    """Re-optimise the other parameters at each c of ``grid`` (outward from the optimum)."""
    problem, x = fit.problem, fit.x
    r = np.arange(x.size) != i
    d = simdiff.Derivatives(problem, backend="jax")
    counts = {"nfun": 0, "njac": 0}
    values = np.empty(grid.size)
    order = np.argsort(np.abs(grid - x[i]))
    starts: dict[int, np.ndarray] = {}
    for k in order:
        c = grid[k]
        done = [j for j in starts if (grid[j] - x[i]) * (c - x[i]) >= 0]
        z0 = starts[min(done, key=lambda j: abs(grid[j] - c))] if done else x[r]

        def full(z, c=c):
            out = x.copy()
            out[r], out[i] = z, c
            return out

        def res(z, full=full):
            counts["nfun"] += 1
            if jac == "fd":
                return np.asarray(problem.evaluate(full(z)), dtype=np.float64)
            return np.asarray(d.value(full(z)), dtype=np.float64)

        def jacobian(z, full=full):
            counts["njac"] += 1
            return np.asarray(d.jacobian(full(z)), dtype=np.float64)[:, r]

        sol = scipy.optimize.least_squares(
            res,
            z0,
            jac="2-point" if jac == "fd" else jacobian,
            xtol=1e-15,
            ftol=1e-15,
            gtol=1e-15,
        )
        starts[k] = sol.x
        values[k] = 0.5 * float(sol.fun @ sol.fun)
    return values, counts


def main() -> dict:
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_before = os.getloadavg()
    fit = lv_fit()
    prof = profile_likelihood(fit)  # compile (untimed)
    grids = {p.index: np.linspace(p.c[0], p.c[-1], POINTS) for p in prof.profiles}

    def all_brute_force(jac):
        return {i: brute_force(fit, i, grid, jac) for i, grid in grids.items()}

    refs = {jac: all_brute_force(jac) for jac in JACS}  # warm (untimed); the values compared
    samples = interleaved(
        {
            "profile": lambda: profile_likelihood(fit),
            **{jac: lambda jac=jac: all_brute_force(jac) for jac in JACS},
        },
        ROUNDS,
        skip=lambda k, r: k == "fd" and r >= FD_ROUNDS,
    )
    times = {k: Summary.of(v) for k, v in samples.items()}
    t_prof = times["profile"].median
    t_bf = {jac: times[jac].median for jac in JACS}
    rows, agree = [], dict.fromkeys(JACS, 0.0)
    counts_bf = {jac: {"nfun": 0, "njac": 0} for jac in JACS}
    for p in prof.profiles:
        grid = grids[p.index]
        ours = np.array([prof.at(p.index, c)[0] for c in grid])
        row = {
            "parameter": p.name,
            "estimate": p.estimate,
            "lower": p.lower,
            "upper": p.upper,
            "lower_status": p.lower_status,
            "upper_status": p.upper_status,
            "wald": list(p.wald) if p.wald else None,
            "points": int(p.c.size),
            "counts": p.counts,
        }
        for jac in JACS:
            ref, counts = refs[jac][p.index]
            for k in counts:
                counts_bf[jac][k] += counts[k]
            diff = float(np.max(np.abs(ours - ref)))
            agree[jac] = max(agree[jac], diff)
            row[f"max_abs_diff_{jac}"] = diff
        rows.append(row)
    result = {
        "problem": "Lotka-Volterra fit of docs/sensitivity.md (4 parameters, 24 observations)",
        # the registry's command (validation/benchmarks/__main__.py), the commit and the load,
        # as the runner writes them into the header of a text result
        "command": COMMAND,
        "git": _git_revision(),
        "started": started,
        "load_average_before": list(load_before),
        "load_average_after": list(os.getloadavg()),
        "backend": "jax",
        "points_per_parameter_brute_force": POINTS,
        "seconds_profile_likelihood": t_prof,
        "seconds_brute_force": t_bf,
        "speedup": {k: v / t_prof for k, v in t_bf.items()},
        "samples_seconds": {k: vars(v) for k, v in times.items()},
        "counts_profile_likelihood": prof.counts,
        "counts_brute_force": counts_bf,
        "max_abs_objective_diff": agree,
        "targets": TARGETS,
        "meets_targets": {
            "max_abs_objective_diff": max(agree.values()) <= TARGETS["max_abs_objective_diff"],
            "speedup_exact_jac": t_bf["exact-jac"] / t_prof >= TARGETS["speedup_exact_jac"],
        },
        "profiles": rows,
        "table": prof.table(),
        "message": prof.message,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared), "
        f"Python {platform.python_version()}",
        "timing": (
            f"warm, one interleaved run: median of {ROUNDS} rounds "
            f"({FD_ROUNDS} for fd), shuffled order each round"
        ),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=OUT.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(result, fh, indent=2, default=float)
    os.replace(tmp, OUT)
    print(prof.table())
    print(
        json.dumps(
            {
                k: result[k]
                for k in (
                    "seconds_profile_likelihood",
                    "seconds_brute_force",
                    "speedup",
                    "max_abs_objective_diff",
                    "meets_targets",
                )
            },
            indent=2,
        )
    )
    return result


if __name__ == "__main__":
    main()
