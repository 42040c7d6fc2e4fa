"""The simdiff command: exit codes, bad option values, user problems as module:attribute, show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simdiff.cli import main
from simdiff.core.catalogue import code_digest
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
    assert "--configs: unknown ['warp-drive']; valid: jax-jit" in capsys.readouterr().err
    assert main(["report", "--claims", "C42", "--out", "unused"]) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["check", "seed", "--derivatives", "bogus"],
            "--derivatives: unknown ['bogus']; valid: grad",
        ),
        (["check", "seed", "--backends", "jax,tpu"], "--backends: unknown ['tpu']"),
        (["check", "seed", "--orders", "abc"], "expected a positive integer; got 'abc'"),
        (["check", "seed", "--orders", "0"], "expected a positive integer; got 0"),
        (["compare", "seed", "--repeats", "0"], "expected a positive integer; got 0"),
        (["compare", "seed", "--derivatives", "grad,lapl"], "--derivatives: unknown derivative"),
        (["--threads", "x", "list"], "expected a positive integer; got 'x'"),
        (["list", "--tag", "no-such-tag"], "--tag: unknown tag 'no-such-tag'; valid:"),
        (["report", "--problems", "nope", "--out", "unused"], "unknown problem 'nope'"),
        (["check", "no_such_module:thing"], "cannot import 'no_such_module'"),
        (["show", "no/such/store"], "no/such/store: no such store"),
    ],
)
def test_bad_option_values_are_usage_errors(argv, message, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_attribute_that_is_not_a_problem_is_a_usage_error(user_module: str, capsys) -> None:
    assert main(["check", f"{user_module}:np"]) == 2
    assert "is not a simdiff.Problem nor a function returning one; got module" in (
        capsys.readouterr().err
    )
    assert main(["check", f"{user_module}:_f"]) == 2  # fn(x, ops), not a factory
    assert "neither a simdiff.Problem nor a zero-argument function" in capsys.readouterr().err
    assert main(["check", f"{user_module}:missing"]) == 2
    assert "has no attribute 'missing'; it defines bad, good, make, np, simdiff" in (
        capsys.readouterr().err
    )


def test_a_module_in_the_current_directory_is_found_without_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    (tmp_path / "cwd_problems_cli.py").write_text(USER)
    monkeypatch.chdir(tmp_path)
    path = list(sys.path)
    try:
        assert main(["check", "cwd_problems_cli:good", "--derivatives", "grad"]) == 0
        assert sys.path == path
    finally:
        sys.modules.pop("cwd_problems_cli", None)


def test_a_damaged_store_is_a_usage_error_naming_the_path(tmp_path: Path, capsys) -> None:
    (tmp_path / "store").write_bytes(b"not a store")
    assert main(["check", "seed", "--derivatives", "grad", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'store'}: a file, not a simdiff store" in err and "Traceback" not in err
    assert main(["show", str(tmp_path / "store")]) == 2


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
    (run,) = Store(out / "store").runs()
    (entry,) = Store(out / "store").entries(run["id"])
    assert {e["config"] for e in entry["record"]["entries"]} == {
        "jax-jit",
        "torch-eager",
        "scipy-fd",
    }
    assert main(["show", str(out / "store")]) == 0
    listing = capsys.readouterr().out
    assert f"{out / 'store'}: 1 runs" in listing and run["id"] in listing and "complete" in listing
    assert main(["show", str(out / "store"), "--run", run["id"]]) == 0
    assert f"{user_module}:good" in capsys.readouterr().out


def test_check_runs_are_matched_by_fingerprint(user_module: str, tmp_path: Path) -> None:
    out = tmp_path / "res"
    args = ["check", f"{user_module}:good", "--derivatives", "grad", "--out", str(out)]
    assert main(args) == 0
    store = Store(out / "store")
    (run,) = store.runs()
    assert run["status"] == "complete" and set(run["params"]["fingerprints"]) == {
        f"{user_module}:good"
    }


@pytest.mark.slow
def test_report_runs_end_to_end_on_a_small_selection(tmp_path: Path) -> None:
    out = tmp_path / "results"
    code = main(
        ["report", "--quick", "--problems", "seed,spherical", "--claims", "C6", "--out", str(out)]
    )
    assert code == 0
    # compile times from cold caches: a fresh Inductor directory, removed after; no JAX cache
    store = Store(out / "store")
    (run,) = store.runs()
    caches = run["env"]["compiler_caches"]
    assert caches["jax_persistent_cache"] is None
    assert "simdiff-inductor-cache-" in caches["torch_inductor_cache"]
    assert not Path(caches["torch_inductor_cache"]).exists()
    # the fresh directory is not left in the environment (what is there depends on whether
    # torch set its default before: it does when first used, maybe inside main)
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") != caches["torch_inductor_cache"]
    parts = {k: store.get(run["id"], "claims", "C6", f"process-{k}", arrays=False) for k in (1, 2)}
    child = parts[2]["record"]["compiler_caches"]  # a fresh process, a cache of its own
    assert parts[1]["record"]["compiler_caches"] == caches
    assert "simdiff-inductor-cache-" in child["torch_inductor_cache"]
    assert child["torch_inductor_cache"] != caches["torch_inductor_cache"]
    assert child["jax_persistent_cache"] is None
    text = (out / "report.md").read_text()
    assert "| C6 |" in text and "spherical" in text and "seed" in text
    assert "<h2>Claims</h2>" in (out / "report.html").read_text()
    assert run["status"] == "complete"
    kinds = {(e["problem"], e["kind"]) for e in store.entries(run["id"], arrays=False)}
    assert {
        ("seed", "check"),
        ("seed", "compare"),
        ("spherical", "check"),
        ("claims", "C6"),  # process-1, process-2 and claim entries
    } <= kinds
    # A rerun appends a new run (the first is complete) ...
    assert main(["report", "--quick", "--problems", "seed", "--claims", "", "--out", str(out)]) == 0
    assert len(store.runs()) == 2


def test_report_resumes_an_interrupted_run(tmp_path: Path) -> None:
    out = tmp_path / "results"
    store = Store(out / "store")
    params = {"quick": True, "problems": ["seed"], "claims": [], "threads": 1}
    # A run made by other code (a catalogue entry or solver changed since) is not resumed ...
    other = store.start_run("report-quick", {**params, "code_sha256": "0" * 64})
    params["code_sha256"] = code_digest()
    run = store.start_run("report-quick", params)  # as an interrupted `simdiff report` left it
    marker = {"passed": True, "n": 1, "entries": [], "marker": "from the interrupted run"}
    store.put(run, "seed", "check", "all", marker)
    assert main(["report", "--quick", "--problems", "seed", "--claims", "", "--out", str(out)]) == 0
    stale, info = store.runs()
    assert (stale["id"], stale["status"]) == (other, "running")
    assert info["id"] == run and info["status"] == "complete"
    entries = {(e["problem"], e["kind"]): e for e in store.entries(run, arrays=False)}
    assert entries[("seed", "check")]["record"]["marker"] == "from the interrupted run"
    assert ("seed", "compare") in entries  # the missing part was measured


# --------------------------------------------------------------------------- --json, imports


def test_list_json_is_one_document(capsys) -> None:
    assert main(["list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_name = {p["name"]: p for p in doc["problems"]}
    assert by_name["seed8"]["n"] == 8 and by_name["seed8"]["output_shape"] == []
    assert "closed-form" in by_name["seed8"]["tags"]
    assert main(["list", "--json", "--tag", "ode"]) == 0
    names = {p["name"] for p in json.loads(capsys.readouterr().out)["problems"]}
    assert "seed8" not in names and "lorenz63" in names


def test_list_imports_neither_jax_nor_torch() -> None:
    code = (
        "import sys\n"
        "from simdiff.cli import main\n"
        "assert main(['list']) == 0\n"
        "print('FRAMEWORKS', sorted({'jax', 'torch'} & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert "seed8" in out
    assert "FRAMEWORKS []" in out


def test_check_json(user_module: str, capsys) -> None:
    assert main(["check", f"{user_module}:good", "--derivatives", "grad", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 0 and doc["run"] is None
    (res,) = doc["problems"]
    assert res["problem"] == f"{user_module}:good" and res["verdict"] == "pass"
    assert {e["derivative"] for e in res["entries"]} == {"grad"}
    assert main(["check", f"{user_module}:bad", "--derivatives", "grad", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 1 and doc["problems"][0]["verdict"] == "fail"


def test_compare_and_show_json(user_module: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "res"
    argv = ["compare", f"{user_module}:good", "--configs", "jax-jit,scipy-fd", "--repeats", "2"]
    assert main([*argv, "--derivatives", "grad", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (res,) = doc["problems"]
    assert {e["config"] for e in res["entries"]} == {"jax-jit", "scipy-fd"}
    assert main(["show", str(out / "store"), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["id"] == doc["run"] and run["status"] == "complete"
    assert main(["show", str(out / "store"), "--run", run["id"], "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["entries"]
    assert entry["problem"] == f"{user_module}:good" and entry["kind"] == "compare"


def test_report_decides_a_claim_from_its_stored_parts(tmp_path: Path) -> None:
    """A claim part stored by an interrupted run is not measured again: the verdict uses it."""
    from validation.claims._common import part

    out = tmp_path / "results"
    store = Store(out / "store")
    params = {"quick": True, "problems": ["seed"], "claims": ["C9"], "threads": 1}
    run = store.start_run("report-quick", {**params, "code_sha256": code_digest()})
    store.put(run, "seed", "check", "all", {"passed": True, "n": 1, "entries": []})
    store.put(run, "seed", "compare", "all", {"entries": [], "baseline": "jax-jit"})
    rows = [["hessian", "pass", ""], ["hvp", "pass", ""], ["derivative3", "fail", "planted"]]
    stored = part(values=[], measured="from the interrupted run")
    stored["details"]["checks"] = rows
    stored.update(id="C9", process=1, seconds=0.0)
    store.put(run, "claims", "C9", "process-1", stored)
    args = ["report", "--quick", "--problems", "seed", "--claims", "C9", "--out", str(out)]
    assert main(args) == 0
    rec = store.get(run, "claims", "C9", "claim", arrays=False)["record"]
    assert rec["outcome"] == "confirmed" and rec["measured"] == "from the interrupted run"
    assert "did not check" in rec["verdict"]
