"""The interval and its rules, and each claim decided from synthetic parts as the experiments give them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from validation.claims import decide as decide_parts
from validation.claims._common import part as _part
from validation.claims._records import _resampled_medians
from validation.claims._verdict import (
    Interval,
    _median_ratio,
    bootstrap,
    bootstrap_ratio,
    break_even_calls,
    decide,
    threads_used,
)
from validation.claims.batching import size_stream
from validation.claims.speed import compile_failure

RNG = np.random.default_rng(7)


def samples(median: float, spread: float, n: int = 15) -> np.ndarray:
    """Lognormal timing samples around ``median`` with relative ``spread``."""
    return median * np.exp(spread * RNG.standard_normal(n))


def iv(lo: float, hi: float) -> Interval:
    return Interval(math.sqrt(lo * hi) if lo > 0 else (lo + hi) / 2, lo, hi, 9)


# --------------------------------------------------------------------------- the interval


@pytest.fixture(autouse=True)
def _fresh_rng(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test draws from a generator of its own: what it draws does not depend on which
    of this module's tests ran before it in the process (xdist's work stealing splits a
    module between workers, so that order changes from run to run)."""
    monkeypatch.setitem(globals(), "RNG", np.random.default_rng(1007))


def test_bootstrap_interval_covers_the_ratio_and_narrows_with_rounds() -> None:
    a, b = samples(3e-3, 0.05, 40), samples(1e-3, 0.05, 40)
    wide = bootstrap_ratio(a[:5], b[:5])
    narrow = bootstrap_ratio(a, b)
    assert narrow.lo <= narrow.ratio <= narrow.hi and 2.7 < narrow.ratio < 3.3
    assert narrow.hi - narrow.lo < wide.hi - wide.lo
    assert bootstrap_ratio(a, b) == bootstrap_ratio(a, b)  # seeded: reproducible


def test_bootstrap_pairs_rounds() -> None:
    # A slow phase that hits both sides of a round alike cancels in a paired ratio.
    phase = np.array([1.0, 5.0, 1.0, 5.0, 1.0, 5.0, 1.0, 5.0])
    paired = bootstrap_ratio(2.0 * phase, phase)
    assert paired.lo == paired.hi == 2.0
    with pytest.raises(ValueError, match="equal lengths"):
        bootstrap(lambda a, b: 1.0, [1.0, 2.0], [1.0])


def _fields(iv: Interval) -> np.ndarray:
    return np.array([iv.ratio, iv.lo, iv.hi, iv.rounds], dtype=float)


def test_batched_bootstrap_ratio_is_the_loop_over_resamples() -> None:
    # the same resamples, each statistic computed at once: the same interval, bit for bit
    for num, den in [
        (samples(2.0, 0.3, 9), samples(1.0, 0.3, 9)),
        ([1.0, math.inf, 2.0, 3.0], [1.0, 1.0, 0.0, 2.0]),  # "never" rounds, a zero median
        ([0.0, 0.0, 0.0], [0.0, 1.0, 0.0]),
    ]:
        batched, loop = bootstrap_ratio(num, den), bootstrap(_median_ratio, num, den)
        # field by field, NaN (a zero median's ratio) equal to NaN
        assert np.array_equal(_fields(batched), _fields(loop), equal_nan=True)


def test_pooled_bootstrap_resamples_processes_then_rounds() -> None:
    # the resampled medians drawn at once against a loop that draws each resample as the
    # docstring says: the same distribution, within the Monte Carlo error of 20,000 draws
    data = np.random.default_rng(11)  # fixed data, whichever tests ran before in the process
    groups = [
        data.lognormal(0.0, 0.3, 8),
        data.lognormal(0.2, 0.3, 5),
        data.lognormal(0.1, 0.3, 11),
    ]
    n = 20_000
    fast = _resampled_medians(groups, n, np.random.default_rng(1))
    rng = np.random.default_rng(2)
    slow = np.empty(n)
    for b in range(n):
        picked = rng.integers(0, len(groups), size=len(groups))
        slow[b] = np.median(np.concatenate([rng.choice(groups[i], groups[i].size) for i in picked]))
    pooled = np.concatenate(groups)
    assert pooled.min() <= fast.min() and fast.max() <= pooled.max()
    assert np.all(np.isfinite(fast))
    for q in (5, 25, 50, 75, 95):
        assert np.percentile(fast, q) == pytest.approx(np.percentile(slow, q), abs=0.02)
    assert fast.std() == pytest.approx(slow.std(), rel=0.05)


def test_bootstrap_without_samples_is_not_measurable() -> None:
    got = bootstrap_ratio([math.nan], [1.0])
    assert math.isnan(got.ratio) and got.rounds == 0
    assert decide(got, 1.5) == "depends: not measurable here"


# --------------------------------------------------------------------------- the generic rule


@pytest.mark.parametrize(
    ("lo", "hi", "want"),
    [(2.0, 3.0, "confirmed"), (0.5, 1.4, "refuted"), (1.2, 2.0, "depends")],
)
def test_decide_above(lo: float, hi: float, want: str) -> None:
    assert decide(iv(lo, hi), 1.5).startswith(want)


