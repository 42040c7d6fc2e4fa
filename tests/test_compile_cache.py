"""simdiff's persistent compilation cache: on by default, reused by a second process, safe.

Each case runs fresh Python processes (the cache is decided when a backend is imported),
with the suite's own switch-off (``JAX_COMPILATION_CACHE_DIR=""``, tests/conftest.py)
removed from their environment and ``SIMDIFF_CACHE_DIR`` pointing into ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simdiff.backends import _caches as caches
from simdiff.errors import CacheWarning

ROOT = Path(__file__).resolve().parents[1]

# One JAX Hessian, its value checked against the closed form by the child itself.
CHILD = r"""
import json, warnings
import numpy as np
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import simdiff
    from simdiff.backends._caches import STATE
    p = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x) ** 2 * x[0]), x0=np.ones(3))
    x = np.array([0.3, -0.7, 1.1])
    H = simdiff.hessian(p, x)
s, c = np.sin(x), np.cos(x)
exact = np.diag(2 * np.cos(2 * x) * x[0])
exact[0, :] += 2 * s * c
exact[:, 0] += 2 * s * c
print(json.dumps({"ok": bool(np.allclose(H, exact, rtol=1e-12, atol=1e-12)),
                  "state": STATE.get("jax"),
                  "warnings": [f"{w.category.__name__}: {w.message}" for w in caught]}))
"""


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR",)}
    env.update(SIMDIFF_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT), **extra)
    return env


def _run(cache: Path, **extra: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=_env(cache, **extra), capture_output=True,
        text=True, timeout=300, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "jax").glob("*-cache") if p.is_file())


def test_processes_share_reuse_and_survive_a_damaged_entry(tmp_path: Path) -> None:
    """Two processes at once on an empty cache both finish right; a later process reads
    their programs instead of compiling (no entry written again); entries truncated behind
    its back are recompiled, with JAX's warning, never a wrong result."""
    cache = tmp_path / "c"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD],
            env=_env(cache),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        r = json.loads(out.strip().splitlines()[-1])
        assert r["ok"] and r["state"] == str(cache / "jax")
    written = _entries(cache)
    assert written, "the Hessian's program was written to the cache"
    mtimes = {p: p.stat().st_mtime_ns for p in written}
    second = _run(cache)
    assert second["ok"] and second["warnings"] == []
    assert _entries(cache) == written
    assert {p: p.stat().st_mtime_ns for p in written} == mtimes  # read, not written again
    for p in written:
        p.write_bytes(p.read_bytes()[: max(1, p.stat().st_size // 3)])
    damaged = _run(cache)
    assert damaged["ok"]
    assert damaged["warnings"]
    assert all("persistent compilation cache" in w for w in damaged["warnings"])


def test_switched_off_by_the_environment(monkeypatch) -> None:
    monkeypatch.setattr(caches, "STATE", {})
    monkeypatch.setenv("SIMDIFF_COMPILE_CACHE", "0")
    assert caches.enable_persistent_caches("jax").startswith("off: SIMDIFF_COMPILE_CACHE=0")


def test_the_users_own_setting_is_left_alone(monkeypatch) -> None:
    monkeypatch.setattr(caches, "STATE", {})
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/of/mine")
    assert caches.enable_persistent_caches("torch").startswith("the user's")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/somewhere/of/mine"


def test_an_unusable_directory_warns_once_and_is_not_used(tmp_path: Path, monkeypatch) -> None:
    """Its place taken by a file (unwritable for root too): one CacheWarning, cache off."""
    monkeypatch.setattr(caches, "STATE", {})
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("SIMDIFF_COMPILE_CACHE", raising=False)
    (tmp_path / "c").write_text("not a directory")
    monkeypatch.setenv("SIMDIFF_CACHE_DIR", str(tmp_path / "c"))
    with pytest.warns(CacheWarning, match="cannot be written") as record:
        state = caches.enable_persistent_caches("torch")
        assert caches.enable_persistent_caches("torch") == state  # decided once
    assert len(record) == 1 and state.startswith("off")
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ


def test_clear_removes_the_directories(tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "c"
    (cache / "jax").mkdir(parents=True)
    (cache / "jax" / "x-cache").write_bytes(b"1")
    monkeypatch.setenv("SIMDIFF_CACHE_DIR", str(cache))
    assert caches.clear_persistent_caches() == [str(cache / "jax")]
    assert not (cache / "jax").exists()


def test_the_cache_command(tmp_path: Path, monkeypatch, capsys) -> None:
    from simdiff.cli import main

    cache = tmp_path / "c"
    (cache / "inductor").mkdir(parents=True)
    monkeypatch.setenv("SIMDIFF_CACHE_DIR", str(cache))
    assert main(["cache", "info"]) == 0
    assert capsys.readouterr().out.strip() == str(cache)
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.strip() == f"removed {cache / 'inductor'}"
    assert not (cache / "inductor").exists()
