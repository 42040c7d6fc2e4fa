"""``simdiff.compare``: the same derivatives under several configurations, timed side by side.

A *configuration* is a way of computing a derivative: ``jax-jit``
(:class:`~simdiff.Derivatives` on JAX, jit-compiled), ``torch-eager``
(torch.func transforms), ``torch-compile`` (the same under ``torch.compile``),
``scipy-fd`` (``scipy.differentiate`` finite differences of the numpy
context) and ``numdifftools`` (its adaptive finite differences).  Configurations
live in :data:`CONFIGS`, a registry of ``name -> builder``; other modules add
theirs with :func:`register_config` (the ODE engines add diffrax and
torchdiffeq).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._api import Derivatives
from ._problem import Problem
from .errors import InputError, NotFoundError, UnsupportedError

__all__ = [
    "CONFIGS",
    "CompareEntry",
    "CompareResult",
    "Task",
    "compare",
    "register_config",
    "set_threads",
    "thread_info",
]

#: A builder gets ``(problem, task)`` and returns a zero-argument callable that
#: computes the task's derivative, waits for it (``block_until_ready``) and
#: returns it.  It raises ``UnsupportedError`` when the configuration cannot do
#: the task; any other exception is reported as the configuration's failure.
Builder = Callable[[Problem, "Task"], Callable[[], Any]]
CONFIGS: dict[str, Builder] = {}


def register_config(name: str, builder: Builder, *, replace: bool = False) -> None:
    """Add a configuration to :data:`CONFIGS`.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff._compare import register_config, CONFIGS
    >>> register_config("zeros", lambda problem, task: (lambda: np.zeros(problem.n)),
    ...                 replace=True)
    >>> "zeros" in CONFIGS
    True
    """
    if name in CONFIGS and not replace:
        raise InputError(f"configuration {name!r} is already registered")
    CONFIGS[name] = builder


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class Task:
    """One derivative to compute: ``kind`` with its inputs.

    ``kind`` is ``value``, ``grad``, ``hessian``, ``hvp``, ``jvp``, ``vjp``,
    ``jacobian`` or ``derivative`` (directional, ``order`` and ``method``
    ``"nested"`` or ``"taylor"``).  ``x`` is ``(n,)`` or ``(batch, n)``; ``v``
    (hvp/jvp/derivative direction) and ``u`` (vjp cotangent) likewise.
    """

    kind: str
    x: np.ndarray
    v: np.ndarray | None = None
    u: np.ndarray | None = None
    order: int = 0
    method: str = "nested"

    @property
    def label(self) -> str:
        if self.kind == "derivative":
            return f"derivative{self.order}" + (".taylor" if self.method == "taylor" else "")
        return self.kind

    @property
    def batch(self) -> int:
        return int(self.x.shape[0]) if self.x.ndim == 2 else 0


def make_task(problem: Problem, label: str, x: Any = None, seed: int = 0) -> Task:
    """A :class:`Task` from a label such as ``"hessian"`` or ``"derivative3.taylor"``."""
    x = problem.x0 if x is None else np.asarray(x, dtype=np.float64)
    rng = np.random.default_rng(seed)
    lead = x.shape[:-1]
    v = rng.standard_normal((*lead, problem.n))
    u = rng.standard_normal((*lead, *problem.output_shape))
    if label.startswith("derivative"):
        body, _, method = label[len("derivative") :].partition(".")
        if not body.isdigit():
            raise InputError(f"derivative labels are 'derivative<k>[.taylor]'; got {label!r}")
        return Task("derivative", x, v=v, order=int(body), method=method or "nested")
    kinds = ("value", "grad", "hessian", "hvp", "jvp", "vjp", "jacobian")
    if label not in kinds:
        raise InputError(
            f"unknown derivative {label!r}; expected one of {list(kinds)} "
            "or 'derivative<k>[.taylor]'"
        )
    return Task(label, x, v=v, u=u)


# --------------------------------------------------------------------------- builders


def _ad_builder(backend: str, compile: bool = False) -> Builder:
    def build(problem: Problem, task: Task) -> Callable[[], Any]:
        d = Derivatives(problem, backend, compile=compile, check_finite=False)
        be = d.backend
        x, v, u = (
            None if a is None else be.from_numpy(a, d.dtype) for a in (task.x, task.v, task.u)
        )
        k = task.kind
        fns: dict[str, Callable[[], Any]] = {
            "value": lambda: d.value(x),
            "grad": lambda: d.grad(x),
            "hessian": lambda: d.hessian(x),
            "hvp": lambda: d.hvp(v, x),
            "jvp": lambda: d.jvp(v, x),
            "vjp": lambda: d.vjp(u, x),
            "jacobian": lambda: d.jacobian(x),
            "derivative": lambda: d.derivative(task.order, v, x, method=task.method),
        }
        fn = fns[k]

        def call() -> Any:
            return be.block_until_ready(fn())

        call.derivatives = d  # type: ignore[attr-defined]
        return call

    return build


def _scipy_fd(problem: Problem, task: Task) -> Callable[[], Any]:
    from ._check import FiniteDifferences, default_fd_step, numpy_vectorized

    if task.batch:
        raise UnsupportedError("scipy-fd is compared at single points only, not batched x")
    f, x, k = numpy_vectorized(problem), task.x, task.kind
    fd = FiniteDifferences(default_fd_step(problem, x))
    if k == "derivative":
        if task.order != 1:
            raise UnsupportedError(
                f"scipy.differentiate gives first derivatives only (asked for order {task.order})"
            )
        return lambda: fd.direction(f, x, task.v)[0]
    table: dict[str, Callable[[], Any]] = {
        "value": lambda: f(x[:, None])[..., 0],
        "grad": lambda: fd.jacobian(f, x)[0],
        "jacobian": lambda: fd.jacobian(f, x)[0],
        "hessian": lambda: fd.hessian(f, x)[0],
        "hvp": lambda: fd.hessian(f, x)[0] @ task.v,
        "jvp": lambda: fd.direction(f, x, task.v)[0],
        "vjp": lambda: np.tensordot(task.u, fd.jacobian(f, x)[0], axes=task.u.ndim),
    }
    return table[k]


def _numdifftools(problem: Problem, task: Task) -> Callable[[], Any]:
    import numdifftools as nd

    if task.batch:
        raise UnsupportedError("numdifftools is compared at single points only, not batched x")

    def f(y: np.ndarray) -> Any:
        return problem.evaluate(y)

    table = {"grad": nd.Gradient, "hessian": nd.Hessian, "jacobian": nd.Jacobian}
    if task.kind not in table:
        raise UnsupportedError(
            f"numdifftools configuration covers {sorted(table)}; not {task.kind}"
        )
    op = table[task.kind](f)
    return lambda: np.asarray(op(task.x))


register_config("jax-jit", _ad_builder("jax"))
register_config("torch-eager", _ad_builder("torch"))
register_config("torch-compile", _ad_builder("torch", compile=True))
register_config("scipy-fd", _scipy_fd)
register_config("numdifftools", _numdifftools)

# --------------------------------------------------------------------------- threads


def set_threads(n: int) -> dict[str, Any]:
    """Use ``n`` threads in both frameworks, as far as each allows; returns :func:`thread_info`.

    torch: ``torch.set_num_threads(n)``.  XLA's CPU thread pool is fixed when
    jax is imported: with ``n == 1`` this sets ``XLA_FLAGS`` to single-threaded
    Eigen (``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1``),
    which only takes effect if jax has not been imported yet; otherwise XLA uses
    every core in the process affinity, which :func:`thread_info` records.
    """
    if n < 1:
        raise InputError(f"threads must be >= 1; got {n}")
    if n == 1 and "jax" not in sys.modules:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = (
            flags + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        ).strip()
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    import torch

    torch.set_num_threads(n)
    return thread_info()


def thread_info() -> dict[str, Any]:
    """Thread counts in effect: torch intra-op threads, XLA's (from flags/affinity), equal?"""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    flags = os.environ.get("XLA_FLAGS", "")
    xla = 1 if "intra_op_parallelism_threads=1" in flags else affinity
    torch_n = sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None
    return {
        "torch": torch_n,
        "xla": xla,
        "affinity": affinity,
        "XLA_FLAGS": flags,
        "equal": torch_n == xla,
    }


