"""The report's figures: one question each, read from store records (no measurement here).

- :func:`fig_ratio_to_jax`: how much slower or faster than JAX is each
  configuration, per problem and derivative?  Problems on one axis, the
  steady-time ratio on a log axis, colour = configuration, marker = derivative.
- :func:`fig_claims`: where does each claim's interval lie relative to the
  article's figure and its band?  Every claim on its own row, its question
  as the label.
- :func:`fig_first_call`: what does the first call (trace + compile) cost
  relative to the steady state?
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["claim_label", "claims_figure", "fig_claims", "fig_first_call", "fig_ratio_to_jax"]

_MARKERS = "osD^v<>ph*"


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def fig_ratio_to_jax(compares: dict[str, dict], path: Path, base: str = "jax-jit") -> bool:
    """Steady time of every configuration over ``base``'s, per problem (rows) and derivative."""
    pts = []  # (problem, derivative, config, ratio)
    for name, rec in compares.items():
        ref = {
            e["derivative"]: e["steady_s"]
            for e in rec["entries"]
            if e["config"] == base and e["status"] == "ok"
        }
        for e in rec["entries"]:
            b = ref.get(e["derivative"])
            if (
                e["config"] != base
                and e["status"] == "ok"
                and _finite(b)
                and _finite(e["steady_s"])
            ):
                pts.append((name, e["derivative"], e["config"], e["steady_s"] / b))
    if not pts:
        return False
    plt = _plt()
    names = sorted(dict.fromkeys(p[0] for p in pts))
    derivs = list(dict.fromkeys(p[1] for p in pts))
    configs = list(dict.fromkeys(p[2] for p in pts))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(7.0, 1.2 + 0.28 * len(names)))
    for ci, c in enumerate(configs):
        for di, d in enumerate(derivs):
            sel = [p for p in pts if p[2] == c and p[1] == d]
            if sel:
                ax.scatter(
                    [p[3] for p in sel],
                    [names.index(p[0]) for p in sel],
                    color=colors[ci % len(colors)],
                    marker=_MARKERS[di % len(_MARKERS)],
                    s=22,
                    alpha=0.85,
                    label=f"{c} / {d}",
                )
    ax.axvline(1.0, color="k", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"steady-state time / {base} (log; > 1: slower than {base})")
    ax.set_title(f"Ratio to {base}, per problem (colour: configuration, marker: derivative)")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _wrap(text: str, width: int = 46) -> str:
    """``text`` broken into lines of at most ``width`` characters; no word is cut or dropped."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


#: Outcome colours of the claims figure.
OUTCOME_COLOURS = {
    "confirmed": "tab:green",
    "refuted": "tab:red",
    "never": "tab:red",
    "depends": "tab:orange",
    "unstable": "tab:purple",
    "not measurable": "tab:gray",
    "not measured": "tab:gray",
}


def _scaled(v: Any, figure: float) -> float:
    return v / figure if isinstance(v, (int, float)) and not math.isnan(v) else math.nan


def claim_label(c: dict[str, Any]) -> str:
    """A claim's row label in :func:`fig_claims`, unwrapped: ``"C1: <its question>"``."""
    return " ".join(f"{c['id']}: {c.get('question') or c.get('claim', '')}".split())


def _decade_limits(values: list[float]) -> tuple[float, float]:
    """Log-axis limits: 1e-3..1e3, widened by whole decades to hold every finite value."""
    finite = [v for v in values if _finite(v) and not math.isinf(v)]
    lo = min([1e-3, *(v / 3 for v in finite)])
    hi = max([1e3, *(v * 3 for v in finite)])
    return 10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi))


def _on_axis(v: float, xmin: float, xmax: float) -> float:
    """``v`` on the log axis ``[xmin, xmax]``: <= 0 at the left edge, infinity at the right."""
    if math.isnan(v) or v <= 0:
        return xmin
    return min(max(v, xmin), xmax)


