"""The peak resident-set-size probe :func:`simdiff.compare` measures first calls with."""

from __future__ import annotations

import math
import os
import threading
from typing import Any

__all__ = ["NoProbe", "PeakRSS", "rss"]


def rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return -1


class PeakRSS:
    """Sample the resident set size every ``interval`` seconds in a thread; keep the peak."""

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.base = self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss())
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())

    @property
    def delta_mb(self) -> float:
        return math.nan if self.base < 0 else (self.peak - self.base) / 2**20


class NoProbe:
    """Stands in for :class:`PeakRSS` when memory is not measured."""

    delta_mb = math.nan

    def __enter__(self) -> NoProbe:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None
