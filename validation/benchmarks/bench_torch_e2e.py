"""End to end with ``compile="auto"``: dgsm on Ishigami and sweep on LJ-38, torch against JAX.

Each configuration runs in a fresh call on a fresh problem (compile or trace
included) on the same 10^4 points; JAX and torch alternate, ``--repeats``
times, median.  Both frameworks are initialised first (``Backend.warm_up``:
imports and runtime start-up, about 2 s for torch's Dynamo modules, paid once
per process by any torch.func user); Inductor's own start-up is not warmed:
the first compile of the process pays it, as a user's would.  The sweep's
intra-op thread choice on torch (``SweepResult.threads``) is printed per repeat.

    python -m validation.benchmarks.bench_torch_e2e --samples 10000 --repeats 1
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np

import problems
import simdiff
from simdiff.backends import get_backend
from simdiff.evidence._timing import Summary, first_call
from simdiff.sensitivity import dgsm


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch.compile internals
    for backend in ("jax", "torch"):
        get_backend(backend).warm_up()
    rng = np.random.default_rng(0)
    lj = problems.get("lj38")
    pts = lj.x0 + 0.01 * rng.standard_normal((args.samples, lj.n))
    times: dict[tuple[str, str], list[float]] = {}
    infos = {}
    threads: dict[str, list[dict]] = {}
    for _ in range(args.repeats):
        for backend in ("jax", "torch"):
            compile = "auto" if backend == "torch" else False
            p = problems.get("ishigami")  # fresh problem: nothing cached
            r, seconds = first_call(
                lambda p=p, b=backend, c=compile: dgsm(
                    p, p.meta["distributions"], args.samples, backend=b, compile=c
                )
            )
            times.setdefault(("dgsm ishigami", backend), []).append(seconds)
            infos[("dgsm ishigami", backend)] = r.compile_info
            q = problems.get("lj38")
            s, seconds = first_call(
                lambda q=q, b=backend, c=compile: simdiff.sweep(q, pts, backend=b, compile=c)
            )
            times.setdefault(("sweep lj38", backend), []).append(seconds)
            infos[("sweep lj38", backend)] = s.compile_info
            if s.threads:  # the sweep's measured intra-op thread choice (torch)
                threads.setdefault(backend, []).append(s.threads)
    print(f"load average {os.getloadavg()}, {args.samples} samples")
    print("| task | JAX s | torch (compile='auto') s | ratio | torch path |")
    print("|---|---|---|---|---|")
    for task in ("dgsm ishigami", "sweep lj38"):
        j = Summary.of(times[(task, "jax")]).median
        t = Summary.of(times[(task, "torch")]).median
        info = infos[(task, "torch")][0]
        compile_s = info.get("compile_s", 0.0)
        detail = f"{info.get('path')}; compile {compile_s:.1f} s; {info.get('reason')}"
        print(f"| {task} | {j:.2f} | {t:.2f} | {t / j:.2f} | {detail} |")
    for (task, backend), ts in times.items():  # the first repeat compiles cold
        print(f"{task} {backend}: " + ", ".join(f"{t:.2f}" for t in ts) + " s (in order)")
    for backend, records in threads.items():
        for t in records:
            print(f"sweep lj38 {backend} threads: used {t.get('used')} of {t.get('start')}; "
                  f"{t.get('reason')}")  # fmt: skip


if __name__ == "__main__":
    main()
