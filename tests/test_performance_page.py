"""docs/performance.md is generated from the stored results, and shows no table older than its code.

``python -m validation.benchmarks --render-docs`` writes the page
(:mod:`validation.benchmarks.page`): one table per current result, with the
command that regenerates it and the commit it was measured at; a result
measured before a later commit changed the code under its declared paths is
listed under "To be re-measured" instead.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from validation.benchmarks import page
from validation.benchmarks.__main__ import BENCHMARKS

ROOT = Path(__file__).resolve().parents[1]


def _shallow() -> bool:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return True
    return out.strip() != "false"


needs_history = pytest.mark.skipif(_shallow(), reason="needs the repository's git history")


def sections(text: str) -> dict[str, str]:
    """The page's ``### <entry>`` sections by heading."""
    out = {}
    for block in re.split(r"\n(?=### )", text):
        if block.startswith("### "):
            head, _, body = block.partition("\n")
            out[head[4:].strip()] = body.split("\n## ", 1)[0]
    return out


def test_every_registry_entry_has_one_place_on_the_page() -> None:
    placed = [p.output for _, _, ps in page.SECTIONS for p in ps]
    assert len(placed) == len(set(placed))
    assert set(placed) == {b.output for b in BENCHMARKS}
    for p in page.places().values():
        assert p.about.strip()
        for path in p.measures:
            assert (ROOT / path).exists(), (p.output, path)


@needs_history
def test_the_page_is_the_rendering_of_the_stored_results() -> None:
    want = page.render({b.output: b.command() for b in BENCHMARKS})
    assert page.PAGE.read_text() == want, (
        "docs/performance.md is not the rendering of docs/results/ at this commit: "
        "run `python -m validation.benchmarks --render-docs`"
    )


@needs_history
def test_each_shown_table_is_its_stored_result_and_current() -> None:
    text = page.PAGE.read_text()
    shown = sections(text)
    todo = text[text.index("## To be re-measured") :]
    for b in BENCHMARKS:
        name = page._heading(b.output)
        if name not in shown:
            assert f"[results/{b.output}]" in todo, b.output
            assert page.stale(b.output) is not None, b.output
            continue
        assert page.stale(b.output) is None, b.output
        body = shown[name]
        assert b.command().strip() in body
        commit = page.measured_at(b.output)
        assert commit is not None and f"commit `{commit[:10]}`" in body
        stored = set((page.RESULTS / b.output).read_text().splitlines())
        rows = [line for line in body.splitlines() if line.startswith("| ")]
        assert all(line in stored for line in rows), b.output
        assert not re.search(r"\bload\b", body, flags=re.I), b.output


def test_a_move_is_not_a_code_change() -> None:
    before = (
        '"""Doc."""\nimport a\nfrom b import c\n\n\ndef f(x):\n    """F."""\n    return x + 1\n'
    )
    moved = (
        '"""Other doc."""\nfrom q.r import c\nimport a  # moved\n\n\ndef f(x):\n    return x + 1\n'
    )
    edited = before.replace("x + 1", "x + 2")
    assert page._code(before) == page._code(moved)
    assert page._code(before) != page._code(edited)


def test_the_body_drops_headers_and_load_and_keeps_tables() -> None:
    body = page._body("bench_core_grad_lj2.txt")
    assert "load" not in body and "# git" not in body
    stored = (page.RESULTS / "bench_core_grad_lj2.txt").read_text().splitlines()
    rows = [line for line in stored if line.startswith("| jax:") or line.startswith("| torch:")]
    assert rows and all(row in body.splitlines() for row in rows)


@needs_history
def test_a_result_measured_before_a_code_change_is_stale() -> None:
    """A result whose commit predates a real change to what it measures is stale; a result
    that declares no simdiff paths (a probe of the frameworks) never is."""
    framework = [p.output for p in page.places().values() if not p.measures]
    assert framework and all(page.stale(name) is None for name in framework)
    first = subprocess.run(
        ["git", "rev-list", "--max-parents=0", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[0]
    assert page.measured_at("bench_core_grad_lj2.txt")
    orig = page.measured_at
    try:
        page.measured_at = lambda output: first  # type: ignore[assignment]
        assert page.stale("bench_core_grad_lj2.txt") is not None
    finally:
        page.measured_at = orig  # type: ignore[assignment]
