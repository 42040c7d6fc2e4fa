"""JAX cost of the checkpointed loop's guard: one ``cond`` per step or per group of steps.

Issue 11's Lotka–Volterra misfit (``validation.benchmarks.bench_ode.lv_long``, default
``max_steps``) with ``CheckpointAdjoint(group=g)`` for each ``g`` given:
solve, gradient and Hessian times of :class:`simdiff.Derivatives` on JAX,
interleaved in a shuffled order, median and minimum of the repeats.  ``group=1`` is a ``cond``
per step.

    python -m validation.benchmarks.bench_ode_groups --groups 1 8 16 32 --repeats 21
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import jax

import simdiff
from simdiff.evidence._timing import Summary, interleaved
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
            configs[(g, kind)] = lambda d=d, kind=kind: jax.block_until_ready(getattr(d, kind)(x))
    for fn in configs.values():
        fn()
    times = interleaved(configs, args.repeats)
    print(f"simdiff-jax, ms, median (min) of {args.repeats}, interleaved")
    print("| group | solve | grad | Hessian | grad/solve |")
    print("|---|---|---|---|---|")
    for g in args.groups:
        st = {k: Summary.of(times[(g, k)]) for k in ("value", "grad", "hessian")}
        med = {k: 1e3 * s.median for k, s in st.items()}
        low = {k: 1e3 * s.min for k, s in st.items()}
        cells = " | ".join(f"{med[k]:.2f} ({low[k]:.2f})" for k in ("value", "grad", "hessian"))
        print(f"| {g} | {cells} | {med['grad'] / med['value']:.1f} |")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
