"""A pytest plugin that sums, per test process, the time JAX spends making programs.

Run it with the suite (``tests`` on the path, since plugins load before the conftest)::

    PYTHONPATH=tests .venv/bin/python -m pytest -n 2 -p _jax_times

At exit each process (``gw0``, ``gw1``, ``main``) prints one line: its CPU seconds
(user and system, all its threads; ``children``: the processes it started and waited
for, such as Inductor's compiler), and the seconds and counts of three phases of
``jax.jit``'s first calls, from JAX's own duration events (``jax.monitoring``):

- ``compile``: XLA compiling a lowered program (``backend_compile_duration``);
- ``lower``: a jaxpr lowered to an MLIR module (``jaxpr_to_mlir_module_duration``);
- ``trace``: Python traced into a jaxpr (``jaxpr_trace_duration``).  A ``jax.jit``
  called inside another's trace is traced inside it, so its seconds are counted in
  both: the sum bounds tracing from above.

Durations are wall time of the process's thread, as CPU time where the process
has a core to itself (``pytest -n 2`` on 2 cores).
"""

from __future__ import annotations

import atexit
import os
import resource
import sys
from collections import Counter

import pytest

PHASES = {
    "/jax/core/compile/backend_compile_duration": "compile",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/jaxpr_trace_duration": "trace",
}
_SECONDS: Counter[str] = Counter()
_COUNTS: Counter[str] = Counter()


def _timed(event: str, duration: float, **_: object) -> None:
    phase = PHASES.get(event)
    if phase is not None:
        _SECONDS[phase] += duration
        _COUNTS[phase] += 1


def _report() -> None:
    who = os.environ.get("PYTEST_XDIST_WORKER", "main")
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    phases = " ".join(
        f"{phase} {_SECONDS[phase]:.1f} s ({_COUNTS[phase]})" for phase in PHASES.values()
    )
    sys.__stderr__.write(
        f"\nJAX {who} cpu {own.ru_utime + own.ru_stime:.1f} s "
        f"children {kids.ru_utime + kids.ru_stime:.1f} s; {phases}\n"
    )


def pytest_configure(config: pytest.Config) -> None:
    # jax is imported here, not when the plugin loads: tests/conftest.py sets variables
    # that JAX reads at import (before the plugin's hooks run, after it is loaded)
    import jax

    jax.monitoring.register_event_duration_secs_listener(_timed)
    atexit.register(_report)