def claims_figure(claims: list[dict[str, Any]]) -> Any:
    """The claims figure (a matplotlib Figure, not saved), or None without claims.

    Row ``i`` is claim ``claims[i]``; its artists carry gids naming the claim:
    ``band C1`` (the shaded band), ``interval C1`` (the 95% interval),
    ``statistic C1`` (the point estimate), ``neutral C1`` (the neutral point)
    and ``outcome C1`` (right of the axis: the outcome, the article's figure and
    the band in words, and where the interval runs off the axis; or the text
    of a row without an interval).  See :func:`fig_claims`.
    """
    if not claims:
        return None
    plt = _plt()
    rows = list(claims)
    labels = [_wrap(claim_label(c)) for c in rows]
    height = 0.9 + sum(0.22 * (1 + lab.count("\n")) + 0.25 for lab in labels)
    fig, ax = plt.subplots(figsize=(9.0, height))
    drawn = []  # (row, claim, figure) of the rows with an interval
    for i, c in enumerate(rows):
        fig_v: Any = c.get("figure", c.get("threshold"))
        r = c.get("ratio", math.nan)
        if _finite(fig_v) and isinstance(r, (int, float)) and not math.isnan(r):
            drawn.append((i, c, float(fig_v)))
    scaled_all = [
        _scaled(v, f)
        for _, c, f in drawn
        for v in [
            *(c.get("interval") or [])[:2],
            c.get("ratio"),
            c.get("neutral"),
            *(c.get("band") or []),
        ]
    ]
    xmin, xmax = _decade_limits(scaled_all)
    for i, c in enumerate(rows):
        cid = c["id"]
        outcome = str(c.get("outcome") or str(c.get("verdict", "")).split(":")[0])
        col = OUTCOME_COLOURS.get(outcome.split(" (")[0], "tab:orange")
        row = next((d for d in drawn if d[0] == i), None)
        if row is None:
            why = "a check" if c.get("kind") == "fact" else "not measured"
            ax.text(1.0, i, f"{outcome} (no interval: {why})", ha="center", va="center",
                    fontsize=7, color=col, gid=f"outcome {cid}")  # fmt: skip
            continue
        fig_v = row[2]
        band = [*(c.get("band") or []), math.nan, math.nan][:2]
        b_lo, b_hi = (_scaled(v, fig_v) for v in band)
        if not (math.isnan(b_lo) and math.isnan(b_hi)):
            ax.fill_betweenx(
                [i - 0.3, i + 0.3],
                _on_axis(b_lo, xmin, xmax),
                xmax if math.isnan(b_hi) else _on_axis(b_hi, xmin, xmax),
                color="0.88",
                gid=f"band {cid}",
            )
        neutral = _scaled(c.get("neutral", math.nan), fig_v)
        if _finite(neutral):
            ax.plot([neutral, neutral], [i - 0.35, i + 0.35], color="k", lw=0.8, ls=":",
                    gid=f"neutral {cid}")  # fmt: skip
        lo, hi = [*(c.get("interval") or []), math.nan, math.nan][:2]
        s_lo, s_r, s_hi = (_scaled(v, fig_v) for v in (lo, c.get("ratio"), hi))
        d_r = _on_axis(s_r, xmin, xmax)
        d_lo, d_hi = (d_r if math.isnan(v) else _on_axis(v, xmin, xmax) for v in (s_lo, s_hi))
        ax.plot([d_lo, d_hi], [i, i], color=col, lw=2, gid=f"interval {cid}")
        ax.plot([d_r], [i], "o", color=col, gid=f"statistic {cid}")
        notes = []
        if s_lo <= 0:
            ax.annotate("", (xmin, i), (xmin * 3, i), arrowprops={"arrowstyle": "->", "color": col})
            notes.append("interval reaches <= 0")
        if math.isinf(s_hi):
            ax.annotate("", (xmax, i), (xmax / 3, i), arrowprops={"arrowstyle": "->", "color": col})
            notes.append("interval reaches infinity")
        words = [outcome, f"article {fig_v:.3g}; band {c.get('band_text') or '-'}", *notes]
        ax.text(xmax * 1.3, i, "\n".join(words), va="center", fontsize=7, color=col,
                gid=f"outcome {cid}")  # fmt: skip
    ax.axvline(1.0, color="k", lw=0.6)
    ax.set_xscale("log")
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.set_xlabel(
        "measured statistic / article's figure (log; line: 95% interval over processes and "
        "rounds; grey: band 'reproduced'; dotted: neutral point)",
        fontsize=7,
    )
    ax.set_title("Claims: each interval against the article's figure and band", fontsize=9)
    fig.tight_layout()
    return fig


def fig_claims(claims: list[dict[str, Any]], path: Path) -> bool:
    """Every claim on its own row: the interval over the article's figure, against its band.

    Log axis of statistic / article's figure, 1e-3 to 1e3 and wider by whole
    decades when a value lies outside; the shaded span is the band that
    counts as reproduced, the dotted line the neutral point.  An interval end
    at or below zero (a per-op cost within noise of 0) or at infinity
    ("never") is drawn at the axis edge with an arrow and said in words, beside
    the outcome, the article's figure and the band in the record's words; a
    fact (C9) or an unmeasured claim is a text row.  Labels are the claims'
    questions in full, wrapped, never truncated (:func:`claim_label`).
    Returns whether a figure was written (False without claims).
    """
    fig = claims_figure(claims)
    if fig is None:
        return False
    fig.savefig(path, dpi=100, bbox_inches="tight")
    _plt().close(fig)
    return True


def fig_first_call(compares: dict[str, dict], path: Path) -> bool:
    """First call against steady state for every (problem, derivative, configuration)."""
    pts = [
        (e["config"], e["steady_s"], e["first_call_s"])
        for rec in compares.values()
        for e in rec["entries"]
        if e["status"] == "ok" and _finite(e["steady_s"]) and _finite(e["first_call_s"])
    ]
    if not pts:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for c in dict.fromkeys(p[0] for p in pts):
        ax.scatter(
            [p[1] for p in pts if p[0] == c], [p[2] for p in pts if p[0] == c], label=c, s=14
        )
    lo = min(min(p[1], p[2]) for p in pts)
    hi = max(max(p[1], p[2]) for p in pts)
    ax.plot([lo, hi], [lo, hi], "k:", lw=0.8, label="first = steady")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("steady-state time [s]")
    ax.set_ylabel("first call (trace + compile + run) [s]")
    ax.set_title("First call vs steady state")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
