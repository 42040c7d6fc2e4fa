"""Thread settings of the frameworks, read and set without importing them needlessly.

XLA fixes its CPU thread pool when jax is imported, so the single-threaded
setting has to go into ``XLA_FLAGS`` before that; torch's intra-op threads can
change at any time.  These functions are the one place that knows this.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["SINGLE_THREAD_XLA_FLAGS", "thread_info", "xla_threads"]

#: What ``XLA_FLAGS`` needs (before jax is imported) for single-threaded XLA on CPU.
SINGLE_THREAD_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def _affinity() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def xla_threads() -> int:
    """XLA's CPU threads: 1 if ``XLA_FLAGS`` makes it single-threaded, else every core allowed."""
    return 1 if "intra_op_parallelism_threads=1" in os.environ.get("XLA_FLAGS", "") else _affinity()


def thread_info() -> dict[str, Any]:
    """Thread counts in effect: torch intra-/inter-op (if torch is loaded), XLA's, equal?

    Examples
    --------
    >>> from simdiff.backends import thread_info
    >>> sorted(thread_info())[:3]
    ['OMP_NUM_THREADS', 'XLA_FLAGS', 'affinity']
    """
    torch = sys.modules.get("torch")
    torch_n = torch.get_num_threads() if torch is not None else None
    xla = xla_threads()
    return {
        "torch": torch_n,
        "torch_interop": torch.get_num_interop_threads() if torch is not None else None,
        "xla": xla,
        "affinity": _affinity(),
        "cpu_count": os.cpu_count(),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
        "equal": torch_n == xla,
    }
