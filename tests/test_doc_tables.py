"""The tables of the docs are the stored runs' numbers: each cell is found in its result file."""

from __future__ import annotations

import math
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


def test_ode_event_gradient_table_is_the_stored_run():
    """docs/ode.md's table of gradients through events: each time is the stored run's, to
    its rounding, in the column of its configuration."""
    stored: dict[tuple[str, str], float] = {}
    problem = ""
    for line in (DOCS / "results" / "bench_ode_events_gradient.txt").read_text().splitlines():
        if line.startswith(("decay_event:", "bouncing_ball_drag:")):
            problem = line.split(":")[0]
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 5 and cells[1] != "gradient (ms)":
            stored[problem, cells[0]] = float(cells[1])
    columns = ["simdiff-jax", "simdiff-jax (jax.Array point)", "simdiff-torch",
               "diffrax (Event, Newton", "torchdiffeq (odeint_event"]  # fmt: skip
    rows = {"| decay, dt/dk (ms) |": "decay_event",
            "| ball, d$t_4$/d$(e, c)$ (ms) |": "bouncing_ball_drag"}  # fmt: skip
    text = (DOCS / "ode.md").read_text()
    for start, problem in rows.items():
        (line,) = [ln for ln in text.splitlines() if ln.startswith(start)]
        shown = [float(c) for c in line[len(start) :].strip(" |").split("|")]
        for column, value in zip(columns, shown, strict=True):
            (key,) = [k for k in stored if k[0] == problem and k[1].startswith(column)
                      and (column != "simdiff-jax" or k[1] == column)]  # fmt: skip
            want = stored[key]
            assert abs(value - want) <= 0.5 * 10 ** (math.floor(math.log10(want)) - 2) + 1e-9, (
                problem, column, value, want)  # fmt: skip


def test_core_overhead_tables_are_the_stored_runs():
    """docs/performance.md's core-overhead tables are the rows of the stored bench_core runs."""
    text = (DOCS / "performance.md").read_text()
    section = text[text.index("## Core overhead") :].split("\n## ", 1)[0]
    shown = [line for line in section.splitlines() if line.startswith("| jax:")
             or line.startswith("| torch:")]  # fmt: skip
    stored: list[str] = []
    for name in ("bench_core_hessian_lj38.txt", "bench_core_grad_lj2.txt"):
        lines = (DOCS / "results" / name).read_text().splitlines()
        stored += [line for line in lines if line.startswith(("| jax:", "| torch:"))]
    assert shown == stored


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


def test_ode_hires_table_is_the_stored_run():
    """Each row of docs/ode.md's HIRES table is a line of the stored run's output."""
    stored = set((DOCS / "results" / "bench_ode_hires_gradient.txt").read_text().splitlines())
    text = (DOCS / "ode.md").read_text()
    section = text[text.index("### Stiff: HIRES at rtol 1e-9") :].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith(("| simdiff-", "| diffrax"))]
    assert len(rows) == 6
    for line in rows:
        assert line in stored, line
