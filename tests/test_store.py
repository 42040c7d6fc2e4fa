"""simdiff.store: format, environment, append-only runs, SIGKILL at random instants, two
writers, foreign and damaged files, permissions, O(entry) writes."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from simdiff.errors import SimdiffError, StoreError
from simdiff.store import FORMAT, SCHEMA_VERSION, Store, environment

ROOT = Path(__file__).resolve().parent.parent

# Writes entries p0, p1, ... and prints "done i" after each put returned.
WRITE = textwrap.dedent(
    """
    import os, sys, traceback, numpy as np
    from simdiff.store import Store

    def write(path, n, tag, name):
        s = Store(path)
        run = s.start_run(name, {"n": n})
        print("run", run, flush=True)
        written = 0
        for i in range(n):
            if s.has(run, f"{tag}{i}", "grad", "jax-jit"):
                continue
            s.put(run, f"{tag}{i}", "grad", "jax-jit", {"i": i}, arrays={"value": np.full(5000, i)})
            written += 1
            print("done", i, flush=True)
        s.finish_run(run)
        print("written", written, flush=True)
    """
)
WRITER = WRITE + "write(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])\n"
# Imports the store once, then forks one writer per line read (the FIFO its output goes
# to): prints the writer's pid, then how it ended (its wait status).  A fork is a whole
# process of its own, killed as one; it saves each writer the interpreter's start and
# simdiff's import (about 0.4 s).
FORKER = WRITE + textwrap.dedent(
    """
    path, n, tag, name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:  # the writer, never back in this loop
            try:
                sys.stdout = open(line.strip(), "w")
                write(path, n, tag, name)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        print(pid, flush=True)
        print(os.waitpid(pid, 0)[1], flush=True)
    """
)


def _env() -> dict[str, str]:
    # Extend the caller's PYTHONPATH (where its dependencies may live), not replace it.
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )


def _spawn(path: Path, n: int, tag: str = "p", name: str = "w") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(n), tag, name],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def test_roundtrip_format_and_environment(tmp_path: Path) -> None:
    s = Store(tmp_path / "sub" / "store")
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
    tag = json.loads((s.path / "simdiff-store.json").read_text())
    assert (tag["format"], tag["version"]) == (FORMAT, SCHEMA_VERSION)
    (seg,) = (s.path / "runs" / run / "entries").iterdir()
    with h5py.File(seg, "r") as f:  # every segment is plain HDF5 carrying the format tag
        assert (f.attrs["format"], f.attrs["segment"]) == (FORMAT, "entry")
    (e,) = s.entries(run)
    assert (e["problem"], e["kind"], e["config"]) == ("seed/8", "hessian", "torch-eager")
    assert e["record"] == {"steady_s": 0.5, "ok": True, "v": 2.0}
    np.testing.assert_array_equal(e["arrays"]["value"], np.eye(2))
    assert s.get(run, "seed/8", "hessian", "torch-eager", arrays=False)["record"]["ok"] is True
    assert s.get(run, "seed/8", "grad", "torch-eager") is None
    (r,) = s.runs()
    assert r["status"] == "running" and r["params"] == {"quick": True} and r["n_entries"] == 1
    for key in ("numpy", "scipy", "jax", "jaxlib", "torch", "h5py", "simdiff"):
        assert r["env"]["versions"][key]
    assert r["env"]["cpu"] and r["env"]["git"] and r["env"]["hostname"]
    s.finish_run(run)
    with pytest.raises(StoreError, match=f"run '{run}' is complete and closed to new entries"):
        s.put(run, "late", "grad", "jax-jit", {})
    # Append-only: a finished run is never resumed.
    run2 = s.start_run("demo", {"quick": True})
    assert run2 != run and [x["status"] for x in s.runs()] == ["complete", "running"]
    assert s.latest_run("demo") == run2
    assert s.find_run("demo", {"quick": True}, status="complete") == run


def test_a_later_put_of_the_same_key_replaces_and_order_is_kept(tmp_path: Path) -> None:
    s = Store(tmp_path / "s")
    run = s.start_run("x")
    for i in range(3):
        s.put(run, f"p{i}", "k", "c", {"i": i})
    s.put(run, "p1", "k", "c", {"i": 10})
    assert [e["record"]["i"] for e in s.entries(run)] == [0, 2, 10]


def test_resume_requires_same_params(tmp_path: Path) -> None:
    s = Store(tmp_path / "r")
    a = s.start_run("x", {"k": 1})
    assert s.start_run("x", {"k": 1}) == a
    assert s.start_run("x", {"k": 2}) != a
    assert s.start_run("x", {"k": 1}, resume=False) != a


def test_environment_is_json() -> None:
    env = environment()
    json.dumps(env)
    assert env["threads"]["cpu_count"] >= 1


def test_environment_names_the_commit_of_a_checkout() -> None:
    """In a git checkout (the tests' own), the record names the commit, not "not a git
    checkout" (the probe once looked for .git one folder too low)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        pytest.skip("not run from a git checkout")
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", environment()["git"]), environment()["git"]


def test_files_get_the_users_permissions(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        s = Store(tmp_path / "perm")
        run = s.start_run("x")
        s.put(run, "a", "b", "c", {}, arrays={"v": np.ones(3)})
        s.finish_run(run)
    finally:
        os.umask(old)
    for p in [s.path, *s.path.rglob("*")]:
        want = 0o755 if p.is_dir() else 0o644
        assert p.stat().st_mode & 0o777 == want, p


def test_a_write_touches_only_the_new_entry(tmp_path: Path) -> None:
    """O(size of the entry) per write: earlier segments are never rewritten."""
    s = Store(tmp_path / "s")
    run = s.start_run("x")
    for i in range(20):
        s.put(run, f"p{i}", "k", "c", {}, arrays={"v": np.full(10_000, i)})
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in s.path.rglob("*.h5")}
    s.put(run, "new", "k", "c", {}, arrays={"v": np.zeros(10)})
    after = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in s.path.rglob("*.h5")}
    assert len(after) == len(before) + 1
    assert all(after[p] == v for p, v in before.items())


