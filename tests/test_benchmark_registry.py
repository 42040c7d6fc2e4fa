"""docs/results holds only what one command regenerates: ``python -m validation.benchmarks``.

Every file under docs/results/ (the stored ``simdiff report --quick`` in
quick/ aside) is the output of one entry of the registry, every entry's
module exists and takes the options the entry passes, and every result file
is cited by a docs page.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from validation.benchmarks.__main__ import BENCHMARKS, RESULTS, ROOT, main, outputs


def stored() -> set[str]:
    return {p.name for p in RESULTS.iterdir() if p.is_file() and not p.name.startswith(".")}


def test_every_result_file_is_made_by_one_entry() -> None:
    made = outputs()
    assert stored() - set(made) == set(), "result files no benchmark entry writes"
    assert set(made) - stored() == set(), "entries whose result file is not stored"


@pytest.mark.parametrize("bench", BENCHMARKS, ids=lambda b: b.output)
def test_each_entry_names_a_module_that_takes_its_options(bench) -> None:
    spec = importlib.util.find_spec(bench.module_path)
    assert spec is not None and spec.origin, bench.module_path
    source = Path(spec.origin).read_text()
    for opt in (a for a in bench.args if a.startswith("--")):
        assert f'"{opt}"' in source, f"{bench.module} has no option {opt}"
    for path in (a for a in bench.args if a.startswith("docs/results/")):
        assert Path(path).name in bench.writes, path


def test_every_result_file_is_cited_by_the_docs() -> None:
    pages = "\n".join(p.read_text() for p in (ROOT / "docs").rglob("*.md"))
    uncited = [name for name in stored() if not re.search(re.escape(name), pages)]
    assert not uncited, f"result files no docs page cites: {uncited}"


def test_unknown_entries_are_refused_and_list_runs(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["no_such_benchmark"])
    assert e.value.code == 2
    assert "unknown entries ['no_such_benchmark']" in capsys.readouterr().err
    assert main(["--list"]) == 0
    assert "python -m validation.benchmarks.bench_ode --problem memory" in capsys.readouterr().out


def test_the_runner_is_the_package_main() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "validation.benchmarks", "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert sum(" python -m " in f" {line}" for line in out.splitlines()) == len(BENCHMARKS)


def _recorded_command(name: str) -> str | None:
    if name.endswith(".json"):  # a benchmark that writes its JSON itself records it there
        return json.loads((RESULTS / name).read_text()).get("command")
    head = [line for line in (RESULTS / name).read_text().splitlines()[:6] if line.startswith("#")]
    return next((line.split("command: ", 1)[1] for line in head if "command: " in line), None)


def test_every_result_names_the_command_that_made_it() -> None:
    """Every result file was written by its registry entry: its header names the command."""
    wrong = {
        b.output: _recorded_command(b.output)
        for b in BENCHMARKS
        if _recorded_command(b.output) != b.command()
    }
    assert not wrong, f"result headers that do not name their registry command: {wrong}"


def test_a_run_replaces_its_file_and_is_recorded_in_the_store(tmp_path, monkeypatch) -> None:
    import contextlib

    import validation.benchmarks.__main__ as runner
    from simdiff.store import Store

    monkeypatch.setattr(runner, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(runner, "_lock", contextlib.nullcontext)  # not the machine-wide one
    runner.RESULTS.mkdir()
    (runner.RESULTS / "catalogue_list.txt").write_text("old\n")
    b = runner.Benchmark("catalogue_list.txt", "simdiff.cli", ("list",))
    store = tmp_path / "store"
    assert runner.run(b, store) == 0
    text = (runner.RESULTS / "catalogue_list.txt").read_text()
    assert text.startswith("# command: python -m simdiff.cli list\n") and "old" not in text
    assert "rosenbrock4" in text
    s = Store(store)
    [meta] = s.runs()
    assert (meta["name"], meta["status"]) == ("benchmark-catalogue_list", "complete")
    [entry] = s.entries(meta["id"])
    assert (entry["problem"], entry["kind"]) == ("catalogue_list.txt", "benchmark")
    assert entry["record"]["text"] == text
    # a failing run leaves the file as it was and records nothing
    bad = runner.Benchmark("catalogue_list.txt", "simdiff.cli", ("no-such-command",))
    assert runner.run(bad, store) != 0
    assert (runner.RESULTS / "catalogue_list.txt").read_text() == text
    assert len(Store(store).runs()) == 1


def test_bench_torch_measures_anew_unless_resumed(tmp_path, monkeypatch) -> None:
    """A registry run of bench_torch re-measures every problem: the stored ``--out`` is
    replaced at the end, not read as already done; ``--resume`` continues a stopped run."""
    import validation.benchmarks.bench_torch as bt

    measured: list[str] = []

    def child(name, args):
        measured.append(name)
        return {"problem": name, "failed": f"measured {len(measured)}"}

    monkeypatch.setattr(bt, "_child", child)
    out = tmp_path / "r.jsonl"
    out.write_text(json.dumps({"problem": "a", "failed": "old"}) + "\n")
    bt.main(["a", "b", "--out", str(out)])
    assert measured == ["a", "b"]
    assert "old" not in out.read_text() and not (tmp_path / ".r.jsonl.partial").exists()
    partial = tmp_path / ".r.jsonl.partial"  # a stopped run's records
    partial.write_text(json.dumps({"problem": "a", "failed": "stopped run"}) + "\n")
    bt.main(["a", "b", "--out", str(out), "--resume"])
    assert measured == ["a", "b", "b"]
    assert "stopped run" in out.read_text()
