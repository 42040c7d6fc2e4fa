"""C9: does PyTorch have native higher-order functional derivatives?"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import simdiff
from simdiff._catalogue import catalogue

from ._common import ClaimsContext, claim_result
from ._measure import measure

# The catalogue as installed (simdiff.problems) or in a checkout (problems).
seed = catalogue("basic").seed

__all__ = ["C9", "c9_verdict"]

#: The higher-order derivatives C9 asks torch.func for.
HIGHER = ("hessian", "hvp", "derivative3")


def c9_verdict(torch_entries: Iterable[tuple[str, str, str]]) -> str:
    """C9's rule from torch's check entries ``(derivative, verdict, message)``.

    - ``confirmed``: torch.func raised "unsupported" for some higher-order derivative;
    - ``refuted``: every higher-order derivative (:data:`HIGHER`) has a passing
      comparison on torch and none failed, errored or was inconclusive;
    - ``depends``: torch.func computed them but some comparison failed;
    - ``not measured`` otherwise (nothing checked: the claim is not decided by
      torch.func merely existing).

    Examples
    --------
    >>> from validation.claims.functional import c9_verdict
    >>> rows = [(d, "pass", "") for d in ("hessian", "hvp", "derivative3")]
    >>> c9_verdict(rows)
    'refuted'
    >>> c9_verdict(rows[:1])[:12]
    'not measured'
    """
    rows = [r for r in torch_entries if r[0].split(".")[0] in HIGHER]
    unsupported = [d for d, v, msg in rows if v in ("error", "n/a") and "Unsupported" in msg]
    if unsupported:
        return f"confirmed: torch.func cannot compute {', '.join(sorted(set(unsupported)))}"
    bad = [d for d, v, _ in rows if v in ("fail", "error", "inconclusive")]
    if bad:
        return f"depends: torch.func computed them, but {', '.join(sorted(set(bad)))} did not check"
    passed = {d.split(".")[0] for d, v, _ in rows if v == "pass"}
    missing = [d for d in HIGHER if d not in passed]
    if missing:
        return f"not measured: torch results for {', '.join(missing)} were not checked"
    return "refuted"


def C9(ctx: ClaimsContext) -> dict[str, Any]:
    """torch.func Hessians, HVPs and nested 3rd derivatives, checked, and timed against JAX.

    The claim is decided by :func:`simdiff.check` of torch's results (against
    SciPy, the exact reference and JAX), not by the existence of torch.func;
    only torch's entries count, so an unrelated JAX failure cannot flip it.
    """
    p = seed(8)
    res = simdiff.check(p, derivatives=("hessian", "hvp", "derivative"), orders=(3,))
    rows = [(e.derivative, e.verdict, e.message) for e in res.entries if e.backend == "torch"]
    verdict = c9_verdict(rows)
    m = measure(p, list(HIGHER), ["jax-jit", "torch-eager"], rounds=ctx.pick(5, 9))
    iv = m.ratio("hessian", "torch-eager", "jax-jit")
    cross = [e for e in res.entries if e.backend == "torch" and e.reference.startswith("cross:")]
    worst = max((e.max_rel_err for e in cross), default=math.nan)
    measured = (
        f"torch.func hessian/hvp/nested 3rd derivative (no loops) checked: torch entries "
        f"{sorted({v for _, v, _ in rows})}, worst relative difference to JAX {worst:.1e}; "
        f"steady torch/JAX: hessian {iv}, hvp {m.ratio('hvp', 'torch-eager', 'jax-jit')}, "
        f"3rd derivative {m.ratio('derivative3', 'torch-eager', 'jax-jit')}"
    )
    return claim_result(
        measured=measured,
        interval=iv,
        threshold=math.nan,
        ratio_means="torch.func / JAX, Hessian (informational; the verdict is the check)",
        verdict=verdict,
        details={"check": str(res), "compare": m.record()},
        threads=m.threads,
    )
