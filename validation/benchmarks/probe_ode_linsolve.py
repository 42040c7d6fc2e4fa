"""How a stiff step should solve W = I - h gamma J at large n: inverse, LU or block-tridiagonal.

One factorisation of a banded ``W`` (``dim`` states, bandwidth ``--band``) and
eight stage solves, as in a Rodas5P step, then the sum of ``sin`` of the
solutions: the value and its gradient with respect to ``W`` on JAX (jit) and
torch (eager, ``torch.func.grad``), median of ``--repeats`` after one warm-up
(JAX's first call, with the compile, is printed separately).  The three
solves are simdiff's (:func:`simdiff.ode.solvers.rosenbrock._factor`): ``inverse``
(``ops.linalg.solve(W, I)``, a matrix product per stage), ``lu``
(``ops.lu_factor`` / ``ops.lu_solve``) and ``banded`` (block Thomas in blocks
of the bandwidth, :mod:`simdiff.ode._banded`, its blocks gathered from the dense
``W``: in the solvers they come from the compressed Jacobian instead).

    python -m validation.benchmarks.probe_ode_linsolve --dim 2048 --band 64 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

import jax
import numpy as np
import torch

import simdiff.backends.jax  # noqa: F401  (x64)
from simdiff.backends import get_backend, get_ops
from simdiff.evidence._timing import timed
from simdiff.ode._banded import block_tridiagonal_factor
from simdiff.ode.solvers.rosenbrock import _factor


def _timed(fn: Any) -> float:
    return timed(lambda: jax.block_until_ready(fn()))


def _row(be: Any, ops: Any, w: Any, b: Any, how: str, bw: int, repeats: int) -> list[float]:
    """Median value and gradient seconds, then the first calls' seconds, for one solve."""

    def f(a: Any) -> Any:
        banded = lambda: block_tridiagonal_factor(a, bw, ops)  # noqa: E731
        solve = _factor(a, 0.0, 0.0, ops, "probe", how, banded)
        return sum(ops.sum(ops.sin(solve(b[:, k]))) for k in range(8))

    fv, fg = be.jit(f), be.jit(be.grad(f))
    firsts = [_timed(lambda: fv(w)), _timed(lambda: fg(w))]
    tv = statistics.median(_timed(lambda: fv(w)) for _ in range(repeats))
    tg = statistics.median(_timed(lambda: fg(w)) for _ in range(repeats))
    return [tv, tg, *firsts]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--band", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backends", nargs="*", default=["jax", "torch"])
    ap.add_argument("--how", nargs="*", default=["inverse", "lu", "banded"])
    args = ap.parse_args(argv)
    n, bw = args.dim, args.band
    rng = np.random.default_rng(0)
    i, j = np.indices((n, n))
    W = np.eye(n) - 0.05 * np.where(abs(i - j) <= bw, rng.standard_normal((n, n)), 0.0)
    B = rng.standard_normal((n, 8))
    print(f"load: {os.getloadavg()}; torch threads {torch.get_num_threads()}")
    print(f"dim {n}, bandwidth {bw}: one factorisation + 8 stage solves; median of "
          f"{args.repeats} (s)")  # fmt: skip
    print("| backend | solve | value | gradient | first value call | first gradient call |")
    print("|---|---|---|---|---|---|")
    for name in args.backends:
        be, ops = get_backend(name), get_ops(name)
        w, b = ops.asarray(W), ops.asarray(B)
        for how in args.how:
            tv, tg, f1, f2 = _row(be, ops, w, b, how, bw, args.repeats)
            print(f"| {name} | {how} | {tv:.3f} | {tg:.3f} | {f1:.1f} | {f2:.1f} |", flush=True)
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
