"""What a torch Rosenbrock step costs: the LU reverse pass against the inverse, and jacfwd.

Prints the mean time per call over ``--repeats`` calls (the mean, not the median: on
loaded cores the cost of an intra-op parallel region is rare long waits):

- ``torch.triu`` of an 8x8 matrix with torch's intra-op threads and with one thread;
- forward + backward of ``x = A^-1 b`` for an 8x8 ``A`` by ``lu_factor`` + ``lu_solve``
  and by ``linalg.inv`` then a product (what ``ops.linalg.solve`` is on torch);
- the HIRES right-hand side's forward-mode Jacobian (``torch.func.jacfwd``) with its
  12 rate constants closed over, and with them passed into the ``jvp`` with zero
  tangents (``ops.jacfwd(fn)(z, p)``).

    python -m validation.benchmarks.probe_torch_rosenbrock --repeats 200
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import torch

import problems.ode as po
import simdiff
from simdiff.evidence._timing import timed


def per_call(fn: Callable[[], object], repeats: int) -> float:
    fn()
    return timed(fn, repeats) / repeats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)
    r = args.repeats
    f64 = torch.float64
    print(f"torch {torch.__version__}, intra-op threads {torch.get_num_threads()}, "
          f"load {os.getloadavg()}")  # fmt: skip
    a = torch.randn(8, 8, dtype=f64) + 8 * torch.eye(8, dtype=f64)
    b = torch.ones(8, 1, dtype=f64)
    threads = torch.get_num_threads()
    rows = []
    for n in sorted({threads, 1}, reverse=True):
        torch.set_num_threads(n)
        rows.append((f"triu, 8x8, {n} thread(s)", per_call(lambda: torch.triu(a), r)))
    torch.set_num_threads(threads)

    def lu() -> None:
        ar = a.clone().requires_grad_(True)
        torch.linalg.lu_solve(*torch.linalg.lu_factor(ar), b).sum().backward()

    def inv() -> None:
        ar = a.clone().requires_grad_(True)
        (torch.linalg.inv(ar) @ b).sum().backward()

    rows.append(("A^-1 b forward + backward, lu_factor + lu_solve", per_call(lu, r)))
    rows.append(("A^-1 b forward + backward, linalg.inv @ b", per_call(inv, r)))
    ops = simdiff.get_ops("torch")
    z = torch.cat([torch.zeros(1, dtype=f64), torch.tensor(po.HIRES_Y0)])
    k = torch.tensor(po.HIRES_K)

    def closed() -> object:
        return torch.func.jacfwd(lambda zz: po.hires_rhs(zz[0], zz[1:], k, ops))(z)

    def passed() -> object:
        return ops.jacfwd(lambda zz, kk: po.hires_rhs(zz[0], zz[1:], kk, ops))(z, k)

    assert torch.equal(closed(), passed())
    rows.append(("HIRES df/d(t, y), rate constants closed over", per_call(closed, r)))
    rows.append(("HIRES df/d(t, y), rate constants passed (ops.jacfwd)", per_call(passed, r)))
    print(f"mean of {r} calls; ms per call")
    print("| what | ms |")
    print("|---|---|")
    for what, t in rows:
        print(f"| {what} | {1e3 * t:.3f} |")


if __name__ == "__main__":
    main()
