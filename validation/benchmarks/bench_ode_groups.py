"""JAX cost of the checkpointed loop's guard: one ``cond`` per step or per group of steps.

Issue 11's Lotka–Volterra misfit (``validation.benchmarks.bench_ode.lv_long``, default
``max_steps``) with ``CheckpointAdjoint(group=g)`` for each ``g`` given:
solve, gradient and Hessian times of :class:`simdiff.Derivatives` on JAX,
interleaved, median and minimum of the repeats.  ``group=1`` is a ``cond``
per step.

    python -m validation.benchmarks.bench_ode_groups --groups 1 8 16 32 --repeats 21
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import jax

import simdiff
from simdiff.ode import CheckpointAdjoint
from validation.benchmarks.bench_ode import lv_long


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 8, 16, 32])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    print(f"load: {os.getloadavg()}")
    x = jax.numpy.asarray(lv_long().x0)
    configs: dict[tuple[int, str], Callable[[], object]] = {}
    for g in args.groups:
        p = lv_long()
        p.adjoint = CheckpointAdjoint(group=g)
        d = simdiff.Derivatives(p, backend="jax")
        for kind in ("value", "grad", "hessian"):
            configs[(g, kind)] = lambda d=d, kind=kind: getattr(d, kind)(x)
    for fn in configs.values():
        jax.block_until_ready(fn())
    times: dict[tuple[int, str], list[float]] = {k: [] for k in configs}
    for _ in range(args.repeats):
        for key, fn in configs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            times[key].append(time.perf_counter() - t0)
    print(f"simdiff-jax, ms, median (min) of {args.repeats}, interleaved")
    print("| group | solve | grad | Hessian | grad/solve |")
    print("|---|---|---|---|---|")
    for g in args.groups:
        med = {k: 1e3 * statistics.median(times[(g, k)]) for k in ("value", "grad", "hessian")}
        low = {k: 1e3 * min(times[(g, k)]) for k in ("value", "grad", "hessian")}
        cells = " | ".join(f"{med[k]:.2f} ({low[k]:.2f})" for k in ("value", "grad", "hessian"))
        print(f"| {g} | {cells} | {med['grad'] / med['value']:.1f} |")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
