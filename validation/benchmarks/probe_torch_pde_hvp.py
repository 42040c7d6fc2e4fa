"""Probe: the fastest torch.func HVP and Hessian of ks_field and burgers_colehopf.

Issue 14 (PDE rows): the torch HVP (reverse over reverse, ``TorchBackend.hvp_method``) ran
12.5x-12.8x JAX's and the Hessians 4.2x (ks_field, n = 128) and 15.3x (burgers_colehopf, n = 1).
This times, interleaved (``bench_torch.interleaved``, median of rounds), eager torch.func:

- HVP: ``rev-rev`` (``grad`` of ``<grad f, v>``, simdiff's) and ``fwd-rev`` (``jvp`` of ``grad``);
- Hessian (ks_field): ``jacrev(jacrev f)`` (simdiff's rev-rev), ``jacfwd(jacrev f)``, and
  ``vmap`` of the rev-rev HVP over the basis (the same as jacrev(grad) up to chunking);
- JAX's (simdiff, jit) for reference,

and checks each against simdiff's torch result (largest difference relative to the largest entry).

    python -m validation.benchmarks.probe_torch_pde_hvp [--rounds 10] [--budget 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.func as tf

import problems
import simdiff
from simdiff.evidence._accuracy import rel_error
from simdiff.evidence._timing import Summary
from validation.benchmarks.bench_torch import interleaved


def rel(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return rel_error(a, b)


def measure(name: str, rounds: int, budget: float) -> None:
    """Check and time every construction for one catalogue problem; print two tables."""
    ops = simdiff.get_ops("torch")
    p = problems.get(name)
    dj = simdiff.Derivatives(p, "jax", check_finite=False)
    dt = simdiff.Derivatives(p, "torch", check_finite=False)
    x = torch.tensor(np.asarray(p.x0, dtype=float))
    v_np = np.random.default_rng(0).standard_normal(p.n)
    v = torch.tensor(v_np)

    def f(y: torch.Tensor) -> torch.Tensor:
        return p.fn(y, ops)

    g = tf.grad(f)

    def hvp_rr(v: torch.Tensor) -> torch.Tensor:
        return tf.grad(lambda y: torch.sum(g(y) * v))(x)

    calls: dict[str, Callable[[], Any]] = {
        "hvp jax": lambda: dj.hvp(v_np),
        "hvp simdiff torch": lambda: dt.hvp(v_np),
        "hvp rev-rev": lambda: hvp_rr(v),
        "hvp fwd-rev": lambda: tf.jvp(g, (x,), (v,))[1],
    }
    refs = {"hvp": np.asarray(dt.hvp(v_np))}
    if p.n > 1:
        calls.update({
            "hessian jax": dj.hessian,
            "hessian simdiff torch": dt.hessian,
            "hessian jacfwd(jacrev)": lambda: tf.jacfwd(tf.jacrev(f))(x),
            "hessian vmap rev-rev hvp": lambda: tf.vmap(hvp_rr)(torch.eye(p.n)),
        })  # fmt: skip
        refs["hessian"] = np.asarray(dt.hessian())
    print(f"\n## {name} (n = {p.n})")
    print("| call | vs simdiff torch |")
    print("|---|---|")
    for k, call in calls.items():
        out = call()
        print(f"| {k} | {rel(np.asarray(out), refs[k.split()[0]]):.1e} |")
    times = interleaved(calls, rounds, budget)
    print("\n| call | median ms | / JAX | samples |")
    print("|---|---|---|---|")
    for k, ts in times.items():
        ms = Summary.of(ts[1:] or ts).median * 1e3
        jax_ms = Summary.of(times[k.split()[0] + " jax"][1:]).median * 1e3
        print(f"| {k} | {ms:.3g} | {ms / jax_ms:.2f} | {len(ts) - 1} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--budget", type=float, default=3.0)
    parser.add_argument("--cases", nargs="+", default=["ks_field", "burgers_colehopf"])
    parser.add_argument(
        "--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)"
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for name in args.cases:
        measure(name, args.rounds, args.budget)
    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
