"""C1, C3, C5: higher-order derivative speed, first call vs steady state, torch.compile.

Each experiment times its sides in one interleaved run (:func:`measure`) and
returns its statistic round by round (:func:`~._common.part`); the verdict
is decided from the records of :mod:`._records` over every process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simdiff.core.catalogue import catalogue

from ._common import ClaimsContext, failed, ms, part, per_round
from ._measure import Measured, measure
from ._records import RECORDS
from ._verdict import break_even_calls

# The catalogue as installed (simdiff.problems) or in a checkout (problems).
rosenbrock = catalogue("basic").rosenbrock
seed = catalogue("basic").seed

__all__ = ["C1", "C3", "C5", "compile_failure"]


def compile_failure(entry: Any) -> str:
    """Why a ``torch-compile`` entry has no time: "" if it ran, else its status and error."""
    if entry.status == "ok":
        return ""
    return f"torch.compile {entry.status}: {entry.error[:300]}"


def _ratio_rounds(m: Measured, label: str, num: str, den: str) -> list[float]:
    return per_round(lambda a, b: a / b, m.entry(label, num).samples, m.entry(label, den).samples)


def _c1_run(ctx: ClaimsContext) -> Measured:
    if "C1" not in ctx.cache:
        x = np.linspace(-2.0, 2.0, 10_000)[:, None]
        ctx.cache["C1"] = measure(
            seed(1),
            ["derivative3"],
            ["jax-jit", "torch-eager", "torch-compile"],
            x=x,
            rounds=ctx.n_rounds(RECORDS["C1"]),
        )
    return ctx.cache["C1"]


def C1(ctx: ClaimsContext) -> dict[str, Any]:
    """Batched 3rd derivative of the seed function at 10,000 points: JAX, torch.func, torch.compile.

    Statistic per round: torch.func eager / JAX steady time; beside it,
    torch.compile / JAX (reported whatever the verdict), with torch.compile's
    compile time and the calls after which it overtakes eager torch.
    """
    m = _c1_run(ctx)
    j, te, tc = (m.entry("derivative3", c) for c in ("jax-jit", "torch-eager", "torch-compile"))
    bad = [e for e in (j, te) if e.status != "ok"]
    if bad:
        return failed(f"{bad[0].config} {bad[0].status}: {bad[0].error[:300]}")
    beside = {}
    if tc.status == "ok":
        beside["torch.compile / JAX"] = _ratio_rounds(m, "derivative3", "torch-compile", "jax-jit")
        even = break_even_calls(tc.first_call_s, tc.steady_s, te.first_call_s, te.steady_s)
        comp = (
            f"torch.compile {ms(tc.steady_s)} steady after a {tc.first_call_s:.1f} s first call "
            f"(it overtakes eager torch after {even:.0f} calls)"
        )
    else:
        comp = f"torch.compile gave no time ({compile_failure(tc)})"
    measured = (
        f"3rd derivative at 10,000 points: JAX {ms(j.steady_s)} steady ({ms(j.first_call_s)} "
        f"first call); torch.func eager {ms(te.steady_s)}; {comp}"
    )
    return part(
        values=_ratio_rounds(m, "derivative3", "torch-eager", "jax-jit"),
        beside=beside,
        measured=measured,
        series={
            "steady_s": {e.config: e.steady_s for e in (j, te, tc)},
            "first_call_s": {e.config: e.first_call_s for e in (j, te, tc)},
        },
        details={"compare": m.record()},
        threads=m.threads,
    )


#: C3's derivatives: the statistic's (gradient) and those reported beside it.
C3_KINDS = {
    "grad": "",
    "hessian": "Hessian calls",
    "hvp": "HVP calls",
    "derivative3": "order-3 calls",
}


def C3(ctx: ClaimsContext) -> dict[str, Any]:
    """First call vs steady state at batch 1 (rosenbrock4), JAX against eager torch.

    Statistic per round: the calls until JAX's total time (its first call,
    then the round's steady time per call) drops below torch's
    (:func:`~._verdict.break_even_calls`, ``inf`` when JAX's steady call is
    not faster), for the gradient; the Hessian, HVP and 3rd derivative
    beside it.  The first call is one sample per process: a fresh process
    per part makes it a real first call each time.
    """
    p = rosenbrock(4)
    kinds = list(C3_KINDS)
    m = measure(p, kinds, ["jax-jit", "torch-eager"], rounds=ctx.n_rounds(RECORDS["C3"]))
    rows: dict[str, Any] = {}
    calls: dict[str, list[float]] = {}
    for k in kinds:
        j, t = m.entry(k, "jax-jit"), m.entry(k, "torch-eager")
        if j.status != "ok" or t.status != "ok":
            rows[k] = {"error": f"{j.status}/{t.status}: {(j.error or t.error)[:200]}"}
            continue
        jf, tf = j.first_call_s, t.first_call_s
        calls[k] = per_round(
            lambda js, ts, jf=jf, tf=tf: break_even_calls(jf, js, tf, ts), j.samples, t.samples
        )
        rows[k] = {
            "jax_first": jf,
            "jax_steady": j.steady_s,
            "torch_first": tf,
            "torch_steady": t.steady_s,
            "break_even_calls": break_even_calls(jf, j.steady_s, tf, t.steady_s),
        }
    if "grad" not in calls:
        return failed(f"gradient not timed: {rows['grad']['error']}")
    measured = "; ".join(
        f"{k}: JAX first {ms(v['jax_first'])} then {ms(v['jax_steady'])}, torch first "
        f"{ms(v['torch_first'])} then {ms(v['torch_steady'])}"
        for k, v in rows.items()
        if "error" not in v
    )
    return part(
        values=calls["grad"],
        beside={C3_KINDS[k]: v for k, v in calls.items() if k != "grad"},
        measured=measured,
        series=rows,
        details={"compare": m.record()},
        threads=m.threads,
    )


def C5(ctx: ClaimsContext) -> dict[str, Any]:
    """torch.compile on the batched 3rd derivative: eager / compiled steady time, compile time.

    Uses C1's run (the same process's).  Statistic per round: torch eager /
    torch.compile steady time.  A torch.compile that failed is the reason the
    claim is not measured, never a verdict.
    """
    m = _c1_run(ctx)
    te, tc = m.entry("derivative3", "torch-eager"), m.entry("derivative3", "torch-compile")
    if te.status != "ok":
        return failed(f"torch-eager {te.status}: {te.error[:300]}")
    if tc.status != "ok":
        return failed(compile_failure(tc))
    measured = (
        f"batched 3rd derivative of the seed function at 10,000 points: torch eager "
        f"{ms(te.steady_s)}, torch.compile {ms(tc.steady_s)} steady after a "
        f"{tc.first_call_s:.1f} s compile"
    )
    return part(
        values=_ratio_rounds(m, "derivative3", "torch-eager", "torch-compile"),
        measured=measured,
        series={"compile_s": tc.first_call_s},
        threads={k: v for k, v in m.threads.items() if "torch" in k},
    )
