"""The tables of the docs are the stored runs' numbers: each cell is found in its result file."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"

#: docs/parameters.md's row labels -> the problem names of bench_structured_params
PROBLEMS = {"10 scalars in a dict": "dict10", "one leaf of shape (10,)": "leaf10",
            "10 leaves of shape (10,)": "leaves100",
            "Lotka–Volterra fit, 120 RK4 steps": "lv_fit_t6",
            "Lotka–Volterra fit, 480 RK4 steps": "lv_fit_t24",
            "LJ-13 by species (n = 39)": "lj13_ab", "LJ-38 by species (n = 114)": "lj38_ab"}  # fmt: skip
POINTS = {"numpy": "numpy", "framework arrays": "native"}
COLUMNS = [("jax", "grad"), ("jax", "hessian"), ("torch", "grad"), ("torch", "hessian")]


def _stored() -> dict[tuple[str, str, str, str], tuple[float, float]]:
    out = {}
    for line in (DOCS / "results" / "bench_structured_params.txt").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 7 and cells[0] in PROBLEMS.values():
            out[cells[0], cells[3], cells[2], cells[4]] = (float(cells[5]), float(cells[6]))
    return out


def _performance_section(output: str) -> str | None:
    """The generated docs/performance.md section of a result, or None where the page lists it
    as to be re-measured (stale: measured before a change to the code it measures)."""
    text = (DOCS / "performance.md").read_text()
    heading = "### " + output.rsplit(".", 1)[0].replace("_", " ") + "\n"
    if heading not in text:
        todo = text[text.index("## To be re-measured") :]
        assert f"[results/{output}]" in todo, f"{output}: neither shown nor to be re-measured"
        return None
    return text[text.index(heading) :].split("\n### ", 1)[0].split("\n## ", 1)[0]


def test_structured_parameter_cost_table_is_the_stored_run():
    stored = _stored()
    text = (DOCS / "parameters.md").read_text()
    rows = [line for line in text.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in PROBLEMS]  # fmt: skip
    assert len(rows) == 2 * len(PROBLEMS)
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        problem, point = PROBLEMS[cells[0]], POINTS[cells[1]]
        for (backend, kind), cell in zip(COLUMNS, cells[2:], strict=True):
            if cell == "—":  # a configuration the run leaves out
                assert (problem, point, backend, kind) not in stored, (line, cell)
                continue
            m = re.match(r"([\d.e+]+) → ([\d.e+]+) ms", cell)
            assert m, cell
            flat, tree = stored[problem, point, backend, kind]
            for shown, value in zip(m.groups(), (flat, tree), strict=True):
                assert abs(float(shown) - value) <= 0.006 * value + 5e-4, (line, cell, value)


def test_structured_parameter_rows_of_the_performance_page_are_the_stored_run():
    """docs/performance.md's structured-parameter table: each row a line of the stored run."""
    stored = set((DOCS / "results" / "bench_structured_params.txt").read_text().splitlines())
    section = _performance_section("bench_structured_params.txt")
    if section is None:
        return
    rows = [line for line in section.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in PROBLEMS.values()]  # fmt: skip
    assert len(rows) >= 8
    for line in rows:
        assert line in stored, line


def test_ode_gradient_tables_are_the_stored_run():
    """Each row of the Lotka-Volterra gradient tables in docs/ode.md and docs/performance.md
    is a line of the stored run's output."""
    stored = set((DOCS / "results" / "bench_ode_gradient.txt").read_text().splitlines())
    sections = {"ode.md": (DOCS / "ode.md").read_text()}
    text = sections["ode.md"]
    first = "python -m validation.benchmarks bench_ode_gradient"
    sections["ode.md"] = text[text.index(first) :].split("\n### ", 1)[0]
    if (shown := _performance_section("bench_ode_gradient.txt")) is not None:
        sections["performance.md"] = shown
    for doc, section in sections.items():
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
        if line.startswith("| ") and len(cells) == 6 and cells[1] != "gradient (ms)":
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
    for name in ("bench_core_hessian_lj38.txt", "bench_core_grad_lj2.txt"):
        section = _performance_section(name)
        if section is None:
            continue
        shown = [line for line in section.splitlines() if line.startswith("| jax:")
                 or line.startswith("| torch:")]  # fmt: skip
        lines = (DOCS / "results" / name).read_text().splitlines()
        stored = [line for line in lines if line.startswith(("| jax:", "| torch:"))]
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


