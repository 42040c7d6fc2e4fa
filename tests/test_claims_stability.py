"""Two quick claims runs on the same commit never give opposite decisive verdicts.

A reduced claim set keeps CI time small: C4 (a ratio of JAX to torch.compile
when sizes change, measured in paired rounds) and C9 (decided by the check
of torch's results).  Each run decides from two parts (two processes' worth
of rounds, here measured in this process): two decisive verdicts
(confirmed / refuted / never) never disagree, and C9 is always refuted.
"""

from __future__ import annotations

import pytest

from validation.claims import ClaimsContext, decide, run_claim

# timings of the programs users get (the suite compiles with most optimisations off)
pytestmark = pytest.mark.xla_optimised

DECISIVE = ("confirmed", "refuted", "never")


def _run(cid: str) -> dict:
    parts = [run_claim(cid, ClaimsContext(quick=True, rounds=3, process=k)) for k in (1, 2)]
    return decide(cid, parts)


@pytest.mark.slow
@pytest.mark.parametrize("cid", ["C4", "C9"])
def test_quick_claims_are_stable(cid: str) -> None:
    first, second = _run(cid), _run(cid)
    outcomes = [r["outcome"] for r in (first, second)]
    assert "not measured" not in outcomes, first["measured"] + second["measured"]
    if all(o in DECISIVE for o in outcomes):
        assert outcomes[0] == outcomes[1], (first["verdict"], second["verdict"])
    if cid == "C9":  # decided by a deterministic check: always the same
        assert outcomes == ["refuted", "refuted"]
    else:
        assert len(first["processes"]) == 2  # the interval pools both parts
