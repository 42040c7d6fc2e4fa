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
| `claims` | `C1`..`C9` | `process-<k>` | one process's measurement (validation/claims `part`) |
| `claims` | `C1`..`C9` | `claim` | the decided claim (`validation.claims.decide`) |
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simdiff.errors import InputError
from simdiff.evidence._figures import fig_claims, fig_first_call, fig_ratio_to_jax
from simdiff.evidence._html import render_html
from simdiff.store import Store, _write_text_atomic

__all__ = ["write_report"]


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


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
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
    """Write ``report.md``, ``report.html`` and the figures for one run of a results store.

    ``report.html`` is the same text rendered (:func:`._html.render_html`)
    with the figures inline, one file that needs nothing beside it.  Both
    files are written atomically: a reader sees the old report or the new
    one, never half of one.

    Parameters
    ----------
    store : Store or path
    run : str, optional
        Run id (default: the latest run).
    out_dir : path
        Directory for ``report.md``, ``report.html`` and ``fig_*.png``.
    command : str
        The command that produced the run, quoted in the report.

    Returns
    -------
    Path
        The markdown file (``report.html`` lies beside it).

    Examples
    --------
    >>> import tempfile, os
    >>> from simdiff.store import Store
    >>> from simdiff.evidence.report import write_report
    >>> d = tempfile.mkdtemp()
    >>> s = Store(os.path.join(d, "store"))
    >>> run = s.start_run("demo")
    >>> s.put(run, "seed", "skipped", "-", {"reason": "example"})
    >>> write_report(s, run, d).name
    'report.md'
    >>> sorted(p.name for p in Path(d).glob("report.*"))
    ['report.html', 'report.md']
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
        (e["record"] for e in entries if e["problem"] == "claims" and e["config"] == "claim"),
        key=lambda c: int(c["id"][1:]),
    )
    env = info["env"]
    lines = ["# simdiff report", ""]
    lines += summary_lines(claims, checks, env)
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
    digest = (info.get("params") or {}).get("code_sha256")
    lines += [
        f"Machine: {env.get('cpu')} ({th.get('affinity')} cores usable); host "
        f"{env.get('hostname')}.",
        f"Code: git {env.get('git')}"
        + (f"; sources sha256 `{digest}` (simdiff/, problems/, validation/)." if digest else "."),
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".",
        f"Threads: {_thread_line(th)}.",
        f"Load average (1, 5, 15 min) when the report was written: {_load()}.",
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
    text = "\n".join(lines)
    page = render_html(text, out, title=f"simdiff report, run {run}")
    path = _write_text_atomic(out / "report.md", text)
    _write_text_atomic(out / "report.html", page)
    return path


def _load() -> str:
    try:
        return ", ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def _thread_line(th: dict[str, Any]) -> str:
    """The thread counts of the run's environment record, each framework by name."""
    torch_n = th.get("torch", th.get("torch_intra_op"))
    torch_txt = (
        f"torch {torch_n} intra-op, {th.get('torch_interop')} inter-op"
        if torch_n is not None
        else "torch not loaded when the run started"
    )
    xla = th.get("xla")
    return (
        f"{torch_txt}; XLA {xla if xla is not None else '-'} "
        f"(XLA_FLAGS `{th.get('XLA_FLAGS') or ''}`); OMP_NUM_THREADS {th.get('OMP_NUM_THREADS')}"
    )


def _threads(c: dict[str, Any]) -> str:
    busy = [v for v in c.get("threads", {}).values() if isinstance(v, (int, float))]
    busy = [v for v in busy if math.isfinite(v)]
    if not busy:
        return "-"
    return (
        f"{min(busy):.2f}" if max(busy) - min(busy) < 0.05 else f"{min(busy):.2f}-{max(busy):.2f}"
    )


def _outcome(c: dict[str, Any]) -> str:
    """A claim's outcome word (records from before outcomes were stored: the verdict's head)."""
    return str(c.get("outcome") or str(c.get("verdict", "")).split(":")[0].split(" (")[0])


def _plain(c: dict[str, Any]) -> str:
    return str(c.get("plain") or c.get("verdict", ""))


#: The article the claims come from, for claim records that do not name it
#: (``validation.claims.ARTICLE`` is the same text).
ARTICLE_FALLBACK = (
    "the widely shared JAX-vs-PyTorch comparison article restated in the claim records "
    "of simdiff.validation.claims"
)
#: What is known of the article beyond its claims: the claim records restate the claims and
#: figures only.  Name title, author, date and URL here when they are known.
ARTICLE_SOURCE = (
    "The article is not named more precisely because the claim records "
    "(simdiff.validation.claims.RECORDS) give only its claims and figures: no title, author, "
    "date or URL."
)


