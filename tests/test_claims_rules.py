"""Every claim's verdict rule on both sides of its threshold and at "depends" (synthetic samples)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from validation.claims._verdict import (
    Interval,
    bootstrap,
    bootstrap_ratio,
    break_even_calls,
    decide,
    threads_used,
)
from validation.claims.batching import c2_verdict
from validation.claims.functional import c9_verdict
from validation.claims.overhead import C6_THRESHOLD_S, C7_THRESHOLD, C8_THRESHOLD
from validation.claims.speed import (
    BREAK_EVEN_CALLS,
    C1_THRESHOLD,
    C5_THRESHOLD,
    c1_verdict,
    c5_verdict,
    compile_failure,
)

RNG = np.random.default_rng(7)


def samples(median: float, spread: float, n: int = 15) -> np.ndarray:
    """Lognormal timing samples around ``median`` with relative ``spread``."""
    return median * np.exp(spread * RNG.standard_normal(n))


def iv(lo: float, hi: float) -> Interval:
    return Interval(math.sqrt(lo * hi) if lo > 0 else (lo + hi) / 2, lo, hi, 9)


# --------------------------------------------------------------------------- the interval


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


@pytest.mark.parametrize(
    ("eager", "compiled", "want"),
    [
        ((10.0, 12.0), (2.0, 3.0), "confirmed"),
        ((10.0, 12.0), (0.4, 0.6), "depends: JAX beats torch.func eager"),  # compile wins
        ((2.0, 3.0), (2.0, 3.0), "refuted"),  # faster, but not the article's 8x
        ((6.0, 10.0), (2.0, 3.0), "depends: the interval"),
    ],
)
def test_c1_rule(eager, compiled, want) -> None:
    assert C1_THRESHOLD == 8.0
    assert c1_verdict(iv(*eager), iv(*compiled)).startswith(want)


@pytest.mark.parametrize(
    ("eager_over_compiled", "want"),
    [((2.0, 3.0), "confirmed"), ((0.8, 1.2), "refuted"), ((1.2, 2.0), "depends: the interval")],
)
def test_c5_rule(eager_over_compiled, want) -> None:
    assert C5_THRESHOLD == 1.5
    assert c5_verdict(iv(*eager_over_compiled)).startswith(want)


def test_c5_and_c1_say_why_torch_compile_gave_no_time() -> None:
    """A refused or failed compile is a stated reason, not a bare "not measurable"."""

    class Entry:
        status, error = "unsupported", "torch.compile of derivative at one point can crash"

    nan = Interval(math.nan, math.nan, math.nan, 0)
    why = compile_failure(Entry())
    assert why == "torch.compile unsupported: torch.compile of derivative at one point can crash"
    assert c5_verdict(nan, why) == f"depends: not measurable here: {why}"
    assert c5_verdict(nan) == "depends: not measurable here"
    assert why in c1_verdict(iv(10.0, 12.0), nan, compile_failure=why)
    Entry.status = "ok"
    assert compile_failure(Entry()) == ""


@pytest.mark.parametrize(
    ("jax_gain", "torch_gain", "want"),
    [
        ((10.0, 20.0), (0.9, 1.2), "confirmed"),
        ((10.0, 20.0), (5.0, 9.0), "refuted: torch.func.vmap also batches"),
        ((0.8, 1.1), (0.9, 1.2), "refuted: jax.vmap does not beat"),
        ((10.0, 20.0), (1.2, 2.0), "depends"),
    ],
)
def test_c2_rule(jax_gain, torch_gain, want) -> None:
    assert c2_verdict(iv(*jax_gain), iv(*torch_gain)).startswith(want)


def test_c3_break_even_rule() -> None:
    assert break_even_calls(0.8, 0.010, 0.015, 0.015) == 157.0  # the article's own figures
    assert break_even_calls(0.01, 0.001, 0.02, 0.002) == 0.0  # JAX ahead from the start
    assert break_even_calls(0.8, 0.020, 0.015, 0.015) == math.inf  # never ahead
    jf, tf = 0.5, 0.01
    for js, ts, want in [
        (1e-3, 2e-3, "confirmed"),  # ~490 calls to pay off: compile overhead matters
        (1e-3, 0.2, "refuted"),  # pays off after ~3 calls
        (1e-3, 1e-3 * 0.5, "confirmed"),  # JAX never catches up (inf)
    ]:
        j, t = samples(js, 0.01), samples(ts, 0.01)

        def even(a, b):
            return break_even_calls(jf, float(np.median(a)), tf, float(np.median(b)))

        assert decide(bootstrap(even, j, t), BREAK_EVEN_CALLS).startswith(want), (js, ts)
    # about 10 calls, noisy: the interval straddles the threshold
    j, t = samples(1e-3, 0.3), samples(0.05, 0.3)
    assert decide(bootstrap(even, j, t), BREAK_EVEN_CALLS).startswith("depends")


@pytest.mark.parametrize(
    ("per_op", "want"), [(8e-6, "confirmed"), (2e-6, "refuted"), (5e-6, "depends")]
)
def test_c6_rule(per_op: float, want: str) -> None:
    k1, k2 = 10, 400
    a = samples(20e-6, 0.01)
    b = a + per_op * (k2 - k1) * np.exp(0.01 * RNG.standard_normal(a.size))

    def slope(s1, s2):
        return (float(np.median(s2)) - float(np.median(s1))) / (k2 - k1)

    assert decide(bootstrap(slope, a, b), C6_THRESHOLD_S).startswith(want)


@pytest.mark.parametrize(
    ("ratio", "want"), [(1.6, "confirmed"), (1.0, "refuted"), (1.22, "depends")]
)
def test_c7_rule(ratio: float, want: str) -> None:
    spread = 0.2 if want == "depends" else 0.02
    jax = samples(100.0, spread, 5)
    torch = jax * ratio * np.exp(spread * RNG.standard_normal(5))
    assert decide(bootstrap_ratio(torch, jax), C7_THRESHOLD).startswith(want)


@pytest.mark.parametrize(
    ("ratio", "want"), [(1.6, "confirmed"), (0.3, "refuted"), (1.2, "depends")]
)
def test_c8_rule(ratio: float, want: str) -> None:
    spread = 0.2 if want == "depends" else 0.03
    unrolled = samples(1.0, spread, 7)
    scan = unrolled * ratio * np.exp(spread * RNG.standard_normal(7))
    assert decide(bootstrap_ratio(scan, unrolled), C8_THRESHOLD).startswith(want)


def test_c9_rule() -> None:
    ok = [("hessian", "pass", ""), ("hvp", "pass", ""), ("derivative3", "pass", "")]
    assert c9_verdict(ok) == "refuted"
    assert c9_verdict([*ok, ("derivative3.taylor", "pass", "")]) == "refuted"
    unsupported = [("hessian", "error", "UnsupportedError: torch.func cannot")]
    assert c9_verdict(ok[1:] + unsupported).startswith("confirmed")
    assert c9_verdict([*ok[:2], ("derivative3", "fail", "")]).startswith("depends")
    assert c9_verdict(ok[:2]).startswith("not measured")  # torch.func existing is not evidence
    assert c9_verdict([("grad", "pass", "")]).startswith("not measured")


def test_threads_used() -> None:
    assert threads_used(2.0, 1.0) == 2.0
    assert math.isnan(threads_used(1.0, 0.0))