# --------------------------------------------------------------------------- memory


def _rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return -1


class _PeakRSS:
    """Sample the resident set size every ``interval`` seconds in a thread; keep the peak."""

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.base = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss())
            self._stop.wait(self.interval)

    def __enter__(self) -> _PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())

    @property
    def delta_mb(self) -> float:
        return math.nan if self.base < 0 else (self.peak - self.base) / 2**20


# --------------------------------------------------------------------------- results


@dataclass
class CompareEntry:
    """One (derivative, configuration) measurement."""

    derivative: str
    config: str
    status: str = "ok"  # "ok" | "unsupported" | "error"
    error: str = ""
    first_call_s: float = math.nan
    steady_s: float = math.nan  # median over repeats
    steady_q25_s: float = math.nan
    steady_q75_s: float = math.nan
    steady_min_s: float = math.nan
    steady_max_s: float = math.nan
    repeats: int = 0
    inner: int = 1
    peak_rss_mb: float = math.nan
    compilations: int | None = None
    reference: str = ""
    max_abs_err: float = math.nan
    max_rel_err: float = math.nan
    samples: list[float] = field(default_factory=list, repr=False)
    value: Any = field(default=None, repr=False)

    def record(self) -> dict[str, Any]:
        """Plain-dict form (for the store), without the samples and the value."""
        skip = {"samples", "value"}
        return {k: v for k, v in self.__dict__.items() if k not in skip}


