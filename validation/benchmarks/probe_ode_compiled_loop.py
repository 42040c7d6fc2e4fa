"""The ODE step loop as one compiled graph (torch ``while_loop`` op) against the other paths.

For each problem, in one process, interleaved (``bench_torch.interleaved``,
median of rounds): the gradient (scalar problems) or VJP of

* ``jax``: ``Derivatives(p, "jax")``;
* ``eager``: ``Derivatives(p, "torch")``;
* ``whole``: ``compile=True`` with ``loop_compiles`` switched off here: the
  whole callable compiled;
* ``loop``: ``compile=True`` with the whole step loop one compiled graph
  (``simdiff.ode.solvers.driver._compiled_loop``; Dopri5's and FixedStep's shipped
  path).

Session 6's runs (docs/results/probe_ode_compiled_loop_s6*.txt) had a
``step`` configuration instead of ``whole``: for Dopri5 its step compiled and
the loop on the host (``compiled_stepper``).  That mechanism was removed
after those runs in favour of the loop (one mechanism); the files are the
record of it.

The first call of each compiled configuration is its compile (seconds, the
Inductor cache of this process fresh when run under ``TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)``).
Compiled results are compared with eager and JAX (largest relative difference).

    python -m validation.benchmarks.probe_ode_compiled_loop lotka_volterra_fit ode_rk4_decay
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

import numpy as np

import problems
import simdiff
from simdiff.evidence._accuracy import rel_error
from simdiff.evidence._timing import Summary, first_call

from .bench_torch import interleaved


def _with_mechanism(name: str, loop: bool) -> Any:
    """The catalogue problem, its solver (a copy) compiling its loop (``loop``) or not."""
    p = problems.get(name)
    solver = copy.copy(p.solver)
    object.__setattr__(solver, "loop_compiles", loop)  # frozen dataclass: an instance flag
    p.solver = solver
    return p


def measure(name: str, rounds: int, budget: float) -> list[str]:
    p = problems.get(name)
    u = None if p.is_scalar else np.random.default_rng(0).standard_normal(p.output_shape)

    def call(d: Any) -> Any:
        return d.grad() if p.is_scalar else d.vjp(u)

    ds = {"jax": simdiff.Derivatives(p, "jax"), "eager": simdiff.Derivatives(p, "torch")}
    out, compile_s, what = {}, {}, {}
    for config, loop in (("whole", False), ("loop", True)):
        d = simdiff.Derivatives(_with_mechanism(name, loop), "torch", compile=True)
        try:
            out[config], compile_s[config] = first_call(lambda d=d: call(d))
        except simdiff.UnsupportedError as exc:
            what[config] = f"failed: {str(exc)[:200]}"
            continue
        what[config] = d.cache_info()[0]["compiles"]
        ds[config] = d
    for config in ("jax", "eager"):
        out[config] = call(ds[config])
    times = interleaved({k: (lambda d=d: call(d)) for k, d in ds.items()}, rounds, budget)
    ms = {k: 1e3 * Summary.of(v[1:] or v).median for k, v in times.items()}
    rel = {
        (k, ref): rel_error(out[k], out[ref])
        for k in ("whole", "loop") if k in out for ref in ("eager", "jax")
    }  # fmt: skip
    kind = "grad" if p.is_scalar else "vjp"
    lines = [
        f"{name} {kind}: jax {ms['jax']:.3f} ms, eager {ms['eager']:.2f} ms "
        f"({ms['eager'] / ms['jax']:.1f}x)"
    ]
    for k in ("whole", "loop"):
        if k not in ms:
            lines.append(f"  {k}: {what[k]}")
            continue
        lines.append(
            f"  {k}: {ms[k]:.2f} ms ({ms[k] / ms['jax']:.1f}x JAX, {ms[k] / ms['eager']:.2f}x "
            f"eager), compile {compile_s[k]:.1f} s, vs eager {rel[(k, 'eager')]:.1e}, vs JAX "
            f"{rel[(k, 'jax')]:.1e}; compiles: {what[k]}"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--budget", type=float, default=3.0)
    args = parser.parse_args(argv)
    for name in args.problems:
        for line in measure(name, args.rounds, args.budget):
            print(line, flush=True)


if __name__ == "__main__":
    main()
