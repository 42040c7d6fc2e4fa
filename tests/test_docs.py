"""Docstring examples run as doctests; the README's commands and example stay true."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import numpy as np
import pytest

import simdiff

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(simdiff.__path__, prefix="simdiff.")
    if ".cli" not in m.name
)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


def _readme_commands():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)


def test_ci_runs_the_readme_test_command():
    commands = _readme_commands()
    test_cmd = next(c for c in commands if "pytest" in c)
    assert test_cmd in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_commands_install_cpu_torch_pin():
    for cmd in _readme_commands()[:2]:
        assert "torch==2.13.0" in cmd and cmd.startswith("python3 -m venv .venv")


def test_readme_example_runs(capsys):
    text = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)\n```", text, flags=re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    printed = float(capsys.readouterr().out.strip())
    assert printed < 1e-10
    assert np.isfinite(printed)


@pytest.mark.parametrize("page", ["getting-started.md", "index.md"])
def test_docs_page_code_runs(page):
    text = (ROOT / "docs" / page).read_text()
    code = "\n".join(re.findall(r"```python\n(.*?)\n```", text, flags=re.S))
    exec(compile(code, page, "exec"), {})
