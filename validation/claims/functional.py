"""C9: does PyTorch have native higher-order functional derivatives?"""

from __future__ import annotations

import math
from typing import Any

import simdiff
from simdiff.core.catalogue import catalogue

from ._common import ClaimsContext, part
from ._measure import measure
from ._records import RECORDS

# The catalogue as installed (simdiff.problems) or in a checkout (problems).
seed = catalogue("basic").seed

__all__ = ["C9"]


def C9(ctx: ClaimsContext) -> dict[str, Any]:
    """torch.func Hessians, HVPs and nested 3rd derivatives, checked, and timed against JAX.

    A fact, decided by :func:`simdiff.check` of torch's results (against
    SciPy, the exact reference and JAX; :func:`~._records.decide_fact`), not
    by the existence of torch.func; only torch's entries count, so an
    unrelated JAX failure cannot flip it.  The check rows travel in
    ``details["checks"]``; torch / JAX steady times are reported beside.
    """
    p = seed(8)
    res = simdiff.check(p, derivatives=("hessian", "hvp", "derivative"), orders=(3,))
    rows = [[e.derivative, e.verdict, e.message] for e in res.entries if e.backend == "torch"]
    higher = list(RECORDS["C9"].beside)
    m = measure(p, higher, ["jax-jit", "torch-eager"], rounds=ctx.n_rounds(RECORDS["C9"]) + 2)
    ratios = {k: m.ratio(k, "torch-eager", "jax-jit") for k in higher}
    cross = [e for e in res.entries if e.backend == "torch" and e.reference.startswith("cross:")]
    worst = max((e.max_rel_err for e in cross), default=math.nan)
    measured = (
        f"torch.func hessian/hvp/nested 3rd derivative (no loops) checked: torch entries "
        f"{sorted({v for _, v, _ in rows})}, worst relative difference to JAX {worst:.1e}; "
        "steady torch/JAX: " + ", ".join(f"{k} {iv}" for k, iv in ratios.items())
    )
    return part(
        values=[],
        measured=measured,
        details={"checks": rows, "check": str(res), "compare": m.record()},
        threads=m.threads,
    )
