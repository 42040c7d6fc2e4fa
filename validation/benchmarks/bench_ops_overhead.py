"""Per-call cost of TorchOps' scalar-accepting wrappers on the tensor-tensor path.

``ops.exp`` and friends accept Python and numpy scalars on torch by a thin
wrapper (simdiff/backends/torch.py); this measures what the wrapper costs when
every operand is already a tensor.  Raw ``torch.<op>`` and ``ops.<op>``
alternate in one run (300 rounds of 500 calls each, in a shuffled order,
64-element float64 tensors); the minimum per-call time (load only ever adds time) and the ratio
of the medians are printed.

Run from the repository root: ``python validation/benchmarks/bench_ops_overhead.py``.
"""

from __future__ import annotations

import torch

from simdiff.backends.torch import TorchOps
from simdiff.evidence._timing import Summary, interleaved


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
        t = interleaved({"raw": raw, "ops": wrapped}, rounds, inner=500)
        s_raw, s_ops = Summary.of(t["raw"]), Summary.of(t["ops"])
        lo_raw, lo_ops = 1e9 * s_raw.min, 1e9 * s_ops.min
        ratio = s_ops.median / s_raw.median
        print(
            f"{name:8s} min: torch.{name} {lo_raw:.0f} ns, ops.{name} {lo_ops:.0f} ns "
            f"(+{lo_ops - lo_raw:.0f} ns); median ratio {ratio:.3f}"
        )


if __name__ == "__main__":
    main()
