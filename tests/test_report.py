"""simdiff.evidence.report: markdown, figures and the claims table from a store run."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

import problems
from simdiff.evidence._check import check
from simdiff.evidence._compare import compare
from simdiff.evidence.report import write_report
from simdiff.store import Store
from validation.claims import decide
from validation.claims._common import part


def _claim(cid: str, values: list[list[float]], beside: dict | None = None) -> dict:
    """A claim decided from synthetic per-process parts, as ``simdiff report`` stores it."""
    parts = []
    for k, vals in enumerate(values, start=1):
        rec = part(
            values=vals,
            beside={name: v[k - 1] for name, v in (beside or {}).items()},
            measured=f"process {k} synthetic",
            threads={"grad jax-jit": 1.02, "grad torch-eager": 0.5},
        )
        rec.update(id=cid, process=k, seconds=1.0)
        parts.append(rec)
    return decide(cid, parts)


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
    c1 = [[9.0, 10.0, 11.0, 9.5], [10.0, 9.0, 10.5, 9.8]]
    compiled = [[0.05, 0.06, 0.05, 0.05], [0.05, 0.05, 0.06, 0.05]]
    s.put(run, "claims", "C1", "claim", _claim("C1", c1, {"torch.compile / JAX": compiled}))
    s.put(run, "claims", "C6", "claim", _claim("C6", [[-2e-6, 3e-6, 1e-6], [2e-6, -1e-6, 4e-6]]))
    s.put(run, "claims", "C9", "process-1", {"not": "a decision"})
    s.finish_run(run)
    path = write_report(s, run, tmp_path / "out", command="simdiff report --quick")
    text = path.read_text()
    assert text.index("## Summary") < text.index("## Claims")
    summary = text[text.index("## Summary") : text.index("## Claims")]
    assert "JAX-vs-PyTorch comparison article" in summary
    assert re.search(r"torch.func eager takes \d+(\.\d)?x \(", summary)
    assert "torch.compile takes 0.05" in summary
    assert "confirmed: C1" in summary and "not measurable: C6" in summary
    assert "| C1 | Is JAX's batched 3rd derivative" in text
    assert "**confirmed**: JAX's batched 3rd derivative is at least 4x faster" in text
    assert "**not measurable** here" in text and "over 2 processes" in text
    assert "torch.compile / JAX" in text  # kept beside C1's verdict
    assert re.search(r"Threads: torch \d+ intra-op, \d+ inter-op; XLA \d+", text)
    assert "torch None" not in text
    assert "| rosenbrock4 | 4 | 2 | 0 | 0 | 0 |" in text and "**PASS**" in text
    assert "scipy-fd" in text and "left out of --quick" in text
    assert "np.float64" not in text
    for fig in ("fig_claims.png", "fig_first_call.png", "fig_ratio_to_jax.png"):
        assert (tmp_path / "out" / fig).stat().st_size > 1000
        assert f"]({fig})" in text
    assert "simdiff report --quick" in text
