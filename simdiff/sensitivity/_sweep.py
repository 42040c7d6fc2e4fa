"""``simdiff.sweep``: values and derivatives over many parameter points, in chunks.

In process, each chunk is one vmapped call.  Given a ``dask.distributed``
client, chunks run on the workers; each worker process builds (and on JAX
compiles) the problem's derivative functions once and keeps them in a
module-level cache.  Finished chunks stream into an HDF5 file, each chunk in
its own group with a ``done`` flag written last, so an interrupted sweep
resumes without recomputing them.  A point where the model fails is reported
in the status array and the sweep goes on.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._api import Derivatives
from .._problem import Problem
from ..errors import NonFiniteError, ShapeError, SimdiffError, SolverError

__all__ = [
    "STATUS",
    "SWEEP_DERIVATIVES",
    "SweepResult",
    "resolve_problem",
    "sweep",
]

SWEEP_DERIVATIVES = ("value", "grad", "hessian", "jacobian")
#: Per-point status codes.
STATUS = {0: "ok", 1: "non-finite output", 2: "solver error", 3: "model error"}
OK, NONFINITE, SOLVER, FAILED = 0, 1, 2, 3
_FORMAT = "simdiff-sweep/1"


# --------------------------------------------------------------------------- result


@dataclass
class SweepResult:
    """What :func:`sweep` returns.

    Attributes
    ----------
    points : ndarray, shape (N, n)
    results : dict of str to ndarray
        One array per requested derivative, leading axis ``N``: ``value``
        ``(N, out...)``, ``grad`` ``(N, n)``, ``hessian`` ``(N, out..., n, n)``,
        ``jacobian`` ``(N, out..., n)``.  NaN where the point failed.
    status : ndarray of int8, shape (N,)
        Per point: 0 ok, 1 non-finite output, 2 solver error
        (:class:`~simdiff.errors.SolverError`), 3 other simdiff error
        (see :data:`STATUS`).
    messages : dict of int to str
        The error message for each failed point that raised one.
    n_chunks, chunks_computed, chunks_resumed : int
        Chunks in the sweep, computed in this call, and read back from the store.
    store : str or None
        The HDF5 file.
    compile_info : list of dict
        ``Derivatives.cache_info()`` of the process that computed the last
        chunk: the path each derivative ran (``"jit"``, ``"eager"``,
        ``"compiled"``) and, under ``compile="auto"``, why.
    """

    points: np.ndarray = field(repr=False)
    results: dict[str, np.ndarray] = field(repr=False)
    status: np.ndarray = field(repr=False)
    messages: dict[int, str]
    n_chunks: int
    chunks_computed: int
    chunks_resumed: int
    store: str | None = None
    compile_info: list = field(default_factory=list, repr=False)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.results[name]

    @property
    def ok(self) -> np.ndarray:
        """Boolean mask of the points that succeeded."""
        return self.status == OK


# --------------------------------------------------------------------------- problems on workers


def resolve_problem(spec: Any) -> Problem:
    """A Problem from itself, a catalogue name (``"rosenbrock4"``) or ``"module:attribute"``.

    The attribute may be a Problem or a zero-argument callable returning one.
    Catalogue names need the repository's ``problems`` package importable.

    Examples
    --------
    >>> from simdiff.sensitivity import resolve_problem
    >>> resolve_problem("problems.basic:rosenbrock").name
    'rosenbrock4'
    """
    if isinstance(spec, Problem):
        return spec
    if not isinstance(spec, str):
        raise TypeError(
            "problem must be a simdiff.Problem, a catalogue name or a "
            f"'module:attribute' string; got {type(spec).__name__}"
        )
    if ":" in spec:
        module, attr = spec.split(":", 1)
        obj = getattr(importlib.import_module(module), attr)
        obj = obj if isinstance(obj, Problem) else obj()
        if not isinstance(obj, Problem):
            raise TypeError(f"{spec!r} did not give a simdiff.Problem; got {type(obj).__name__}")
        return obj
    return importlib.import_module("problems").get(spec)


_TOKENS: weakref.WeakKeyDictionary[Problem, str] = weakref.WeakKeyDictionary()
_WORKER_CACHE: dict[tuple[str, str, str], Derivatives] = {}


def _token(spec: Any, problem: Problem) -> str:
    if isinstance(spec, str):
        return spec
    if problem not in _TOKENS:
        _TOKENS[problem] = f"{problem.name}-{uuid.uuid4().hex}"
    return _TOKENS[problem]


def _derivatives_for(spec: Any, token: str, backend: str, compile: bool | str) -> Derivatives:
    """The per-process cache: one Derivatives (one compilation per shape) per problem."""
    key = (token, backend, str(compile))
    d = _WORKER_CACHE.get(key)
    if d is None:
        d = _WORKER_CACHE[key] = Derivatives(
            resolve_problem(spec), backend, check_finite=False, compile=compile
        )
    return d


# --------------------------------------------------------------------------- one chunk


def _evaluate(d: Derivatives, derivatives: tuple[str, ...], x: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "value" in derivatives and "grad" in derivatives:
        out["value"], out["grad"] = d.value_and_grad(x)
    for name in derivatives:
        if name not in out:
            out[name] = getattr(d, name)(x)
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def _row_finite(results: dict[str, np.ndarray], k: int) -> np.ndarray:
    ok = np.ones(k, dtype=bool)
    for a in results.values():
        ok &= np.isfinite(a.reshape(k, -1)).all(axis=1)
    return ok


def _compute_chunk(
    spec: Any,
    token: str,
    backend: str,
    compile: tuple[bool | str, int],
    derivatives: tuple[str, ...],
    shapes: dict[str, tuple[int, ...]],
    points: np.ndarray,
    size: int,
) -> dict[str, Any]:
    """Evaluate one chunk (padded to ``size`` rows so one compilation serves every chunk).

    ``compile`` is the policy and the number of chunks announced to it.
    """
    d = _derivatives_for(spec, token, backend, compile[0]).expect_calls(compile[1])
    k = points.shape[0]
    padded = points if k == size else np.concatenate([points, np.repeat(points[-1:], size - k, 0)])
    messages: dict[int, str] = {}
    try:
        results = {name: a[:k] for name, a in _evaluate(d, derivatives, padded).items()}
        status = np.where(_row_finite(results, k), OK, NONFINITE).astype(np.int8)
    except Exception:  # any batched failure: locate it point by point below
        results = {name: np.full((k, *shapes[name]), np.nan) for name in derivatives}
        status = np.zeros(k, dtype=np.int8)
        for i in range(k):
            try:
                row = _evaluate(d, derivatives, points[i])
            except SolverError as exc:
                status[i], messages[i] = SOLVER, f"{type(exc).__name__}: {exc}"
                continue
            except (NonFiniteError, ArithmeticError) as exc:
                status[i], messages[i] = NONFINITE, f"{type(exc).__name__}: {exc}"
                continue
            except SimdiffError as exc:
                status[i], messages[i] = FAILED, f"{type(exc).__name__}: {exc}"
                continue
            for name, a in row.items():
                results[name][i] = a
            status[i] = OK if _row_finite({n: a[None] for n, a in row.items()}, 1)[0] else NONFINITE
    info = d.cache_info()
    return {"results": results, "status": status, "messages": messages, "compile_info": info}


# --------------------------------------------------------------------------- HDF5 store


class _Store:
    """Chunks of one sweep in an HDF5 file: group ``chunks/<i>``, attribute ``done`` last."""

    def __init__(self, path: str | Path, meta: dict[str, Any], points: np.ndarray) -> None:
        import h5py

        self.path = str(path)
        self.file = h5py.File(self.path, "a")
        attrs = self.file.attrs
        if "format" not in attrs:
            attrs["format"] = _FORMAT
            for key, value in meta.items():
                attrs[key] = json.dumps(value)
            self.file.create_dataset("points", data=points)
            self.file.flush()
            return
        if attrs["format"] != _FORMAT:
            self.close()
            raise ValueError(
                f"{self.path} is not a simdiff sweep store (format "
                f"{attrs['format']!r}, expected {_FORMAT!r})"
            )
        stored = {key: json.loads(attrs[key]) for key in meta if key in attrs}
        differ = {k: (stored.get(k), v) for k, v in meta.items() if stored.get(k) != v}
        if differ:
            self.close()
            detail = "; ".join(f"{k}: stored {a!r}, asked {b!r}" for k, (a, b) in differ.items())
            raise ValueError(
                f"store {self.path} holds a different sweep ({detail}); "
                "use another file or delete this one"
            )

    def done(self, i: int) -> bool:
        name = f"chunks/{i:06d}"
        return name in self.file and bool(self.file[name].attrs.get("done", False))

    def read(self, i: int) -> dict[str, Any]:
        g = self.file[f"chunks/{i:06d}"]
        messages = {int(k): v for k, v in json.loads(g.attrs["messages"]).items()}
        results = {name: g["results"][name][()] for name in g["results"]}
        return {"results": results, "status": g["status"][()], "messages": messages}

    def write(self, i: int, chunk: dict[str, Any]) -> None:
        name = f"chunks/{i:06d}"
        if name in self.file:  # left unfinished by an interrupted run
            del self.file[name]
        g = self.file.create_group(name)
        for key, a in chunk["results"].items():
            g.create_dataset(f"results/{key}", data=a)
        g.create_dataset("status", data=chunk["status"])
        g.attrs["messages"] = json.dumps({str(k): v for k, v in chunk["messages"].items()})
        self.file.flush()
        g.attrs["done"] = True
        self.file.flush()

    def close(self) -> None:
        self.file.close()


# --------------------------------------------------------------------------- sweep


def _validate(problem: Problem, points: Any, derivatives: Any, chunk_size: Any):
    pts = np.asarray(points)
    if pts.dtype.kind not in "fiu":
        raise TypeError(f"points must be a real array; got dtype {pts.dtype}")
    pts = pts.astype(np.float64)
    if pts.ndim != 2 or pts.shape[1] != problem.n or pts.shape[0] == 0:
        raise ShapeError(
            f"points for problem {problem.name!r} must have shape (N, {problem.n}) "
            f"with N >= 1; got {pts.shape}"
        )
    if not np.all(np.isfinite(pts)):
        i, j = (int(v) for v in np.argwhere(~np.isfinite(pts))[0])
        raise ValueError(f"points must be finite; points[{i}, {j}] = {pts[i, j]}")
    if isinstance(derivatives, str):
        derivatives = (derivatives,)
    derivatives = tuple(derivatives)
    unknown = [d for d in derivatives if d not in SWEEP_DERIVATIVES]
    if unknown or not derivatives or len(set(derivatives)) != len(derivatives):
        raise ValueError(
            f"derivatives must be distinct names from {SWEEP_DERIVATIVES}; got {derivatives}"
        )
    if not problem.is_scalar and "grad" in derivatives:
        raise ShapeError(
            f"'grad' needs a scalar problem; {problem.name!r} returns shape "
            f"{problem.output_shape} (ask for 'jacobian')"
        )
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
        raise TypeError(f"chunk_size must be a positive integer; got {chunk_size!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer; got {chunk_size}")
    return pts, derivatives


def _shapes(problem: Problem, derivatives: Sequence[str]) -> dict[str, tuple[int, ...]]:
    out, n = problem.output_shape, problem.n
    table = {"value": out, "grad": (n,), "hessian": (*out, n, n), "jacobian": (*out, n)}
    return {name: table[name] for name in derivatives}


def sweep(
    problem: Problem | str,
    points: Any,
    derivatives: Sequence[str] = ("value", "grad"),
    *,
    chunk_size: int = 256,
    client: Any = None,
    store: str | Path | None = None,
    backend: str = "jax",
    callback: Callable[[int, int, int], None] | None = None,
    retries: int = 1,
    compile: bool | str = False,
) -> SweepResult:
    """Evaluate values and derivatives of a problem at many parameter points.

    Parameters
    ----------
    problem : Problem or str
        A Problem, a catalogue name or ``"module:attribute"`` (rebuilt on each
        worker).  A Problem sent to dask workers must pickle with cloudpickle
        (lambdas and closures do).
    points : array_like, shape (N, n)
    derivatives : sequence of {"value", "grad", "hessian", "jacobian"}
    chunk_size : int
        Points per vmapped call (the last chunk is padded, so one compilation
        serves all); also the unit of distribution, storage and resumption.
    client : dask.distributed.Client, optional
        Run the chunks on its workers; results come back as they finish.
        A chunk whose worker dies is rescheduled by dask.
    store : path, optional
        HDF5 file the chunks stream into.  If it already holds finished
        chunks of the same sweep (same problem, points, derivatives,
        backend and chunk size) they are read back, not recomputed; a
        different sweep in the file raises ``ValueError``.
    backend : {"jax", "torch"}
    callback : callable, optional
        ``callback(chunk_index, chunks_done, n_chunks)`` after each chunk is
        stored (progress reporting; an exception raised there stops the
        sweep, and what is stored stays).
    retries : int
        dask retries of a chunk whose task raised.
    compile : {False, True, "auto"}
        Compile policy on torch (see :class:`simdiff.Derivatives`; JAX always
        compiles).  ``"auto"`` is told the number of chunks and compiles when
        they pay for the compile; ``compile_info`` in the result says what ran.

    Returns
    -------
    SweepResult
        Values, derivatives and a per-point status; a point where the model
        fails (non-finite output, :class:`~simdiff.errors.SolverError`, other
        simdiff errors) gets NaNs and a status, and the sweep goes on.

    Notes
    -----
    A chunk is first evaluated as one batch.  If the batch raises, its points
    are evaluated one at a time so that only the failing points are marked;
    an error that is not a simdiff error (a bug) is raised there.
    The store is written only by the calling process.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.sqrt(x)), x0=np.ones(2))
    >>> r = simdiff.sweep(p, np.array([[1.0, 4.0], [-1.0, 1.0], [4.0, 4.0]]), chunk_size=2)
    >>> r["value"], r.status
    (array([ 3., nan,  4.]), array([0, 1, 0], dtype=int8))
    """
    prob = resolve_problem(problem)
    pts, derivatives = _validate(prob, points, derivatives, chunk_size)
    size = int(min(chunk_size, pts.shape[0]))
    n_chunks = -(-pts.shape[0] // size)
    shapes = _shapes(prob, derivatives)
    token = _token(problem, prob)
    spec = problem if isinstance(problem, str) else prob  # pickles without its cache
    results = {name: np.full((pts.shape[0], *shape), np.nan) for name, shape in shapes.items()}
    status = np.zeros(pts.shape[0], dtype=np.int8)
    messages: dict[int, str] = {}
    meta = {
        "problem": prob.name,
        "backend": backend,
        "derivatives": list(derivatives),
        "chunk_size": size,
        "n_points": int(pts.shape[0]),
        "points_sha256": hashlib.sha256(np.ascontiguousarray(pts).tobytes()).hexdigest(),
    }
    db = _Store(store, meta, pts) if store is not None else None
    counts = {"computed": 0, "resumed": 0}
    compile_info: list = []

    def accept(i: int, chunk: dict[str, Any], fresh: bool) -> None:
        start = i * size
        k = chunk["status"].shape[0]
        for name in derivatives:
            results[name][start : start + k] = chunk["results"][name]
        status[start : start + k] = chunk["status"]
        messages.update({start + j: m for j, m in chunk["messages"].items()})
        compile_info[:] = chunk.get("compile_info", compile_info)
        if fresh and db is not None:
            db.write(i, chunk)
        counts["computed" if fresh else "resumed"] += 1
        if callback is not None:
            callback(i, counts["computed"] + counts["resumed"], n_chunks)

    try:
        todo = []
        for i in range(n_chunks):
            if db is not None and db.done(i):
                accept(i, db.read(i), fresh=False)
            else:
                todo.append(i)
        args = (token, backend, (compile, n_chunks), derivatives, shapes)
        if client is None:
            for i in todo:
                accept(i, _compute_chunk(spec, *args, pts[i * size : (i + 1) * size], size), True)
        else:
            _run_dask(client, spec, args, pts, size, todo, accept, retries)
    finally:
        if db is not None:
            db.close()
    return SweepResult(
        pts,
        results,
        status,
        messages,
        n_chunks,
        counts["computed"],
        counts["resumed"],
        None if store is None else str(store),
        compile_info,
    )


def _run_dask(client, spec, args, pts, size, todo, accept, retries) -> None:
    from distributed import as_completed

    if not todo:
        return
    [remote_spec] = client.scatter([spec], broadcast=True, hash=False)
    run = uuid.uuid4().hex[:8]
    futures = {}
    for i in todo:
        fut = client.submit(
            _compute_chunk,
            remote_spec,
            *args,
            pts[i * size : (i + 1) * size],
            size,
            key=f"simdiff-sweep-{run}-{i}",
            retries=retries,
            pure=False,
        )
        futures[fut] = i
    try:
        for fut in as_completed(futures):
            accept(futures[fut], fut.result(), True)
    finally:
        client.cancel(list(futures))
