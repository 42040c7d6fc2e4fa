"""Which Hessian method is fastest per backend and shape: the data behind ``method="auto"``.

For each catalogue entry, ``Derivatives(problem, backend).hessian(method=m)``
is timed for every method ``m`` in ``fwd-rev``, ``rev-rev`` and ``fwd-fwd``
on JAX (jit) and on torch (torch.func, eager), interleaved in one run
(order shuffled each round, median of rounds).  It prints, per problem, the
input size ``n``, the output size ``m``, each method's time relative to the
fastest on that backend, and the method ``method="auto"`` picks, so the rule
in :func:`simdiff._api.auto_hessian_method` can be checked against the data.

    python -m validation.bench_torch_hessian --rounds 15
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import time

import numpy as np
import torch

import problems
import simdiff
from simdiff._api import HESSIAN_METHODS, auto_hessian_method

DEFAULT = (
    "ishigami", "sobol_g", "rosenbrock32", "muller-brown", "lj13", "lj38",
    "spherical", "ode_oscillator", "lotka_volterra", "heat_modes",
)  # fmt: skip
METHODS = tuple(m for m in HESSIAN_METHODS if m != "auto")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="*", default=list(DEFAULT))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--budget", type=float, default=2.0, help="seconds per configuration at most"
    )
    args = parser.parse_args(argv)
    calls = {}
    for name in args.problems:
        p = problems.get(name)
        for backend in ("jax", "torch"):
            d = simdiff.Derivatives(p, backend, check_finite=False)
            ref = None
            for m in METHODS:
                h = np.asarray(d.hessian(method=m))  # builds, compiles on JAX
                ref = h if ref is None else ref
                np.testing.assert_allclose(h, ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())
                calls[(name, backend, m)] = lambda d=d, m=m: d.hessian(method=m)
    once = {}
    for k, fn in calls.items():
        start = time.perf_counter()
        fn()
        once[k] = time.perf_counter() - start
    times: dict[tuple, list[float]] = {k: [] for k in calls}
    keys = list(calls)
    rng = random.Random(0)
    for r in range(args.rounds):
        rng.shuffle(keys)
        for k in keys:
            if once[k] * r > args.budget:
                continue
            start = time.perf_counter()
            calls[k]()
            times[k].append(time.perf_counter() - start)
    print(f"load average {os.getloadavg()}, torch threads {torch.get_num_threads()}")
    print("| problem | n | m | backend | fwd-rev | rev-rev | fwd-fwd | fastest | auto |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name in args.problems:
        p = problems.get(name)
        m_out = math.prod(p.output_shape)
        for backend in ("jax", "torch"):
            med = {m: statistics.median(times[(name, backend, m)]) for m in METHODS}
            best = min(med, key=med.__getitem__)
            auto = auto_hessian_method(simdiff.backends.get_backend(backend), p.n, m_out)
            cells = " | ".join(
                f"{med[m] * 1e3:.3g} ms ({med[m] / med[best]:.2f}x)" for m in METHODS
            )
            print(f"| {name} | {p.n} | {m_out} | {backend} | {cells} | {best} | {auto} |")
            rows.append({"problem": name, "n": p.n, "m": m_out, "backend": backend, **med})
    return rows


if __name__ == "__main__":
    main()
