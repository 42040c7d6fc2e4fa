"""The ``simdiff`` command: ``list``, ``check``, ``compare``, ``report``.

Problems are catalogue names (the ``problems`` package of the repository,
importable when the command runs from the repository root) or
``module:attribute`` paths to a user's own :class:`~simdiff.Problem` (or a
zero-argument function returning one); the current directory is searched.

Exit status: 0 when everything asked for passed, 1 when a check failed, 2 on
usage errors (unknown names, which are listed with the valid ones).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

__all__ = ["main"]

QUICK_CLAIMS = ("C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9")


class UsageError(Exception):
    """A name or option the command cannot use; exit status 2."""


def _catalogue() -> Any:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module("problems")
    except ImportError as exc:
        raise UsageError(
            f"the catalogue package 'problems' is not importable ({exc}); run simdiff from the "
            "repository root, or name your own problem as module:attribute"
        ) from exc


def resolve(name: str) -> tuple[str, Callable[[], Any]]:
    """``(label, factory)`` for a catalogue name or a ``module:attribute`` path."""
    import simdiff

    if ":" in name:
        module, _, attr = name.partition(":")
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            obj = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"cannot load {name!r}: {type(exc).__name__}: {exc}") from exc

        def factory() -> Any:
            p = obj if isinstance(obj, simdiff.Problem) else obj()
            if not isinstance(p, simdiff.Problem):
                raise UsageError(
                    f"{name!r} is not a simdiff.Problem nor a function returning "
                    f"one; got {type(p).__name__}"
                )
            return p

        return name, factory
    reg = _catalogue().registry()
    if name not in reg:
        raise UsageError(
            f"unknown problem {name!r}; valid catalogue names: "
            f"{', '.join(sorted(reg))} (or module:attribute)"
        )
    return name, reg[name]


def _progress(items: Sequence[Any], desc: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is a dependency; without it, no bars
        return items
    return tqdm(items, desc=desc, file=sys.stderr, leave=False, disable=not sys.stderr.isatty())


def _split(s: str | None) -> list[str] | None:
    return None if s is None else [p.strip() for p in s.split(",") if p.strip()]


# --------------------------------------------------------------------------- commands


def cmd_list(args: argparse.Namespace) -> int:
    cat = _catalogue()
    for name in cat.names(args.tag):
        try:
            p = cat.get(name)
            tags = ",".join(p.meta.get("tags", ()))
            print(f"{name:24s} n={p.n:<6d} out={p.output_shape!s:8s} tags={tags}")
        except Exception as exc:  # a broken entry is listed with its error
            print(f"{name:24s} ERROR {type(exc).__name__}: {exc}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ._check import DERIVATIVES, check
    from .store import Store

    factories = [resolve(n) for n in args.problems]
    store = Store(Path(args.out) / "simdiff.h5") if args.out else None
    run = store.start_run("check", {"problems": args.problems}) if store else None
    status = 0
    for label, factory in factories:
        p = factory()
        kw: dict[str, Any] = {
            "derivatives": _split(args.derivatives) or DERIVATIVES,
            "backends": _split(args.backends) or ("jax", "torch"),
        }
        if args.orders:
            kw["orders"] = tuple(int(k) for k in _split(args.orders) or ())
        res = check(p, **kw)
        print(res)
        print()
        if store and run:
            store.put(
                run,
                label,
                "check",
                "all",
                {"passed": res.passed, "n": p.n, "entries": [asdict(e) for e in res.entries]},
            )
        status = status or (0 if res.passed else 1)
    if store and run:
        store.finish_run(run)
    return status


def cmd_compare(args: argparse.Namespace) -> int:
    from ._compare import CONFIGS, compare, config_backend
    from .store import Store

    configs = _split(args.configs) or ["jax-jit", "torch-eager", "scipy-fd"]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise UsageError(f"unknown configurations {unknown}; valid: {', '.join(sorted(CONFIGS))}")
    factories = [resolve(n) for n in args.problems]
    store = Store(Path(args.out) / "simdiff.h5") if args.out else None
    run = (
        store.start_run("compare", {"problems": args.problems, "configs": configs})
        if store
        else None
    )
    for label, factory in factories:
        p = factory()
        derivs = _split(args.derivatives) or (
            ["grad", "hessian"] if p.is_scalar else ["jacobian", "jvp", "vjp"]
        )
        usable = [c for c in configs if (b := config_backend(c)) is None or p.supports(b)]
        r = compare(p, derivs, usable, repeats=args.repeats)
        print(r)
        print()
        if store and run:
            store.put(run, label, "compare", "all", r.record())
    if store and run:
        store.finish_run(run)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report
    from .store import Store

    cat = _catalogue()
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        from validation.catalogue import run_catalogue
        from validation.claims import CLAIMS, ClaimsContext, run_claim
    except ImportError as exc:
        raise UsageError(
            f"the validation package is not importable ({exc}); run `simdiff "
            "report` from the repository root"
        ) from exc
    names = _split(args.problems) or cat.names()
    factories = dict(resolve(n) for n in names)
    claims = _split(args.claims) if args.claims is not None else list(CLAIMS)
    bad = [c for c in claims if c not in CLAIMS]
    if bad:
        raise UsageError(f"unknown claims {bad}; valid: {', '.join(CLAIMS)}")
    out = Path(args.out)
    store = Store(out / "simdiff.h5")
    params = {"quick": args.quick, "problems": names, "claims": claims, "threads": args.threads}
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
    ctx = ClaimsContext(quick=args.quick)
    for cid in _progress(claims, "claims"):
        if store.has(run, "claims", cid, "claim"):
            log(f"{cid}: already in the store, skipped (resumed run)")
            continue
        rec = run_claim(cid, ctx)
        store.put(run, "claims", cid, "claim", rec)
        log(f"{cid}: {rec['verdict']} ({rec['seconds']:.1f} s)")
    store.finish_run(run)
    cmd = "simdiff report" + (" --quick" if args.quick else "") + f" --out {args.out}"
    path = write_report(store, run, out, command=cmd)
    log(f"wrote {path} and {store.path}; checks {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``simdiff`` command."""
    ap = argparse.ArgumentParser(prog="simdiff", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--threads", type=int, default=1, help="threads for torch and XLA, set equal (default 1)"
    )
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="list the catalogue")
    p.add_argument("--tag", default=None)
    p.set_defaults(fn=cmd_list)
    p = sub.add_parser("check", help="check derivatives against SciPy, exact and across backends")
    p.add_argument("problems", nargs="+", help="catalogue names or module:attribute")
    p.add_argument("--derivatives", help="comma-separated subset of the check derivatives")
    p.add_argument("--backends", help="comma-separated: jax,torch")
    p.add_argument("--orders", help="orders of directional derivatives, e.g. 2,3")
    p.add_argument("--out", help="also store results in OUT/simdiff.h5")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("compare", help="time derivatives under several configurations")
    p.add_argument("problems", nargs="+", help="catalogue names or module:attribute")
    p.add_argument("--derivatives", help="e.g. grad,hessian,derivative3")
    p.add_argument("--configs", help="e.g. jax-jit,torch-eager,torch-compile,scipy-fd")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", help="also store results in OUT/simdiff.h5")
    p.set_defaults(fn=cmd_compare)
    p = sub.add_parser("report", help="check + compare the catalogue, run the claims, write report")
    p.add_argument("--quick", action="store_true", help="the small preset (minutes on 2 cores)")
    p.add_argument("--out", default="results", help="output directory (default results/)")
    p.add_argument("--problems", help="comma-separated catalogue names (default: all)")
    p.add_argument("--claims", help="comma-separated claim ids (default: all; '' for none)")
    p.add_argument("--no-resume", action="store_true", help="start a new run")
    p.set_defaults(fn=cmd_report)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``simdiff`` command; returns the exit status.

    Examples
    --------
    >>> from simdiff.cli import main
    >>> main(["check", "no-such-problem"])  # doctest: +SKIP
    2
    """
    args = build_parser().parse_args(argv)
    from .backends import set_threads  # before jax is imported: XLA reads its flags once

    set_threads(args.threads)
    try:
        return int(args.fn(args))
    except UsageError as exc:
        print(f"simdiff: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
