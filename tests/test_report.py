"""simdiff.report: markdown, figures and the claims table from a store run."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import problems
from simdiff._check import check
from simdiff._compare import compare
from simdiff.report import write_report
from simdiff.store import Store


def _claim(cid: str, verdict: str, ratio: float, series: dict) -> dict:
    return {
        "id": cid,
        "claim": f"claim {cid}",
        "article": "8 ms",
        "measured": "0.4 ms vs 2 ms",
        "ratio": ratio,
        "interval": [0.9 * ratio, 1.1 * ratio],
        "rounds": 9,
        "threshold": 1.5,
        "ratio_means": "torch / JAX",
        "verdict": verdict,
        "series": series,
        "details": {},
        "threads": {"grad jax-jit": 1.02, "grad torch-eager": 0.5},
        "seconds": 1.0,
    }


def test_report_from_a_store_run(tmp_path: Path) -> None:
    s = Store(tmp_path / "simdiff.h5")
    run = s.start_run("report-quick", {"quick": True})
    p = problems.get("rosenbrock4")
    res = check(p, derivatives=("grad",), backends=("jax",))
    s.put(
        run,
        "rosenbrock4",
        "check",
        "all",
        {
            "passed": res.passed,
            "verdict": res.verdict,
            "n": p.n,
            "entries": [asdict(e) for e in res.entries],
        },
    )
    r = compare(p, ["grad"], ["jax-jit", "torch-eager", "scipy-fd"], repeats=2)
    s.put(run, "rosenbrock4", "compare", "all", r.record())
    s.put(run, "rosenbrock4", "skipped", "torch-compile", {"reason": "left out of --quick"})
    s.put(
        run,
        "claims",
        "C1",
        "claim",
        _claim(
            "C1",
            "confirmed",
            6.2,
            {
                "order": [1, 2, 3],
                "nested jax-jit": [1e-4, 2e-4, 4e-4],
                "nested torch-eager": [1e-3, 3e-3, 9e-3],
            },
        ),
    )
    s.put(
        run,
        "claims",
        "C4",
        "claim",
        _claim(
            "C4",
            "depends: within 1.5x",
            1.1,
            {"n": [8, 16], "jax first": [0.1, 0.1], "torch first": [0.01, 0.01]},
        ),
    )
    s.finish_run(run)
    path = write_report(s, run, tmp_path / "out", command="simdiff report --quick")
    text = path.read_text()
    assert "## Claims" in text
    assert (
        "| C1 | claim C1 | 8 ms | 0.4 ms vs 2 ms | 6.2 [5.58, 6.82] (torch / JAX) | 1.5 |" in text
    )
    assert "**confirmed** | 0.50-1.02 |" in text and "**depends: within 1.5x**" in text
    assert "| rosenbrock4 | 4 | 2 | 0 | 0 | 0 |" in text and "**PASS**" in text
    assert "scipy-fd" in text and "left out of --quick" in text
    for fig in ("fig_claims.png", "fig_first_call.png", "fig_ratio_to_jax.png"):
        assert (tmp_path / "out" / fig).stat().st_size > 1000
        assert f"]({fig})" in text
    assert "simdiff report --quick" in text
