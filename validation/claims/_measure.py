"""Measurements for the claims: simdiff.compare's interleaved rounds, threads counted.

One mechanism times everything: :func:`simdiff.compare` (every configuration
built and called once, then ``rounds`` rounds calling each once in a shuffled
order, one sample per round).  :class:`Measured` adds the ratios with
bootstrap intervals over those paired rounds and the threads each
configuration kept busy, measured as process CPU time over wall time during a
short probe after the timing (so the probe does not disturb the samples).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import simdiff
from simdiff.evidence.compare.run import CONFIGS, Builder, CompareEntry, CompareResult, compare

from ._verdict import Interval, bootstrap_ratio, threads_used

__all__ = ["Measured", "measure", "probe_threads"]

#: Seconds of calls the thread probe runs per configuration (at most PROBE_CALLS calls).
PROBE_S = 0.05
PROBE_CALLS = 200


def probe_threads(call: Callable[[], Any], seconds: float = PROBE_S) -> float:
    """Threads busy during ``call``: process CPU time / wall time over repeated calls."""
    calls, cpu0, t0 = 0, time.process_time(), time.perf_counter()
    while calls < PROBE_CALLS and time.perf_counter() - t0 < seconds:
        call()
        calls += 1
    return threads_used(time.process_time() - cpu0, time.perf_counter() - t0)


@dataclass
class Measured:
    """A compare result with ratio intervals and measured threads per configuration."""

    result: CompareResult
    threads: dict[str, float] = field(default_factory=dict)

    def entry(self, label: str, config: str) -> CompareEntry:
        return self.result.get(label, config)

    def ok(self, label: str, config: str) -> bool:
        return self.entry(label, config).status == "ok"

    def ratio(self, label: str, num: str, den: str, seed: int = 0) -> Interval:
        """Steady time of ``num`` over ``den`` for ``label``, with its bootstrap interval."""
        a, b = self.entry(label, num), self.entry(label, den)
        if a.status != "ok" or b.status != "ok":
            return Interval(math.nan, math.nan, math.nan, 0)
        return bootstrap_ratio(a.samples, b.samples, seed=seed)

    def record(self) -> dict[str, Any]:
        """Plain-dict form: entries (with samples), framework threads, measured threads."""
        entries = []
        for e in self.result.entries:
            rec = e.record()
            rec["samples"] = list(e.samples)
            entries.append(rec)
        return {"entries": entries, "threads": self.result.threads, "busy": self.threads}


def measure(
    problem: simdiff.Problem,
    labels: Sequence[str],
    configs: Sequence[str],
    *,
    rounds: int,
    x: Any = None,
    builders: Mapping[str, Builder] | None = None,
    memory: bool = False,
) -> Measured:
    """Time ``labels`` under ``configs`` in one interleaved run; count threads afterwards."""
    table = {**CONFIGS, **(builders or {})}
    kept: dict[tuple[str, str], Callable[[], Any]] = {}

    def keeping(name: str) -> Builder:
        def build(p: simdiff.Problem, task: Any) -> Callable[[], Any]:
            call = table[name](p, task)
            kept[(name, task.label)] = call
            return call

        return build

    wrapped = {name: keeping(name) for name in configs}
    r = compare(
        problem, labels, list(configs), x=x, repeats=rounds, builders=wrapped, memory=memory
    )
    out = Measured(r)
    for (name, label), call in kept.items():
        if r.get(label, name).status == "ok":
            out.threads[f"{label} {name}"] = probe_threads(call)
    return out