@pytest.mark.parametrize(
    ("lo", "hi", "want"),
    [(2.0, 3.0, "refuted"), (0.5, 1.4, "confirmed"), (1.2, 2.0, "depends")],
)
def test_decide_below(lo: float, hi: float, want: str) -> None:
    assert decide(iv(lo, hi), 1.5, claim_side="below").startswith(want)


def test_decide_from_samples_both_ways_and_depends() -> None:
    fast, slow = samples(1e-3, 0.02), samples(3e-3, 0.02)
    assert decide(bootstrap_ratio(slow, fast), 1.5) == "confirmed"
    assert decide(bootstrap_ratio(fast, slow), 1.5) == "refuted"
    noisy = samples(1.5e-3, 0.6)
    assert decide(bootstrap_ratio(noisy, samples(1e-3, 0.6)), 1.5).startswith("depends")


# --------------------------------------------------------------------------- per claim


def part(values, beside=None, failure="", checks=None, process=1) -> dict:
    """One process's part as the experiments return it (validation/claims/_common.part)."""
    rec = _part(values=values, beside=beside, measured="synthetic", failure=failure)
    if checks is not None:
        rec["details"]["checks"] = [list(r) for r in checks]
    rec.update(id="-", process=process, seconds=1.0)
    return rec


def test_c1_keeps_the_torch_compile_result_whatever_the_verdict() -> None:
    eager = list(samples(2.5, 0.3, 6))  # straddles the band's edge 4 in neither process
    compiled = list(samples(0.05, 0.05, 6))
    rec = decide_parts(
        "C1",
        [
            part(eager, {"torch.compile / JAX": compiled}),
            part(eager, {"torch.compile / JAX": compiled}, process=2),
        ],
    )
    assert rec["outcome"] == "refuted"
    assert "torch.compile / JAX" in rec["verdict"] and "torch.compile / JAX" in rec["beside"]
    assert rec["beside"]["torch.compile / JAX"][2] < 0.1


def test_c3_from_the_articles_own_figures_and_never() -> None:
    """JAX 800 ms first then 10 ms, torch 15 ms: 157 calls, inside the band; never is its own."""
    article = [break_even_calls(0.8, 0.010, 0.015, 0.015)] * 6
    assert article[0] == 157.0
    assert decide_parts("C3", [part(article), part(article, process=2)])["outcome"] == "confirmed"
    never = [break_even_calls(0.8, 0.020, 0.015, 0.015)] * 6
    rec = decide_parts("C3", [part(never), part(never, process=2)])
    assert rec["outcome"] == "never" and "never paid back" in rec["plain"]
    ten = [10.0] * 6  # the old threshold would have confirmed this: now refuted
    assert decide_parts("C3", [part(ten), part(ten, process=2)])["outcome"] == "refuted"


def test_c6_negative_per_op_cost_is_not_measurable() -> None:
    slopes = list(2e-6 + 6e-6 * RNG.standard_normal(8))
    rec = decide_parts("C6", [part(slopes), part(slopes, process=2)])
    assert min(slopes) < 0 and rec["outcome"] == "not measurable"
    assert "CPU" in rec["plain"] or "not measurable" in rec["plain"]


def test_processes_that_disagree_are_unstable() -> None:
    fast, slow = list(samples(3.0, 0.01, 6)), list(samples(0.5, 0.01, 6))
    rec = decide_parts("C2", [part(fast), part(slow, process=2)])
    assert rec["outcome"] == "unstable" and len(rec["processes"]) == 2
    assert "process 1 confirmed" in rec["verdict"] and "process 2 refuted" in rec["verdict"]


def test_a_failed_part_is_not_measured_with_its_reason() -> None:
    rec = decide_parts(
        "C4", [part([2.0] * 4), part([], failure="torch.compile error: boom", process=2)]
    )
    assert rec["outcome"] == "not measured" and "boom" in rec["verdict"]


def test_c9_is_decided_by_the_check() -> None:
    ok = [("hessian", "pass", ""), ("hvp", "pass", ""), ("derivative3", "pass", "")]
    assert decide_parts("C9", [part([], checks=ok)])["outcome"] == "refuted"
    bad = [*ok[:2], ("derivative3", "fail", "")]
    assert decide_parts("C9", [part([], checks=bad)])["outcome"] == "confirmed"
    assert decide_parts("C9", [part([], checks=ok[:2])])["outcome"] == "not measured"


def test_compile_failure_says_why() -> None:
    class Entry:
        status, error = "unsupported", "torch.compile of derivative at one point can crash"

    why = compile_failure(Entry())
    assert why == "torch.compile unsupported: torch.compile of derivative at one point can crash"
    Entry.status = "ok"
    assert compile_failure(Entry()) == ""


def test_c4_size_stream_repeats_within_a_round_and_not_across() -> None:
    a, b = size_stream(0, 4), size_stream(1, 4)
    assert len(set(a)) == 4 and len(a) > len(set(a)) and not set(a) & set(b)


def test_threads_used() -> None:
    assert threads_used(2.0, 1.0) == 2.0
    assert math.isnan(threads_used(1.0, 0.0))
