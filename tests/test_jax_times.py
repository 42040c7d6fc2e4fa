"""tests/_jax_times.py, the plugin that sums the time JAX spends making programs, reports it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent

TWO_PROGRAMS = """
import jax
import jax.numpy as jnp


def test_compiles_two_programs():
    jax.jit(lambda x: jnp.sin(x) * 2.0)(jnp.ones(3))
    jax.jit(lambda x: jnp.cos(x) + x)(jnp.ones(4))
"""


def test_the_jax_plugin_reports_cpu_and_each_phase_of_the_compiles(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(TWO_PROGRAMS)
    env = {
        **os.environ,
        "PYTHONPATH": str(TESTS),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # no other plugin's imports
    }
    env.pop("PYTEST_XDIST_WORKER", None)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "_jax_times", "-p", "no:cacheprovider",
         str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    number = r"(\d+\.\d) s"
    line = re.search(
        rf"^JAX main cpu {number} children {number}; compile {number} \((\d+)\) "
        rf"lower {number} \((\d+)\) trace {number} \((\d+)\)$",
        out.stderr,
        re.MULTILINE,
    )
    assert line, out.stderr
    cpu, children, compile_s, compiles, lower_s, lowers, trace_s, traces = line.groups()
    assert float(cpu) > 0 and float(children) >= 0
    # the test's two programs at least (jnp's own jitted functions, and the programs of
    # eager operations, come on top)
    assert min(int(compiles), int(lowers), int(traces)) >= 2
    # each phase's seconds are a part of the process's CPU (one core, one thread at a time)
    assert float(compile_s) + float(lower_s) + float(trace_s) <= float(cpu) + 0.1
