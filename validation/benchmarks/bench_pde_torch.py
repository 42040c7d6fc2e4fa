"""The PDE catalogue rows, eager only: JAX (jit) against torch.func eager, interleaved.

``validation.benchmarks.bench_torch`` times torch compiled too, and since ``simdiff.pde`` is
traceable by
Dynamo a compile of an 80- or 100-step ETDRK4 solve (unrolled) takes longer than its per-problem
timeout, which then loses the row's eager numbers as well.  This runs the same derivatives
(``bench_torch._derivatives``: gradient, HVP, Hessian with the backend's ``method="auto"``) in
three configurations per round, order shuffled, median of rounds:
``Derivatives(p, "jax")``, ``Derivatives(p, "torch")`` at torch's default intra-op threads, and
the same torch object with ``torch.set_num_threads(1)`` around each call (the thread count is
the process's, set and restored per call), to show what torch's thread pool costs on tensors
just above its parallel grain.

    python -m validation.benchmarks.bench_pde_torch heat_modes heat_diffusivity ks_field \
        burgers_colehopf
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import torch

import problems
import simdiff
from simdiff.evidence._timing import Summary
from validation.benchmarks.bench_torch import _derivatives, _timed, interleaved


def _one_thread(call: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return call()
        finally:
            torch.set_num_threads(before)

    return run


def measure(name: str, rounds: int, budget: float) -> list[dict[str, Any]]:
    """Median seconds per derivative and configuration for one catalogue problem."""
    p = problems.get(name)
    jax_d = simdiff.Derivatives(p, "jax", check_finite=False)
    torch_d = simdiff.Derivatives(p, "torch", check_finite=False)
    calls: dict[tuple[str, str], Callable[[], Any]] = {}
    for kind, call in _derivatives(p).items():
        calls[(kind, "jax")] = lambda c=call: c(jax_d)
        calls[(kind, "torch")] = lambda c=call: c(torch_d)
        calls[(kind, "torch_1thread")] = _one_thread(lambda c=call: c(torch_d))
    for fn in calls.values():  # first calls: jit, caches
        _timed(fn)
    times = interleaved(calls, rounds, budget)
    rows = []
    for kind in _derivatives(p):
        row: dict[str, Any] = {"problem": name, "derivative": kind}
        for config in ("jax", "torch", "torch_1thread"):
            row[config] = Summary.of(times[(kind, config)]).median
            row[f"{config}_rounds"] = len(times[(kind, config)])
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+", help="catalogue names")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per configuration")
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, default intra-op threads {torch.get_num_threads()}")
    print("| problem | derivative | JAX ms | torch eager ms | torch / JAX | 1 thread / JAX |")
    print("|---|---|---|---|---|---|")
    for name in args.problems:
        for r in measure(name, args.rounds, args.budget):
            j, t, t1 = r["jax"], r["torch"], r["torch_1thread"]
            print(
                f"| {name} | {r['derivative']} | {j * 1e3:.3g} | {t * 1e3:.3g} | "
                f"{t / j:.1f} | {t1 / j:.1f} |",
                flush=True,
            )
    print(f"\nLoad average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
