"""simdiff.store: schema, environment, append-only runs, atomic writes under SIGKILL, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from simdiff.store import SCHEMA_VERSION, Store, environment

ROOT = Path(__file__).resolve().parent.parent

WRITER = textwrap.dedent(
    """
    import sys, numpy as np
    from simdiff.store import Store
    s = Store(sys.argv[1])
    run = s.start_run("kill-test", {"n": 60})
    written = 0
    for i in range(60):
        if s.has(run, f"p{i}", "grad", "jax-jit"):
            continue
        s.put(run, f"p{i}", "grad", "jax-jit", {"i": i}, arrays={"value": np.full(20000, i)})
        written += 1
        print("done", i, flush=True)
    s.finish_run(run)
    print("written", written, flush=True)
    """
)


def _spawn(path: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )


def test_roundtrip_schema_and_environment(tmp_path: Path) -> None:
    s = Store(tmp_path / "sub" / "r.h5")
    assert s.runs() == []
    run = s.start_run("demo", {"quick": True})
    s.put(
        run,
        "seed/8",
        "hessian",
        "torch-eager",
        {"steady_s": 0.5, "ok": True, "v": np.float64(2)},
        arrays={"value": np.eye(2)},
    )
    with h5py.File(s.path, "r") as f:
        assert f.attrs["schema_version"] == SCHEMA_VERSION
    (e,) = s.entries(run)
    assert (e["problem"], e["kind"], e["config"]) == ("seed/8", "hessian", "torch-eager")
    assert e["record"] == {"steady_s": 0.5, "ok": True, "v": 2.0}
    np.testing.assert_array_equal(e["arrays"]["value"], np.eye(2))
    (r,) = s.runs()
    assert r["status"] == "running" and r["params"] == {"quick": True} and r["n_entries"] == 1
    for key in ("numpy", "scipy", "jax", "jaxlib", "torch", "h5py", "simdiff"):
        assert r["env"]["versions"][key]
    assert r["env"]["cpu"] and r["env"]["git"] and r["env"]["hostname"]
    s.finish_run(run)
    # Append-only: a finished run is never resumed.
    run2 = s.start_run("demo", {"quick": True})
    assert run2 != run and [x["status"] for x in s.runs()] == ["complete", "running"]
    assert s.latest_run("demo") == run2


def test_resume_requires_same_params(tmp_path: Path) -> None:
    s = Store(tmp_path / "r.h5")
    a = s.start_run("x", {"k": 1})
    assert s.start_run("x", {"k": 1}) == a
    assert s.start_run("x", {"k": 2}) != a
    assert s.start_run("x", {"k": 1}, resume=False) != a


def test_schema_mismatch_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.h5"
    with h5py.File(path, "w") as f:
        f.attrs["schema_version"] = 99
        f.create_group("runs")
    with pytest.raises(ValueError, match="schema_version 99; this simdiff reads and writes"):
        Store(path).runs()


def test_environment_is_json() -> None:
    env = environment()
    json.dumps(env)
    assert env["threads"]["cpu_count"] >= 1


def test_sigkill_mid_write_leaves_a_readable_file_and_rerun_resumes(tmp_path: Path) -> None:
    path = tmp_path / "r.h5"
    proc = _spawn(path)
    done = []
    assert proc.stdout is not None
    while len(done) < 8:
        line = proc.stdout.readline()
        assert line, "writer ended early"
        done.append(int(line.split()[1]))
    time.sleep(0.013)  # land somewhere inside a later write
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    s = Store(path)
    (run,) = s.runs()
    assert run["status"] == "running"
    got = {e["problem"]: e for e in s.entries(run["id"])}
    for i in done:  # every entry reported finished is there and whole
        np.testing.assert_array_equal(got[f"p{i}"]["arrays"]["value"], np.full(20000, i))
    assert all(e["arrays"]["value"].shape == (20000,) for e in got.values())
    # The rerun resumes the interrupted run and writes only what is missing.
    proc2 = _spawn(path)
    out, _ = proc2.communicate(timeout=120)
    assert proc2.returncode == 0
    assert f"written {60 - len(got)}" in out
    (run,) = s.runs()
    assert run["status"] == "complete" and run["n_entries"] == 60
    assert not list(tmp_path.glob(".r.h5.*.tmp"))