def test_profile_cost_paragraph_is_the_stored_run():
    """docs/sensitivity.md's cost and agreement of the LV profiles are the stored JSON's."""
    res = json.loads((DOCS / "results" / "profile_likelihood_lv.json").read_text())
    text = " ".join((DOCS / "sensitivity.md").read_text().split())
    m = re.search(r"interval ends take ([\d.]+) s \((\d+) exact Hessians and gradients, "
                  r"evaluated in (\d+) batched calls", text)  # fmt: skip
    assert m, "the profile cost sentence of docs/sensitivity.md"
    counts = res["counts_profile_likelihood"]
    assert float(m[1]) == pytest.approx(res["seconds_profile_likelihood"], abs=0.005)
    assert (int(m[2]), int(m[3])) == (counts["nhess"], counts["batches"])
    m = re.search(r"takes ([\d.]+) s with simdiff's exact Jacobian \((\d+)x; (\d+) Jacobians\) "
                  r"and (\d+) s with SciPy's finite differences on NumPy \((\d+)x\)", text)  # fmt: skip
    assert m, "the brute-force cost sentence of docs/sensitivity.md"
    bf, speed = res["seconds_brute_force"], res["speedup"]
    assert float(m[1]) == pytest.approx(bf["exact-jac"], abs=0.05)
    assert int(m[2]) == round(speed["exact-jac"])
    assert int(m[3]) == res["counts_brute_force"]["exact-jac"]["njac"]
    assert int(m[4]) == round(bf["fd"])
    assert abs(int(m[5]) - speed["fd"]) <= 0.5 * 10 ** (len(m[5]) - 2)  # 2 significant digits
    m = re.search(r"equals both re-optimisations to ([\d.e-]+) in \$L\$", text)
    assert m and float(m[1]) == pytest.approx(max(res["max_abs_objective_diff"].values()), rel=0.05)
    assert all(res["meets_targets"].values())


def test_identity_recheck_table_is_the_stored_run():
    """docs/performance.md's identity-recheck table is the stored run, row for row, and the
    rows any text there names as above the 5% target are those whose share is above it."""
    stored = [line for line in
              (DOCS / "results" / "bench_identity_recheck.txt").read_text().splitlines()
              if line.startswith("| ") and not line.startswith("| problem")]  # fmt: skip
    section = _performance_section("bench_identity_recheck.txt")
    if section is None:
        return
    rows = [line for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| problem")]  # fmt: skip
    assert rows == stored
    over = {" ".join(c.strip() for c in line.strip("|").split("|")[:3]) for line in stored
            if float(line.split("|")[7].strip().rstrip("%")) > 5.0}  # fmt: skip
    named = set(re.findall(r"([\w-]+ (?:jax|torch) \w+) \([\d.]+%\)", section))
    assert named <= over


def test_ode_hires_table_is_the_stored_run():
    """Each row of docs/ode.md's HIRES table is a line of the stored run's output."""
    stored = set((DOCS / "results" / "bench_ode_hires_gradient.txt").read_text().splitlines())
    text = (DOCS / "ode.md").read_text()
    section = text[text.index("### Stiff: HIRES at rtol 1e-9") :].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith(("| simdiff-", "| diffrax"))]
    assert len(rows) == 6
    for line in rows:
        assert line in stored, line


def test_ode_robertson_tables_are_the_stored_run():
    """Each row of docs/ode.md's Robertson tables is a line of the stored run's output."""
    stored = set((DOCS / "results" / "bench_ode_robertson.txt").read_text().splitlines())
    text = (DOCS / "ode.md").read_text()
    section = text[text.index("### Stiff: Robertson to t = 1e5") :].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines()
            if line.startswith("| ") and not line.startswith(("| solver", "| diffrax Kvaerno5 rtol"))]  # fmt: skip
    assert len(rows) == 26  # 20 configurations, 3 + 3 interpolated comparisons
    assert any("Rodas5P compile=True" in line for line in rows)
    for line in rows:
        assert line in stored, line
