"""The experiments behind the claims (:data:`._records.RECORDS`) and the verdict over processes.

Each ``C<k>(ctx)`` measures its claim in the current process and returns one
*part* (:func:`._common.part`): the per-round values of the statistic its
record names (:data:`._records.RECORDS`), the statistics reported beside
it, and what was measured in words; no experiment decides its own claim.
:func:`decide` turns the parts of every process into the claim's result
through :func:`._records.decide_claim` (or :func:`._records.decide_fact`
for C9): the interval pools the processes (a two-level bootstrap), and a
claim whose processes disagree is *unstable*.

``simdiff report`` measures part 1 in its own process and parts 2, 3, ...
in fresh processes (:func:`measure_in_child`, one process for every claim
that needs that part, :mod:`._worker`).

Modules by claim family: :mod:`.speed` (C1, C3, C5), :mod:`.batching` (C2,
C4), :mod:`.overhead` (C6, C7, C8), :mod:`.functional` (C9).
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import simdiff
from simdiff.backends import cold_compiler_caches, compiler_caches
from simdiff.core.catalogue import catalogue

from ._common import ClaimsContext, failed
from ._records import ARTICLE, RECORDS, Verdict, decide_claim, decide_fact, says
from .batching import C2, C4
from .functional import C9
from .overhead import C6, C7, C8, memory_probe
from .speed import C1, C3, C5

__all__ = [
    "ARTICLE",
    "CLAIMS",
    "RECORDS",
    "ClaimsContext",
    "decide",
    "measure_in_child",
    "memory_probe",
    "run_claim",
]

CLAIMS: dict[str, Callable[[ClaimsContext], dict[str, Any]]] = {
    "C1": C1,
    "C2": C2,
    "C3": C3,
    "C4": C4,
    "C5": C5,
    "C6": C6,
    "C7": C7,
    "C8": C8,
    "C9": C9,
}


def run_claim(cid: str, ctx: ClaimsContext) -> dict[str, Any]:
    """One process's part of claim ``cid``; a failure is recorded as the reason, never a verdict."""
    start = time.perf_counter()
    try:
        out = CLAIMS[cid](ctx)
    except Exception as exc:  # an experiment that breaks is reported, not hidden
        out = failed(f"experiment failed: {type(exc).__name__}: {str(exc)[:300]}")
    out.update(
        id=cid,
        process=ctx.process,
        seconds=time.perf_counter() - start,
        maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        compiler_caches=compiler_caches(),
    )
    return out


def measure_in_child(
    cids: Sequence[str], *, quick: bool, process: int, threads: int = 1, timeout: float = 3600
) -> dict[str, dict[str, Any]]:
    """Parts of ``cids`` measured in one fresh process (:mod:`._worker`), by claim id.

    The child imports the simdiff and the catalogue this process uses and
    runs with the same thread settings, from an empty Inductor cache of its own
    (:func:`simdiff.backends.cold_compiler_caches`).  A child that
    dies gives every claim it did not finish a failed part with the child's
    last words.
    """
    where = [Path(simdiff.__file__).parent.parent, Path(catalogue().__path__[0]).parent]
    cmd = [sys.executable, "-m", "validation.claims._worker", "--process", str(process)]
    cmd += ["--threads", str(threads), "--claims", ",".join(cids)] + (["--quick"] if quick else [])
    # Its own empty Inductor cache: a process after the first would otherwise load what the
    # first compiled, and time that as its compile (and JAX's persistent cache off).
    with cold_compiler_caches():
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([*map(str, where), env.get("PYTHONPATH", "")])
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
            stdout, why = out.stdout, f"exit status {out.returncode}: {out.stderr[-400:]}"
        except subprocess.TimeoutExpired as exc:
            stdout, why = (exc.stdout or b"").decode(), f"timed out after {timeout:g} s"
    parts = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            parts[rec["id"]] = rec
    for cid in cids:
        if cid not in parts:
            parts[cid] = failed(f"process {process} gave no measurement ({why})")
            parts[cid].update(id=cid, process=process, seconds=math.nan, maxrss_mb=math.nan)
    return parts


def _iv(iv: Any) -> list[float]:
    return [iv.ratio, iv.lo, iv.hi, iv.rounds]


def decide(cid: str, parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The claim's result (JSON-able, for the store and the report) from its parts.

    A part that failed makes the claim ``not measured`` with its reason.
    """
    record = RECORDS[cid]
    failure = "; ".join(f"process {p['process']}: {p['failure']}" for p in parts if p["failure"])
    if record.kind == "fact":
        rows = [tuple(r) for p in parts for r in p["details"].get("checks", [])]
        verdict: Verdict = decide_fact(record, rows, failure=failure)
    else:
        beside = {k: [p["beside"].get(k, []) for p in parts] for k in record.beside}
        beside = {k: v for k, v in beside.items() if any(v)}
        verdict = decide_claim(record, [p["values"] for p in parts], beside=beside, failure=failure)
    iv = verdict.interval
    measured = (
        parts[0]["measured"]
        if len(parts) == 1
        else " ".join(f"Process {p['process']}: {p['measured']}." for p in parts)
    )
    return {
        "id": cid,
        "article_name": ARTICLE,
        "question": record.question,
        "claim": record.claim,
        "article": record.article,
        "statistic": record.statistic,
        "figure": record.figure,
        "band": list(record.band),
        "band_text": record.band_text(),
        "neutral": record.neutral,
        "proxy": record.proxy,
        "kind": record.kind,
        "outcome": verdict.outcome,
        "verdict": str(verdict),
        "plain": says(record, verdict),
        "ratio": iv.ratio,
        "interval": [iv.lo, iv.hi],
        "rounds": iv.rounds,
        "processes": [_iv(v) for v in verdict.processes],
        "beside": {k: _iv(v) for k, v in verdict.beside.items()},
        "measured": measured,
        "threads": parts[0].get("threads", {}),
        "parts": list(parts),
        "seconds": sum(p.get("seconds", 0.0) for p in parts),
    }
