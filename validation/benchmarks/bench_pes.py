"""Dense AD Hessian of Lennard-Jones clusters LJ-N: JAX, PyTorch, finite differences, scaling.

This is the dense forward-over-reverse AD Hessian (``method="fwd-rev"``), which
``simdiff.hessian`` no longer uses for cluster problems by default: the
structured Hessian (one 6x6 block per pair) and its scaling to N = 2000, with
ASE's finite-difference Vibrations, are in ``validation.benchmarks.bench_pes_scaling``;
saddle searches with exact Hessians in ``validation.benchmarks.bench_pes_saddles``.

For each N (compact fcc fragments from the catalogue, ``problems.pes.fcc_cluster``)
and each method, a fresh worker process measures the first call (compile and
warm-up), the median of ``--repeats`` steady-state calls and the peak resident
memory added by the computation (``ru_maxrss`` after the calls minus before the
first one).  Methods:

- ``jax``: ``simdiff.Derivatives(p, "jax").hessian(x, method="fwd-rev")`` (jit)
- ``torch``: ``simdiff.Derivatives(p, "torch").hessian(x, method="fwd-rev")`` (torch.func)
- ``fd-ad-grad``: central differences of the JAX AD gradient, all ``2n`` shifted
  points in one vmapped call (step 1e-5)
- ``scipy-fd``: ``scipy.differentiate.hessian`` on a vectorised numpy energy
  (small N only)
- ``jax-grad`` / ``torch-grad``: the gradient, for the Hessian/gradient ratio

Accuracy is the largest absolute difference from the JAX Hessian, relative to
its largest entry.  The scaling exponent is the slope of log(time) against
log(N).  The Hessian/gradient time ratio is compared with ``3N``, the number
of gradient-sized (HVP) passes a forward-over-reverse Hessian needs.

    python -m validation.benchmarks.bench_pes --sizes 13 38 75 150 --repeats 7 [--threads 1]

``--threads N`` sets torch's intra-op threads and XLA's CPU threading in the
workers (default: each framework's own default).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

import numpy as np

from simdiff.evidence._accuracy import rel_error
from simdiff.evidence._timing import Summary, first_call, timed

METHODS = ("jax", "torch", "fd-ad-grad", "scipy-fd", "jax-grad", "torch-grad")


def _problem(n_atoms: int):
    from problems.pes import fcc_cluster
    from simdiff.pes import cluster_problem, lennard_jones

    return cluster_problem(lennard_jones, fcc_cluster(n_atoms), name=f"lj{n_atoms}")


def _runner(method: str, n_atoms: int):
    import simdiff

    p = _problem(n_atoms)
    x = p.x0
    if method in ("jax", "torch"):
        d = simdiff.Derivatives(p, backend=method)
        return lambda: d.hessian(x, method="fwd-rev")
    if method in ("jax-grad", "torch-grad"):
        d = simdiff.Derivatives(p, backend=method.split("-")[0])
        return lambda: d.grad(x)
    if method == "fd-ad-grad":
        d = simdiff.Derivatives(p, backend="jax")
        n, h = p.n, 1e-5
        pts = np.vstack([x + h * np.eye(n), x - h * np.eye(n)])

        def fd():
            g = d.grad(pts)
            return (g[:n] - g[n:]) / (2 * h)

        return fd
    if method == "scipy-fd":
        import scipy.differentiate

        from problems.pes import LJEnergyNumpy

        f = LJEnergyNumpy(n_atoms)
        opts = {"initial_step": 0.05, "order": 8, "tolerances": {"atol": 1e-9, "rtol": 1e-12}}
        return lambda: scipy.differentiate.hessian(f, x, **opts).ddf
    raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")


def worker(method: str, n_atoms: int, repeats: int, out: str, threads: int | None) -> None:
    """Measure one (method, N) in this process; write JSON (and the result as .npy)."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    fn = _runner(method, n_atoms)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    res, first = first_call(lambda: np.asarray(fn()))
    st = Summary.of([timed(lambda: np.asarray(fn())) for _ in range(repeats)])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    np.save(out + ".npy", res)
    with open(out, "w") as fh:
        json.dump({"method": method, "n_atoms": n_atoms, "first_s": first,
                   "median_s": st.median, "min_s": st.min,
                   "max_s": st.max, "peak_mb": peak / 1024.0}, fh)  # fmt: skip


