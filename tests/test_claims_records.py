"""Every claim record, fed synthetic measurements on both sides of its band, reaches each verdict.

The table below gives, per claim, per-process values of its statistic that
lie inside the band, beyond it on the article's side, between the neutral
point and the band, on the other side of the neutral point, straddling, at
an impossible value, disagreeing between processes, and a failed
measurement; every record must reach ``confirmed`` and ``refuted`` (or be a
fact, decided by a check), and nothing is decided without a measurement.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from validation.claims._records import (
    OUTCOMES,
    RECORDS,
    bootstrap_processes,
    decide_claim,
    decide_fact,
    says,
)

RNG = np.random.default_rng(3)
INTERVAL_CLAIMS = [c for c, r in RECORDS.items() if r.kind == "interval"]


def rounds(value: float, spread: float = 0.02, n: int = 8) -> list[float]:
    """Per-round values around ``value`` (relative ``spread``; additive when value is 0)."""
    noise = spread * RNG.standard_normal(n)
    return list(value * np.exp(noise)) if value else list(noise * 1e-6)


def inside(cid: str) -> float:
    r = RECORDS[cid]
    lo, hi = r.band
    return math.sqrt(lo * hi) if math.isfinite(hi) else 2 * lo


def other_side(cid: str) -> float:
    r = RECORDS[cid]
    return r.neutral / 2 if r.neutral > 0 else -1e-6


def below_band(cid: str) -> float:
    r = RECORDS[cid]
    return (r.neutral + r.band[0]) / 2 if r.neutral > 0 else r.band[0] / 2


# claim -> [(per-process values, expected outcome)]
def table(cid: str) -> list[tuple[list[list[float]], str]]:
    r = RECORDS[cid]
    lo, hi = r.band
    rows = [
        ([rounds(inside(cid)), rounds(inside(cid))], "confirmed"),
        ([rounds(below_band(cid)), rounds(below_band(cid))], "refuted"),
        ([rounds(lo, 0.6, 12), rounds(lo, 0.6, 12)], "depends"),
        ([rounds(inside(cid)), rounds(below_band(cid))], "unstable"),
    ]
    if r.neutral > 0 or cid == "C6":
        rows.append(
            ([rounds(other_side(cid), 0.02)], "refuted" if r.neutral > 0 else "not measurable")
        )
    if r.beyond == "above":
        rows.append(([rounds(5 * hi if math.isfinite(hi) else 50 * lo)], "confirmed"))
    if r.beyond == "" and math.isfinite(hi):
        rows.append(([rounds(5 * hi)], "refuted"))
    if r.impossible_at is not None:
        rows.append(([[-1.0, 1.0, 2.0, -0.5]], "not measurable"))
    if r.never_outcome:
        rows.append(([[math.inf] * 6, [math.inf] * 6], "never"))
        rows.append(([[100.0, math.inf, 120.0, math.inf, math.inf, 90.0]], "depends"))
    return rows


@pytest.fixture(autouse=True)
def _fresh_rng(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test draws from a generator of its own: what it draws does not depend on which
    of this module's tests ran before it in the process (xdist's work stealing splits a
    module between workers, so that order changes from run to run)."""
    monkeypatch.setitem(globals(), "RNG", np.random.default_rng(1003))


@pytest.mark.parametrize("cid", INTERVAL_CLAIMS)
def test_every_interval_claim_reaches_its_verdicts(cid: str) -> None:
    r = RECORDS[cid]
    reached = set()
    for processes, want in table(cid):
        got = decide_claim(r, processes)
        assert got.outcome == want, (cid, want, str(got), processes)
        assert got.outcome in OUTCOMES
        reached.add(got.outcome)
    assert {"confirmed", "refuted", "depends", "unstable"} <= reached, (cid, reached)


@pytest.mark.parametrize("cid", INTERVAL_CLAIMS)
def test_no_claim_is_decided_without_measuring(cid: str) -> None:
    r = RECORDS[cid]
    assert decide_claim(r, []).outcome == "not measured"
    assert decide_claim(r, [[math.nan, math.nan]]).outcome == "not measured"
    failed = decide_claim(r, [rounds(inside(cid))], failure="RuntimeError: boom")
    assert (failed.outcome, failed.text) == ("not measured", "RuntimeError: boom")


def test_the_article_figure_lies_inside_its_band() -> None:
    for r in RECORDS.values():
        if r.kind == "interval":
            assert r.band[0] <= r.figure <= r.band[1], r.id
            assert r.question.endswith("?") and r.statistic and r.article, r.id
            assert r.n_rounds(True) >= 1 and r.n_processes(True) >= 1, r.id


def test_c7_has_seven_rounds_of_fresh_processes() -> None:
    assert RECORDS["C7"].n_rounds(quick=True) >= 7


def test_c1_reports_torch_compile_whatever_eager_gives() -> None:
    r = RECORDS["C1"]
    compiled = {"torch.compile / JAX": [rounds(0.5), rounds(0.5)]}
    for value in (inside("C1"), r.band[0]):
        got = decide_claim(r, [rounds(value, 0.6, 12)] * 2, beside=compiled)
        assert "torch.compile / JAX 0.4" in got.text or "torch.compile / JAX 0.5" in got.text, str(
            got
        )
        assert math.isclose(got.beside["torch.compile / JAX"].ratio, 0.5, rel_tol=0.1)


def test_c9_is_a_fact_decided_by_the_check() -> None:
    r = RECORDS["C9"]
    ok = [("hessian", "pass", ""), ("hvp", "pass", ""), ("derivative3", "pass", "")]
    assert decide_fact(r, ok).outcome == "refuted"
    assert decide_fact(r, [*ok, ("derivative3.taylor", "pass", "")]).outcome == "refuted"
    unsupported = ("hessian", "error", "UnsupportedError: torch.func cannot")
    assert decide_fact(r, [*ok[1:], unsupported]).outcome == "confirmed"
    assert decide_fact(r, [*ok[:2], ("derivative3", "fail", "")]).outcome == "confirmed"
    assert decide_fact(r, ok[:2]).outcome == "not measured"  # torch.func existing is no evidence
    assert decide_fact(r, ok, failure="ImportError: torch").outcome == "not measured"
    with pytest.raises(ValueError, match="fact"):
        decide_claim(r, [[1.0]])


def test_process_bootstrap_covers_the_spread_between_processes() -> None:
    a, b = rounds(1.0, 0.01, 10), rounds(1.3, 0.01, 10)
    one, pooled = bootstrap_processes([a]), bootstrap_processes([a, b])
    assert one.hi < 1.1 and pooled.lo < 1.05 and pooled.hi > 1.25
    assert pooled.rounds == 20
    assert bootstrap_processes([a, b]) == bootstrap_processes([a, b])  # seeded


def test_a_never_verdict_reads_as_a_sentence() -> None:
    """C3 at infinity: 'does not get ahead ... never', not 'ahead after never calls'."""
    got = decide_claim(RECORDS["C3"], [[math.inf] * 6, [math.inf] * 6])
    assert got.outcome == "never"
    plain = says(RECORDS["C3"], got)
    assert "after never" not in plain and "does not get ahead" in plain, plain
