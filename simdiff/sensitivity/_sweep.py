"""``simdiff.sweep``: values and derivatives over many parameter points, in chunks.

In process, each chunk is one vmapped call.  Given a ``dask.distributed``
client, chunks run on the workers; each worker process builds (and on JAX
compiles) the problem's derivative functions once and keeps them in the
problem's own derivative cache.  Finished chunks stream into a results store
(:class:`simdiff.store.Store`), one entry per chunk, so an interrupted sweep
resumes without recomputing them; the sweep is matched to its stored run by
the problem's fingerprint (what defines it), never by its name; a problem
that cannot be fingerprinted is never resumed.  A point
where the model fails is reported in the status array and the sweep goes on.
"""

from __future__ import annotations

import functools
import hashlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simdiff._log import ProgressCounter, check_progress, get_logger
from simdiff.core.catalogue import resolve
from simdiff.core.config import Config
from simdiff.core.derivatives import Derivatives, cached_derivatives
from simdiff.core.fingerprint import fingerprint
from simdiff.core.problem import Problem
from simdiff.errors import (
    InputError,
    InputTypeError,
    NonFiniteError,
    ShapeError,
    SimdiffError,
    SolverError,
    StoreError,
)
from simdiff.sensitivity._sweep_threads import ThreadTrial
from simdiff.store import Store

__all__ = [
    "STATUS",
    "SWEEP_DERIVATIVES",
    "SweepResult",
    "resolve_problem",
    "sweep",
]

_log = get_logger(__name__)

SWEEP_DERIVATIVES = ("value", "grad", "hessian", "jacobian")
#: Per-point status codes.
STATUS = {0: "ok", 1: "non-finite output", 2: "solver error", 3: "model error"}
OK, NONFINITE, SOLVER, FAILED = 0, 1, 2, 3


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
        The results store (a directory, :class:`simdiff.store.Store`).
    run : str or None
        The sweep's run in the store.
    compile_info : list of dict
        ``Derivatives.cache_info()`` of the process that computed the last
        chunk: the path each derivative ran (``"jit"``, ``"eager"``,
        ``"compiled"``) and, under ``compile="auto"``, why.
    threads : dict
        The intra-op thread choice of an in-process sweep on a backend that
        can change its thread count at run time (torch; empty elsewhere):
        ``start`` (the count before the sweep, restored after it), the seconds
        of one chunk at one thread (``one_thread_s``) and at ``start``
        threads (``start_threads_s``), ``used`` (the count the remaining
        chunks ran with) and ``reason`` (see
        :class:`~simdiff.sensitivity._sweep_threads.ThreadTrial`).
    note : str
        Why stored results were not resumed although a store was given (the
        problem cannot be fingerprinted); empty otherwise.
    """

    points: np.ndarray = field(repr=False)
    results: dict[str, np.ndarray] = field(repr=False)
    status: np.ndarray = field(repr=False)
    messages: dict[int, str]
    n_chunks: int
    chunks_computed: int
    chunks_resumed: int
    store: str | None = None
    run: str | None = None
    compile_info: list = field(default_factory=list, repr=False)
    threads: dict = field(default_factory=dict, repr=False)
    note: str = ""

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
    Catalogue names are those of ``simdiff.problems`` (the repository's
    ``problems/``).  The same resolution as the ``simdiff`` command's; a spec
    that names no problem raises :class:`simdiff.errors.ProblemNotFound`
    (a ``LookupError``).

    Examples
    --------
    >>> from simdiff.sensitivity import resolve_problem
    >>> resolve_problem("problems.basic:rosenbrock").name
    'rosenbrock4'
    """
    if isinstance(spec, Problem):
        return spec
    if not isinstance(spec, str):
        raise InputTypeError(
            "problem must be a simdiff.Problem, a catalogue name or a "
            f"'module:attribute' string; got {type(spec).__name__}"
        )
    return resolve(spec)[1]()


@functools.lru_cache(maxsize=8)
def _resolve_spec(spec: str) -> Problem:
    """A worker's Problem for a catalogue name or ``"module:attribute"``, resolved once.

    Bounded: at most 8 resolved problems (and, in their caches, their compiled
    derivatives) stay alive per worker process.
    """
    return resolve_problem(spec)


