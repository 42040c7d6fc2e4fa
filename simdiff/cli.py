"""The ``simdiff`` command: ``list``, ``check``, ``compare``, ``report``, ``show``.

Problems are catalogue names (``simdiff list``) or ``module:attribute`` paths
to a user's own :class:`~simdiff.Problem` (or a zero-argument function
returning one); the module is imported from the Python path or, failing that,
from the current directory (``module.py`` or ``module/``), as ``python -m``
would find it.

Exit status: 0 when everything asked for passed, 1 when a check failed, 2 on
a usage error (a bad option value, an unknown name, which is listed with the
valid ones, or a path that is not a results store; the message says which) and
when a check was inconclusive or could not be checked
(:attr:`simdiff.evidence.CheckResult.exit_code`).

``--json`` (on ``list``, ``check``, ``compare`` and ``show``) prints one JSON
document on stdout instead of the text, with the same exit status; progress
and error messages stay on stderr.  Non-finite numbers are written as
``null``.  ``simdiff list`` and ``simdiff show`` import neither jax nor torch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from simdiff.core.catalogue import (
    CatalogueUnavailable,
    ProblemNotFound,
    catalogue,
    code_digest,
    resolve,
    validation,
)
from simdiff.errors import StoreError, UsageError

__all__ = ["UsageError", "main"]

#: The results store inside ``--out``.
STORE_DIR = "store"


# --------------------------------------------------------------------------- problems


def _build(names: Sequence[str]) -> list[tuple[str, Any]]:
    """Every named problem, built before any work starts (so a bad name fails fast)."""
    return [(label, factory()) for label, factory in (resolve(n) for n in names)]


def _progress(items: Iterable[Any], desc: str) -> Any:
    """Bars on standard error when it is a terminal (simdiff._log.progress)."""
    from simdiff._log import progress

    return progress(items, desc=desc, enabled=sys.stderr.isatty())


# --------------------------------------------------------------------------- output


def _plain(obj: Any) -> Any:
    """``obj`` as JSON data: numpy scalars and arrays as numbers and lists, tuples as lists,
    non-finite floats as None (strict JSON has no NaN)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [_plain(v) for v in obj]
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays and scalars
        return _plain(obj.tolist())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    return str(obj)


def _print_json(doc: Any) -> None:
    print(json.dumps(_plain(doc), indent=2, allow_nan=False))


# --------------------------------------------------------------------------- option values


def _names(s: str | None) -> list[str] | None:
    return None if s is None else [p.strip() for p in s.split(",") if p.strip()]


def _subset(option: str, given: str | None, valid: Sequence[str]) -> list[str] | None:
    names = _names(given)
    if names is None:
        return None
    bad = [n for n in names if n not in valid]
    if bad or not names:
        raise UsageError(
            f"{option}: unknown {bad if bad else 'empty list'}; valid: {', '.join(valid)}"
        )
    return names


def _positive_int(s: str) -> int:
    try:
        k = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {s!r}") from None
    if k < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {k}")
    return k


