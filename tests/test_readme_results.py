"""The README's and docs' result numbers name a stored run and match its report."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "results" / "quick" / "report.md"


def _report_claims() -> dict[str, tuple[str, str, str]]:
    """``id -> (statistic [interval], threshold, verdict)`` from the stored report's table."""
    out = {}
    for line in REPORT.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and re.fullmatch(r"C\d", cells[0]):
            stat = re.match(r"(\S+ \[[^\]]*\])", cells[4]).group(1)
            out[cells[0]] = (stat, cells[5], cells[6].strip("*"))
    return out


def test_stored_report_has_run_id_git_and_figures() -> None:
    text = REPORT.read_text()
    assert re.search(r"Run `\d{4}-report-quick` \(complete\)", text)
    assert re.search(r"git [0-9a-f]{40}", text)
    assert "Reproduce with:" in text
    for fig in re.findall(r"\]\((fig_[a-z_]+\.png)\)", text):
        assert (REPORT.parent / fig).stat().st_size > 1000


def test_readme_claims_table_matches_the_stored_run() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## What the main job found") :]
    assert "docs/results/quick/report.md" in section
    run = re.search(r"Run `(\S+)`", REPORT.read_text()).group(1)
    git = re.search(r"git ([0-9a-f]{7})", REPORT.read_text()).group(1)
    assert f"`{run}`" in section and f"`{git}`" in section
    stored = _report_claims()
    rows = re.findall(r"^\| (C\d) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", section, flags=re.M)
    assert {r[0] for r in rows} == set(stored)
    for cid, stat, threshold, verdict in rows:
        want = stored[cid]
        assert (stat.strip(), threshold.strip(), verdict.strip()) == want, cid
