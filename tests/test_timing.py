"""The one timer (simdiff/evidence/_timing.py) and the benchmarks that use it.

No timing asserts: the calls timed here record the order they ran in, and the
statistics are checked on given samples.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

import numpy as np
import pytest

from simdiff.evidence._timing import (
    CPU_CLOCK,
    Summary,
    first_call,
    first_call_cpu,
    interleaved,
    median_time,
    timed,
)

BENCHMARKS = Path(__file__).resolve().parents[1] / "validation" / "benchmarks"

#: Benchmarks still reading the clock themselves, each with why; shrink as they move over.
ALLOWED: dict[str, str] = {}

CLOCKS = {"perf_counter", "perf_counter_ns", "process_time", "process_time_ns", "monotonic"}


def _clock_reads(path: Path) -> list[int]:
    """Lines where ``path`` reads a clock of :mod:`time` directly."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in CLOCKS:
            if isinstance(node.value, ast.Name) and node.value.id == "time":
                lines.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            if any(a.name in CLOCKS for a in node.names):
                lines.append(node.lineno)
    return lines


def test_benchmarks_time_through_the_one_timer() -> None:
    reads = {p.name: _clock_reads(p) for p in sorted(BENCHMARKS.glob("*.py"))}
    own = {name: lines for name, lines in reads.items() if lines and name not in ALLOWED}
    assert not own, f"read the clock themselves (use simdiff.evidence._timing): {own}"
    stale = sorted(name for name in ALLOWED if not reads.get(name))
    assert not stale, f"no longer read the clock: remove from ALLOWED: {stale}"


def test_the_clock_scan_finds_direct_reads(tmp_path: Path) -> None:
    f = tmp_path / "b.py"
    f.write_text("import time\nfrom time import process_time\nt = time.perf_counter()\n")
    assert sorted(_clock_reads(f)) == [2, 3]
    f.write_text("import time\ntime.time()\ntime.sleep(0)\n")
    assert _clock_reads(f) == []


def test_interleaved_shuffles_and_gives_every_configuration_its_rounds() -> None:
    ran: list[str] = []
    calls = {k: (lambda k=k: ran.append(k)) for k in "abcdef"}
    t = interleaved(calls, 8, seed=3)
    assert {k: len(v) for k, v in t.items()} == dict.fromkeys("abcdef", 8)
    assert all(s >= 0.0 for v in t.values() for s in v)
    rounds = [ran[6 * r : 6 * r + 6] for r in range(8)]
    assert all(sorted(r) == list("abcdef") for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1, "the order is never shuffled"
    firsts = {r[0] for r in rounds}
    assert len(firsts) > 1, "the same configuration always runs first"
    ran.clear()
    interleaved(calls, 8, seed=3)
    assert [ran[6 * r : 6 * r + 6] for r in range(8)] == rounds, "not reproducible by seed"


def test_interleaved_inner_calls_and_skip() -> None:
    count = {"a": 0, "b": 0}

    def bump(k: str) -> None:
        count[k] += 1

    keys = {("a", 1): lambda: bump("a"), ("b", 2): lambda: bump("b")}  # tuple names
    t = interleaved(
        keys, 5, inner={("a", 1): 3, ("b", 2): 1}, skip=lambda k, r: k[0] == "b" and r >= 2
    )
    assert len(t[("a", 1)]) == 5 and len(t[("b", 2)]) == 2
    assert count == {"a": 15, "b": 2}


def test_interleaved_reads_the_clock_it_is_given() -> None:
    ticks = iter(range(100))
    t = interleaved({"a": lambda: None}, 3, inner=2, clock=lambda: 10.0 * next(ticks))
    assert t == {"a": [5.0, 5.0, 5.0]}  # one tick of 10 per sample of 2 calls
    assert timed(lambda: None, 4, clock=lambda: 8.0 * next(ticks)) == 8.0
    assert CPU_CLOCK is time.process_time


def test_summary_quartiles_median_and_range() -> None:
    s = Summary.of([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (s.median, s.q25, s.q75, s.min, s.max, s.n) == (3.0, 2.0, 4.0, 1.0, 5.0, 5)
    even = [0.4, 0.1, 0.3, 0.2]
    s = Summary.of(even)
    q25, q75 = np.quantile(even, [0.25, 0.75])
    assert s.median == pytest.approx(0.25, rel=1e-12)
    assert (s.q25, s.q75) == (pytest.approx(q25, rel=1e-12), pytest.approx(q75, rel=1e-12))
    assert s.q25 == pytest.approx(0.175, rel=1e-12) and s.q75 == pytest.approx(0.325, rel=1e-12)
    one = Summary.of([2.0])
    assert (one.median, one.q25, one.q75, one.n) == (2.0, 2.0, 2.0, 1)
    with pytest.raises(ValueError, match="no samples"):
        Summary.of([])


def test_median_time_validates_and_calls_repeats_times_inner() -> None:
    n = [0]

    def call() -> None:
        n[0] += 1

    assert median_time(call, 3, inner=4) >= 0.0
    assert n[0] == 12
    for repeats, inner in ((0, 1), (1, 0), (-1, 2)):
        with pytest.raises(ValueError, match="must be >= 1"):
            median_time(call, repeats, inner)
    assert n[0] == 12


def test_first_calls_return_the_result() -> None:
    out, s = first_call(lambda: 7)
    assert out == 7 and s >= 0.0
    out, wall, cpu = first_call_cpu(lambda: sum(range(10_000)))
    assert out == 49_995_000 and wall >= 0.0 and cpu >= 0.0
    assert timed(lambda: None, inner=3) >= 0.0