def _derivatives_for(spec: Problem | str, config: Config) -> Derivatives:
    """The problem's shared Derivatives for ``config`` (one compilation per shape).

    From the problem's own cache: a Problem scattered to dask workers is one
    object per worker, so its cache serves every chunk there; a string spec is
    resolved once per worker.  ``config.expected_calls`` (the sweep's chunks)
    is announced to it.
    """
    problem = spec if isinstance(spec, Problem) else _resolve_spec(spec)
    return cached_derivatives(problem, config=config)


# --------------------------------------------------------------------------- one chunk


def _evaluate(d: Derivatives, derivatives: Sequence[str], x: np.ndarray) -> dict[str, Any]:
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


def _diagnose(problem: Problem, x: np.ndarray, backend: str) -> tuple[int, str]:
    """Status and message of a point whose batched results are not finite.

    A compiled, vmapped call cannot raise (a failed solve poisons its output
    with NaN), so the point's value is evaluated once more, eagerly, where
    the model raises its own error (a solver's exhausted ``max_steps`` with
    the time reached, an instability).
    """
    exc = problem.failure_at(x, backend=backend)
    if isinstance(exc, SolverError):
        return SOLVER, f"{type(exc).__name__}: {exc}"
    if isinstance(exc, NonFiniteError):
        return NONFINITE, f"{type(exc).__name__}: {exc}"
    if exc is not None:
        return FAILED, f"{type(exc).__name__}: {exc}"
    with np.errstate(all="ignore"):
        value = problem.evaluate(x, backend="numpy" if problem.supports("numpy") else backend)
    if not np.all(np.isfinite(value)):
        return NONFINITE, f"the value is not finite at this point: {value}"
    return NONFINITE, "the value is finite but a derivative is not (a singular derivative)"


def _compute_chunk(
    spec: Any,
    config: Config,
    derivatives: Sequence[str],
    shapes: dict[str, tuple[int, ...]],
    points: np.ndarray,
    size: int,
) -> dict[str, Any]:
    """Evaluate one chunk (padded to ``size`` rows so one compilation serves every chunk).

    ``config``: the backend, the compile policy and the number of chunks
    announced to it (``expected_calls``).
    """
    backend = str(config.backend)
    d = _derivatives_for(spec, config)
    k = points.shape[0]
    padded = points if k == size else np.concatenate([points, np.repeat(points[-1:], size - k, 0)])
    messages: dict[int, str] = {}
    try:
        results = {name: a[:k] for name, a in _evaluate(d, derivatives, padded).items()}
        status = np.where(_row_finite(results, k), OK, NONFINITE).astype(np.int8)
        for i in map(int, np.flatnonzero(status == NONFINITE)):  # a batch only says NaN: why?
            status[i], messages[i] = _diagnose(d.problem, points[i], backend)
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
            if not _row_finite({n: a[None] for n, a in row.items()}, 1)[0]:
                status[i], messages[i] = _diagnose(d.problem, points[i], backend)
    info = d.cache_info()
    return {"results": results, "status": status, "messages": messages, "compile_info": info}


# --------------------------------------------------------------------------- store


def _chunk_key(i: int) -> tuple[str, str, str]:
    return ("sweep", "chunk", f"{i:06d}")


def _write_chunk(db: Store, run: str, i: int, chunk: dict[str, Any], repair: bool) -> None:
    """Store chunk ``i``; ``repair``: the run is complete and this chunk replaces a missing or
    damaged entry (:meth:`Store.put` accepts that, and only that, in a complete run)."""
    messages = {str(k): v for k, v in chunk["messages"].items()}
    arrays = {**chunk["results"], "status": chunk["status"]}
    db.put(run, *_chunk_key(i), {"messages": messages}, arrays=arrays, repair=repair)


def _read_chunk(db: Store, run: str, i: int, derivatives: Sequence[str]) -> dict[str, Any] | None:
    """Stored chunk ``i``, or None where it is missing or damaged (it is then recomputed)."""
    try:
        e = db.get(run, *_chunk_key(i))
    except StoreError as exc:
        _log.warning("sweep: chunk %d of run %s is recomputed: %s", i, run, exc)
        return None
    if e is None:
        return None
    messages = {int(k): v for k, v in e["record"]["messages"].items()}
    results = {name: e["arrays"][name] for name in derivatives}
    return {"results": results, "status": e["arrays"]["status"], "messages": messages}


