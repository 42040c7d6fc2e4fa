"""tests/_gc_times.py, the plugin that times the suite's garbage collections, reports them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent


def test_the_gc_plugin_reports_each_generation_under_the_thresholds_asked(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text("import gc\n\ndef test_collects():\n    gc.collect()\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(TESTS),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # no other plugin's imports: a second, not five
        "SIMDIFF_GC_THRESHOLDS": "5000,20,30",
    }
    env.pop("PYTEST_XDIST_WORKER", None)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "_gc_times", "-p", "no:cacheprovider",
         str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    line = re.search(
        r"^GC main seconds \[(.*)\] counts \[(\d+), (\d+), (\d+)\] thresholds \((.*)\)$",
        out.stderr,
        re.MULTILINE,
    )
    assert line, out.stderr
    seconds = [float(s) for s in line.group(1).split(", ")]
    assert len(seconds) == 3 and min(seconds) >= 0
    assert int(line.group(4)) >= 1  # the test's own full collection, at least
    assert line.group(5) == "5000, 20, 30"  # not Python's defaults
