"""tests/_jax_times.py, the plugin that sums the time JAX spends making programs, reports it."""

from __future__ import annotations

import re
from pathlib import Path

from _plugin_run import run_with_plugin

TWO_PROGRAMS = """
import jax
import jax.numpy as jnp


def test_compiles_two_programs():
    jax.jit(lambda x: jnp.sin(x) * 2.0)(jnp.ones(3))
    jax.jit(lambda x: jnp.cos(x) + x)(jnp.ones(4))
"""


def test_the_jax_plugin_reports_cpu_and_each_phase_of_the_compiles(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(TWO_PROGRAMS)
    out = run_with_plugin("_jax_times", tmp_path)
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
