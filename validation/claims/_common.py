"""What every claim experiment shares: the run context and the shape of one measurement."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ClaimsContext", "failed", "ms", "part", "per_round", "us"]


@dataclass
class ClaimsContext:
    """Preset and shared measurements of one claims run in one process.

    ``rounds`` overrides every claim's rounds per process (its record's
    ``rounds`` otherwise); ``cache`` shares measurements between claims
    (C5 reuses C1's torch.compile run); ``process`` numbers the process (1
    for the report's own process, 2, 3, ... for the fresh ones).
    """

    quick: bool = True
    cache: dict[str, Any] = field(default_factory=dict)
    rounds: int | None = None
    process: int = 1

    def pick(self, quick: Any, full: Any) -> Any:
        return quick if self.quick else full

    def n_rounds(self, record: Any) -> int:
        """Rounds per process for ``record`` (a :class:`~._records.ClaimRecord`)."""
        return self.rounds if self.rounds is not None else record.n_rounds(self.quick)


def ms(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if math.isfinite(t) else "n/a"


def us(t: float) -> str:
    return f"{t * 1e6:.3g} us" if math.isfinite(t) else "n/a"


def per_round(fn: Any, *samples: Sequence[float]) -> list[float]:
    """``fn`` applied round by round to paired per-round samples (plain floats, JSON-able)."""
    arrays = [np.asarray(s, dtype=np.float64) for s in samples]
    if len({a.shape for a in arrays}) != 1:
        raise ValueError(f"paired samples need equal lengths; got {[a.shape for a in arrays]}")
    return [float(fn(*vals)) for vals in zip(*arrays, strict=True)]


def part(
    *,
    values: Sequence[float],
    measured: str,
    beside: dict[str, Sequence[float]] | None = None,
    series: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
    threads: dict[str, Any] | None = None,
    failure: str = "",
) -> dict[str, Any]:
    """One process's measurement of a claim: per-round values of its statistic, and context.

    ``values[r]`` is the claim's statistic in round ``r``; ``beside`` holds
    the statistics its record reports beside the verdict, in the same
    per-round form.  Nothing here is a verdict: :func:`validation.claims.decide`
    decides from the parts of every process.
    """
    return {
        "values": [float(v) for v in values],
        "beside": {k: [float(v) for v in vs] for k, vs in (beside or {}).items()},
        "measured": measured,
        "series": series or {},
        "details": details or {},
        "threads": threads or {},
        "failure": failure,
    }


def failed(why: str, measured: str = "") -> dict[str, Any]:
    """A measurement that did not produce the statistic, with the reason."""
    return part(values=[], measured=measured or why, failure=why)
