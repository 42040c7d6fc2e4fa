"""Two quick claims runs on the same commit agree wherever an interval is clear of its threshold.

A reduced claim set keeps CI time small: C4 (a ratio of JAX to torch when
sizes change every call, measured in paired rounds) and C9 (decided by the
check of torch's results).  C6 is left out: its statistic is an absolute
time per op, which moves with the load of a shared machine between two runs
(a ratio measured in paired rounds does not).  The rule: two decisive
verdicts never disagree, and a run whose interval is clear of the threshold
by a factor of 2 is matched by the other run's verdict.
"""

from __future__ import annotations

import math

import pytest

from validation.claims import ClaimsContext, run_claim

CLEAR = 2.0
DECISIVE = ("confirmed", "refuted")


def _clear(rec: dict) -> bool:
    lo, hi = rec["interval"]
    t = rec["threshold"]
    if not all(math.isfinite(v) for v in (lo, hi, t)):
        return False
    return lo > CLEAR * t or hi < t / CLEAR


@pytest.mark.slow
@pytest.mark.parametrize("cid", ["C4", "C9"])
def test_quick_claims_are_stable(cid: str) -> None:
    first, second = (run_claim(cid, ClaimsContext(quick=True, rounds=5)) for _ in range(2))
    verdicts = [r["verdict"].split(":")[0] for r in (first, second)]
    assert "not measured (error)" not in verdicts, first["measured"] + second["measured"]
    if all(v in DECISIVE for v in verdicts):
        assert verdicts[0] == verdicts[1], (first["measured"], second["measured"])
    if first["id"] == "C9":  # decided by a deterministic check: always the same
        assert first["verdict"] == second["verdict"] == "refuted"
    for a, b in ((first, second), (second, first)):
        if _clear(a):
            assert b["verdict"] == a["verdict"], (a["measured"], b["measured"])
    assert all(r["threads"] for r in (first, second))  # threads were counted
