"""Run pytest in a child process with one of the suite's timing plugins (tests/_*_times.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent


def run_with_plugin(plugin: str, where: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``pytest -p plugin`` on the tests in ``where``, as one process (``main``), ``env`` added.

    No other plugin is loaded (their imports would cost seconds, not the test's
    milliseconds), and the child is not an xdist worker even when this process is one.
    """
    child = {
        **os.environ,
        "PYTHONPATH": str(TESTS),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        **env,
    }
    child.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", plugin, "-p", "no:cacheprovider",
         str(where)],
        cwd=where, env=child, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
