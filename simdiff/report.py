"""Markdown report with matplotlib figures, written from one run of a results store.

The report reads only the store (:class:`simdiff.store.Store`), so it can be
rewritten from a finished or interrupted run without measuring again.  Entry
conventions it understands (written by ``validation/`` and the CLI):

| problem | kind | config | record |
|---|---|---|---|
| catalogue name | `check` | `all` | `passed`, `entries` (CheckEntry dicts) |
| catalogue name | `compare` | `all` | `entries` (CompareEntry dicts), `baseline` |
| catalogue name | `literature` | `all` | `rows` (validation/literature.py) |
| catalogue name | `skipped` | any | `reason` |
| `claims` | `C1`..`C9` | `claim` | the claim dict of validation/claims.py |
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._report_figures import fig_claims, fig_first_call, fig_ratio_to_jax
from .errors import InputError
from .store import Store

__all__ = ["write_report"]

_VERDICT_ORDER = ("confirmed", "refuted", "depends")


def _fmt_t(t: Any) -> str:
    if t is None or not isinstance(t, (int, float)) or not math.isfinite(t):
        return "-"
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if t >= f:
            return f"{t / f:.3g} {unit}"
    return f"{t / 1e-9:.3g} ns"


def _fmt_x(v: Any, spec: str = ".2f") -> str:
    if isinstance(v, (int, float)) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v is None or not isinstance(v, (int, float)) or not math.isfinite(v):
        return "-"
    return format(v, spec)


def _cell(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: list[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


# --------------------------------------------------------------------------- figures


# --------------------------------------------------------------------------- report


def write_report(
    store: Store | str | os.PathLike[str],
    run: str | None = None,
    out_dir: str | os.PathLike[str] = "results",
    *,
    command: str = "",
) -> Path:
    """Write ``report.md`` and its figures for one run of a results store.

    Parameters
    ----------
    store : Store or path
    run : str, optional
        Run id (default: the latest run).
    out_dir : path
        Directory for ``report.md`` and ``fig_*.png``.
    command : str
        The command that produced the run, quoted in the report.

    Returns
    -------
    Path
        The markdown file.

    Examples
    --------
    >>> import tempfile, os
    >>> from simdiff.store import Store
    >>> from simdiff.report import write_report
    >>> d = tempfile.mkdtemp()
    >>> s = Store(os.path.join(d, "store"))
    >>> run = s.start_run("demo")
    >>> s.put(run, "seed", "skipped", "-", {"reason": "example"})
    >>> write_report(s, run, d).name
    'report.md'
    """
    store = store if isinstance(store, Store) else Store(store)
    run = run or store.latest_run()
    if run is None:
        raise InputError(f"{store.path} holds no runs to report on")
    info = next(r for r in store.runs() if r["id"] == run)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    entries = store.entries(run, arrays=False)
    checks = {e["problem"]: e["record"] for e in entries if e["kind"] == "check"}
    compares = {e["problem"]: e["record"] for e in entries if e["kind"] == "compare"}
    skipped = [
        (e["problem"], e["config"], e["record"].get("reason", ""))
        for e in entries
        if e["kind"] == "skipped"
    ]
    claims = sorted(
        (e["record"] for e in entries if e["problem"] == "claims"), key=lambda c: int(c["id"][1:])
    )
    env = info["env"]
    lines = ["# simdiff report", ""]
    lines += [
        f"Run `{run}` ({info['status']}), started {info['created']}"
        + (f", finished {info['finished']}" if info["finished"] else "")
        + ".",
        "",
    ]
    if command:
        lines += ["Reproduce with:", "", "```", command, "```", ""]
    v = env.get("versions", {})
    th = env.get("threads", {})
    lines += [
        f"Machine: {env.get('cpu')} ({th.get('affinity')} cores usable); host "
        f"{env.get('hostname')}; git {env.get('git')}.",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".",
        f"Threads: torch {th.get('torch_intra_op')}, XLA_FLAGS `{th.get('XLA_FLAGS')}`, "
        f"OMP_NUM_THREADS {th.get('OMP_NUM_THREADS')}.",
        "",
    ]
    lines += _claims_section(claims, out)
    lines += _check_section(checks)
    lines += _literature_section(
        {e["problem"]: e["record"] for e in entries if e["kind"] == "literature"}
    )
    lines += _compare_section(compares, out)
    if skipped:
        lines += ["## Skipped", ""]
        lines += [*_table(["problem", "what", "why"], [list(s) for s in skipped]), ""]
    lines += [
        "## How to read this",
        "",
        "Times are medians of interleaved repeats (round robin over configurations), the "
        "IQR beside them; *first call* includes tracing and compilation. Ratios are relative "
        "to the baseline configuration measured in the same run. Memory is the peak RSS "
        "increase during the first call (sampled; a lower bound). See docs/evidence.md.",
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def _threads(c: dict[str, Any]) -> str:
    busy = [v for v in c.get("threads", {}).values() if isinstance(v, (int, float))]
    busy = [v for v in busy if math.isfinite(v)]
    if not busy:
        return "-"
    return (
        f"{min(busy):.2f}" if max(busy) - min(busy) < 0.05 else f"{min(busy):.2f}-{max(busy):.2f}"
    )


def _claims_section(claims: list[dict[str, Any]], out: Path) -> list[str]:
    lines = ["## Claims", ""]
    if not claims:
        return [*lines, "No claims experiments in this run.", ""]
    rows = []
    for c in claims:
        lo, hi = (c.get("interval") or [math.nan, math.nan])[:2]
        rows.append(
            [
                c["id"],
                c["claim"],
                c["article"],
                c["measured"],
                f"{_fmt_x(c.get('ratio'), '.3g')} [{_fmt_x(lo, '.3g')}, {_fmt_x(hi, '.3g')}] "
                f"({c.get('ratio_means', '')})",
                _fmt_x(c.get("threshold"), ".3g"),
                f"**{c['verdict']}**",
                _threads(c),
            ]
        )
    header = ["id", "claim", "article's figure", "measured here", "statistic [95% interval]"]
    lines += _table([*header, "threshold", "verdict", "threads busy"], rows)
    lines += [
        "",
        "Each verdict compares the bootstrap interval of its statistic (interleaved rounds, "
        "paired resampling) with the threshold taken from the article: confirmed or refuted "
        "only when the whole interval lies on one side; *depends* when it straddles. "
        "*Threads busy* is process CPU time over wall time while the timed calls ran.",
        "",
    ]
    if fig_claims(claims, out / "fig_claims.png"):
        lines += ["![claims against their thresholds](fig_claims.png)", ""]
    return lines


def _check_section(checks: dict[str, dict]) -> list[str]:
    lines = ["## Check: derivatives against SciPy, exact references and across backends", ""]
    rows = []
    for name, rec in checks.items():
        es = rec.get("entries", [])
        kinds = ("pass", "fail", "error", "inconclusive", "n/a")
        count = {k: sum(e["verdict"] == k for e in es) for k in kinds}
        bad = "; ".join(
            f"{e['derivative']}/{e['backend']} vs {e['reference']}: {e['message']}"
            for e in es
            if e["verdict"] in ("fail", "error")
        )[:300]
        worst = max(
            (e["max_rel_err"] for e in es if e["verdict"] == "pass" and e["reference"] != "-"),
            default=math.nan,
        )
        rows.append(
            [
                name,
                rec.get("n"),
                count["pass"],
                count["fail"],
                count["error"],
                count["inconclusive"],
                count["n/a"],
                _fmt_x(worst, ".1e"),
                f"**{_check_verdict(rec).upper()}**",
                bad,
            ]
        )
    if not rows:
        return [*lines, "No checks in this run.", ""]
    lines += _table(
        [
            "problem",
            "n",
            "pass",
            "fail",
            "error",
            "inconclusive",
            "n/a (not checked)",
            "worst rel err (passing)",
            "verdict",
            "failures",
        ],
        rows,
    )
    return [*lines, ""]


def _check_verdict(rec: dict[str, Any]) -> str:
    """The stored verdict; records from before verdicts were stored have ``passed`` only."""
    return str(rec.get("verdict") or ("pass" if rec.get("passed") else "fail"))


def _literature_section(lits: dict[str, dict]) -> list[str]:
    rows = [
        [name, r["key"], r["quoted"], r["measured"], r["tol"], r["verdict"], r["note"]]
        for name, rec in lits.items()
        for r in rec.get("rows", [])
    ]
    if not rows:
        return []
    lines = ["## Literature values", ""]
    lines += _table(
        ["problem", "value", "quoted", "measured", "tolerance", "verdict", "note"], rows
    )
    return [*lines, ""]


def _compare_section(compares: dict[str, dict], out: Path) -> list[str]:
    lines = ["## Compare: timings side by side", ""]
    if not compares:
        return [*lines, "No comparisons in this run.", ""]
    if fig_ratio_to_jax(compares, out / "fig_ratio_to_jax.png"):
        lines += ["![steady-state time relative to JAX](fig_ratio_to_jax.png)", ""]
    if fig_first_call(compares, out / "fig_first_call.png"):
        lines += ["![first call vs steady state](fig_first_call.png)", ""]
    for name, rec in compares.items():
        base = rec.get("baseline")
        bsteady = {e["derivative"]: e["steady_s"] for e in rec["entries"] if e["config"] == base}
        lines += [
            f"### {name} (n={rec.get('n')}, batch={rec.get('batch') or 1}; ratios vs {base})",
            "",
        ]
        rows = []
        for e in rec["entries"]:
            ok = e["status"] == "ok"
            b = bsteady.get(e["derivative"], math.nan)
            ratio = e["steady_s"] / b if ok and b and math.isfinite(b) else math.nan
            rows.append(
                [
                    e["derivative"],
                    e["config"],
                    _fmt_t(e["first_call_s"]),
                    _fmt_t(e["steady_s"]),
                    f"{_fmt_t(e['steady_q25_s'])}..{_fmt_t(e['steady_q75_s'])}",
                    _fmt_x(ratio),
                    _fmt_x(e["peak_rss_mb"], ".1f"),
                    f"{_fmt_x(e['max_rel_err'], '.1e')} ({e['reference'] or '-'})",
                    "ok" if ok else f"{e['status']}: {e['error'][:200]}",
                ]
            )
        lines += [
            *_table(
                [
                    "derivative",
                    "config",
                    "first call",
                    "steady",
                    "IQR",
                    "ratio",
                    "RSS MB",
                    "rel err (ref)",
                    "status",
                ],
                rows,
            ),
            "",
        ]
    return lines
