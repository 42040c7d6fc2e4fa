"""Where simdiff-torch's ODE gradient spends its time: the tape, not the loop.

Issue 11's Lotka–Volterra misfit (``validation.benchmarks.bench_ode.lv_long``), three
gradients of the same problem in one interleaved run (shuffled order, median of the rounds):

- ``simdiff-torch``: :class:`simdiff.Derivatives` (top-level gradients by
  plain ``torch.autograd``, ``TorchBackend.grad``);
- ``simdiff fn, torch.func.grad``: the same simdiff function (the same
  driver and steps) differentiated by ``torch.func.grad``, the path
  ``Derivatives`` took before;
- ``torchdiffeq``: ``odeint(method="dopri5")`` with plain autograd, as in
  ``validation.benchmarks.bench_ode``.

Besides the medians it counts, once per configuration, the ATen operations
and the autograd nodes evaluated (``torch.profiler``): counts do not depend
on the machine's load, so they show whether simdiff records more work than
torchdiffeq or records the same work more expensively.

    python -m validation.benchmarks.bench_ode_tape --repeats 7
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np
import torch
from torch.profiler import profile

import simdiff
from simdiff.evidence._timing import Summary, interleaved
from validation.benchmarks.bench_ode import lv_long, torchdiffeq_callables


def configurations() -> dict[str, dict[str, Callable[[], object]]]:
    p = lv_long()
    x = torch.tensor(p.x0, dtype=torch.float64)
    d = simdiff.Derivatives(p, backend="torch")
    ops = simdiff.get_ops("torch")

    def func_grad() -> object:
        return torch.func.grad(lambda y: p.fn(y, ops))(x)

    td = torchdiffeq_callables(p, np.linspace(1.0, -0.5, p.n))
    return {
        "simdiff-torch (Derivatives)": {"value": lambda: d.value(x), "grad": lambda: d.grad(x)},
        "simdiff fn, torch.func.grad": {"grad": func_grad},
        "torchdiffeq (autograd)": {"value": td["value"], "grad": td["grad"]},
    }


def counts(fn: Callable[[], object]) -> tuple[int, int]:
    """ATen operations and autograd nodes evaluated by one call."""
    with profile() as prof:
        fn()
    events = prof.key_averages()
    aten = sum(e.count for e in events if e.key.startswith("aten::"))
    nodes = sum(e.count for e in events if e.key.startswith("autograd::engine::evaluate_function"))
    return aten, nodes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"load: {os.getloadavg()}")
    configs = configurations()
    for kinds in configs.values():
        for fn in kinds.values():
            fn()
    flat = {(name, kind): fn for name, kinds in configs.items() for kind, fn in kinds.items()}
    times = interleaved(flat, args.repeats)
    print(f"median of {args.repeats}, interleaved; ms; counts of one gradient call")
    print("| configuration | solve | grad | ATen ops (grad) | autograd nodes (grad) |")
    print("|---|---|---|---|---|")
    for name, kinds in configs.items():
        med = {k: 1e3 * Summary.of(times[(name, k)]).median for k in kinds}
        aten, nodes = counts(kinds["grad"])
        solve = f"{med['value']:.1f}" if "value" in med else "n/a"
        print(f"| {name} | {solve} | {med['grad']:.1f} | {aten} | {nodes} |")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
