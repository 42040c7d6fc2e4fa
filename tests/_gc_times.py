"""A pytest plugin that times each test process's garbage collections (``gc.callbacks``).

Run it with the suite (``tests`` on the path, since plugins load before the conftest)::

    PYTHONPATH=tests .venv/bin/python -m pytest -n 2 -p _gc_times
    SIMDIFF_GC_THRESHOLDS=700,10,10 PYTHONPATH=tests .venv/bin/python -m pytest -n 2 -p _gc_times

At exit each process (``gw0``, ``gw1``, ``main``) prints one line: the seconds and the
number of its collections per generation, and the thresholds they ran under.
``SIMDIFF_GC_THRESHOLDS`` replaces, when the session starts, the thresholds
tests/conftest.py sets (Python's defaults are 700,10,10).
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import time
from typing import Any

import pytest

_SECONDS = [0.0, 0.0, 0.0]
_COUNTS = [0, 0, 0]
_started = 0.0


def _timed(phase: str, info: dict[str, Any]) -> None:
    global _started
    if phase == "start":
        _started = time.perf_counter()
        return
    generation = info["generation"]
    _SECONDS[generation] += time.perf_counter() - _started
    _COUNTS[generation] += 1


def _report() -> None:
    who = os.environ.get("PYTEST_XDIST_WORKER", "main")
    seconds = [round(s, 2) for s in _SECONDS]
    sys.__stderr__.write(
        f"\nGC {who} seconds {seconds} counts {_COUNTS} thresholds {gc.get_threshold()}\n"
    )


gc.callbacks.append(_timed)
atexit.register(_report)  # after pytest's own last collections (its cleanup)


def pytest_sessionstart(session: pytest.Session) -> None:
    thresholds = os.environ.get("SIMDIFF_GC_THRESHOLDS")
    if thresholds:
        gc.set_threshold(*(int(t) for t in thresholds.split(",")))
