"""Run the catalogue (``problems.names()``) through check and compare into a results store.

Which derivatives and configurations each problem gets depends on its size,
its output (scalar or vector), its tags (in ``--quick``, problems tagged
``pde``, ``ode``, ``large``, ``stiff`` or ``chaotic``, or neither ``small``
nor ``closed-form``, are checked on the gradient or JVP/VJP only and timed on
the gradient or JVP only), the backends it runs on and
the preset; every
choice that leaves something out is written to the store as a ``skipped``
entry with its reason, so the report says what was not measured and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

import simdiff
from simdiff.evidence.check.run import check
from simdiff.evidence.compare.run import compare
from simdiff.store import Store

from .literature import reproduce

__all__ = ["Plan", "plan", "run_catalogue"]

#: Sizes above which a derivative is left out of the quick / full preset.
HESSIAN_MAX_N = {True: 256, False: 2048}
FD_CONFIG_MAX_N = 16
#: Tags of problems whose higher derivatives are left to the full preset.
HEAVY_TAGS = {"pde", "ode", "large", "stiff", "chaotic"}


@dataclass
class Plan:
    """What one problem is checked and timed with, and what is left out (with reasons)."""

    check_derivatives: tuple[str, ...]
    orders: tuple[int, ...]
    compare_derivatives: list[str]
    configs: list[str]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    heavy: bool = False


def plan(problem: simdiff.Problem, quick: bool) -> Plan:
    """Choose derivatives and configurations for ``problem`` (see the module docstring)."""
    n, scalar = problem.n, problem.is_scalar
    skipped: list[tuple[str, str]] = []
    if scalar:
        checks = ("grad", "hessian", "hvp", "jvp", "vjp", "derivative")
        comp = ["grad", "hvp"]
        if n <= HESSIAN_MAX_N[quick]:
            comp.insert(1, "hessian")
        else:
            skipped.append(("compare hessian", f"n={n} > {HESSIAN_MAX_N[quick]} in this preset"))
    else:
        checks = ("jvp", "vjp", "jacobian", "derivative")
        comp = ["jacobian", "jvp", "vjp"]
    tags = set(problem.meta.get("tags", ()))
    heavy = bool(tags & HEAVY_TAGS) or not (tags & {"small", "closed-form"})
    if quick and heavy:
        keep = ("grad",) if scalar else ("jvp", "vjp")
        left = [c for c in checks if c not in keep]
        checks = keep
        comp = [keep[0]]
        skipped.append(
            (
                f"check {', '.join(left)}",
                "--quick: a simulator whose derivatives take "
                f"long to compile (tags {sorted(tags)}); the full preset checks them",
            )
        )
    orders = (2,) if quick else (2, 3)
    configs = [c for c, b in (("jax-jit", "jax"), ("torch-eager", "torch")) if problem.supports(b)]
    for b in ("jax", "torch"):
        if not problem.supports(b):
            skipped.append((f"{b} configurations", f"problem runs on {list(problem.backends)}"))
    if quick:
        skipped.append(
            (
                "torch-compile",
                "left out of --quick (compile takes seconds to minutes "
                "per derivative); measured in claims C1 and C5",
            )
        )
    elif problem.supports("torch"):
        configs.append("torch-compile")
    if quick and heavy:
        skipped.append(
            (
                "scipy-fd / numdifftools timing",
                "--quick: finite differences of a simulator cost seconds per call (each call "
                "is n+1 or more solves); the full preset times them",
            )
        )
    elif n <= FD_CONFIG_MAX_N and problem.supports("numpy"):
        configs.append("scipy-fd")
        if scalar:
            configs.append("numdifftools")
    else:
        skipped.append(
            ("scipy-fd / numdifftools timing", f"n={n} > {FD_CONFIG_MAX_N} or no numpy context")
        )
    return Plan(checks, orders, comp, configs, skipped, heavy)


def _compare_arrays(result: Any) -> dict[str, np.ndarray]:
    arrays = {}
    for e in result.entries:
        if e.status == "ok" and e.config == result.baseline and e.value is not None:
            if np.asarray(e.value).size <= 100_000:
                arrays[f"{e.derivative}@{e.config}"] = np.asarray(e.value)
    return arrays


def run_catalogue(
    store: Store,
    run: str,
    names: Iterable[str],
    factories: dict[str, Callable[[], simdiff.Problem]],
    *,
    quick: bool = True,
    repeats: int | None = None,
    progress: Callable[[Iterable[Any]], Iterable[Any]] = iter,
    log: Callable[[str], None] = lambda s: None,
) -> bool:
    """Check, reproduce literature values and compare each named problem into ``run``.

    Entries already in the run are skipped (a resumed run).  Returns True when
    every check passed and no literature value failed.
    """
    ok = True
    reps = repeats or (5 if quick else 9)
    for name in progress(list(names)):
        done_check = store.has(run, name, "check", "all")
        done_compare = store.has(run, name, "compare", "all")
        done_lit = store.has(run, name, "literature", "all")
        if done_check:
            rec = next(
                e
                for e in store.entries(run, arrays=False)
                if e["problem"] == name and e["kind"] == "check"
            )
            ok &= bool(rec["record"]["passed"])
        if done_check and done_compare and done_lit:
            log(f"{name}: already in the store, skipped (resumed run)")
            continue
        try:
            problem = factories[name]()
            pl = plan(problem, quick)
        except Exception as exc:
            store.put(run, name, "skipped", "build", {"reason": f"{type(exc).__name__}: {exc}"})
            ok = False
            continue
        for what, why in pl.skipped:
            store.put(run, name, "skipped", what, {"reason": why})
        if not done_check:
            t0 = time.perf_counter()
            res = check(problem, derivatives=pl.check_derivatives, orders=pl.orders)
            store.put(
                run,
                name,
                "check",
                "all",
                {
                    "passed": res.passed,
                    "verdict": res.verdict,
                    "n": problem.n,
                    "seconds": time.perf_counter() - t0,
                    "tags": list(problem.meta.get("tags", ())),
                    "entries": [asdict(e) for e in res.entries],
                },
            )
            log(f"{name}: check {res.verdict}")
            ok &= res.passed
        if not done_lit:
            rows = reproduce(problem)
            store.put(run, name, "literature", "all", {"rows": rows})
            ok &= all(r["verdict"] != "fail" for r in rows)
            if rows:
                log(f"{name}: literature values {[r['verdict'] for r in rows]}")
        if not done_compare:
            t0 = time.perf_counter()
            r = compare(
                problem,
                pl.compare_derivatives,
                pl.configs,
                repeats=3 if quick and pl.heavy and not repeats else reps,
            )
            store.put(
                run,
                name,
                "compare",
                "all",
                {**r.record(), "seconds": time.perf_counter() - t0},
                arrays=_compare_arrays(r),
            )
            log(f"{name}: compare done in {time.perf_counter() - t0:.1f} s")
    return ok
