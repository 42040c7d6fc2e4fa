"""Torch against JAX over the catalogue: eager, compiled, compile seconds, break-even calls.

For each catalogue problem and derivative (scalar problems: gradient, HVP,
Hessian; vector-valued ones: VJP, JVP, Hessian) three configurations are
timed, interleaved in one run per problem (order shuffled each round, median
of rounds): ``Derivatives(p, "jax")`` (jit), ``Derivatives(p, "torch")``
(torch.func eager) and ``Derivatives(p, "torch", compile=True)``, all with the
Hessian method ``"auto"`` picks for the backend.  The first call of the JAX
and the compiled torch configuration is reported as the compile time; the
break-even number of calls is ``compile_s / (eager_s - compiled_s)`` (``inf``
where compiling does not pay).  The compiled and eager results are compared
(largest relative difference, to be below 1e-12).

The "policy" column is what ``compile="auto"`` keeps in steady state once
it has compiled: the compiled callable where it compiled and its calls were
faster than eager, else eager (its own check, median of three calls, decides
the same on the same numbers).  Hessians use the method ``method="auto"``
picks for the path (``TorchBackend.hessian_method(n, m, compiled=...)``).
``--auto`` measures the policy instead: a fourth configuration,
``compile="auto"`` told to expect 10^9 calls (so it compiles wherever
compiling can pay), timed once it settled; the column is then its own time
and path, and where it stayed eager its reason (``cache_info()``'s
``compile_error``) is kept in the record as ``auto_reason``.

Each problem runs in its own process (``--timeout`` seconds at most), so a
crash in generated code or a compile that does not end is a row of the table
("crashed", "timed out") instead of the end of the run.  Its record is
appended as one JSON line to ``.<out>.partial`` beside ``--out`` as soon as it
is measured, and the finished file replaces ``--out`` at the end, so every run
measures anew and a stopped run leaves ``--out`` as it was (``--resume``
continues a stopped run's partial file, skipping the problems already in it);
``--table FILE`` prints the markdown table of such a file.

    python -m validation.benchmarks.bench_torch --out docs/results/bench_torch_catalogue.jsonl
    python -m validation.benchmarks.bench_torch --table docs/results/bench_torch_catalogue.jsonl
    python -m validation.benchmarks.bench_torch --auto heat_modes --out pde.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import problems
import simdiff
from simdiff.core.structure import StructuredHessian
from simdiff.evidence import _timing
from simdiff.evidence._accuracy import rel_error


def _derivatives(p: simdiff.Problem) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    v = rng.standard_normal(p.n)
    if p.is_scalar:
        return {
            "grad": lambda d: d.grad(),
            "hvp": lambda d: d.hvp(v),
            "hessian": lambda d: d.hessian(),
        }
    u = rng.standard_normal(p.output_shape)
    return {"vjp": lambda d: d.vjp(u), "jvp": lambda d: d.jvp(v), "hessian": lambda d: d.hessian()}


def interleaved(
    calls: dict[Any, Callable[[], Any]], rounds: int, budget: float
) -> dict[Any, list[float]]:
    """Seconds per call of every callable, interleaved (``_timing.interleaved``).

    One first call each (its time is the first sample), then ``rounds`` rounds
    in a seeded shuffled order; a callable is timed in round ``r`` while its
    first call times ``r + 1`` stays within ``budget`` seconds.
    """
    once = {k: _timed(fn)[0] for k, fn in calls.items()}
    rest = _timing.interleaved(calls, rounds, skip=lambda k, r: once[k] * (r + 1) > budget)
    return {k: [once[k], *rest[k]] for k in calls}


def _timed(fn: Any) -> tuple[float, Any]:
    """``(seconds, result)`` of one call (:func:`simdiff.evidence._timing.first_call`)."""
    out, seconds = _timing.first_call(fn)
    return seconds, out


def median_ms(fn: Callable[[], Any], repeats: int, warm: bool = True) -> float:
    """Median milliseconds of ``repeats`` calls of ``fn`` (after one untimed call if ``warm``)."""
    if warm:
        fn()
    return 1e3 * _timing.median_time(fn, repeats)


#: Calls after which ``compile="auto"`` (told to expect many) has settled on its path:
#: warm-up, eager timing, then the compile (or its failure) on the third.
AUTO_SETTLE_CALLS = 4


def measure(name: str, rounds: int, budget: float, auto: bool = False) -> dict[str, Any]:
    """One problem: every derivative in the three configurations, interleaved.

    ``auto``: a fourth, ``compile="auto"`` told to expect 10^9 calls (so it
    compiles wherever it can), timed after it settled; its path and, where it
    stayed eager, the reason (``cache_info()``'s ``compile_error``) are kept.
    """
    p = problems.get(name)
    ds = {
        "jax": simdiff.Derivatives(p, "jax", check_finite=False),
        "eager": simdiff.Derivatives(p, "torch", check_finite=False),
        "compiled": simdiff.Derivatives(p, "torch", compile=True, check_finite=False),
    }
    if auto:
        ds["auto"] = simdiff.Derivatives(p, "torch", compile="auto", check_finite=False)
        ds["auto"].expect_calls(10**9)
    calls, first, results, errors = {}, {}, {}, {}
    for kind, call in _derivatives(p).items():
        for config, d in ds.items():
            try:
                first[(kind, config)], out = _timed(lambda c=call, d=d: c(d))
                for _ in range(AUTO_SETTLE_CALLS - 1 if config == "auto" else 0):
                    out = call(d)
            except simdiff.UnsupportedError as exc:
                errors[(kind, config)] = str(exc)[:300]
                continue
            results[(kind, config)] = np.asarray(out)
            calls[(kind, config)] = lambda c=call, d=d: c(d)
    times = interleaved(calls, rounds, budget)
    rows = []
    for kind in _derivatives(p):
        row: dict[str, Any] = {"problem": name, "n": p.n, "m": math.prod(p.output_shape)}
        row["derivative"] = kind
        for config in ds:
            k = (kind, config)
            if k in times:
                row[f"{config}_s"] = _timing.Summary.of(times[k]).median
                row[f"{config}_rounds"] = len(times[k])
            if k in errors:
                row[f"{config}_error"] = errors[k]
        row["jax_first_s"] = first.get((kind, "jax"))
        row["compile_s"] = first.get((kind, "compiled"))
        if (kind, "compiled") in results:
            e, c = results[(kind, "eager")], results[(kind, "compiled")]
            row["compiled_vs_eager_rel"] = rel_error(c, e)
        if "eager_s" in row and "compiled_s" in row:
            gain = row["eager_s"] - row["compiled_s"]
            row["break_even_calls"] = row["compile_s"] / gain if gain > 0 else math.inf
        info = {i["kind"]: i for i in ds["eager"].cache_info()}
        if auto:
            ai = {i["kind"]: i for i in ds["auto"].cache_info()}.get(kind, {})
            row["auto_path"] = ai.get("path")
            if ai.get("compile_error"):
                row["auto_reason"] = str(ai["compile_error"])[:400]
        structured = isinstance(p.fn, StructuredHessian)  # method="auto" assembles it
        method = info.get("hessian", {}).get("method") or ("structured" if structured else None)
        row["method"] = method if kind == "hessian" else None
        rows.append(row)
    return {"problem": name, "rows": rows, "load": os.getloadavg(), "time": time.time()}


def table(path: Path) -> str:
    """Markdown table of a results file."""
    lines = [
        "| problem | n | m | derivative | JAX ms | torch eager / JAX | torch compiled / JAX "
        "| policy / JAX | compile s | break-even calls | compiled vs eager (rel) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    loads = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if "failed" in rec:
            lines.append(f"| {rec['problem']} | | | {rec['failed']} | | | | | | | |")
            continue
        if "rows" not in rec:
            continue
        loads.append(rec["load"][0])
        for r in rec["rows"]:
            j = r.get("jax_s")

            def ratio(key: str, r: dict = r, j: float | None = j) -> str:
                if r.get(key) is None or j is None:
                    return "failed" if r.get(key.replace("_s", "_error")) else "-"
                return f"{r[key] / j:.2f}"

            be = r.get("break_even_calls")
            be_s = "-" if be is None else ("never" if be == math.inf else f"{be:.0f}")
            cs = "-" if r.get("compile_s") is None else f"{r['compile_s']:.1f}"
            rel = r.get("compiled_vs_eager_rel")
            lines.append(
                f"| {r['problem']} | {r['n']} | {r['m']} | {r['derivative']}"
                f"{' (' + r['method'] + ')' if r.get('method') else ''} | "
                f"{'-' if j is None else f'{j * 1e3:.3g}'} | {ratio('eager_s')} | "
                f"{ratio('compiled_s')} | {_policy(r, j)} | {cs} | {be_s} | "
                f"{'-' if rel is None else f'{rel:.1e}'} |"
            )
    if loads:
        lines.append(
            f"\nLoad average (1 min) while measuring: {min(loads):.1f} to {max(loads):.1f}."
        )
    return "\n".join(lines)


def _policy(r: dict, j: float | None) -> str:
    """``compile="auto"``'s steady state: compiled where it compiled and is faster, else eager.

    Measured (``--auto``): the ``compile="auto"`` configuration's own time and path.
    """
    eager, compiled = r.get("eager_s"), r.get("compiled_s")
    if eager is None or j is None:
        return "-"
    if r.get("auto_s") is not None:
        return f"{r['auto_s'] / j:.2f} ({r.get('auto_path')}, measured)"
    if r.get("method") == "structured":  # assembled from term Hessians: not compiled
        return f"{eager / j:.2f} (structured)"
    if compiled is not None and compiled < eager:
        return f"{compiled / j:.2f} (compiled)"
    return f"{eager / j:.2f} (eager)"


def default_order() -> list[str]:
    """Closed-form and sensitivity entries first, then PES, ODE, PDE; small before large."""
    reg = problems.registry()

    def rank(name: str) -> tuple[int, int, str]:
        p = reg[name]()
        tags = p.meta.get("tags", ())
        group = (
            3
            if "pde" in tags
            else 2
            if "ode" in tags or "rk4-model" in tags
            else 1
            if "pes" in tags
            else 0
        )
        return group, p.n, name

    return sorted(reg, key=rank)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="*", help="catalogue names (default: all)")
    parser.add_argument("--out", type=Path, default=Path("bench_torch.jsonl"))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per configuration")
    parser.add_argument("--table", type=Path, help="print the table of a results file and stop")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per problem")
    parser.add_argument(
        "--auto", action="store_true", help='also time compile="auto" (the policy, measured)'
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue a stopped run's partial file"
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # in the child
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.table))
        return
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch.compile internals
    if args.one:  # the child process: one problem, one JSON line on stdout
        print(json.dumps(measure(args.problems[0], args.rounds, args.budget, args.auto)))
        return
    names = args.problems or default_order()
    partial = args.out.parent / f".{args.out.name}.partial"
    done = set()
    if args.resume and partial.exists():
        done = {json.loads(x).get("problem") for x in partial.read_text().splitlines()}
    else:
        partial.unlink(missing_ok=True)
    with partial.open("a") as fh:
        if not done:
            env = {"torch": torch.__version__, "threads": torch.get_num_threads()}
            cmd = "python -m validation.benchmarks.bench_torch"
            fh.write(json.dumps({"env": env, "cmd": cmd}) + "\n")
        for name in names:
            if name in done:
                continue
            rec = _child(name, args)
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            print(name, rec.get("failed") or f"load {rec['load'][0]:.1f}", flush=True)
    os.replace(partial, args.out)
    print(table(args.out))


def _child(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """``measure(name)`` in a fresh process; a crash or a timeout becomes a record."""
    cmd = [sys.executable, "-m", "validation.benchmarks.bench_torch", "--one", name]
    cmd += ["--rounds", str(args.rounds), "--budget", str(args.budget)]
    cmd += ["--auto"] if args.auto else []
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"problem": name, "failed": f"timed out after {args.timeout:.0f} s"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [""]
        return {"problem": name, "failed": f"crashed (exit {done.returncode}): {tail[0][:120]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
