"""``simdiff.compare``: the same derivatives under several configurations, timed side by side.

The configurations and tasks live in :mod:`simdiff.evidence.compare.configs`, the
result types in :mod:`simdiff.evidence.compare.result`, the memory probe in
:mod:`simdiff.evidence._memory` and thread settings in :mod:`simdiff.backends`; this
module is the timing protocol.  Their public names are re-exported here and
in :mod:`simdiff.evidence`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from simdiff.backends import get_backend, set_threads, thread_info, to_host
from simdiff.core.problem import Problem
from simdiff.errors import InputError, UnsupportedError
from simdiff.evidence._memory import NoProbe, PeakRSS
from simdiff.evidence._timing import Summary, first_call, timed
from simdiff.evidence.compare.configs import (
    CONFIGS,
    Builder,
    Task,
    config_backend,
    make_task,
    register_config,
)
from simdiff.evidence.compare.result import CompareEntry, CompareResult

__all__ = [
    "CONFIGS",
    "CompareEntry",
    "CompareResult",
    "Task",
    "compare",
    "config_backend",
    "make_task",
    "register_config",
    "set_threads",
    "thread_info",
]


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
            top = problem.check_options.max_exact_order
            if top is None or task.order <= top:
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
    ``scipy-fd`` configuration's value when that ran; ``max_rel_err`` is the
    largest absolute difference over the largest reference entry.  A
    configuration that raises is reported with its error message
    (``status="error"``, or ``"unsupported"`` for ``UnsupportedError`` from
    the builder), never dropped; so is one whose answer has the wrong shape or
    non-finite entries where the reference is finite.

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
    warm_frameworks(configs, builders)
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
            t = timed(call, 1)
        except Exception as exc:
            entry.status, entry.error = "error", f"{type(exc).__name__}: {exc}"[:500]
            continue
        entry.inner = max(1, min(10_000, math.ceil(min_sample_s / max(t, 1e-9))))
    calls = [(e, c) for e, c in calls if e.status == "ok"]
    rounds = random.Random(0)
    for _ in range(repeats):
        rounds.shuffle(calls)  # the pair that opens a round runs measurably slower
        for entry, call in calls:
            entry.samples.append(timed(call, entry.inner) / entry.inner)
    for entry, _ in calls:
        _summarise(entry)
    _accuracy(problem, tasks, result)
    result.threads = thread_info()
    return result


def warm_frameworks(configs: Sequence[str], builders: Mapping[str, Builder] | None = None) -> None:
    """Import and initialise the frameworks the configurations use, outside any timing.

    The first call of a configuration then measures tracing and compilation,
    not ``import torch`` or XLA's client start-up.  A configuration given in
    ``builders`` counts as the registered one whose builder it is.
    """
    extra = builders or {}
    names = []
    for c in configs:
        same = [k for k, b in CONFIGS.items() if c in extra and b is extra[c]]
        names.append(config_backend(same[0] if same else c))
    for name in dict.fromkeys(names):
        if name is not None:
            get_backend(name).warm_up()


def _first_call(
    entry: CompareEntry, builder: Builder, problem: Problem, task: Task, memory: bool
) -> Callable[[], Any] | None:
    try:
        call = builder(problem, task)
        with PeakRSS() if memory else NoProbe() as probe:
            y, entry.first_call_s = first_call(call)
        entry.peak_rss_mb = probe.delta_mb if memory else math.nan
        entry.value = to_host(y)
        d = getattr(call, "derivatives", None)
        entry.compilations = None if d is None else d.compilations
        return call
    except UnsupportedError as exc:
        entry.status = "unsupported" if "torch.compile failed" not in str(exc) else "error"
        entry.error = f"{type(exc).__name__}: {exc}"[:500]
    except Exception as exc:  # any failure of a configuration is a result, not a crash
        entry.status, entry.error = "error", f"{type(exc).__name__}: {exc}"[:500]
    return None


def _summarise(e: CompareEntry) -> None:
    s = Summary.of(e.samples)
    e.repeats, e.steady_s = s.n, s.median
    e.steady_q25_s, e.steady_q75_s = s.q25, s.q75
    e.steady_min_s, e.steady_max_s = s.min, s.max


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
            if e.value.shape != ref.shape:  # an answer of the wrong shape is an error, not a number
                e.reference, e.max_abs_err, e.max_rel_err = name, math.inf, math.inf
                e.status = "error"
                e.error = f"returned shape {e.value.shape}; the {name} reference has {ref.shape}"
                continue
            e.reference = name
            if not np.all(np.isfinite(ref)):  # nothing to measure against: say so, keep NaN
                e.reference = f"{name} (non-finite)"
                continue
            if not np.all(np.isfinite(e.value)):
                e.max_abs_err = e.max_rel_err = math.inf
                e.status, e.error = "error", "non-finite values where the reference is finite"
                continue
            # Relative to the largest reference entry (not to max(1, ...)): a derivative
            # whose entries are all 1e-8 and wrong by 100% shows 1, not 1e-8.
            scale = float(np.max(np.abs(ref), initial=0.0)) or 1.0
            e.max_abs_err = float(np.max(np.abs(e.value - ref), initial=0.0))
            e.max_rel_err = e.max_abs_err / scale
