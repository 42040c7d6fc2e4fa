"""The tables of the docs are the stored runs' numbers: each cell is found in its result file."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"

#: docs/parameters.md's row labels -> the problem names of bench_structured_params
PROBLEMS = {"10 scalars in a dict": "dict10", "one leaf of shape (10,)": "leaf10",
            "10 leaves of shape (10,)": "leaves100"}  # fmt: skip
POINTS = {"numpy": "numpy", "framework arrays": "native"}
COLUMNS = [("jax", "grad"), ("jax", "hessian"), ("torch", "grad"), ("torch", "hessian")]


def _stored() -> dict[tuple[str, str, str, str], tuple[float, float]]:
    out = {}
    for line in (DOCS / "results" / "bench_structured_params.txt").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 7 and cells[0] in PROBLEMS.values():
            out[cells[0], cells[3], cells[2], cells[4]] = (float(cells[5]), float(cells[6]))
    return out


def test_structured_parameter_cost_table_is_the_stored_run():
    stored = _stored()
    text = (DOCS / "parameters.md").read_text()
    rows = [line for line in text.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in PROBLEMS]  # fmt: skip
    assert len(rows) == 6
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        problem, point = PROBLEMS[cells[0]], POINTS[cells[1]]
        for (backend, kind), cell in zip(COLUMNS, cells[2:], strict=True):
            m = re.match(r"([\d.]+) → ([\d.]+) ms", cell)
            assert m, cell
            flat, tree = stored[problem, point, backend, kind]
            for shown, value in zip(m.groups(), (flat, tree), strict=True):
                assert abs(float(shown) - value) <= 0.006 * value + 5e-4, (line, cell, value)


def test_ode_gradient_tables_are_the_stored_run():
    """Each row of the Lotka-Volterra gradient tables in docs/ode.md and docs/performance.md
    is a line of the stored run's output."""
    stored = set((DOCS / "results" / "bench_ode_gradient.txt").read_text().splitlines())
    for doc, first in (("ode.md", "python -m validation.benchmarks bench_ode_gradient"),
                       ("performance.md", "### bench ode gradient")):  # fmt: skip
        text = (DOCS / doc).read_text()
        section = text[text.index(first) :].split("\n### ", 1)[0]
        rows = [line for line in section.splitlines()
                if line.startswith("| simdiff-") or line.startswith("| diffrax (")]  # fmt: skip
        assert len(rows) >= 3, doc
        for line in rows:
            assert line in stored, (doc, line)


def test_ode_lorenz96_table_is_the_stored_run():
    """Each row of docs/ode.md's Lorenz-96 table is a line of the stored run's output."""
    stored = set((DOCS / "results" / "bench_ode_lorenz96.txt").read_text().splitlines())
    text = (DOCS / "ode.md").read_text()
    section = text[text.index("python -m validation.benchmarks bench_ode_lorenz96") :]
    section = section.split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    assert [line.split("|")[1].strip() for line in rows] == ["10", "100", "1000", "10000"]
    for line in rows:
        assert line in stored, line
