"""What every claim experiment shares: the run context and the shape of its result."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ._verdict import Interval

__all__ = ["SPEED_MARGIN", "ClaimsContext", "claim_result", "ms", "us"]

#: "Clearly faster" where the article gives no figure: a ratio interval wholly above 1.5.
SPEED_MARGIN = 1.5


@dataclass
class ClaimsContext:
    """Preset and shared measurements of one claims run.

    ``rounds`` is the number of interleaved rounds each timing uses (the
    bootstrap resamples them); ``cache`` shares measurements between claims
    (C5 reuses C1's torch.compile run).
    """

    quick: bool = True
    cache: dict[str, Any] = field(default_factory=dict)
    rounds: int | None = None

    def pick(self, quick: Any, full: Any) -> Any:
        return quick if self.quick else full

    @property
    def n_rounds(self) -> int:
        return self.rounds if self.rounds is not None else self.pick(9, 21)


def ms(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if math.isfinite(t) else "n/a"


def us(t: float) -> str:
    return f"{t * 1e6:.3g} us" if math.isfinite(t) else "n/a"


def claim_result(
    *,
    measured: str,
    interval: Interval,
    threshold: float,
    ratio_means: str,
    verdict: str,
    series: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
    threads: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON-able claim record the store and the report read."""
    return {
        "measured": measured,
        "ratio": interval.ratio,
        "interval": [interval.lo, interval.hi],
        "rounds": interval.rounds,
        "threshold": threshold,
        "ratio_means": ratio_means,
        "verdict": verdict,
        "series": series or {},
        "details": details or {},
        "threads": threads or {},
    }
