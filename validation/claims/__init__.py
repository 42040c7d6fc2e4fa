"""The experiments behind the claims table (shared/claims.md), one function per claim.

Each ``C<k>(ctx)`` measures on this machine, in this run, and returns a plain
dict (JSON-able, stored in the HDF5 store)::

    {"id", "claim", "article", "measured", "ratio", "interval", "rounds",
     "threshold", "ratio_means", "verdict", "series", "details", "threads"}

``ratio`` is the statistic the verdict is decided on (its meaning in
``ratio_means``), ``interval`` its bootstrap interval over interleaved
rounds, ``threshold`` the article's figure it is compared with; ``verdict``
is ``confirmed``, ``refuted``, ``depends: ...`` or ``not measured: ...``
(:mod:`validation.claims._verdict`).  ``threads`` holds the threads each
timed configuration kept busy (process CPU time / wall time).

Modules by claim family: :mod:`.speed` (C1, C3, C5), :mod:`.batching` (C2,
C4), :mod:`.overhead` (C6, C7, C8), :mod:`.functional` (C9).  C8 is not
the article's scan claim restated for JAX alone: it is one of its figures.
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable
from typing import Any

from ._common import SPEED_MARGIN, ClaimsContext
from .batching import C2, C4
from .functional import C9
from .overhead import C6, C7, C8, memory_probe
from .speed import C1, C3, C5

__all__ = ["CLAIMS", "SPEED_MARGIN", "ClaimsContext", "memory_probe", "run_claim"]

_TEXT = {
    "C1": (
        "Batched 2nd/3rd derivatives of sin(x^2)+exp(cos(x)): JAX faster",
        "JAX < 1 ms (batched 3rd derivative); PyTorch 8 ms",
    ),
    "C2": (
        "vmap batches per-environment loops; PyTorch needs manual batching",
        "JAX 3200 FPS vs PyTorch 1400 FPS (2.3x) at batch 64",
    ),
    "C3": (
        "JIT: slow first call, fast later calls; matters when models are reset often",
        "JAX ~800 ms first, ~10 ms after; torch ~15 ms",
    ),
    "C4": ("Changing input sizes force recompilation; JAX slower then", "qualitative"),
    "C5": ("torch.compile narrows the gap", "1.5-2x (CNN/Transformer)"),
    "C6": ("PyTorch eager pays a per-op dispatch cost", "5-10 us per op (GPU)"),
    "C7": ("Functional style lets XLA save memory", "18% less memory"),
    "C8": ("lax.scan instead of Python loops raises compile time", "+20% compile time"),
    "C9": ("PyTorch has no native higher-order functional derivatives", "qualitative"),
}
CLAIMS: dict[str, Callable[[ClaimsContext], dict[str, Any]]] = {
    "C1": C1,
    "C2": C2,
    "C3": C3,
    "C4": C4,
    "C5": C5,
    "C6": C6,
    "C7": C7,
    "C8": C8,
    "C9": C9,
}


def run_claim(cid: str, ctx: ClaimsContext) -> dict[str, Any]:
    """Run one claim's experiment; a failure is recorded as the verdict, with its error."""
    claim, article = _TEXT[cid]
    start = time.perf_counter()
    try:
        out = CLAIMS[cid](ctx)
    except Exception as exc:  # an experiment that breaks is reported, not hidden
        out = {
            "measured": f"experiment failed: {type(exc).__name__}: {str(exc)[:300]}",
            "ratio": math.nan,
            "interval": [math.nan, math.nan],
            "rounds": 0,
            "threshold": math.nan,
            "ratio_means": "",
            "verdict": "not measured (error)",
            "series": {},
            "details": {},
            "threads": {},
        }
    out.update(
        id=cid,
        claim=claim,
        article=article,
        seconds=time.perf_counter() - start,
        maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    return out
