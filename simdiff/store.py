"""The results store: append-only runs of immutable HDF5 segments, crash-safe and shared.

One store serves ``simdiff check``, ``compare``, ``report`` and
:func:`simdiff.sweep`.  A store is a directory (format ``simdiff-store``,
version :data:`SCHEMA_VERSION`)::

    STORE/
      simdiff-store.json          the format tag: {"format": "simdiff-store", "version": 2, ...}
      .lock                       writers serialise run creation on it (fcntl.flock)
      runs/<id>/run.h5            attrs: format, version, segment="run", name, created,
                                         params (JSON), env (JSON: the environment record)
      runs/<id>/owner.lock        held (flock) by the process writing the run, released
                                  when the run finishes or the process ends
      runs/<id>/entries/<h>.h5    one entry: attrs problem, kind, config, written, seq,
                                  record (JSON), checksum; datasets: its arrays
      runs/<id>/finished.h5       written last: the run is complete

Every segment is written to a temporary file in its final directory, flushed
(``fsync``) and renamed into place (:func:`os.replace`, atomic on POSIX), then
the directory is flushed.  A segment is therefore either absent or whole: a
writer killed at any instant leaves a store that opens and holds every entry
whose :meth:`Store.put` returned, and a write costs the size of the entry, not
of the store.  Segments are never modified, so readers can open the store while
a writer runs.  Two processes may write one store at once: runs are created
under the store's lock, each run is owned by one process (a second process
asking to resume it gets a new run instead), and entries of different keys are
different files, so no entry is ever lost.

A directory that is not empty and has no format tag, a file, a tag of another
format or version, or a damaged segment is refused with a
:class:`~simdiff.errors.StoreError` that names the path and what to do.

Integrity: each entry carries the SHA-256 of its arrays (name, dtype, shape
and bytes of each; :func:`checksum`) and its own key.  Reading an entry
recomputes the checksum and compares the stored key with the key asked for, so
a flipped bit or an entry file copied over another's name is a
:class:`~simdiff.errors.StoreError` naming the file, never a wrong value.  A
sweep that meets such an entry on resume recomputes its chunk and writes it
back (:meth:`Store.put` with ``repair=True``, which a complete run accepts for
a missing or damaged entry).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import numpy as np

from simdiff._log import get_logger
from simdiff.core.fingerprint import fingerprint
from simdiff.environment import environment, now
from simdiff.errors import StoreError

__all__ = [
    "FORMAT",
    "SCHEMA_VERSION",
    "Store",
    "StoreError",
    "checksum",
    "environment",
    "fingerprint",
]

#: Format tag written in the store's tag file and in every segment.
FORMAT = "simdiff-store"
#: Version of the layout above; bumped on any incompatible change (1 was a single HDF5 file).
SCHEMA_VERSION = 2
_TAG_FILE = "simdiff-store.json"
# Run directories this process owns: path -> file descriptor holding the flock.
_OWNED: dict[str, int] = {}
_log = get_logger(__name__)


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


def _params_json(params: Mapping[str, Any] | None) -> str:
    return json.dumps(_jsonable(params or {}), sort_keys=True)


def checksum(arrays: Mapping[str, Any] | None) -> str:
    """SHA-256 (hex) of named arrays: each name, dtype, shape and C-order bytes, in name order.

    Examples
    --------
    >>> import numpy as np
    >>> a = checksum({"x": np.arange(3.0)})
    >>> a == checksum({"x": np.arange(3.0)}), a == checksum({"x": np.arange(3.0) + 1e-300})
    (True, False)
    """
    h = hashlib.sha256()
    for name in sorted(arrays or {}):
        arr = np.ascontiguousarray(np.asarray((arrays or {})[name]))
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def _entry_file(problem: str, kind: str, config: str) -> str:
    key = "|".join(quote(str(p), safe="") for p in (problem, kind, config))
    return hashlib.sha256(key.encode()).hexdigest()[:40] + ".h5"


# --------------------------------------------------------------------------- file primitives


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tmp_name(directory: Path, suffix: str = ".h5") -> Path:
    host = socket.gethostname().replace("-", "_")
    return directory / f".tmp-{host}-{os.getpid()}-{uuid.uuid4().hex[:12]}{suffix}"


def _write_text_atomic(final: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``final`` so that no reader ever sees a half-written file.

    The text goes to a temporary file in the same directory, is flushed to
    disk and renamed over ``final``, as :func:`_write_segment` does (the
    report's ``report.md`` and ``report.html`` are written this way).
    """
    tmp = _tmp_name(final.parent, final.suffix)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_dir(final.parent)
    return final


