"""The environment record of a results-store run: versions, CPU, threads, git, host, time."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from simdiff._version import __version__
from simdiff.backends import compiler_caches, thread_info

__all__ = ["environment"]

_PACKAGES = (
    "numpy",
    "scipy",
    "jax",
    "jaxlib",
    "torch",
    "h5py",
    "matplotlib",
    "diffrax",
    "numdifftools",
    "torchdiffeq",
)


def now() -> str:
    """UTC time now, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_revision() -> str:
    root = Path(__file__).resolve().parents[1]  # simdiff/environment.py -> the repository
    if not (root / ".git").exists():  # an installed package: no checkout to ask
        return "not a git checkout"
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
        return rev + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment() -> dict[str, Any]:
    """Package versions, CPU model, thread counts, git revision, host and time.

    Thread counts are those in effect now (:func:`simdiff.backends.thread_info`).  Every run of a
    store records this once (``Store.runs()[i]["env"]``).

    Examples
    --------
    >>> from simdiff.store import environment
    >>> env = environment()
    >>> sorted(k for k in env if k in ("cpu", "git", "versions"))
    ['cpu', 'git', 'versions']
    """
    versions: dict[str, str | None] = {"simdiff": __version__, "python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "versions": versions,
        "cpu": _cpu_model(),
        "threads": thread_info(),
        "compiler_caches": compiler_caches(),
        "git": _git_revision(),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "time": now(),
    }
