"""What one operation costs under torch's forward mode, by what its operands are.

Under ``torch.func.jvp`` (and ``torch.autograd.forward_ad``) an operation
between a dual tensor and a value without a tangent (a Python number, a
constant tensor) gives the missing tangent as an "efficient zero tensor";
arithmetic on those computes its output's shape through the operation's meta
kernel, which for ``mul``/``add`` is Python (``torch._refs``, registered by
``torch/_meta_registrations.py``).  This probe times, per operation, on a
2-element float64 vector: eager; under ``torch.func.vjp`` (reverse); under
``torch.func.jvp`` with both operands dual, and with one constant; the zero
tensor's arithmetic alone; and counts the Python ``torch._refs`` calls per
operation (0 on the fast paths).  It is the measured reason simdiff's
torch rules avoid forward-over-reverse where reverse-over-reverse will do
(docs/performance.md, "Forward mode on torch").

    python -m validation.benchmarks.probe_torch_forward_ad
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch._prims_common as prims_common

from simdiff.evidence._timing import median_time

REPS = 200
ROUNDS = 5

_refs_calls = [0]
_elementwise_dtypes = prims_common.elementwise_dtypes


def _counting(*args: object, **kwargs: object) -> object:
    _refs_calls[0] += 1
    return _elementwise_dtypes(*args, **kwargs)


def _per_op(run: Callable[[], object]) -> tuple[float, float]:
    """(median microseconds per operation over ROUNDS, torch._refs calls per operation)."""
    run()
    _refs_calls[0] = 0
    us = median_time(run, ROUNDS) / REPS * 1e6
    return us, _refs_calls[0] / (ROUNDS * REPS)


def main() -> None:
    prims_common.elementwise_dtypes = _counting  # type: ignore[assignment]
    x = torch.rand(2, dtype=torch.float64)
    c = torch.full((2,), 2.0, dtype=torch.float64)
    zero = torch._efficientzerotensor(2, dtype=torch.float64)
    ops: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "x * x (both dual)": lambda x: x * x,
        "x + x (both dual)": lambda x: x + x,
        "x[0] * x[1] (both dual)": lambda x: x[0] * x[1],
        "x * 2.0 (Python number)": lambda x: x * 2.0,
        "x + 2.0 (Python number)": lambda x: x + 2.0,
        "x * c (constant tensor)": lambda x: x * c,
        "sin(x)": torch.sin,
    }
    print(f"torch {torch.__version__}; microseconds per operation, median of {ROUNDS} x {REPS}")
    print()
    print("| operation | eager | vjp (reverse) | jvp (forward) | torch._refs calls / op (jvp) |")
    print("|---|---|---|---|---|")
    for name, op in ops.items():

        def loop(y: torch.Tensor, op: Callable[[torch.Tensor], torch.Tensor] = op) -> torch.Tensor:
            out = y
            for _ in range(REPS):
                out = op(y)
            return out

        eager, _ = _per_op(lambda: loop(x))
        rev, _ = _per_op(lambda: torch.func.vjp(loop, x))
        fwd, refs = _per_op(lambda: torch.func.jvp(loop, (x,), (x,)))
        print(f"| {name} | {eager:.1f} | {rev:.1f} | {fwd:.1f} | {refs:.1f} |")
    print()
    print("The zero tensor alone (what forward mode builds for a missing tangent):")
    print()
    print("| operation | microseconds | torch._refs calls / op |")
    print("|---|---|---|")
    for name, zop in {
        "zero * 2.0": lambda: zero * 2.0,
        "zero * x": lambda: zero * x,
        "zero + x": lambda: zero + x,
        "x * 2.0 (plain, for scale)": lambda: x * 2.0,
    }.items():

        def zloop(zop: Callable[[], torch.Tensor] = zop) -> None:
            for _ in range(REPS):
                zop()

        us, refs = _per_op(zloop)
        print(f"| {name} | {us:.1f} | {refs:.1f} |")


if __name__ == "__main__":
    main()
