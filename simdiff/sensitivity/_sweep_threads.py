"""The intra-op thread count of an in-process sweep, chosen by measuring its chunks."""

from __future__ import annotations

import math
from typing import Any

from simdiff.backends import get_backend

__all__ = ["ThreadTrial"]


class ThreadTrial:
    """One measured choice of intra-op threads for the chunks of an in-process sweep.

    On a backend whose thread count can change at run time (torch), the
    framework's intra-op threads (OpenMP, one per core by default) pay a
    fork/join per operation; on a machine whose cores are busy with other
    work, a sweep's large element-wise operations ran several times slower
    with two threads than with one (docs/performance.md).  So: the first
    three computed chunks (the first pays one-time costs) run with one
    thread, the fourth with the starting count, and the rest with the count
    that was faster (the fourth chunk against the mean of the second and
    third).  The trial comes after three one-thread chunks so that
    ``compile="auto"``, which decides from the median eager time of the
    chunks so far, is not swayed by one slow chunk.
    The starting count is restored when the sweep ends, also on an error.  A
    fourth chunk that ran compiled is no comparison: the starting count is
    kept.  Needs at least 5 chunks and a starting count above 1; the choice
    is reported in ``SweepResult.threads``.
    """

    def __init__(self, backend: str, n_chunks: int) -> None:
        self.backend = get_backend(backend)
        start = self.backend.intra_op_threads()
        self.start = 0 if start is None else start
        self.active = self.start > 1 and n_chunks >= 5
        self.record: dict[str, Any] = {} if start is None else {"start": start}
        self.one: list[float] = []

    def before(self, k: int) -> None:
        if self.active and k in (0, 3):
            self.backend.set_threads(1 if k == 0 else self.start)

    def after(self, k: int, seconds: float, chunk: dict[str, Any]) -> None:
        if not self.active or k not in (1, 2, 3):
            return
        if k < 3:
            self.one.append(seconds)
            return
        one = self.record["one_thread_s"] = sum(self.one) / len(self.one)
        self.record["start_threads_s"] = seconds
        if any(r.get("path") == "compiled" for r in chunk.get("compile_info", ())):
            self.record["reason"] = "the fourth chunk ran compiled: no comparison; start kept"
            one = math.inf
        else:
            at_start = f"{seconds * 1e3:.3g} ms at {self.start} threads"
            self.record["reason"] = f"one chunk: {one * 1e3:.3g} ms at 1 thread, {at_start}"
        self.record["used"] = 1 if one < seconds else self.start
        self.backend.set_threads(self.record["used"])

    def restore(self) -> dict[str, Any]:
        if self.active:
            self.backend.set_threads(self.start)
            self.record.setdefault("used", self.start)
        return self.record
