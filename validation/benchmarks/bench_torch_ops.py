"""What simdiff's torch ops layer costs over the same function written in plain torch.

The catalogue's Ishigami function and the 38-atom Lennard-Jones cluster
(``simdiff.pes.cluster_energy``: dense pairs, double where) are written a
second time directly against ``torch``, with the same arithmetic.  Both are
differentiated by the same ``torch.func`` transforms (value, gradient,
reverse-over-reverse Hessian), eager, interleaved in one run (configuration
order shuffled each round, median of rounds).  The ratio is the ops layer's
overhead alone: the transforms, the dispatcher and simdiff's ``Derivatives``
bookkeeping are the same on both sides.

    python -m validation.benchmarks.bench_torch_ops --rounds 40
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np
import torch
import torch.func

import problems
import simdiff
from simdiff.evidence._timing import Summary, interleaved


def ishigami_torch(x: torch.Tensor) -> torch.Tensor:
    """problems.sensitivity.ishigami_fn (a=7, b=0.1) in plain torch."""
    return torch.sin(x[0]) + 7.0 * torch.sin(x[1]) ** 2 + 0.1 * x[2] ** 4 * torch.sin(x[0])


def lj_torch(n: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """simdiff.pes.cluster_energy(pair=lennard_jones) for ``n`` atoms in plain torch."""
    offdiag = torch.from_numpy(~np.eye(n, dtype=bool))

    def energy(x: torch.Tensor) -> torch.Tensor:
        pos = x.reshape(n, 3)
        d = pos[:, None, :] - pos[None, :, :]
        r2 = torch.sum(d * d, dim=-1)
        safe = offdiag & (r2 > 0.0)
        r = torch.sqrt(torch.where(safe, r2, 1.0))
        s2 = 1.0 / (r * r)
        s6 = s2 * s2 * s2
        e = 0.5 * torch.sum(torch.where(safe, 4.0 * (s6 * s6 - s6), 0.0))
        coincide = offdiag & (r2 == 0.0)
        blow = torch.inf + torch.sqrt(torch.where(coincide, r2, 1.0))
        return e + 0.5 * torch.sum(torch.where(coincide, blow, 0.0))

    return energy


TRANSFORMS: dict[str, Callable[[Callable], Callable]] = {
    "value": lambda f: f,
    "grad": torch.func.grad,
    "hessian rev-rev": lambda f: torch.func.jacrev(torch.func.jacrev(f)),
}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args(argv)
    ops = simdiff.get_ops("torch")
    cases = {"ishigami": ishigami_torch, "lj38": lj_torch(38)}
    configs: dict[tuple[str, str, str], Callable[[], object]] = {}
    for name, hand in cases.items():
        p = problems.get(name)
        x = torch.from_numpy(p.x0.copy())

        def via_ops(y: torch.Tensor, p: simdiff.Problem = p) -> torch.Tensor:
            return p.fn(y, ops)

        torch.testing.assert_close(via_ops(x), hand(x), rtol=1e-14, atol=0)
        for tname, transform in TRANSFORMS.items():
            for side, f in (("simdiff ops", via_ops), ("plain torch", hand)):
                g = transform(f)
                configs[(name, tname, side)] = lambda g=g, x=x: g(x)
    for fn in configs.values():
        fn()  # warm-up
    times = interleaved(configs, args.rounds)
    rows = []
    print(f"load average {os.getloadavg()}, torch threads {torch.get_num_threads()}")
    print("| problem | transform | simdiff ops ms | plain torch ms | ratio |")
    print("|---|---|---|---|---|")
    for name in cases:
        for tname in TRANSFORMS:
            a = Summary.of(times[(name, tname, "simdiff ops")]).median
            b = Summary.of(times[(name, tname, "plain torch")]).median
            rows.append({"problem": name, "transform": tname, "ops_s": a, "torch_s": b})
            print(f"| {name} | {tname} | {a * 1e3:.3f} | {b * 1e3:.3f} | {a / b:.2f} |")
    return rows


if __name__ == "__main__":
    main()