def _orders(s: str) -> tuple[int, ...]:
    parts = [p.strip() for p in s.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected orders such as 2,3; got {s!r}")
    return tuple(_positive_int(p) for p in parts)


def _store(out: str) -> Any:
    from simdiff.store import Store

    return Store(Path(out) / STORE_DIR)


def _fingerprints(problems: Sequence[tuple[str, Any]]) -> dict[str, str | None]:
    from simdiff.store import fingerprint

    return {label: fingerprint(p) for label, p in problems}


def _start_run(store: Any, name: str, params: dict[str, Any]) -> str:
    """A run for ``params``; never a resumed one when a problem has no fingerprint."""
    unknown = [label for label, fp in params["fingerprints"].items() if fp is None]
    if unknown:
        print(
            f"not resuming stored results: {', '.join(unknown)} cannot be fingerprinted "
            "(an object whose state cannot be inspected in its definition); a new run is started",
            file=sys.stderr,
        )
    return store.start_run(name, params, resume=not unknown)


# --------------------------------------------------------------------------- commands


def cmd_list(args: argparse.Namespace) -> int:
    rows: list[str] = []
    docs: list[dict[str, Any]] = []
    tags: set[str] = set()
    for name, factory in sorted(catalogue().registry().items()):
        try:
            p = factory()
        except Exception as exc:  # a broken entry is listed with its error
            rows.append(f"{name:24s} ERROR {type(exc).__name__}: {exc}")
            docs.append({"name": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        ptags = tuple(p.meta.get("tags", ()))
        tags.update(ptags)
        if args.tag is None or args.tag in ptags:
            rows.append(f"{name:24s} n={p.n:<6d} out={p.output_shape!s:8s} tags={','.join(ptags)}")
            docs.append({"name": name, "n": p.n, "output_shape": p.output_shape, "tags": ptags})
    if args.tag is not None and args.tag not in tags:
        raise UsageError(f"--tag: unknown tag {args.tag!r}; valid: {', '.join(sorted(tags))}")
    if args.json:
        _print_json({"problems": docs})
    else:
        print("\n".join(rows))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from simdiff.evidence.check.run import DERIVATIVES, check

    kw: dict[str, Any] = {
        "derivatives": _subset("--derivatives", args.derivatives, DERIVATIVES) or DERIVATIVES,
        "backends": _subset("--backends", args.backends, ("jax", "torch")) or ("jax", "torch"),
    }
    if args.orders:
        kw["orders"] = args.orders
    problems = _build(args.problems)
    store = _store(args.out) if args.out else None
    run = None
    if store is not None:
        params = {**kw, "problems": args.problems, "fingerprints": _fingerprints(problems)}
        run = _start_run(store, "check", params)
    status = 0  # 0 pass, 1 a check failed, 2 a check inconclusive or not checked
    docs: list[dict[str, Any]] = []
    for label, p in problems:
        done = store.get(run, label, "check", "all", arrays=False) if store else None
        if done is not None:
            rec = done["record"]  # records from before verdicts were stored have `passed` only
            verdict = rec.get("verdict") or ("pass" if rec["passed"] else "fail")
            if not args.json:
                print(f"{label}: {verdict} (stored in {run})")
            code = {"pass": 0, "fail": 1}.get(verdict, 2)
            record = {**rec, "verdict": verdict, "stored_in": run}
        else:
            res = check(p, **kw)
            if not args.json:
                print(res)
                print()
            record = {
                "passed": res.passed,
                "verdict": res.verdict,
                "n": p.n,
                "entries": [asdict(e) for e in res.entries],
            }
            if store is not None:
                store.put(run, label, "check", "all", record)
            code = res.exit_code
        docs.append({"problem": label, **record, "exit_code": code})
        status = 1 if 1 in (status, code) else max(status, code)
    if store is not None:
        store.finish_run(run)
    if args.json:
        _print_json({"run": run, "exit_code": status, "problems": docs})
    return status


def cmd_compare(args: argparse.Namespace) -> int:
    from simdiff.evidence.compare.run import CONFIGS, compare, config_backend, make_task

    configs = _subset("--configs", args.configs, sorted(CONFIGS)) or [
        "jax-jit",
        "torch-eager",
        "scipy-fd",
    ]
    problems = _build(args.problems)
    plan = []
    for label, p in problems:
        derivs = _names(args.derivatives) or (
            ["grad", "hessian"] if p.is_scalar else ["jacobian", "jvp", "vjp"]
        )
        for d in derivs:
            try:
                make_task(p, d)
            except ValueError as exc:
                raise UsageError(f"--derivatives: {exc}") from exc
        usable = [c for c in configs if (b := config_backend(c)) is None or p.supports(b)]
        plan.append((label, p, derivs, usable))
    store = _store(args.out) if args.out else None
    run = None
    if store is not None:
        params = {
            "problems": args.problems,
            "configs": configs,
            "derivatives": args.derivatives,
            "repeats": args.repeats,
            "fingerprints": _fingerprints(problems),
        }
        run = _start_run(store, "compare", params)
    docs: list[dict[str, Any]] = []
    for label, p, derivs, usable in plan:
        if store is not None and store.has(run, label, "compare", "all"):
            if args.json:
                done = store.get(run, label, "compare", "all", arrays=False)
                docs.append({"problem": label, **done["record"], "stored_in": run})
            else:
                print(f"{label}: stored in {run}")
            continue
        r = compare(p, derivs, usable, repeats=args.repeats)
        if args.json:
            docs.append({"problem": label, **r.record()})
        else:
            print(r)
            print()
        if store is not None:
            store.put(run, label, "compare", "all", r.record())
    if store is not None:
        store.finish_run(run)
    if args.json:
        _print_json({"run": run, "problems": docs})
    return 0


def _run_claims(
    store: Any,
    run: str,
    claims: list[str],
    claims_mod: Any,
    *,
    quick: bool,
    threads: int,
    log: Callable[[str], None],
) -> None:
    """Measure every claim in as many processes as its record asks for, then decide it.

    Part 1 of every claim is measured in this process, part ``k`` of every
    claim that needs it in one fresh process (all such claims together: one
    start-up per part); every part is stored as it arrives
    (``claims/<id>/process-<k>``), so an interrupted report resumes with the
    parts it lacks, and the verdict (``claims/<id>/claim``) is decided from
    the stored parts.
    """
    records = claims_mod.RECORDS
    todo = [c for c in claims if not store.has(run, "claims", c, "claim")]
    for c in sorted(set(claims) - set(todo)):
        log(f"{c}: already in the store, skipped (resumed run)")
    need = {c: records[c].n_processes(quick) for c in todo}
    ctx = claims_mod.ClaimsContext(quick=quick)
    for k in range(1, max(need.values(), default=0) + 1):
        missing = [
            c for c in todo if need[c] >= k and not store.has(run, "claims", c, f"process-{k}")
        ]
        if not missing:
            continue
        if k == 1:
            for c in _progress(missing, "claims"):
                part = claims_mod.run_claim(c, ctx)
                store.put(run, "claims", c, "process-1", part)
                log(f"{c}: process 1 measured ({part['seconds']:.1f} s)")
        else:
            log(f"claims {', '.join(missing)}: process {k} (a fresh one)")
            parts = claims_mod.measure_in_child(missing, quick=quick, process=k, threads=threads)
            for c in missing:
                store.put(run, "claims", c, f"process-{k}", parts[c])
    for c in todo:
        parts = [
            store.get(run, "claims", c, f"process-{k}", arrays=False)["record"]
            for k in range(1, need[c] + 1)
        ]
        rec = claims_mod.decide(c, parts)
        store.put(run, "claims", c, "claim", rec)
        log(f"{c}: {rec['verdict'][:200]} ({rec['seconds']:.1f} s in {len(parts)} processes)")


def cmd_report(args: argparse.Namespace) -> int:
    from simdiff.evidence.report import write_report

    run_catalogue = validation("catalogue").run_catalogue
    claims_mod = validation("claims")
    names: list[str] = _names(args.problems) or list(catalogue().names())
    factories = dict(resolve(n) for n in names)
    claims: list[str] = (
        (_names(args.claims) or []) if args.claims is not None else list(claims_mod.CLAIMS)
    )
    bad = [c for c in claims if c not in claims_mod.CLAIMS]
    if bad:
        raise UsageError(f"--claims: unknown {bad}; valid: {', '.join(claims_mod.CLAIMS)}")
    out = Path(args.out)
    store = _store(args.out)
    params = {
        "quick": args.quick,
        "problems": names,
        "claims": claims,
        "threads": args.threads,
        "code_sha256": code_digest(),  # changed code (catalogue, solvers, claims) never resumes
    }
    run = store.start_run(
        "report-quick" if args.quick else "report", params, resume=not args.no_resume
    )
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    log(f"run {run} -> {store.path}")
    ok = run_catalogue(
        store,
        run,
        names,
        factories,
        quick=args.quick,
        progress=lambda xs: _progress(xs, "catalogue"),
        log=log,
    )
    _run_claims(store, run, claims, claims_mod, quick=args.quick, threads=args.threads, log=log)
    store.finish_run(run)
    cmd = "simdiff report" + (" --quick" if args.quick else "") + f" --out {args.out}"
    if args.problems:
        cmd += f" --problems {args.problems}"
    if args.claims is not None:
        cmd += f" --claims '{args.claims}'"
    path = write_report(store, run, out, command=cmd)
    html = path.with_suffix(".html")
    log(f"wrote {path}, {html} and {store.path}; checks {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


def cmd_show(args: argparse.Namespace) -> int:
    from simdiff.store import Store

    store = Store(args.store)
    if not store.path.exists():
        raise UsageError(f"{store.path}: no such store")
    runs = store.runs()
    if args.run is None and args.json:
        _print_json({"store": str(store.path), "runs": runs})
        return 0
    if args.run is None:
        print(f"{store.path}: {len(runs)} runs")
        for r in runs:
            params = ", ".join(
                f"{k}={v}"
                for k, v in r["params"].items()
                if not k.startswith("fingerprint") and not k.endswith("sha256")
            )
            print(
                f"{r['id']:28s} {r['status']:9s} {r['created']}  {r['n_entries']:5d} entries  "
                f"git {r['env'].get('git', '?')[:12]}  {params[:80]}"
            )
        return 0
    ids = [r["id"] for r in runs]
    if args.run not in ids:
        raise UsageError(f"--run: no run {args.run!r} in {store.path}; runs: {', '.join(ids)}")
    if args.json:
        entries = list(store.entries(args.run, arrays=False))
        _print_json({"store": str(store.path), "run": args.run, "entries": entries})
        return 0
    for e in store.entries(args.run, arrays=False):
        keys = ", ".join(sorted(e["record"]))[:60]
        print(f"{e['problem']:24s} {e['kind']:12s} {e['config']:14s} {e['written']}  {{{keys}}}")
    return 0


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``simdiff`` command."""
    ap = argparse.ArgumentParser(prog="simdiff", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--threads",
        type=_positive_int,
        default=1,
        help="threads for torch and XLA, set equal (default 1)",
    )
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list the catalogue")
    p.add_argument("--tag", default=None)
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(fn=cmd_list, frameworks=False)
    p = sub.add_parser("check", help="check derivatives against SciPy, exact and across backends")
    p.add_argument("problems", nargs="+", help="catalogue names or module:attribute")
    p.add_argument("--derivatives", help="comma-separated subset of the check derivatives")
    p.add_argument("--backends", help="comma-separated: jax,torch")
    p.add_argument("--orders", type=_orders, help="orders of directional derivatives, e.g. 2,3")
    p.add_argument("--out", help=f"also store results in OUT/{STORE_DIR}")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("compare", help="time derivatives under several configurations")
    p.add_argument("problems", nargs="+", help="catalogue names or module:attribute")
    p.add_argument("--derivatives", help="e.g. grad,hessian,derivative3")
    p.add_argument("--configs", help="e.g. jax-jit,torch-eager,torch-compile,scipy-fd")
    p.add_argument("--repeats", type=_positive_int, default=7)
    p.add_argument("--out", help=f"also store results in OUT/{STORE_DIR}")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(fn=cmd_compare)
    p = sub.add_parser("report", help="check + compare the catalogue, run the claims, write report")
    p.add_argument("--quick", action="store_true", help="the small preset (minutes on 2 cores)")
    p.add_argument("--out", default="results", help="output directory (default results/)")
    p.add_argument("--problems", help="comma-separated catalogue names (default: all)")
    p.add_argument("--claims", help="comma-separated claim ids (default: all; '' for none)")
    p.add_argument("--no-resume", action="store_true", help="start a new run")
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("show", help="list the runs of a results store (or one run's entries)")
    p.add_argument("store", help=f"the store directory (e.g. results/{STORE_DIR})")
    p.add_argument("--run", help="list this run's entries")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.set_defaults(fn=cmd_show, frameworks=False)
    p = sub.add_parser("cache", help="simdiff's persistent compilation caches: where, or clear")
    p.add_argument("action", choices=("info", "clear"), help="info: the directory; clear: empty it")
    p.set_defaults(fn=cmd_cache, frameworks=False)
    return ap


def cmd_cache(args: argparse.Namespace) -> int:
    """``simdiff cache info|clear``: the compilation cache directory, or empty it."""
    from simdiff.backends._caches import cache_dir, clear_persistent_caches

    if args.action == "clear":
        removed = clear_persistent_caches()
        print(f"removed {', '.join(removed)}" if removed else f"nothing to remove in {cache_dir()}")
    else:
        print(cache_dir())
    return 0


def _refuse_unknown_leading_options(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Name an unknown option before the command (argparse would only say a command is
    required); exits with status 2 through ``parser.error``."""
    actions = parser._option_string_actions
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        name = argv[i].split("=", 1)[0]
        action = actions.get(name)
        if action is None:
            known = sorted(o for o in actions if o.startswith("--"))
            parser.error(
                f"unrecognized option {argv[i]!r} before the command; options there: "
                f"{', '.join(known)}; options of a command go after it (simdiff check --help)"
            )
        takes_value = action.nargs != 0 and "=" not in argv[i]
        i += 2 if takes_value else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``simdiff`` command; returns the exit status.

    Examples
    --------
    >>> from simdiff.cli import main
    >>> main(["check", "no-such-problem"])  # doctest: +SKIP
    2
    """
    try:
        parser = build_parser()
        _refuse_unknown_leading_options(parser, sys.argv[1:] if argv is None else list(argv))
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage error (status 2) or --help (0)
        return int(exc.code or 0)
    if getattr(args, "frameworks", True):  # list and show need neither jax nor torch
        from simdiff.backends import set_threads  # before jax is imported: XLA reads its flags once

        set_threads(args.threads)
    try:
        if args.fn in (cmd_report, cmd_compare):  # their compile times are from cold caches
            from simdiff.backends import cold_compiler_caches

            with cold_compiler_caches():
                return int(args.fn(args))
        return int(args.fn(args))
    except (UsageError, ProblemNotFound, StoreError, CatalogueUnavailable) as exc:
        print(f"simdiff: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `simdiff list | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 0


if __name__ == "__main__":
    sys.exit(main())