def _open_run(
    db: Store, params: dict[str, Any], pts: np.ndarray, *, resume: bool
) -> tuple[str, bool]:
    """The sweep's run: a finished one to read back, an interrupted one to resume, or a new one.

    ``resume=False`` (a problem of unknown identity): always a new run.
    """
    run = db.find_run("sweep", params, status="complete") if resume else None
    if run is not None:
        return run, True
    run = db.start_run("sweep", params, resume=resume)
    if db.get(run, "sweep", "points", "all", arrays=False) is None:
        db.put(run, "sweep", "points", "all", {"n_points": len(pts)}, arrays={"points": pts})
    return run, False


# --------------------------------------------------------------------------- sweep


def _validate(problem: Problem, points: Any, derivatives: Any, chunk_size: Any):
    pts = np.asarray(points)
    if pts.dtype.kind not in "fiu":
        raise InputTypeError(f"points must be a real array; got dtype {pts.dtype}")
    pts = pts.astype(np.float64)
    if pts.ndim != 2 or pts.shape[1] != problem.n or pts.shape[0] == 0:
        raise ShapeError(
            f"points for problem {problem.name!r} must have shape (N, {problem.n}) "
            f"with N >= 1; got {pts.shape}"
        )
    if not np.all(np.isfinite(pts)):
        i, j = (int(v) for v in np.argwhere(~np.isfinite(pts))[0])
        raise InputError(f"points must be finite; points[{i}, {j}] = {pts[i, j]}")
    if isinstance(derivatives, str):
        derivatives = (derivatives,)
    derivatives = tuple(derivatives)
    unknown = [d for d in derivatives if d not in SWEEP_DERIVATIVES]
    if unknown or not derivatives or len(set(derivatives)) != len(derivatives):
        raise InputError(
            f"derivatives must be distinct names from {SWEEP_DERIVATIVES}; got {derivatives}"
        )
    if not problem.is_scalar and "grad" in derivatives:
        raise ShapeError(
            f"'grad' needs a scalar problem; {problem.name!r} returns shape "
            f"{problem.output_shape} (ask for 'jacobian')"
        )
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
        raise InputTypeError(f"chunk_size must be a positive integer; got {chunk_size!r}")
    if chunk_size < 1:
        raise InputError(f"chunk_size must be a positive integer; got {chunk_size}")
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
    progress: bool = False,
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
        Results store (a directory, :class:`simdiff.store.Store`) the chunks
        stream into, one entry per chunk.  A sweep is a run of the store
        whose parameters are the problem's :func:`~simdiff.store.fingerprint`
        (what defines it: code, closure and default values, referenced module
        data, ``x0`` and a simulator's settings; never its name),
        the points' SHA-256, the derivatives, backend and chunk size.  Chunks
        of the same sweep already there are read back, not recomputed; a
        different sweep gets a new run of the same store.  A path that is
        not a simdiff store raises :class:`~simdiff.errors.StoreError`.
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
    progress : bool
        Show a progress bar of the chunks on standard error (tqdm).

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
    check_progress(progress)
    prob = resolve_problem(problem)
    pts, derivatives = _validate(prob, points, derivatives, chunk_size)
    size = int(min(chunk_size, pts.shape[0]))
    n_chunks = -(-pts.shape[0] // size)
    shapes = _shapes(prob, derivatives)
    spec = problem if isinstance(problem, str) else prob  # pickles without its cache
    results = {name: np.full((pts.shape[0], *shape), np.nan) for name, shape in shapes.items()}
    status = np.zeros(pts.shape[0], dtype=np.int8)
    messages: dict[int, str] = {}
    db = run = None
    complete = False
    note = ""
    if store is not None:
        db = Store(store)
        identity = fingerprint(prob)
        if identity is None:
            note = (
                f"problem {prob.name!r} cannot be fingerprinted (its definition holds an object "
                "whose state cannot be inspected); stored results are not resumed, a new run "
                "is started"
            )
        params = {
            "fingerprint": identity,
            "backend": backend,
            "derivatives": list(derivatives),
            "chunk_size": size,
            "n_points": int(pts.shape[0]),
            "points_sha256": hashlib.sha256(np.ascontiguousarray(pts).tobytes()).hexdigest(),
        }
        run, complete = _open_run(db, params, pts, resume=identity is not None)
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
        if fresh and db is not None and run is not None:
            _write_chunk(db, run, i, chunk, repair=complete)
        counts["computed" if fresh else "resumed"] += 1
        bad = int(np.count_nonzero(chunk["status"]))
        if fresh and bad:
            first = next(iter(chunk["messages"].values()), "non-finite result")
            _log.warning("sweep of %r: %d of %d points of chunk %d failed (%s)",
                         prob.name, bad, k, i, first)  # fmt: skip
        bar.update(1)
        if callback is not None:
            callback(i, counts["computed"] + counts["resumed"], n_chunks)

    bar = ProgressCounter(desc=f"sweep {prob.name}", total=n_chunks, enabled=progress)
    todo = []
    for i in range(n_chunks):
        stored = None if db is None or run is None else _read_chunk(db, run, i, derivatives)
        if stored is not None:
            accept(i, stored, fresh=False)
        else:
            todo.append(i)
    if counts["resumed"]:
        _log.info("sweep of %r resumes run %s of %s: %d of %d chunks stored, %d to compute",
                  prob.name, run, store, counts["resumed"], n_chunks, len(todo))  # fmt: skip
    elif note:
        _log.info("sweep of %r: %s", prob.name, note)
    config = Config(backend=backend, compile=compile, expected_calls=int(n_chunks),
                    check_finite=False)  # fmt: skip
    args = (config, derivatives, shapes)
    threads: dict[str, Any] = {}
    with bar:
        if client is None:
            trial = ThreadTrial(backend, len(todo))
            try:
                for k, i in enumerate(todo):
                    trial.before(k)
                    start = time.perf_counter()
                    chunk = _compute_chunk(prob, *args, pts[i * size : (i + 1) * size], size)
                    trial.after(k, time.perf_counter() - start, chunk)
                    accept(i, chunk, True)
            finally:
                threads = trial.restore()
        else:
            _run_dask(client, spec, args, pts, size, todo, accept, retries)
    if db is not None and run is not None and not complete:
        db.finish_run(run)
    return SweepResult(
        pts,
        results,
        status,
        messages,
        n_chunks,
        counts["computed"],
        counts["resumed"],
        None if store is None else str(store),
        run,
        compile_info,
        threads,
        note,
    )


def _run_dask(client, spec, args, pts, size, todo, accept, retries) -> None:
    """Run the chunks ``todo`` on ``client``'s workers and ``accept`` each as it finishes.

    The problem is scattered to every worker once, so each worker keeps its
    compiled derivatives for all its chunks.  A worker that dies can take the
    scattered problem with it, and dask then cancels the chunks that needed it
    ("already forgotten"); those chunks are submitted again (with the problem
    scattered anew if its copy was lost), at most ``retries + 1`` times each, so a lost worker costs
    its chunks, never the sweep.
    """
    from concurrent.futures import CancelledError

    from distributed import as_completed

    if not todo:
        return
    run = uuid.uuid4().hex[:8]
    resubmitted = dict.fromkeys(todo, 0)

    def submit(i: int, remote_spec: Any) -> Any:
        return client.submit(
            _compute_chunk,
            remote_spec,
            *args,
            pts[i * size : (i + 1) * size],
            size,
            key=f"simdiff-sweep-{run}-{i}-{resubmitted[i]}",
            retries=retries,
            pure=False,
        )

    [remote_spec] = client.scatter([spec], broadcast=True, hash=False)
    futures = {submit(i, remote_spec): i for i in todo}
    try:
        pending = as_completed(list(futures))
        for fut in pending:
            i = futures[fut]
            try:
                result = fut.result()
            except CancelledError:
                if resubmitted[i] > retries:
                    raise
                resubmitted[i] += 1
                if remote_spec.status != "finished":  # lost with its worker: scatter it once again
                    [remote_spec] = client.scatter([spec], broadcast=True, hash=False)
                again = submit(i, remote_spec)
                futures[again] = i
                pending.add(again)
                continue
            accept(i, result, True)
    finally:
        client.cancel(list(futures))
