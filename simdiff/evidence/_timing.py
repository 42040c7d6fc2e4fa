"""The one timer of ``simdiff compare``, the report and the benchmarks.

Wall-clock seconds by :func:`time.perf_counter`; configurations interleaved
round by round in a shuffled order (load changes hit every configuration
alike, and the one that runs first in a round is measurably slower); a
configuration's steady cost is the median of its rounds, with quartiles.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from simdiff.errors import InputError

__all__ = [
    "CPU_CLOCK",
    "Summary",
    "balanced_orders",
    "first_call",
    "first_call_cpu",
    "interleaved",
    "median_time",
    "timed",
]

K = TypeVar("K", bound=Hashable)

#: The clock of this process's CPU seconds, for ``clock=``: time spent descheduled on a
#: machine with more work than cores does not count (wall-clock time does).
CPU_CLOCK: Callable[[], float] = time.process_time


def timed(
    call: Callable[[], Any], inner: int = 1, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Seconds for ``inner`` calls of ``call`` (one sample) by ``clock`` (wall-clock unless
    told; :data:`CPU_CLOCK` counts this process's CPU seconds only)."""
    start = clock()
    for _ in range(inner):
        call()
    return clock() - start


def first_call(call: Callable[[], Any]) -> tuple[Any, float]:
    """``(result, seconds)`` of one call: for first calls (tracing, compilation)."""
    start = time.perf_counter()
    out = call()
    return out, time.perf_counter() - start


def first_call_cpu(call: Callable[[], Any]) -> tuple[Any, float, float]:
    """``(result, seconds, cpu_seconds)`` of one call; CPU time of this process.

    CPU seconds above wall seconds mean the call ran on several threads (a
    compiler's worker pool, a parallel backend).

    Examples
    --------
    >>> out, wall, cpu = first_call_cpu(lambda: sum(range(1000)))
    >>> out, wall >= 0.0, cpu >= 0.0
    (499500, True, True)
    """
    start, cpu = time.perf_counter(), time.process_time()
    out = call()
    return out, time.perf_counter() - start, time.process_time() - cpu


def median_time(call: Callable[[], Any], repeats: int, inner: int = 1) -> float:
    """Median seconds per call over ``repeats`` samples of ``inner`` calls each."""
    if repeats < 1 or inner < 1:
        raise InputError(f"repeats and inner must be >= 1; got {repeats}, {inner}")
    return statistics.median(timed(call, inner) / inner for _ in range(repeats))


def balanced_orders(n: int) -> list[list[int]]:
    """Orders of ``n`` configurations in which each follows each other equally often.

    A Williams design: the rows ``0, 1, n-1, 2, n-2, ...`` shifted cyclically
    (``n`` rows), with their reverses for odd ``n`` (``2 n`` rows); every
    ordered pair of different configurations is adjacent in exactly one row
    (two for odd ``n``), and every configuration takes every position alike.

    Examples
    --------
    >>> balanced_orders(3)
    [[0, 1, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0], [0, 2, 1], [1, 0, 2]]
    """
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        if len(first) % 2:
            first.append(lo)
            lo += 1
        else:
            first.append(hi)
            hi -= 1
    rows = [[(f + i) % n for f in first] for i in range(n)]
    return rows + [r[::-1] for r in rows] if n % 2 else rows


def interleaved(
    calls: Mapping[K, Callable[[], Any]],
    rounds: int,
    *,
    inner: int | Mapping[K, int] = 1,
    seed: int = 0,
    skip: Callable[[K, int], bool] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[K, list[float]]:
    """Seconds per call of each configuration, one sample per round, in shuffled order.

    ``inner`` calls make one sample (a number, or one per name); ``skip(name,
    round)`` true leaves a configuration out of a round (a slow eager path
    measured in fewer rounds).  Names are any hashable keys (strings, tuples).
    ``clock``: as :func:`timed` (wall-clock unless told).

    Examples
    --------
    >>> calls = {"a": lambda: None, "b": lambda: None}
    >>> t = interleaved(calls, 3, skip=lambda k, r: k == "b" and r > 0)
    >>> {k: len(v) for k, v in t.items()}
    {'a': 3, 'b': 1}
    """
    names = list(calls)
    per = {k: inner if isinstance(inner, int) else inner[k] for k in names}
    out: dict[K, list[float]] = {k: [] for k in names}
    rng = random.Random(seed)
    for r in range(rounds):
        rng.shuffle(names)
        for k in names:
            if skip is not None and skip(k, r):
                continue
            out[k].append(timed(calls[k], per[k], clock) / per[k])
    return out


@dataclass(frozen=True)
class Summary:
    """Median, quartiles and range of a configuration's samples (seconds)."""

    median: float
    q25: float
    q75: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> Summary:
        """The summary of ``samples`` (at least one)."""
        if not samples:
            raise InputError("no samples to summarise")
        s = sorted(samples)
        q = np.quantile(s, [0.25, 0.75])
        return cls(statistics.median(s), float(q[0]), float(q[1]), s[0], s[-1], len(s))
