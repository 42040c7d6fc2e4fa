"""torch's reverse-over-reverse Hessian of a scalar problem: ``jacrev(jacrev f)`` vs ``n`` HVPs.

For each entry, interleaved, the median of 7 calls after a warm-up, with
``simdiff.core.builders.HVP_HESSIAN_MAX_N`` set to 0 (always ``jacrev(jacrev f)``) and
to 8 (``n`` reverse-over-reverse HVPs stacked, up to n = 8); the better of
two rounds each.  The measured rule (one HVP where n = 1) is in
docs/performance.md.

    python -m validation.benchmarks.bench_torch_hessian_hvps
"""

from __future__ import annotations

import torch

import problems
import simdiff
import simdiff.core.builders as api
from validation.benchmarks.bench_torch import median_ms

ENTRIES = (
    "seed", "heat_diffusivity", "burgers_colehopf", "ode_rk4_decay", "muller-brown",
    "ishigami", "rosenbrock4", "ode_linear_energy", "lotka_volterra_fit", "heat_modes",
)  # fmt: skip


def main() -> None:
    keep = api.HVP_HESSIAN_MAX_N
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} threads; ms, median of 7, best of 2 rounds")
    print()
    print("| entry | n | jacrev(jacrev f) | n HVPs | ratio | max abs difference |")
    print("|---|---|---|---|---|---|")
    try:
        for name in ENTRIES:
            p = problems.get(name)
            x = torch.tensor(p.x0, dtype=torch.float64)
            times: dict[int, list[float]] = {0: [], 8: []}
            values = {}
            for limit in (0, 8, 0, 8):
                api.HVP_HESSIAN_MAX_N = limit
                d = simdiff.Derivatives(p, "torch")
                times[limit].append(median_ms(lambda d=d, x=x: d.hessian(x, method="rev-rev"), 7))
                values[limit] = d.hessian(x, method="rev-rev")
            a, b = min(times[0]), min(times[8])
            diff = float((values[0] - values[8]).abs().max())
            print(f"| {name} | {p.n} | {a:.3g} | {b:.3g} | {b / a:.2f} | {diff:.1e} |", flush=True)
    finally:
        api.HVP_HESSIAN_MAX_N = keep


if __name__ == "__main__":
    main()
