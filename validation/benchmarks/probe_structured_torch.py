"""Structured vs flat parameters on torch: the per-call cost the tree adds, as ratios.

The problems of :mod:`validation.benchmarks.bench_structured_params` (the
microcases ``dict10``, ``leaf10``, ``leaves100`` and the binary Lennard-Jones
clusters ``lj13_ab``, ``lj38_ab``), torch only, at numpy and tensor points,
``simdiff.grad`` and ``simdiff.hessian``: structured and flat calls
interleaved in one process (shuffled order, median over rounds of the mean of
``inner`` calls), printed as the ratio structured / flat and the difference in
microseconds.  A probe for working on the torch path, not the stored
benchmark (that is ``bench_structured_params``).  Time is this process's CPU
time (``CPU_CLOCK``: ``time.process_time``) with torch on one thread: what the tree adds is
Python and autograd work on one thread, and on a shared machine with more work
than cores wall-clock time is bimodal (a Hessian of ``dict10``: 7.8 ms a call,
now and then 3.6 ms, flat and structured alike; 4.0 ms of CPU time every call).

    python -m validation.benchmarks.probe_structured_torch [ROUNDS] [NAME ...]
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch

import simdiff
from simdiff.evidence._timing import CPU_CLOCK, Summary, interleaved, timed
from validation.benchmarks.bench_structured_params import cases, lj_binary

#: calls slower than this (seconds) take one call per sample
SLOW = 2e-3


def main(rounds: int = 31, names: tuple[str, ...] = ()) -> None:
    """Print one row per problem, point kind and derivative."""
    torch.set_num_threads(1)
    problems: dict[str, tuple[Any, Any, Any]] = {k: v[:3] for k, v in cases().items()}
    for n_atoms in (13, 38):
        problems[f"lj{n_atoms}_ab"] = lj_binary(n_atoms)[:3]
    print(f"torch (1 thread), CPU time; median over {rounds} interleaved rounds of the mean "
          f"of 15 calls (calls over {1e3 * SLOW:g} ms: of as many as take 10 ms)")  # fmt: skip
    print("| problem | point | derivative | flat (ms) | structured (ms) | ratio "
          "| difference (us) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    backend = simdiff.backends.get_backend("torch")
    for name, (tree, flat, point) in problems.items():
        if names and name not in names:
            continue
        for arrays in ("numpy", "tensor"):
            p, fp = point, np.asarray(tree.flatten(point))
            if arrays == "tensor":
                p = {k: backend.from_numpy(np.asarray(v), "float64") for k, v in point.items()}
                fp = backend.from_numpy(fp, "float64")
            for kind in ("grad", "hessian"):
                fn = getattr(simdiff, kind)
                calls = {
                    "flat": lambda fn=fn, q=flat, x=fp: fn(q, x, backend="torch"),
                    "structured": lambda fn=fn, q=tree, x=p: fn(q, x, backend="torch"),
                }
                for call in calls.values():  # warm-up
                    call()
                    call()
                one = max(timed(c, clock=CPU_CLOCK) for c in calls.values())
                inner = 15 if one < SLOW else max(1, round(0.01 / one))
                runs = interleaved(calls, rounds, inner=inner, clock=CPU_CLOCK)
                f, s = (Summary.of(runs[k]).median for k in ("flat", "structured"))
                print(f"| {name} | {arrays} | {kind} | {1e3 * f:.3g} | {1e3 * s:.3g} | "
                      f"{s / f:.3f} | {1e6 * (s - f):.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    args = sys.argv[1:]
    n = int(args.pop(0)) if args and args[0].isdigit() else 31
    main(n, tuple(args))
