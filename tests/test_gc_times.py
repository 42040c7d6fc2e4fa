"""tests/_gc_times.py, the plugin that times the suite's garbage collections, reports them."""

from __future__ import annotations

import re
from pathlib import Path

from _plugin_run import run_with_plugin


def test_the_gc_plugin_reports_each_generation_under_the_thresholds_asked(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text("import gc\n\ndef test_collects():\n    gc.collect()\n")
    out = run_with_plugin("_gc_times", tmp_path, SIMDIFF_GC_THRESHOLDS="5000,20,30")
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