def summary_lines(
    claims: list[dict[str, Any]], checks: dict[str, dict], env: dict[str, Any]
) -> list[str]:
    """Five lines a reader needs first: what was tested, what is faster, where it flips, verdicts.

    Plain words with the measured numbers (:func:`validation.claims._records.says`),
    read from the claim records; claims not in the run are left out.
    """
    by = {c["id"]: c for c in claims}
    article = next((c.get("article_name") for c in claims if c.get("article_name")), "")
    th = env.get("threads", {})
    out = [
        "## Summary",
        "",
        f"1. **What**: the claims of {article or ARTICLE_FALLBACK} about JAX and PyTorch "
        f"derivatives, measured on this machine ({th.get('affinity')} cores, float64) in one run.",
    ]
    if not claims:
        return [*out, "2. No claims were measured in this run.", ""]

    def say(cid: str) -> str:
        c = by.get(cid)
        return f"{cid}: {_plain(c)}" if c else ""

    def beside(cid: str, key: str, text: str) -> str:
        iv = (by.get(cid) or {}).get("beside", {}).get(key)
        if not iv or not all(isinstance(v, (int, float)) for v in iv[:3]):
            return ""
        return f"{text} {_fmt_x(iv[0], '.2g')}x ({_fmt_x(iv[1], '.2g')}-{_fmt_x(iv[2], '.2g')}x)"

    faster = [say("C1"), beside("C1", "torch.compile / JAX", "torch.compile takes"), say("C2")]
    faster = [f for f in faster if f]
    if faster and "torch.compile" in faster[1 if len(faster) > 1 else 0]:
        faster[1] += " JAX's time once compiled"
    flips = [f for f in (say("C3"), say("C4"), say("C5")) if f]
    out.append("2. **What is faster**: " + ("; ".join(faster) or "not measured") + ".")
    out.append("3. **Where the answer flips**: " + ("; ".join(flips) or "not measured") + ".")
    groups: dict[str, list[str]] = {}
    for c in claims:
        groups.setdefault(_outcome(c), []).append(c["id"])
    counts = "; ".join(f"{k}: {', '.join(v)}" for k, v in groups.items())
    checked = [_check_verdict(r) for r in checks.values()]
    check_txt = (
        f"{checked.count('pass')} of {len(checked)} catalogue problems pass the derivative check"
        if checked
        else "no derivative checks in this run"
    )
    out.append(f"4. **Verdicts**: {counts}. {check_txt}.")
    rest = [f for f in (say("C6"), say("C7"), say("C8"), say("C9")) if f]
    out.append("5. **Also**: " + ("; ".join(rest) or "-") + ".")
    return [*out, ""]


def _verdict_cell(c: dict[str, Any]) -> str:
    """``**outcome**: plain words``, the outcome not repeated when the words begin with it."""
    word, plain = _outcome(c), _plain(c)
    if plain.startswith(word):
        return f"**{word}**{plain[len(word) :]}"
    return f"**{word}**: {plain}"


def _interval_cell(c: dict[str, Any]) -> str:
    lo, hi = (c.get("interval") or [math.nan, math.nan])[:2]
    if c.get("kind") == "fact":
        return "- (a check, not an interval)"
    procs = c.get("processes") or []
    over = f" over {len(procs)} processes" if len(procs) > 1 else ""
    return (
        f"{_fmt_x(c.get('ratio'), '.3g')} [{_fmt_x(lo, '.3g')}, {_fmt_x(hi, '.3g')}]"
        f" ({c.get('rounds', '-')} rounds{over})"
    )


def _claims_section(claims: list[dict[str, Any]], out: Path) -> list[str]:
    lines = ["## Claims", ""]
    if not claims:
        return [*lines, "No claims experiments in this run.", ""]
    article = next((c.get("article_name") for c in claims if c.get("article_name")), "")
    lines += [f"The claims are those of {article or ARTICLE_FALLBACK}. {ARTICLE_SOURCE}", ""]
    rows = []
    for c in claims:
        rows.append(
            [
                c["id"],
                c.get("question") or c["claim"],
                c["article"],
                c.get("band_text", _fmt_x(c.get("threshold"), ".3g")),
                _interval_cell(c),
                _verdict_cell(c),
            ]
        )
    header = ["id", "question", "article's figure", "band 'reproduced'", "statistic [95% interval]"]
    lines += _table([*header, "verdict"], rows)
    lines += [
        "",
        "Each claim is a record (validation/claims/_records.py): the article's figure, the "
        "statistic measured, the band around the figure that counts as reproduced and the "
        "neutral point. The interval is a two-level bootstrap (processes, then rounds within "
        "each), so it covers what differs between processes. *confirmed*: the interval lies "
        "in the band or beyond it on the article's side; *refuted*: it lies on the other side "
        "of the neutral point, or between it and the band; *depends*: it straddles; "
        "*unstable*: the processes' own intervals give different outcomes; *not measurable*: "
        "the interval reaches an impossible value (a per-op cost <= 0).",
        "",
    ]
    if fig_claims(claims, out / "fig_claims.png"):
        lines += ["![every claim's interval against its band](fig_claims.png)", ""]
    lines += ["### What was measured", ""]
    for c in claims:
        lines += [
            f"- **{c['id']}** ({c.get('statistic') or c.get('ratio_means', '')}): "
            f"{_cell(c['measured'])} Verdict: {_cell(c['verdict'])}. Threads busy: {_threads(c)}.",
        ]
    return [*lines, ""]


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


def _np_plain(text: Any) -> str:
    """``np.float64(1.5)`` -> ``1.5`` in a stored repr (records written before they were plain)."""
    return re.sub(r"np\.(?:float|int)\d+\(([^()]*)\)", r"\1", str(text))


def _literature_section(lits: dict[str, dict]) -> list[str]:
    rows = [
        [
            name,
            r["key"],
            _np_plain(r["quoted"]),
            _np_plain(r["measured"]),
            r["tol"],
            r["verdict"],
            r["note"],
        ]
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
