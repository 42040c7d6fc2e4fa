"""Every ```python block of docs/*.md runs, page by page, and the numbers the pages quote reproduce.

A page's blocks run top to bottom in one namespace (a later block may use an
earlier one's names), from the repository root.  A block that cannot run in
the tests is marked on the line before its fence with
``<!-- no-run: reason -->``; the reason is required and such blocks are kept
few (:data:`MAX_NO_RUN`).  :data:`NUMBERS` lists numbers quoted in the pages'
prose and tables with the expression (evaluated in the page's namespace after
its code ran) that produces them: a number that no longer reproduces fails;
:data:`FACTS` lists further statements a page's results must satisfy.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(
    r"(?:<!--\s*no-run:\s*(?P<why>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)\n```", re.S
)
MAX_NO_RUN = 4
#: Pages whose code takes more than a few seconds.
SLOW = {"pes.md", "sensitivity.md", "ode.md", "pde.md", "taylor.md", "composability.md",
        "parameters.md"}  # fmt: skip


def blocks(page: Path) -> list[tuple[str, str | None]]:
    """``(code, no_run_reason)`` of each ```python block of ``page``."""
    return [(m["code"], m["why"]) for m in FENCE.finditer(page.read_text())]


#: Pages whose blocks another test already runs top to bottom (not run twice in CI).
RUN_ELSEWHERE = {
    "getting-started.md": "tests/test_docs.py::test_docs_page_code_runs",
    "index.md": "tests/test_docs.py::test_docs_page_code_runs",
}
PAGES = sorted(p.name for p in DOCS.glob("*.md") if blocks(p) and p.name not in RUN_ELSEWHERE)


def test_pages_run_elsewhere_are_run_there() -> None:
    text = (ROOT / "tests" / "test_docs.py").read_text()
    for page in RUN_ELSEWHERE:
        assert f'"{page}"' in text, page


def run_page(name: str, where: Path) -> dict:
    """Run the page's blocks in ``where`` (files they write land there)."""
    scope: dict = {"__name__": f"docs.{name}"}
    cwd = os.getcwd()
    os.chdir(where)
    try:
        for i, (code, why) in enumerate(blocks(DOCS / name)):
            if why is None:
                exec(compile(code, f"{name}[block {i}]", "exec"), scope)
    finally:
        os.chdir(cwd)
    return scope


def _num(text: str) -> float:
    return float(text.replace("\u2212", "-").replace(",", ""))


#: (page, regex with one group: the quoted number, expression producing it, relative tolerance)
NUMBERS: list[tuple[str, str, str, float]] = [
    ("pes.md", r"LJ7 minimum \(([−\-\d.]+)\), softest mode", "m7.energy", 1e-6),
    ("pes.md", r"softest mode \| — \| ([−\-\d.]+) \(barrier", "s7.energy", 1e-6),
    ("pes.md", r"\(barrier ([\d.]+)\) \| 1 \|", "s7.energy - m7.energy", 1e-5),
    ("pes.md", r"\(barrier [\d.]+\) \| 1 \| (\d+) \|", "s7.nit", 0.0),
    (
        "pes.md",
        r"\| `lj13` \| perturbed icosahedron start \| \$E_\\text\{min\} = ([−\-\d.]+)\$",
        "m.energy",
        1e-6,
    ),
    ("ode.md", r"this converges in (\d+) iterations", "res.nit", 0.0),
    (
        "ode.md",
        r"within \$([\d.]+)\\cdot10\^\{-7\}\$\s+relative of the true",
        "1e7 * np.max(np.abs(res.x / np.array([1.5, 1.0, 1.0, 3.0]) - 1))",
        0.05,
    ),
    ("sensitivity.md", r"; (\d+) function and \d+ Jacobian evaluations", "fit.nfev", 0.0),
    ("sensitivity.md", r"; \d+ function and (\d+) Jacobian evaluations", "fit.njac", 0.0),
    ("sensitivity.md", r"fit\.x = \[([\d.]+),", "fit.x[0]", 1e-4),
    ("sensitivity.md", r"fit\.x = \[[\d.]+, [\d.]+, [\d.]+, ([\d.]+)\]", "fit.x[3]", 1e-4),
    ("sensitivity.md", r"same optimum in (\d+) iterations", "opt.nit", 0.0),
    ("sensitivity.md", r"iterations, (\d+) exact Hessians", "opt.nhess", 0.0),
    (
        "sensitivity.md",
        r"\| \$\\alpha\$ \| \[[\d.]+, [\d.]+\] \| \[([\d.]+),",
        'prof["alpha"].lower',
        1e-4,
    ),
    (
        "sensitivity.md",
        r"\| \$\\gamma\$ \| \[[\d.]+, [\d.]+\] \| \[[\d.]+, ([\d.]+)\]",
        'prof["gamma"].upper',
        1e-4,
    ),
    (
        "sensitivity.md",
        r"\| \$\\beta\$ \| \[[\d.]+, [\d.]+\] \| \[[\d.]+, [\d.]+\] \| \d+ \| (\d+) \|",
        'prof["beta"].counts["nhess"]',
        0.0,
    ),
    ("sensitivity.md", r"\| \$A\$ \| — \| \[([\d.]+),", 'dprof["A"].lower', 1e-5),
    ("sensitivity.md", r"\| \$A\$ \| — \| \[[\d.]+, ([\d.]+)\]", 'dprof["A"].upper', 1e-5),
]


#: (page, expression that must hold in the page's namespace after its code ran)
FACTS: list[tuple[str, str]] = [
    ("pes.md", "m.index == 0"),  # LJ13's minimum
    ("pes.md", "nm.n_rigid == 6 and nm.frequencies.shape == (33,)"),
    ("pes.md", "phi.shape == (33, 33, 33)"),
    ("pes.md", "bool(np.all(np.isfinite(hess)))"),
]


def test_no_run_markers_are_few_and_give_reasons() -> None:
    marked = [(p, why) for p in PAGES for _, why in blocks(DOCS / p) if why is not None]
    assert len(marked) <= MAX_NO_RUN, marked
    assert all(why.strip() for _, why in marked)


@pytest.mark.parametrize(
    "page", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW else p for p in PAGES]
)
def test_page_code_runs_and_its_numbers_reproduce(page: str, tmp_path: Path) -> None:
    scope = run_page(page, tmp_path)
    text = (DOCS / page).read_text()
    for where, pattern, expr, rtol in NUMBERS:
        if where != page:
            continue
        m = re.search(pattern, text)
        assert m, f"{page}: the quoted number {pattern!r} is gone; update NUMBERS"
        quoted, got = _num(m.group(1)), float(np.asarray(eval(expr, scope)))
        assert got == pytest.approx(quoted, rel=rtol, abs=0 if rtol else 0.5), (
            f"{page} quotes {m.group(1)} for {expr}; the code gives {got}"
        )
    for where, fact in FACTS:
        if where == page:
            assert eval(fact, {"np": np, **scope}), f"{page}: {fact} does not hold"


def test_every_page_with_code_is_run() -> None:
    """Pages in docs/ subfolders (api/, results/) carry no code the tests would miss."""
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if blocks(p)}
    assert pages <= set(PAGES) | set(RUN_ELSEWHERE), sorted(pages - set(PAGES) - set(RUN_ELSEWHERE))
