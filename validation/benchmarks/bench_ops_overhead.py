"""Per-call cost of TorchOps' scalar-accepting wrappers on the tensor-tensor path.

``ops.exp`` and friends accept Python and numpy scalars on torch by a thin
wrapper (simdiff/backends/torch.py); this measures what the wrapper costs when
every operand is already a tensor.  Raw ``torch.<op>`` and ``ops.<op>``
alternate in one run (300 rounds of 500 calls each, 64-element float64
tensors); the minimum per-call time (load only ever adds time) and the ratio
of the medians are printed.

Run from the repository root: ``python validation/benchmarks/bench_ops_overhead.py``.
"""

from __future__ import annotations

import statistics
import time

import torch

from simdiff.backends.torch import TorchOps


def _per_call_ns(fn, n: int = 500) -> float:
    start = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - start) / n


def main(rounds: int = 300) -> None:
    ops = TorchOps()
    x = torch.linspace(0.1, 1.0, 64, dtype=torch.float64)
    y = x + 0.1
    pairs = {
        "exp": (lambda: torch.exp(x), lambda: ops.exp(x)),
        "maximum": (lambda: torch.maximum(x, y), lambda: ops.maximum(x, y)),
        "atan2": (lambda: torch.atan2(x, y), lambda: ops.atan2(x, y)),
    }
    for name, (raw, wrapped) in pairs.items():
        t_raw, t_ops = [], []
        for _ in range(rounds):
            t_raw.append(_per_call_ns(raw))
            t_ops.append(_per_call_ns(wrapped))
        lo_raw, lo_ops = min(t_raw), min(t_ops)
        ratio = statistics.median(t_ops) / statistics.median(t_raw)
        print(
            f"{name:8s} min: torch.{name} {lo_raw:.0f} ns, ops.{name} {lo_ops:.0f} ns "
            f"(+{lo_ops - lo_raw:.0f} ns); median ratio {ratio:.3f}"
        )


if __name__ == "__main__":
    main()
