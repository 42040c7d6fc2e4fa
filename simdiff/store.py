"""HDF5 result store: versioned, append-only runs, atomic writes, resumable.

Layout of a store file (``schema_version`` 1)::

    /                         attrs: schema_version, created_by
    /runs/<run id>/           attrs: name, status ("running" | "complete"), created,
                                     finished, params (JSON), env (JSON)
    /runs/<run id>/entries/<key>/
                              attrs: problem, kind, config, written, record (JSON)
                              datasets: the entry's arrays (derivative values, timings)

``<key>`` is ``problem|kind|config`` with each part percent-encoded.  Every
write copies the file to a temporary file in the same directory, modifies the
copy, flushes it to disk and renames it over the original with
:func:`os.replace` (atomic on POSIX): a process killed at any moment leaves
either the old file or the new one, never a half-written one.  One writer per
file at a time; readers may open it whenever they like.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import glob
import importlib.metadata
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from .errors import InputError

__all__ = ["SCHEMA_VERSION", "Store", "environment"]

#: Version of the file layout above; bumped on any incompatible change.
SCHEMA_VERSION = 1
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


def _now() -> str:
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
    root = Path(__file__).resolve().parent.parent
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

    Thread counts are those in effect now: ``torch.get_num_threads()`` if torch
    is imported, and the XLA/OpenMP environment variables.

    Examples
    --------
    >>> from simdiff.store import environment
    >>> env = environment()
    >>> sorted(k for k in env if k in ("cpu", "git", "versions"))
    ['cpu', 'git', 'versions']
    """
    from . import __version__

    versions = {"simdiff": __version__, "python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    threads: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }
    if "torch" in sys.modules:
        threads["torch_intra_op"] = sys.modules["torch"].get_num_threads()
        threads["torch_inter_op"] = sys.modules["torch"].get_num_interop_threads()
    for var in ("XLA_FLAGS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        threads[var] = os.environ.get(var)
    return {
        "versions": versions,
        "cpu": _cpu_model(),
        "threads": threads,
        "git": _git_revision(),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "time": _now(),
    }


def _key(problem: str, kind: str, config: str) -> str:
    return "|".join(quote(str(p), safe="") for p in (problem, kind, config))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return repr(obj)


class Store:
    """An HDF5 results file (``h5py``) with append-only runs and atomic writes.

    Parameters
    ----------
    path : str or Path
        The ``.h5`` file; created (with its directory) on the first write.

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> from simdiff.store import Store
    >>> s = Store(os.path.join(tempfile.mkdtemp(), "r.h5"))
    >>> run = s.start_run("demo")
    >>> s.put(run, "seed", "grad", "jax-jit", {"steady_s": 1e-5}, arrays={"value": np.ones(2)})
    >>> s.has(run, "seed", "grad", "jax-jit")
    True
    >>> e = s.entries(run)[0]
    >>> e["record"]["steady_s"], e["arrays"]["value"]
    (1e-05, array([1., 1.]))
    >>> s.finish_run(run)
    >>> [r["status"] for r in s.runs()]
    ['complete']
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    # ------------------------------------------------------------------ writing
    @contextlib.contextmanager
    def _write(self) -> Iterator[Any]:
        import h5py

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
        os.close(fd)
        try:
            if self.path.exists():
                shutil.copyfile(self.path, tmp)
                mode = "r+"
            else:
                mode = "w"
            with h5py.File(tmp, mode) as f:
                if mode == "w":
                    f.attrs["schema_version"] = SCHEMA_VERSION
                    f.attrs["created_by"] = "simdiff"
                    f.create_group("runs")
                else:
                    self._check_schema(f)
                yield f
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _check_schema(self, f: Any) -> None:
        version = int(f.attrs.get("schema_version", -1))
        if version != SCHEMA_VERSION:
            raise InputError(
                f"{self.path}: schema_version {version}; this simdiff reads and "
                f"writes schema_version {SCHEMA_VERSION}"
            )

    def start_run(
        self, name: str, params: Mapping[str, Any] | None = None, *, resume: bool = True
    ) -> str:
        """Open a run and return its id.

        With ``resume=True`` the latest run called ``name`` that is still
        ``"running"`` (interrupted) and has the same ``params`` is continued;
        otherwise a new run is appended.  Stale temporary files of killed
        writers are removed.
        """
        for stale in glob.glob(str(self.path.parent / f".{self.path.name}.*.tmp")):
            os.unlink(stale)
        params_json = json.dumps(_jsonable(params or {}), sort_keys=True)
        if resume:
            for run in reversed(self.runs()):
                if (
                    run["name"] == name
                    and run["status"] == "running"
                    and json.dumps(run["params"], sort_keys=True) == params_json
                ):
                    return run["id"]
        with self._write() as f:
            run_id = f"{len(f['runs']) + 1:04d}-{quote(name, safe='')}"
            g = f["runs"].create_group(run_id)
            g.attrs.update(
                name=name,
                status="running",
                created=_now(),
                finished="",
                params=params_json,
                env=json.dumps(_jsonable(environment())),
            )
            g.create_group("entries")
        return run_id

    def put(
        self,
        run: str,
        problem: str,
        kind: str,
        config: str,
        record: Mapping[str, Any],
        arrays: Mapping[str, Any] | None = None,
    ) -> None:
        """Write one entry (atomically); an existing entry with the same key is replaced."""
        with self._write() as f:
            entries = f[f"runs/{run}/entries"]
            key = _key(problem, kind, config)
            if key in entries:
                del entries[key]
            g = entries.create_group(key)
            g.attrs.update(
                problem=problem,
                kind=kind,
                config=config,
                written=_now(),
                record=json.dumps(_jsonable(record)),
            )
            for name, arr in (arrays or {}).items():
                g.create_dataset(name, data=np.asarray(arr))

    def finish_run(self, run: str) -> None:
        """Mark a run complete: a later :meth:`start_run` of that name appends a new one."""
        with self._write() as f:
            f[f"runs/{run}"].attrs.update(status="complete", finished=_now())

    # ------------------------------------------------------------------ reading
    @contextlib.contextmanager
    def _read(self) -> Iterator[Any]:
        import h5py

        with h5py.File(self.path, "r") as f:
            self._check_schema(f)
            yield f

    def runs(self) -> list[dict[str, Any]]:
        """All runs, oldest first: ``id, name, status, created, finished, params, env``."""
        if not self.path.exists():
            return []
        with self._read() as f:
            out = []
            for run_id in sorted(f["runs"]):
                a = f["runs"][run_id].attrs
                out.append(
                    {
                        "id": run_id,
                        "name": str(a["name"]),
                        "status": str(a["status"]),
                        "created": str(a["created"]),
                        "finished": str(a["finished"]),
                        "params": json.loads(a["params"]),
                        "env": json.loads(a["env"]),
                        "n_entries": len(f["runs"][run_id]["entries"]),
                    }
                )
            return out

    def has(self, run: str, problem: str, kind: str, config: str) -> bool:
        """Whether the entry exists (a resumed run skips it)."""
        if not self.path.exists():
            return False
        with self._read() as f:
            return _key(problem, kind, config) in f[f"runs/{run}/entries"]

    def entries(self, run: str, *, arrays: bool = True) -> list[dict[str, Any]]:
        """The run's entries: dicts ``problem, kind, config, written, record, arrays``."""
        with self._read() as f:
            out = []
            for g in f[f"runs/{run}/entries"].values():
                a = g.attrs
                e = {
                    "problem": str(a["problem"]),
                    "kind": str(a["kind"]),
                    "config": str(a["config"]),
                    "written": str(a["written"]),
                    "record": json.loads(a["record"]),
                }
                e["arrays"] = {k: g[k][()] for k in g} if arrays else {}
                out.append(e)
            return out

    def latest_run(self, name: str | None = None) -> str | None:
        """Id of the latest run (called ``name`` if given), or None."""
        runs = [r for r in self.runs() if name is None or r["name"] == name]
        return runs[-1]["id"] if runs else None
