"""The peak resident-set-size probe :func:`simdiff.compare` measures first calls with."""

from __future__ import annotations

import ctypes
import math
import os
import threading
from typing import Any

__all__ = ["NoProbe", "PeakRSS", "release_free_memory", "rss"]


def rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return -1


def release_free_memory() -> bool:
    """Return the C heap's free memory to the system (glibc's ``malloc_trim(0)``).

    Memory a process freed can stay resident in the allocator's heap, and a later
    allocation reuses it without raising the resident set size: a peak-RSS increase
    measured after an earlier call then depends on what that call left behind (torch's
    Hessian of the 1000-input seed function: 0.01 MB to 61 MB over seven fresh
    processes, with the 7.6 MB result among its allocations).  Called before a
    measurement, the increase counts the memory the measured call itself takes.
    False where the C library has no ``malloc_trim`` (not glibc), or where the process's
    own symbols cannot be opened (Windows: ``CDLL(None)`` raises TypeError).
    """
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return True


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
