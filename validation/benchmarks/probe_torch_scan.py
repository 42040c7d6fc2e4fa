"""Can ``ops.scan`` on torch be a loop torch.compile handles?  torch's scan vs an unrolled loop.

A 50-step fixed-length loop (two elementwise ops per step, 8 values), its
gradient by ``torch.func.grad``, eager and under ``torch.compile(fullgraph=True)``:
once as a Python loop (what ``ops.scan`` on torch is, and what Dynamo
unrolls) and once with torch's ``scan`` higher-order op
(``torch._higher_order_ops.scan``).  Prints each outcome and the first
call's seconds (the compile, for the compiled ones).

    python -m validation.benchmarks.probe_torch_scan
"""

from __future__ import annotations

import torch
from torch._higher_order_ops.scan import scan

from simdiff.evidence._timing import first_call

STEPS = 50


def f_loop(x: torch.Tensor) -> torch.Tensor:
    c = x
    for _ in range(STEPS):
        c = torch.sin(c) * 0.9 + 0.1 * c
    return c.sum()


def f_scan(x: torch.Tensor) -> torch.Tensor:
    def step(c: torch.Tensor, _: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c2 = torch.sin(c) * 0.9 + 0.1 * c
        return c2, c2.sum()

    c, _ = scan(step, x, torch.zeros(STEPS, 1))
    return c.sum()


def main() -> None:
    torch.set_default_dtype(torch.float64)
    x = torch.linspace(0.1, 1.0, 8)
    print(f"torch {torch.__version__}; eager loop grad {torch.func.grad(f_loop)(x)[:2]}")
    for name, f in (("scan", f_scan), ("loop", f_loop)):
        for mode in ("eager-grad", "compiled-grad"):
            g = torch.func.grad(f)
            if mode == "compiled-grad":
                g = torch.compile(g, fullgraph=True)
            try:
                out, seconds = first_call(lambda g=g: g(x))
            except Exception as exc:
                print(name, mode, "FAIL", type(exc).__name__, str(exc).splitlines()[0][:200])
                continue
            print(name, mode, "ok", f"{seconds:.1f}s", out[:2], flush=True)


if __name__ == "__main__":
    main()
