"""The simdiff command: exit codes, unknown names, user problems as module:attribute."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from simdiff.cli import main
from simdiff.store import Store

USER = """
import numpy as np
import simdiff

def _f(x, ops):
    return ops.sum(ops.sin(x) * x)

good = simdiff.Problem(_f, x0=np.array([0.3, 0.8]), name="good")
bad = simdiff.Problem(lambda x, ops: ops.sum(ops.stop_gradient(x) * x), x0=np.array([0.3, 0.8]),
                      name="bad")

def make():
    return good
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "my_problems_cli.py").write_text(USER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_problems_cli"
    sys.modules.pop("my_problems_cli", None)


def test_check_passes_on_a_user_problem(user_module: str, capsys) -> None:
    assert main(["check", f"{user_module}:good", "--derivatives", "grad,hessian"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["check", f"{user_module}:make", "--derivatives", "grad"]) == 0


def test_check_fails_with_nonzero_exit(user_module: str, capsys) -> None:
    assert main(["check", f"{user_module}:bad", "--derivatives", "grad"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_unknown_names_exit_2_and_list_valid_ones(capsys) -> None:
    assert main(["check", "no-such-problem"]) == 2
    err = capsys.readouterr().err
    assert "unknown problem 'no-such-problem'" in err and "rosenbrock4" in err
    assert main(["check", "no_such_module:thing"]) == 2
    assert main(["compare", "seed", "--configs", "jax-jit,warp-drive"]) == 2
    assert "unknown configurations ['warp-drive']" in capsys.readouterr().err
    assert main(["report", "--claims", "C42", "--out", "unused"]) == 2


def test_list(capsys) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "seed8" in out and "n=8" in out


def test_compare_on_a_user_problem_writes_the_store(
    user_module: str, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "res"
    code = main(
        [
            "compare",
            f"{user_module}:good",
            "--configs",
            "jax-jit,torch-eager,scipy-fd",
            "--repeats",
            "2",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    assert "torch-eager" in capsys.readouterr().out
    (run,) = Store(out / "simdiff.h5").runs()
    (entry,) = Store(out / "simdiff.h5").entries(run["id"])
    assert {e["config"] for e in entry["record"]["entries"]} == {
        "jax-jit",
        "torch-eager",
        "scipy-fd",
    }


@pytest.mark.slow
def test_report_runs_end_to_end_on_a_small_selection(tmp_path: Path) -> None:
    out = tmp_path / "results"
    code = main(
        ["report", "--quick", "--problems", "seed,spherical", "--claims", "C6", "--out", str(out)]
    )
    assert code == 0
    text = (out / "report.md").read_text()
    assert "| C6 |" in text and "spherical" in text and "seed" in text
    store = Store(out / "simdiff.h5")
    (run,) = store.runs()
    assert run["status"] == "complete"
    kinds = {(e["problem"], e["kind"]) for e in store.entries(run["id"], arrays=False)}
    assert {
        ("seed", "check"),
        ("seed", "compare"),
        ("spherical", "check"),
        ("claims", "C6"),
    } <= kinds
    # A rerun appends a new run (the first is complete) ...
    assert main(["report", "--quick", "--problems", "seed", "--claims", "", "--out", str(out)]) == 0
    assert len(store.runs()) == 2


def test_report_resumes_an_interrupted_run(tmp_path: Path) -> None:
    out = tmp_path / "results"
    store = Store(out / "simdiff.h5")
    params = {"quick": True, "problems": ["seed"], "claims": [], "threads": 1}
    run = store.start_run("report-quick", params)  # as an interrupted `simdiff report` left it
    marker = {"passed": True, "n": 1, "entries": [], "marker": "from the interrupted run"}
    store.put(run, "seed", "check", "all", marker)
    assert main(["report", "--quick", "--problems", "seed", "--claims", "", "--out", str(out)]) == 0
    (info,) = store.runs()
    assert info["id"] == run and info["status"] == "complete"
    entries = {(e["problem"], e["kind"]): e for e in store.entries(run, arrays=False)}
    assert entries[("seed", "check")]["record"]["marker"] == "from the interrupted run"
    assert ("seed", "compare") in entries  # the missing part was measured