# --------------------------------------------------------------------------- refusals


def test_a_file_is_refused_with_its_path(tmp_path: Path) -> None:
    junk = tmp_path / "junk.h5"
    junk.write_bytes(os.urandom(3000))
    for call in (lambda s: s.runs(), lambda s: s.start_run("x")):
        with pytest.raises(StoreError, match="junk.h5: a file, not a simdiff store") as info:
            call(Store(junk))
        assert "give a directory path" in str(info.value)
    assert isinstance(info.value, SimdiffError)
    old = tmp_path / "old.h5"  # the single-file store of simdiff's first round
    with h5py.File(old, "w") as f:
        f.attrs.update(schema_version=1, created_by="simdiff")
    with pytest.raises(StoreError, match="single-file store of an earlier simdiff"):
        Store(old).runs()


def test_a_foreign_directory_is_refused_and_left_alone(tmp_path: Path) -> None:
    d = tmp_path / "data"
    d.mkdir()
    (d / "mine.h5").write_bytes(b"x")
    with pytest.raises(StoreError, match="data: a directory without a simdiff store tag"):
        Store(d).start_run("x")
    assert sorted(p.name for p in d.iterdir()) == ["mine.h5"]
    (tmp_path / "empty").mkdir()  # an empty directory becomes a store
    Store(tmp_path / "empty").start_run("x")


def test_other_format_or_version_is_refused(tmp_path: Path) -> None:
    s = Store(tmp_path / "s")
    s.start_run("x")
    tag = s.path / "simdiff-store.json"
    tag.write_text(json.dumps({"format": FORMAT, "version": 99}))
    with pytest.raises(StoreError, match="store version 99; this simdiff reads and writes"):
        s.runs()
    tag.write_text(json.dumps({"format": "other", "version": SCHEMA_VERSION}))
    with pytest.raises(StoreError, match="format 'other'"):
        s.runs()
    tag.write_text("{trunc")
    with pytest.raises(StoreError, match="store tag simdiff-store.json is damaged"):
        s.start_run("x")