def _measure(method: str, n_atoms: int, repeats: int, tmp: str, threads: int | None) -> dict:
    out = os.path.join(tmp, f"{method}-{n_atoms}.json")
    cmd = [sys.executable, "-m", "validation.benchmarks.bench_pes", "--worker", method,
           str(n_atoms),
           "--repeats", str(repeats), "--out", out]  # fmt: skip
    env = dict(os.environ)
    if threads:
        cmd += ["--threads", str(threads)]
        env["XLA_FLAGS"] = (f"--xla_cpu_multi_thread_eigen=false "
                            f"intra_op_parallelism_threads={threads}")  # fmt: skip
        env["OMP_NUM_THREADS"] = str(threads)
    subprocess.run(cmd, check=True, env=env)
    with open(out) as fh:
        rec = json.load(fh)
    rec["result"] = np.load(out + ".npy")
    return rec


def _slope(ns: list[int], ts: list[float]) -> float:
    if len(ns) < 2:
        return float("nan")
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[13, 38, 75, 150])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scipy-max", type=int, default=13, help="largest N for scipy-fd")
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help="intra-op threads for torch and XLA")
    parser.add_argument("--report", metavar="LOG", help="reprint tables from a run's stderr log")
    args = parser.parse_args(argv)
    if args.report:
        report(args.report)
        return []
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), args.repeats, args.out, args.threads)
        return []
    records: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n_atoms in args.sizes:
            ref = None
            for method in METHODS:
                if method == "scipy-fd" and n_atoms > args.scipy_max:
                    continue
                rec = _measure(method, n_atoms, args.repeats, tmp, args.threads)
                if method == "jax":
                    ref = rec["result"]
                if ref is not None and method not in ("jax-grad", "torch-grad"):
                    rec["rel_err"] = rel_error(rec["result"], ref)
                del rec["result"]
                records.append(rec)
                print(json.dumps(rec), file=sys.stderr, flush=True)
    _print_tables(records)
    return records


def _print_tables(records: list[dict]) -> None:
    by = {(r["method"], r["n_atoms"]): r for r in records}
    sizes = sorted({r["n_atoms"] for r in records})
    print("| N | n = 3N | method | first call (s) | median (s) | min (s) | peak RSS added (MB) | "
          "max error / max abs H |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for n_atoms in sizes:
        for m in METHODS:
            r = by.get((m, n_atoms))
            if r is None:
                continue
            err = f"{r['rel_err']:.1e}" if "rel_err" in r else "-"
            print(f"| {n_atoms} | {3 * n_atoms} | {m} | {r['first_s']:.3g} | {r['median_s']:.3g} "
                  f"| {r['min_s']:.3g} | {r['peak_mb']:.0f} | {err} |")  # fmt: skip
    print()
    print("| method | exponent k, median time ~ N^k | exponent k, min time ~ N^k |")
    print("|---|---|---|")
    for m in METHODS:
        ns = [n for n in sizes if (m, n) in by]
        k_med = _slope(ns, [by[(m, n)]["median_s"] for n in ns])
        k_min = _slope(ns, [by[(m, n)]["min_s"] for n in ns])
        print(f"| {m} | {k_med:.2f} | {k_min:.2f} |")
    print()
    print("| N | backend | Hessian / gradient (medians) | (mins) | 3N | min ratio / 3N |")
    print("|---|---|---|---|---|---|")
    for n_atoms in sizes:
        for b in ("jax", "torch"):
            if (b, n_atoms) in by and (f"{b}-grad", n_atoms) in by:
                h, g = by[(b, n_atoms)], by[(f"{b}-grad", n_atoms)]
                q_med, q_min = h["median_s"] / g["median_s"], h["min_s"] / g["min_s"]
                print(f"| {n_atoms} | {b} | {q_med:.3g} | {q_min:.3g} | {3 * n_atoms} "
                      f"| {q_min / (3 * n_atoms):.3g} |")  # fmt: skip


def report(log: str) -> None:
    """Print the tables again from the JSON lines a run wrote to stderr."""
    with open(log) as fh:
        _print_tables([json.loads(line) for line in fh if line.startswith("{")])


if __name__ == "__main__":
    main()