@dataclass
class CompareResult:
    """Timings of every (derivative, configuration) pair from one interleaved run."""

    problem: str
    n: int
    batch: int
    baseline: str
    threads: dict[str, Any]
    entries: list[CompareEntry] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """Plain-dict form for the store: baseline, threads, sizes and the entries' records."""
        return {
            "baseline": self.baseline,
            "threads": self.threads,
            "n": self.n,
            "batch": self.batch,
            "entries": [e.record() for e in self.entries],
        }

    def get(self, derivative: str, config: str) -> CompareEntry:
        for e in self.entries:
            if e.derivative == derivative and e.config == config:
                return e
        raise NotFoundError((derivative, config))

    def ratio(self, derivative: str, config: str, *, of: str = "steady_s") -> float:
        """``config``'s time over the baseline's (``> 1``: slower than the baseline)."""
        base = getattr(self.get(derivative, self.baseline), of)
        return getattr(self.get(derivative, config), of) / base if base > 0 else math.nan

    def __str__(self) -> str:
        head = (
            f"compare {self.problem!r} (n={self.n}, batch={self.batch or 1}; "
            f"threads torch={self.threads.get('torch')} xla={self.threads.get('xla')}); "
            f"ratios vs {self.baseline}"
        )
        rows = [
            (
                "derivative",
                "config",
                "first call",
                "steady",
                "IQR",
                "ratio",
                "rss MB",
                "max rel err",
                "status",
            )
        ]
        for e in self.entries:
            ok = e.status == "ok"
            try:
                r = f"{self.ratio(e.derivative, e.config):.2f}" if ok else "-"
            except KeyError:
                r = "-"
            rows.append(
                (
                    e.derivative,
                    e.config,
                    _fmt_s(e.first_call_s),
                    _fmt_s(e.steady_s),
                    f"{_fmt_s(e.steady_q25_s)}..{_fmt_s(e.steady_q75_s)}",
                    r,
                    f"{e.peak_rss_mb:.1f}",
                    f"{e.max_rel_err:.1e}",
                    e.status if ok else f"{e.status}: {e.error[:120]}",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(8)]
        return "\n".join(
            [head]
            + [
                "  ".join(c.ljust(w) for c, w in zip(row[:8], widths, strict=True)) + "  " + row[8]
                for row in rows
            ]
        )


def _fmt_s(t: float) -> str:
    if not math.isfinite(t):
        return "-"
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if t >= f:
            return f"{t / f:.3g} {unit}"
    return f"{t / 1e-9:.3g} ns"


def _to_numpy(y: Any) -> np.ndarray:
    if hasattr(y, "detach"):
        y = y.detach().cpu()
    return np.asarray(y, dtype=np.float64)


# --------------------------------------------------------------------------- compare


def exact_reference(problem: Problem, task: Task) -> np.ndarray | None:
    """The task's value from ``problem.exact`` (per point for batched ``x``), or None."""
    ex = problem.exact

    def one(x: np.ndarray, v: Any, u: Any) -> Any:
        k = task.kind
        jac = ex.get("jacobian") or (ex.get("grad") if problem.output_shape == () else None)
        if k in ("value", "grad", "hessian", "jacobian") and k in ex:
            return ex[k](x)
        if k == "jacobian" and jac is not None:
            return jac(x)
        if k == "hvp" and "hessian" in ex:
            return ex["hessian"](x) @ v
        if k == "jvp" and jac is not None:
            return jac(x) @ v
        if k == "vjp" and jac is not None:
            return np.tensordot(u, jac(x), axes=np.ndim(u))
        if k == "derivative" and "derivative" in ex:
            if task.order <= problem.meta.get("max_exact_order", task.order):
                return ex["derivative"](x, task.order, v)
        return None

    if not task.batch:
        r = one(task.x, task.v, task.u)
        return None if r is None else np.asarray(r, dtype=np.float64)

    def row(a: Any, i: int) -> Any:
        return None if a is None else a[i]

    rows = [one(task.x[i], row(task.v, i), row(task.u, i)) for i in range(task.batch)]
    return None if rows[0] is None else np.asarray(rows, dtype=np.float64)


def compare(
    problem: Problem,
    derivatives: Sequence[str] = ("grad", "hessian"),
    configs: Sequence[str] = ("jax-jit", "torch-eager", "torch-compile", "scipy-fd"),
    *,
    x: Any = None,
    repeats: int = 7,
    min_sample_s: float = 2e-3,
    baseline: str | None = None,
    memory: bool = True,
    seed: int = 0,
    builders: Mapping[str, Builder] | None = None,
) -> CompareResult:
    """Time ``derivatives`` of ``problem`` under each configuration, interleaved.

    Parameters
    ----------
    problem : Problem
    derivatives : sequence of str
        Labels: ``value``, ``grad``, ``hessian``, ``hvp``, ``jvp``, ``vjp``,
        ``jacobian``, ``derivative<k>`` (nested) or ``derivative<k>.taylor``.
    configs : sequence of str
        Names in :data:`CONFIGS` (or in ``builders``).
    x : array_like, shape (n,) or (batch, n), optional
        The point(s); default ``problem.x0``.
    repeats : int
        Steady-state samples per (derivative, configuration).
    min_sample_s : float
        A sample repeats the call ``inner`` times so that it lasts at least
        this long (calibrated from the second call); the time per call is the
        sample over ``inner``.
    baseline : str, optional
        The configuration ratios are relative to (default: the first).
    memory : bool
        Record the peak resident-set-size increase during the first call.
    builders : mapping, optional
        Extra configurations for this call only (``name -> builder``).

    Returns
    -------
    CompareResult

    Notes
    -----
    Protocol: every pair is built and called once (the *first call*: tracing,
    compilation, and the computation, timed with ``time.perf_counter`` after
    ``block_until_ready`` on JAX).  Then ``repeats`` rounds each call every
    working pair once, in an order shuffled every round (the first call of a round
    runs measurably slower), so a slow phase of a shared machine
    hits all configurations alike and the ratios survive it.  ``steady_s`` is
    the median of the samples, with quartiles, min and max.  Memory is the
    peak RSS increase over the first call, sampled every millisecond from a
    thread (``/proc/self/statm``): it sees XLA and torch allocations, which
    tracemalloc does not, but misses peaks shorter than a millisecond and
    memory reused from the allocator's cache (so it is a lower bound; a
    configuration measured later may look cheaper).  Accuracy is against
    ``problem.exact`` when it covers the derivative, else against the
    ``scipy-fd`` configuration's value when that ran.  A configuration that
    raises is reported with its error message (``status="error"``, or
    ``"unsupported"`` for ``UnsupportedError`` from the builder), never dropped.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x)), x0=np.zeros(3))
    >>> r = simdiff.compare(p, ["grad"], ["jax-jit", "torch-eager"], repeats=2)
    >>> [e.status for e in r.entries]
    ['ok', 'ok']
    >>> r.get("grad", "torch-eager").max_abs_err < 1e-12
    True
    """
    table = {**CONFIGS, **(builders or {})}
    unknown = [c for c in configs if c not in table]
    if unknown:
        raise InputError(f"unknown configurations {unknown}; registered: {sorted(table)}")
    if not configs:
        raise InputError("compare needs at least one configuration")
    if repeats < 1:
        raise InputError(f"repeats must be >= 1; got {repeats}")
    tasks = [make_task(problem, label, x, seed) for label in derivatives]
    baseline = baseline or configs[0]
    if baseline not in configs:
        raise InputError(f"baseline {baseline!r} is not among the configurations {list(configs)}")
    warm_frameworks(configs)
    result = CompareResult(
        problem.name, problem.n, tasks[0].batch if tasks else 0, baseline, thread_info()
    )
    calls: list[tuple[CompareEntry, Callable[[], Any]]] = []
    for task in tasks:
        for name in configs:
            entry = CompareEntry(task.label, name)
            result.entries.append(entry)
            call = _first_call(entry, table[name], problem, task, memory)
            if call is not None:
                calls.append((entry, call))
    for entry, call in calls:  # calibrate the inner loop from a second call
        try:
            t = _timed(call, 1)
        except Exception as exc:
            entry.status, entry.error = "error", f"{type(exc).__name__}: {exc}"[:500]
            continue
        entry.inner = max(1, min(10_000, math.ceil(min_sample_s / max(t, 1e-9))))
    calls = [(e, c) for e, c in calls if e.status == "ok"]
    rounds = random.Random(0)
    for _ in range(repeats):
        rounds.shuffle(calls)  # the pair that opens a round runs measurably slower
        for entry, call in calls:
            entry.samples.append(_timed(call, entry.inner) / entry.inner)
    for entry, _ in calls:
        _summarise(entry)
    _accuracy(problem, tasks, result)
    result.threads = thread_info()
    return result


def warm_frameworks(configs: Sequence[str]) -> None:
    """Import and initialise the frameworks the configurations use, outside any timing.

    The first call of a configuration then measures tracing and compilation,
    not ``import torch`` or XLA's client start-up.
    """
    if any(c.startswith("torch") for c in configs):
        import torch
        import torch.func

        t = torch.tensor([0.5], dtype=torch.float64)
        torch.func.grad(lambda y: torch.sin(y).sum())(t)
    if any(c.startswith("jax") for c in configs):
        import jax
        import jax.numpy as jnp

        from .backends import get_backend

        get_backend("jax")  # switches on x64
        jax.block_until_ready(jax.jit(jax.grad(lambda y: jnp.sin(y).sum()))(jnp.ones(1)))


def _first_call(
    entry: CompareEntry, builder: Builder, problem: Problem, task: Task, memory: bool
) -> Callable[[], Any] | None:
    try:
        call = builder(problem, task)
        with _PeakRSS() if memory else _Null() as probe:
            start = time.perf_counter()
            y = call()
            entry.first_call_s = time.perf_counter() - start
        entry.peak_rss_mb = probe.delta_mb if memory else math.nan
        entry.value = _to_numpy(y)
        d = getattr(call, "derivatives", None)
        entry.compilations = None if d is None else d.compilations
        return call
    except UnsupportedError as exc:
        entry.status = "unsupported" if "torch.compile failed" not in str(exc) else "error"
        entry.error = f"{type(exc).__name__}: {exc}"[:500]
    except Exception as exc:  # any failure of a configuration is a result, not a crash
        entry.status, entry.error = "error", f"{type(exc).__name__}: {exc}"[:500]
    return None


class _Null:
    delta_mb = math.nan

    def __enter__(self) -> _Null:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _timed(call: Callable[[], Any], inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        call()
    return time.perf_counter() - start


def _summarise(e: CompareEntry) -> None:
    s = sorted(e.samples)
    e.repeats = len(s)
    e.steady_s = statistics.median(s)
    q = np.quantile(s, [0.25, 0.75])
    e.steady_q25_s, e.steady_q75_s = float(q[0]), float(q[1])
    e.steady_min_s, e.steady_max_s = s[0], s[-1]


def _accuracy(problem: Problem, tasks: list[Task], result: CompareResult) -> None:
    for task in tasks:
        ref = exact_reference(problem, task)
        name = "exact"
        if ref is None:
            fd = [
                e
                for e in result.entries
                if e.derivative == task.label and e.config == "scipy-fd" and e.status == "ok"
            ]
            base = [
                e
                for e in result.entries
                if e.derivative == task.label and e.config == result.baseline and e.status == "ok"
            ]
            if fd:
                ref, name = fd[0].value, "scipy-fd"
            elif base:  # no independent reference: agreement with the baseline
                ref, name = base[0].value, result.baseline
        for e in result.entries:
            if e.derivative != task.label or e.status != "ok" or ref is None:
                continue
            if e.value.shape != ref.shape:
                e.reference, e.max_abs_err = name, math.inf
                continue
            scale = max(1.0, float(np.max(np.abs(ref), initial=0.0)))
            e.reference = name
            e.max_abs_err = float(np.max(np.abs(e.value - ref), initial=0.0))
            e.max_rel_err = e.max_abs_err / scale
