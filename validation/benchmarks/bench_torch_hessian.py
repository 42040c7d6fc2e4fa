"""Which Hessian method is fastest per backend and shape: the data behind ``method="auto"``.

For each catalogue entry, ``Derivatives(problem, backend).hessian(method=m)``
is timed for every method ``m`` in ``fwd-rev``, ``rev-rev`` and ``fwd-fwd``
on JAX (jit) and on torch (torch.func, eager), interleaved in one run
(order shuffled each round, median of rounds).  It prints, per problem, the
input size ``n``, the output size ``m``, each method's time relative to the
fastest on that backend, and the method ``method="auto"`` picks, so the rule
in :func:`simdiff.core.builders.auto_hessian_method` can be checked against the data.

With ``--compiled`` the torch configurations run under ``torch.compile``
(``Derivatives(..., compile=True)``) and the first call of each method (its
compile time) is printed beside the steady state: the data behind the
compiled-path rule, ``TorchBackend.hessian_method(n, m, compiled=True)``.
Forward over forward is left out above ``--fwd-fwd-max`` inputs (its
compile and run time grow with ``n`` times the reverse pass; 15x to 90x
slower eager at ``n >= 39``).

    python -m validation.benchmarks.bench_torch_hessian --rounds 15
    python -m validation.benchmarks.bench_torch_hessian --compiled --rounds 10
"""

from __future__ import annotations

import argparse
import math
import os
import warnings

import numpy as np
import torch

import problems
import simdiff
from simdiff.core.builders import HESSIAN_METHODS, auto_hessian_method
from simdiff.evidence._timing import Summary, first_call, interleaved

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
    parser.add_argument("--compiled", action="store_true", help="torch under torch.compile")
    parser.add_argument("--fwd-fwd-max", type=int, default=40, help="largest n for fwd-fwd")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch.compile internals
    calls, first, failed, refs = {}, {}, {}, {}
    for name in args.problems:
        p = problems.get(name)
        for backend in ("jax", "torch"):
            compile = args.compiled and backend == "torch"
            d = simdiff.Derivatives(p, backend, check_finite=False, compile=compile)
            for m in _methods(p.n, args.fwd_fwd_max):
                try:  # builds, compiles on JAX (and torch)
                    h, first[(name, backend, m)] = first_call(
                        lambda d=d, m=m: np.asarray(d.hessian(method=m))
                    )
                except simdiff.UnsupportedError as exc:  # torch.compile failed (compile=True)
                    failed[(name, backend, m)] = str(exc).splitlines()[0][:160]
                    continue
                ref = refs.setdefault(name, h)  # JAX's first method: the reference
                np.testing.assert_allclose(h, ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())
                calls[(name, backend, m)] = lambda d=d, m=m: d.hessian(method=m)
            print(name, backend, "built", flush=True)
    once = {k: first_call(fn)[1] for k, fn in calls.items()}
    times = interleaved(calls, args.rounds, skip=lambda k, r: once[k] * r > args.budget)
    torch_label = "torch compiled" if args.compiled else "torch"
    print(f"load average {os.getloadavg()}, torch threads {torch.get_num_threads()}")
    print("| problem | n | m | backend | fwd-rev | rev-rev | fwd-fwd | fastest | auto |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name in args.problems:
        p = problems.get(name)
        m_out = math.prod(p.output_shape)
        for backend in ("jax", "torch"):
            ms = [m for m in _methods(p.n, args.fwd_fwd_max) if (name, backend, m) in times]
            med = {m: Summary.of(times[(name, backend, m)]).median for m in ms}
            best = min(med, key=med.__getitem__)
            compiled = args.compiled and backend == "torch"
            auto = auto_hessian_method(
                simdiff.backends.get_backend(backend), p.n, m_out, compiled=compiled
            )
            cells = " | ".join(
                f"{med[m] * 1e3:.3g} ms ({med[m] / med[best]:.2f}x)"
                + (f", compile {first[(name, backend, m)]:.1f} s" if compiled else "")
                if m in med
                else (
                    f"failed: {failed[(name, backend, m)]}" if (name, backend, m) in failed else "-"
                )
                for m in METHODS
            )
            label = torch_label if backend == "torch" else backend
            print(f"| {name} | {p.n} | {m_out} | {label} | {cells} | {best} | {auto} |")
            rows.append({"problem": name, "n": p.n, "m": m_out, "backend": backend, **med})
    return rows


def _methods(n: int, fwd_fwd_max: int) -> tuple[str, ...]:
    return tuple(m for m in METHODS if m != "fwd-fwd" or n <= fwd_fwd_max)


if __name__ == "__main__":
    main()
