"""What :func:`simdiff.compare` returns: one entry per (derivative, configuration)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from simdiff.errors import NotFoundError

__all__ = ["CompareEntry", "CompareResult"]


@dataclass
class CompareEntry:
    """One (derivative, configuration) measurement."""

    derivative: str
    config: str
    status: str = "ok"  # "ok" | "unsupported" | "error"
    error: str = ""
    first_call_s: float = math.nan
    steady_s: float = math.nan  # median over repeats
    steady_q25_s: float = math.nan
    steady_q75_s: float = math.nan
    steady_min_s: float = math.nan
    steady_max_s: float = math.nan
    repeats: int = 0
    inner: int = 1
    peak_rss_mb: float = math.nan
    compilations: int | None = None
    reference: str = ""
    max_abs_err: float = math.nan
    max_rel_err: float = math.nan
    samples: list[float] = field(default_factory=list, repr=False)
    value: Any = field(default=None, repr=False)

    def record(self) -> dict[str, Any]:
        """Plain-dict form (for the store), without the samples and the value."""
        skip = {"samples", "value"}
        return {k: v for k, v in self.__dict__.items() if k not in skip}


@dataclass
class CompareResult:
    """Timings of every (derivative, configuration) pair from one interleaved run."""

    problem: str
    n: int
    batch: int
    baseline: str
    threads: dict[str, Any]
    entries: list[CompareEntry] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """Plain-dict form for the store: baseline, threads, sizes and the entries' records."""
        return {
            "baseline": self.baseline,
            "threads": self.threads,
            "n": self.n,
            "batch": self.batch,
            "entries": [e.record() for e in self.entries],
        }

    def get(self, derivative: str, config: str) -> CompareEntry:
        for e in self.entries:
            if e.derivative == derivative and e.config == config:
                return e
        raise NotFoundError((derivative, config))

    def ratio(self, derivative: str, config: str, *, of: str = "steady_s") -> float:
        """``config``'s time over the baseline's (``> 1``: slower than the baseline)."""
        base = getattr(self.get(derivative, self.baseline), of)
        return getattr(self.get(derivative, config), of) / base if base > 0 else math.nan

    def __str__(self) -> str:
        head = (
            f"compare {self.problem!r} (n={self.n}, batch={self.batch or 1}; "
            f"threads torch={self.threads.get('torch')} xla={self.threads.get('xla')}); "
            f"ratios vs {self.baseline}"
        )
        rows = [
            (
                "derivative",
                "config",
                "first call",
                "steady",
                "IQR",
                "ratio",
                "rss MB",
                "max rel err",
                "status",
            )
        ]
        for e in self.entries:
            ok = e.status == "ok"
            try:
                r = f"{self.ratio(e.derivative, e.config):.2f}" if ok else "-"
            except KeyError:
                r = "-"
            rows.append(
                (
                    e.derivative,
                    e.config,
                    _fmt_s(e.first_call_s),
                    _fmt_s(e.steady_s),
                    f"{_fmt_s(e.steady_q25_s)}..{_fmt_s(e.steady_q75_s)}",
                    r,
                    f"{e.peak_rss_mb:.1f}",
                    f"{e.max_rel_err:.1e}",
                    e.status if ok else f"{e.status}: {e.error[:120]}",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(8)]
        return "\n".join(
            [head]
            + [
                "  ".join(c.ljust(w) for c, w in zip(row[:8], widths, strict=True)) + "  " + row[8]
                for row in rows
            ]
        )


def _fmt_s(t: float) -> str:
    if not math.isfinite(t):
        return "-"
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if t >= f:
            return f"{t / f:.3g} {unit}"
    return f"{t / 1e-9:.3g} ns"
