"""The README's results section is the stored run's numbers, by value, and names that run.

The stored quick report (docs/results/quick/) is made by ``simdiff report
--quick``; its store record is not kept, so the report's markdown is the
stored run.  Every number in the README's "What the main job found" section
(its table and its prose) must be a number of the stored report, compared
as a value: editing "26.7 s" to "2.67 s" in the README fails.  The report
must name the code it ran on (git commit and a sha256 of the sources).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "results" / "quick" / "report.md"
SECTION = "## What the main job found"
#: A number as prose and tables write it: 26.7, 1.06e+03, -7.3e-06, 0.054, 157.
NUMBER = re.compile(r"(?<![\w.])[-−]?\d+(?:[.,]\d+)*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def numbers(text: str) -> list[float]:
    """Every number in ``text`` as a float (thousands commas dropped; ids like C1 skipped)."""
    out = []
    for m in NUMBER.finditer(text):
        s = m.group(0).replace("−", "-").replace(",", "")
        try:
            out.append(float(s))
        except ValueError:
            continue
    return out


def readme_section() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    return readme[start : end if end > 0 else len(readme)]


def _same(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def test_numbers_parse_by_value() -> None:
    assert numbers("26.7 s, 1.06e+03, [-7.3e-06, 3.9e-06], 10,000 points, C1") == [
        26.7,
        1060.0,
        -7.3e-06,
        3.9e-06,
        10000.0,
    ]


def test_stored_report_has_run_id_code_fingerprint_and_figures() -> None:
    text = REPORT.read_text()
    assert re.search(r"Run `\d{4}-report-quick` \(complete\)", text)
    assert re.search(r"git [0-9a-f]{40}", text)
    assert re.search(r"sources sha256 `[0-9a-f]{64}`", text), "the report names no code fingerprint"
    assert "Reproduce with:" in text
    for fig in re.findall(r"\]\((fig_[a-z_]+\.png)\)", text):
        assert (REPORT.parent / fig).stat().st_size > 1000


def test_readme_names_the_stored_run() -> None:
    section = readme_section()
    text = REPORT.read_text()
    assert "docs/results/quick/report.md" in section
    run = re.search(r"Run `(\S+)`", text).group(1)
    git = re.search(r"git ([0-9a-f]{7})", text).group(1)
    assert f"`{run}`" in section and f"`{git}`" in section


def unmatched(section: str, report: str) -> list[float]:
    """Numbers of a README results ``section`` that ``report`` does not state (by value)."""
    body = re.sub(r"```.*?```", "", section, flags=re.S)  # the command, not results
    body = re.sub(r"`[^`]*`", "", body)  # run ids, paths, commits
    body = re.sub(r"\[[^\]]*\]\([^)]*\)", "", body)  # links
    stored = set(numbers(report))
    return [v for v in numbers(body) if not any(_same(v, s) for s in stored)]


def test_a_changed_number_is_caught() -> None:
    report = "torch.compile 0.347 ms steady after a 26.7 s first call; 5.27 [2.79, 44.3]"
    assert unmatched("after a 26.7 s first call: 5.27 [2.79, 44.3]", report) == []
    assert unmatched("after a 2.67 s first call: 5.27 [2.79, 44.3]", report) == [2.67]


def test_every_readme_result_number_is_in_the_stored_report() -> None:
    """Table and prose: a number the README states and the report does not is a copy error."""
    missing = unmatched(readme_section(), REPORT.read_text())
    assert not missing, f"README numbers not in the stored report: {missing}"


def test_readme_claims_table_matches_the_stored_verdicts() -> None:
    """Each README table row ``| Ck | ... |`` names the verdict the stored report gives Ck."""
    text = REPORT.read_text()
    stored = dict(re.findall(r"^\| (C\d) \|.*\| \*\*([a-z ]+)\*\*", text, flags=re.M))
    rows = re.findall(r"^\| (C\d) \|(.*)\|$", readme_section(), flags=re.M)
    assert {cid for cid, _ in rows} == set(stored)
    for cid, rest in rows:
        assert stored[cid] in rest, (cid, stored[cid], rest)


def test_the_stored_report_was_made_by_the_code_as_it_is() -> None:
    """The stored run's sources sha256 is the code's: a change to simdiff/, problems/ or
    validation/ without a new ``simdiff report --quick`` (copied to docs/results/quick/,
    README section updated) fails here."""
    from simdiff.core.catalogue import code_digest

    stored = re.search(r"sources sha256 `([0-9a-f]{64})`", REPORT.read_text()).group(1)
    assert stored == code_digest(), (
        "docs/results/quick/report.md describes other code: regenerate it with the command "
        "in docs/evidence.md and update README's results section"
    )
