"""Benchmark: DGSM of a 4-parameter ODE model (exact batched gradients vs SALib finite
differences) and sweep throughput in process vs 1 and 2 dask workers.

Usage (from the repository root)::

    python -m validation.benchmarks.bench_sensitivity --samples 10000 --sweep-points 4096

Prints two markdown tables.  Model: ``lv4_mean_prey`` (problems/sensitivity.py),
the time-averaged prey of a Lotka-Volterra system integrated by 240 RK4 steps,
parameters uniform within +-20 % of (1.0, 0.1, 0.075, 1.5).

- simdiff: ``simdiff.sensitivity.dgsm`` (Sobol sample, exact reverse-mode
  gradients vmapped over chunks: 256 points on JAX, 2048 on torch); the first
  call (with compilation) and a second, warm call are timed.
- SALib: ``SALib.sample.finite_diff`` (N base points + N*D one-sided
  perturbations, delta=1e-2 relative) evaluated by simdiff's batched JAX value
  function (its fastest evaluator of this model), then ``SALib.analyze.dgsm``.
- Accuracy: SALib's ``vi`` against the exact-gradient ``nu`` on SALib's own
  base points (the finite-difference error alone), and every estimate against a
  reference ``nu`` from 2**16 Sobol points with exact gradients (finite
  difference plus sampling error).
"""

from __future__ import annotations

import argparse

import numpy as np

import problems
import simdiff
from simdiff.evidence._timing import first_call
from simdiff.sensitivity import batched_value_and_grad, dgsm


def _salib_problem(p: simdiff.Problem) -> dict:
    return {
        "num_vars": p.n,
        "names": list(p.meta["parameters"]),
        "bounds": [[a, b] for _, a, b in p.meta["distributions"]],
    }


def bench_dgsm(n: int, backends: list[str]) -> list[dict]:
    from SALib.analyze import dgsm as salib_dgsm
    from SALib.sample import finite_diff

    p = problems.get("lv4_mean_prey")
    dists = p.meta["distributions"]
    rows, nus = [], {}
    for be in backends:
        r, first = first_call(lambda be=be: dgsm(p, dists, n, backend=be, n_bootstrap=0, seed=1))
        _, warm = first_call(lambda be=be: dgsm(p, dists, n, backend=be, n_bootstrap=0, seed=2))
        nus[len(rows)] = r.nu
        rows.append({"method": f"simdiff {be} (exact, vmap)", "evals": f"{n} value+grad",
                     "first_s": first, "warm_s": warm, "fd_err": 0.0})  # fmt: skip
    sp = _salib_problem(p)
    d = simdiff.Derivatives(p, "jax", check_finite=False)

    def salib(seed: int) -> tuple[np.ndarray, dict]:
        X = finite_diff.sample(sp, n, delta=1e-2, seed=seed)
        Y = np.concatenate([np.asarray(d.value(X[i : i + 1024])) for i in range(0, len(X), 1024)])
        return X, salib_dgsm.analyze(sp, X, Y, num_resamples=10, seed=1)

    for label in ("first", "warm"):
        (X, S), elapsed = first_call(lambda label=label: salib(1 if label == "first" else 2))
        if label == "first":
            first, X1, S1 = elapsed, X, S
        else:
            warm = elapsed
    _, g = batched_value_and_grad(p, X1[:: p.n + 1])
    exact_same_points = np.mean(g**2, axis=0)
    rows.append(
        {
            "method": "SALib finite_diff + dgsm (FD, delta=1e-2)",
            "evals": f"{len(X1)} values",
            "first_s": first,
            "warm_s": warm,
            "fd_err": np.max(np.abs(S1["vi"] - exact_same_points) / exact_same_points),
        }
    )
    nus[len(rows) - 1] = np.asarray(S1["vi"])
    ref = dgsm(p, dists, 2**16, seed=99, n_bootstrap=0).nu  # after the timings: no warm-up
    for i, nu in nus.items():
        rows[i]["ref_err"] = np.max(np.abs(nu - ref) / ref)  # fmt: skip
    return rows


def bench_sweep(n_points: int, chunk: int) -> list[dict]:
    from distributed import Client, LocalCluster

    pts = simdiff.sensitivity.sample(
        simdiff.sensitivity.as_distributions(
            problems.get("lv4_mean_prey").meta["distributions"], 4
        ),
        n_points,
    )
    rows = []

    def timed(label: str, **kw) -> simdiff.sensitivity.SweepResult:
        out = None
        for run in ("first", "warm"):
            out, dt = first_call(
                lambda: simdiff.sweep(
                    "lv4_mean_prey", pts, ("value", "grad"), chunk_size=chunk, **kw
                )
            )
            rows.append({"setup": label, "run": run, "s": dt, "pts_per_s": n_points / dt})
        return out

    base = timed("in-process")
    for workers in (1, 2):
        cluster = LocalCluster(n_workers=workers, processes=True, threads_per_worker=1,
                               dashboard_address=":0")  # fmt: skip
        client = Client(cluster)
        r = timed(f"dask, {workers} worker(s)", client=client)
        assert np.array_equal(r["grad"], base["grad"]), "distributed sweep differs"
        client.close()
        cluster.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--sweep-points", type=int, default=4096)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--backends", default="jax,torch")
    args = ap.parse_args()
    print(f"## DGSM of lv4_mean_prey, N = {args.samples}\n")
    print(
        "| method | model evaluations | first call (s) | warm (s) | max rel. FD error "
        "(same points) | max rel. error vs 2^16-point reference |"
    )
    print("|---|---|---|---|---|---|")
    for r in bench_dgsm(args.samples, args.backends.split(",")):
        print(f"| {r['method']} | {r['evals']} | {r['first_s']:.2f} | {r['warm_s']:.2f} | "
              f"{r['fd_err']:.1e} | {r['ref_err']:.1e} |")  # fmt: skip
    print(f"\n## Sweep of lv4_mean_prey value+grad, {args.sweep_points} points, "
          f"chunk {args.chunk}\n")  # fmt: skip
    print("| setup | run | seconds | points/s |")
    print("|---|---|---|---|")
    for r in bench_sweep(args.sweep_points, args.chunk):
        print(f"| {r['setup']} | {r['run']} | {r['s']:.2f} | {r['pts_per_s']:.0f} |")


if __name__ == "__main__":
    main()