def _write_segment(final: Path, segment: str, attrs: Mapping[str, Any], arrays=None) -> None:
    """Write an HDF5 segment beside ``final`` and rename it into place (atomically)."""
    import h5py

    tmp = _tmp_name(final.parent)
    try:
        with h5py.File(tmp, "w") as f:  # created with the user's umask
            f.attrs.update(format=FORMAT, version=SCHEMA_VERSION, segment=segment, **attrs)
            for name, arr in (arrays or {}).items():
                f.create_dataset(name, data=np.asarray(arr))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_dir(final.parent)


def _stale(name: str) -> bool:
    """Whether ``.tmp-<host>-<pid>-...`` belongs to a process of this host that has ended."""
    parts = name.split("-")
    if len(parts) < 4 or parts[1] != socket.gethostname().replace("-", "_"):
        return False
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except (ValueError, PermissionError):
        return False
    return False


def _refuse_file(path: Path) -> NoReturn:
    """Refuse a file given as a store's path, naming an earlier simdiff's single-file store."""
    import h5py

    why = "a file, not a simdiff store (a store is a directory)"
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("created_by") == "simdiff":
                why = (
                    "a single-file store of an earlier simdiff (schema_version "
                    f"{f.attrs.get('schema_version')}); this simdiff writes directory "
                    f"stores, version {SCHEMA_VERSION}"
                )
    except OSError:
        pass
    raise StoreError(f"{path}: {why}; give a directory path (it is created if missing)")


