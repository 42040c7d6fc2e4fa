"""docs/results holds only what one command regenerates: ``python -m validation.benchmarks``.

Every file under docs/results/ (the stored ``simdiff report --quick`` in
quick/ aside) is the output of one entry of the registry, every entry's
module exists and takes the options the entry passes, and every result file
is cited by a docs page.
"""

from __future__ import annotations

import importlib.util
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