def test_a_truncated_segment_is_refused_with_its_path(tmp_path: Path) -> None:
    s = Store(tmp_path / "s")
    run = s.start_run("x")
    s.put(run, "a", "b", "c", {"ok": 1}, arrays={"v": np.ones(1000)})
    (seg,) = (s.path / "runs" / run / "entries").glob("*.h5")
    seg.write_bytes(seg.read_bytes()[:500])
    with pytest.raises(StoreError, match=f"{seg.name}: a damaged segment") as info:
        s.entries(run)
    assert "delete this file to drop what it held" in str(info.value)
    run_h5 = s.path / "runs" / run / "run.h5"
    run_h5.write_bytes(b"")
    with pytest.raises(StoreError, match="run.h5: a damaged segment"):
        s.runs()
    with pytest.raises(StoreError, match="no run '0042-x'"):
        Store(tmp_path / "t").entries("0042-x")


# --------------------------------------------------------------------------- processes


def test_sigkill_at_20_random_instants_loses_no_returned_write(tmp_path: Path) -> None:
    path = tmp_path / "r"
    rng = random.Random(13)
    returned: set[int] = set()
    forker = subprocess.Popen(
        [sys.executable, "-c", FORKER, str(path), "400", "p", "kill-test"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    assert forker.stdin is not None and forker.stdout is not None
    try:
        for k in range(20):
            fifo = tmp_path / f"out{k}"
            os.mkfifo(fifo)
            forker.stdin.write(f"{fifo}\n")
            forker.stdin.flush()
            pid = int(forker.stdout.readline())
            with open(fifo) as out:  # the writer's stdout, at its end once the writer is gone
                assert out.readline().startswith("run ")
                first = out.readline()  # the writer is in its loop of puts now
                assert first.startswith("done"), first
                time.sleep(rng.uniform(0.0, 0.02))  # inside a later put (or between two)
                os.kill(pid, signal.SIGKILL)
                lines = [first, *out]
            status = int(forker.stdout.readline())
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
            # A kill inside the print itself leaves a truncated last line ("done" or "done 1"
            # of "done 12"): only a whole line names a write whose put returned.
            returned |= {int(line.split()[1]) for line in lines
                         if line.startswith("done ") and line.endswith("\n")}  # fmt: skip
            s = Store(path)  # always opens
            (run,) = s.runs()  # each rerun resumed the interrupted run
            got = {e["problem"]: e for e in s.entries(run["id"])}
            for i in returned:  # every entry whose put returned is there and whole
                np.testing.assert_array_equal(got[f"p{i}"]["arrays"]["value"], np.full(5000, i))
            assert all(e["arrays"]["value"].shape == (5000,) for e in got.values())
    finally:
        forker.stdin.close()  # its loop ends
        forker.wait(timeout=60)
        forker.stdout.close()
    assert forker.returncode == 0
    assert run["status"] == "running" and len(returned) >= 20
    # A rerun writes only what is missing and leaves no temporary files behind.
    proc = _spawn(path, 400, name="kill-test")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0 and f"written {400 - len(got)}" in out
    (run,) = Store(path).runs()
    assert run["status"] == "complete" and run["n_entries"] == 400
    assert not list(path.rglob(".tmp-*"))


def test_two_writers_at_once_lose_nothing_and_a_reader_reads_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "r"
    procs = [_spawn(path, 40, tag=t, name="stress") for t in ("a", "b")]
    seen_while_running = 0
    while any(p.poll() is None for p in procs):
        seen_while_running = max(
            seen_while_running, sum(r["n_entries"] for r in Store(path).runs())
        )
    outs = [p.communicate()[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    s = Store(path)
    runs = s.runs()
    # Same name and params, but a run owned by a live process is not resumed by another.
    assert len(runs) == 2 and {r["status"] for r in runs} == {"complete"}
    keys = {e["problem"] for r in runs for e in s.entries(r["id"], arrays=False)}
    assert keys == {f"{t}{i}" for t in "ab" for i in range(40)}
    assert seen_while_running <= 80


def test_a_reader_racing_the_writer_that_creates_the_store_sees_a_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tag is renamed into place between the reader's look for it and its listing."""
    s = Store(tmp_path / "r")
    s.start_run("demo", {})
    tag = s.path / "simdiff-store.json"
    real_exists = Path.exists
    missed = []

    def exists_once_missing(self: Path, *args: object, **kwargs: object) -> bool:
        if self == tag and not missed:
            missed.append(self)
            return False  # as if the writer's rename came just after this look
        return real_exists(self, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", exists_once_missing)
    assert [r["name"] for r in Store(tmp_path / "r").runs()] == ["demo"]
    assert missed == [tag]