def _clean_stale(path: Path) -> None:
    """Remove the temporary files that writers which died left behind."""
    for d in [path, path / "runs", *(path / "runs").glob("*/entries")]:
        for c in d.glob(".tmp-*"):
            if _stale(c.name):
                if c.is_dir():
                    shutil.rmtree(c, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(c)


def _claim(run_dir: Path, *, block: bool = False) -> bool:
    """Take ownership of a run (flock on its owner.lock); False if another process has it."""
    import fcntl

    key = str(run_dir)
    if key in _OWNED:
        return True
    fd = os.open(run_dir / "owner.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return False
    _OWNED[key] = fd
    return True


class Store:
    """The results store: a directory of append-only runs of immutable HDF5 segments.

    Parameters
    ----------
    path : str or Path
        The store's directory; created (with its parents) on the first write.
        An existing file, or a non-empty directory without simdiff's format
        tag, is refused.

    Notes
    -----
    Writing: :meth:`start_run` opens (or resumes) a run, :meth:`put` appends
    one entry, :meth:`finish_run` marks the run complete.  Reading:
    :meth:`runs`, :meth:`entries`, :meth:`get`, :meth:`has`,
    :meth:`latest_run`, :meth:`find_run`.  The module docstring gives the
    layout and the guarantees (kill at any instant, two writers, readers during
    writes).

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> from simdiff.store import Store
    >>> s = Store(os.path.join(tempfile.mkdtemp(), "results"))
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

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # ------------------------------------------------------------------ opening
    def _refuse(self, why: str, todo: str) -> StoreError:
        return StoreError(f"{self.path}: {why}; {todo}")

    def _exists(self) -> bool:
        """Whether a store is there; raises StoreError for anything that is not one."""
        p = self.path
        if not p.exists():
            blocking = next((a for a in p.parents if a.exists() and not a.is_dir()), None)
            if blocking is not None:  # mkdir would raise NotADirectoryError
                raise self._refuse(
                    f"{blocking} is a file, so no directory can be created under it",
                    "give a path whose parent directories are directories (or absent)",
                )
            return False
        if not p.is_dir():
            return _refuse_file(self.path)
        tag = p / _TAG_FILE
        if not tag.exists():
            others = [c.name for c in p.iterdir() if not c.name.startswith(".")]
            # A writer creating the store renames its tag into place between the two
            # looks above: then the listing holds the tag, and this is a store.
            if others and _TAG_FILE not in others:
                raise self._refuse(
                    f"a directory without a simdiff store tag ({_TAG_FILE}), holding "
                    f"{sorted(others)[:3]}",
                    "simdiff did not create it and will not write into it: give another path",
                )
            if not others:
                return False
        try:
            info = json.loads(tag.read_text())
            fmt, version = info["format"], int(info["version"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise self._refuse(
                f"the store tag {_TAG_FILE} is damaged ({type(exc).__name__}: {exc})",
                "restore it from a copy, or move the directory away and start a new store",
            ) from exc
        if fmt != FORMAT:
            raise self._refuse(
                f"format {fmt!r}, not {FORMAT!r}",
                "simdiff will not write into it: give another path",
            )
        if version != SCHEMA_VERSION:
            raise self._refuse(
                f"store version {version}; this simdiff reads and writes version {SCHEMA_VERSION}",
                "use the simdiff that wrote it, or start a new store",
            )
        return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Create the store if needed and hold its writer lock."""
        import fcntl

        self._exists()  # refuse a file or a foreign directory before touching anything
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not self._exists():  # the tag first, then the rest: see _exists
                tmp = _tmp_name(self.path, ".json")
                info = {"format": FORMAT, "version": SCHEMA_VERSION, "created": now()}
                tmp.write_text(json.dumps(info, indent=1))
                os.replace(tmp, self.path / _TAG_FILE)
                _fsync_dir(self.path)
            (self.path / "runs").mkdir(exist_ok=True)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _run_dir(self, run: str) -> Path:
        d = self.path / "runs" / str(run)
        if not self._exists() or not (d / "run.h5").exists():
            known = [r["id"] for r in self.runs()]
            raise StoreError(f"{self.path}: no run {run!r}; the runs are {known}")
        return d

    def _damaged(self, path: Path, exc: BaseException) -> StoreError:
        return StoreError(
            f"{path}: a damaged segment of the store {self.path} ({type(exc).__name__}: {exc}); "
            "simdiff never leaves one behind, so the file was changed by another program: "
            "restore it from a copy, or delete this file to drop what it held"
        )

    @contextlib.contextmanager
    def _segment(self, path: Path, segment: str) -> Iterator[Any]:
        import h5py

        try:
            f = h5py.File(path, "r")
        except OSError as exc:
            raise self._damaged(path, exc) from exc
        with f:
            if f.attrs.get("format") != FORMAT or f.attrs.get("segment") != segment:
                raise self._damaged(path, ValueError(f"not a {FORMAT} {segment!r} segment"))
            yield f

    # ------------------------------------------------------------------ runs
    def start_run(
        self, name: str, params: Mapping[str, Any] | None = None, *, resume: bool = True
    ) -> str:
        """Open a run and return its id.

        Parameters
        ----------
        name : str
            What the run is (``"check"``, ``"report-quick"``, ``"sweep"``, ...).
        params : mapping, optional
            What the run computes (JSON-able); a run is resumed only with equal
            ``params``.  Include a :func:`fingerprint` of each user problem so
            that a different function never resumes another's results.
        resume : bool
            Continue the latest run of this ``name`` and ``params`` that was
            interrupted (``status == "running"``) and that no other live process
            is writing; otherwise append a new run.

        Returns
        -------
        str
            The run id, ``"<number>-<name>"``.  This process owns the run until
            :meth:`finish_run` or until it ends.
        """
        params_json = _params_json(params)
        with self._locked():
            _clean_stale(self.path)
            if resume:
                for run in reversed(self.runs()):
                    if (
                        run["name"] == name
                        and run["status"] == "running"
                        and _params_json(run["params"]) == params_json
                        and _claim(self.path / "runs" / run["id"])
                    ):
                        return run["id"]
            runs = self.path / "runs"
            n = sum(1 for c in runs.iterdir() if not c.name.startswith("."))
            run_id = f"{n + 1:04d}-{quote(name, safe='')}"
            tmp = _tmp_name(runs, "")
            (tmp / "entries").mkdir(parents=True)
            _write_segment(
                tmp / "run.h5",
                "run",
                {
                    "name": name,
                    "created": now(),
                    "params": params_json,
                    "env": json.dumps(_jsonable(environment())),
                },
            )
            os.rename(tmp, runs / run_id)
            _fsync_dir(runs)
            _claim(runs / run_id, block=True)
        return run_id

    def put(
        self,
        run: str,
        problem: str,
        kind: str,
        config: str,
        record: Mapping[str, Any],
        arrays: Mapping[str, Any] | None = None,
        *,
        repair: bool = False,
    ) -> None:
        """Append one entry; a later entry with the same ``(problem, kind, config)`` replaces it.

        The entry is one segment written beside its final name and renamed into
        place: when ``put`` returns it is in the store, whole, and no other
        file was touched.  A complete run (:meth:`finish_run`) is closed:
        writing into it raises :class:`~simdiff.errors.StoreError`, except with
        ``repair=True`` for an entry that is missing or damaged (a recomputed
        value replacing one that was deleted or failed its checksum).
        """
        d = self._run_dir(run)
        path = d / "entries" / _entry_file(problem, kind, config)
        if (d / "finished.h5").exists() and not (
            repair and not self._intact(path, problem, kind, config)
        ):
            raise StoreError(
                f"{self.path}: run {run!r} is complete and closed to new entries; "
                "start a new run (Store.start_run)"
            )
        arrays = {k: np.asarray(v) for k, v in (arrays or {}).items()}
        _write_segment(
            path,
            "entry",
            {
                "problem": problem,
                "kind": kind,
                "config": config,
                "written": now(),
                "seq": time.time_ns(),
                "record": json.dumps(_jsonable(record)),
                "checksum": checksum(arrays),
            },
            arrays,
        )
        _log.debug("store %s: run %s, %s %s %s written", self.path, run, problem, kind, config)

    def finish_run(self, run: str) -> None:
        """Mark a run complete (a later :meth:`start_run` of its name appends a new one)."""
        d = self._run_dir(run)
        _write_segment(d / "finished.h5", "finish", {"finished": now()})
        fd = _OWNED.pop(str(d), None)
        if fd is not None:
            os.close(fd)

    # ------------------------------------------------------------------ reading
    def runs(self) -> list[dict[str, Any]]:
        """All runs, oldest first.

        Returns
        -------
        list of dict
            ``id, name, status ("running" | "complete"), created, finished,
            params, env, n_entries``.  A run still ``"running"`` was either
            interrupted or is being written now.
        """
        if not self._exists() or not (self.path / "runs").exists():
            return []
        out = []
        dirs = [c for c in (self.path / "runs").iterdir() if not c.name.startswith(".")]
        for d in sorted(dirs, key=lambda c: (len(c.name.partition("-")[0]), c.name)):
            with self._segment(d / "run.h5", "run") as f:
                a = dict(f.attrs)
            finished = ""
            if (d / "finished.h5").exists():
                with self._segment(d / "finished.h5", "finish") as f:
                    finished = str(f.attrs["finished"])
            out.append(
                {
                    "id": d.name,
                    "name": str(a["name"]),
                    "status": "complete" if finished else "running",
                    "created": str(a["created"]),
                    "finished": finished,
                    "params": json.loads(a["params"]),
                    "env": json.loads(a["env"]),
                    "n_entries": sum(
                        1 for c in (d / "entries").iterdir() if not c.name.startswith(".")
                    ),
                }
            )
        return out

    def latest_run(self, name: str | None = None) -> str | None:
        """Id of the latest run (called ``name`` if given), or None."""
        runs = [r for r in self.runs() if name is None or r["name"] == name]
        return runs[-1]["id"] if runs else None

    def find_run(
        self, name: str, params: Mapping[str, Any] | None = None, *, status: str | None = None
    ) -> str | None:
        """Id of the latest run called ``name`` with these ``params`` (and ``status``), or None."""
        want = _params_json(params)
        for r in reversed(self.runs()):
            if (
                r["name"] == name
                and _params_json(r["params"]) == want
                and status in (None, r["status"])
            ):
                return r["id"]
        return None

    def has(self, run: str, problem: str, kind: str, config: str) -> bool:
        """Whether the entry exists (a resumed run skips it)."""
        return (self._run_dir(run) / "entries" / _entry_file(problem, kind, config)).exists()

    def _entry(
        self, path: Path, arrays: bool, key: tuple[str, str, str] | None = None
    ) -> dict[str, Any]:
        """Read one entry; with ``arrays``, verify its checksum; with ``key``, verify its key."""
        with self._segment(path, "entry") as f:
            a = f.attrs
            try:
                e = {
                    "problem": str(a["problem"]),
                    "kind": str(a["kind"]),
                    "config": str(a["config"]),
                    "written": str(a["written"]),
                    "seq": int(a["seq"]),
                    "record": json.loads(a["record"]),
                    "arrays": {k: f[k][()] for k in f} if arrays else {},
                }
                stored = a.get("checksum")
            except (KeyError, OSError, ValueError) as exc:
                raise self._damaged(path, exc) from exc
        if key is not None and (e["problem"], e["kind"], e["config"]) != key:
            raise self._damaged(
                path,
                StoreError(
                    f"the entry holds {(e['problem'], e['kind'], e['config'])!r} where "
                    f"{key!r} belongs (an entry file copied or renamed over another)"
                ),
            )
        if arrays and stored is not None and str(stored) != checksum(e["arrays"]):
            raise self._damaged(path, StoreError("its arrays do not match their checksum"))
        return e

    def _intact(self, path: Path, problem: str, kind: str, config: str) -> bool:
        """Whether the entry at ``path`` exists, holds its key and passes its checksum."""
        if not path.exists():
            return False
        try:
            self._entry(path, True, (problem, kind, config))
        except StoreError:
            return False
        return True

    def get(
        self, run: str, problem: str, kind: str, config: str, *, arrays: bool = True
    ) -> dict[str, Any] | None:
        """One entry (a dict as in :meth:`entries`), or None if it is not there.

        Raises
        ------
        simdiff.errors.StoreError
            The entry is damaged: unreadable, its arrays fail their checksum, or
            it holds another key than ``(problem, kind, config)``.
        """
        path = self._run_dir(run) / "entries" / _entry_file(problem, kind, config)
        return self._entry(path, arrays, (problem, kind, config)) if path.exists() else None

    def entries(self, run: str, *, arrays: bool = True) -> list[dict[str, Any]]:
        """The run's entries in the order written.

        Returns
        -------
        list of dict
            ``problem, kind, config, written, seq, record, arrays``.
        """
        d = self._run_dir(run) / "entries"
        out = []
        for p in d.iterdir():
            if p.name.startswith("."):
                continue
            e = self._entry(p, arrays)
            if _entry_file(e["problem"], e["kind"], e["config"]) != p.name:
                raise self._damaged(
                    p,
                    StoreError(
                        f"the entry holds {(e['problem'], e['kind'], e['config'])!r}, whose "
                        "file has another name (an entry file copied or renamed over another)"
                    ),
                )
            out.append(e)
        return sorted(out, key=lambda e: e["seq"])
