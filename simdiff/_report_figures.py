"""The report's figures: one question each, read from store records (no measurement here).

- :func:`fig_ratio_to_jax`: how much slower or faster than JAX is each
  configuration, per problem and derivative?  Problems on one axis, the
  steady-time ratio on a log axis, colour = configuration, marker = derivative.
- :func:`fig_claims`: where does each claim's interval lie relative to the
  article's threshold?  Statistic / threshold on a log axis with its interval.
- :func:`fig_first_call`: what does the first call (trace + compile) cost
  relative to the steady state?
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["fig_claims", "fig_first_call", "fig_ratio_to_jax"]

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


def fig_claims(claims: list[dict[str, Any]], path: Path) -> bool:
    """Each claim's statistic over its threshold, with the bootstrap interval (log axis)."""
    rows = [
        c
        for c in claims
        if _finite(c.get("threshold")) and _finite(c.get("ratio"))
        and all(_finite(v) for v in c.get("interval", [math.nan]))
    ]  # fmt: skip
    if not rows:
        return False
    plt = _plt()
    colors = {"confirmed": "tab:green", "refuted": "tab:red"}
    fig, ax = plt.subplots(figsize=(6.5, 1.2 + 0.4 * len(rows)))
    for i, c in enumerate(rows):
        t = c["threshold"]
        lo, hi = (v / t for v in c["interval"])
        r = c["ratio"] / t
        col = colors.get(c["verdict"].split(":")[0], "tab:orange")
        ax.errorbar(r, i, xerr=[[r - lo], [hi - r]], fmt="o", color=col, capsize=3)
    ax.axvline(1.0, color="k", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)), [f"{c['id']}: {c['verdict'][:28]}" for c in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("measured statistic / article's threshold (log; interval: 95% bootstrap)")
    ax.set_title("Claims: where each interval lies relative to its threshold")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
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
