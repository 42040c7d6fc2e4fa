"""C1, C3, C5: higher-order derivative speed, first call vs steady state, torch.compile.

Each experiment times its sides in one interleaved run (:func:`measure`) and
decides by a bootstrap interval (:mod:`validation.claims._verdict`).  The
rules are pure functions of intervals, unit-tested on both sides of their
thresholds and at "depends".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simdiff._catalogue import catalogue

from ._common import ClaimsContext, claim_result, ms
from ._measure import measure
from ._verdict import Interval, bootstrap, break_even_calls, decide

# The catalogue as installed (simdiff.problems) or in a checkout (problems).
rosenbrock = catalogue("basic").rosenbrock
seed = catalogue("basic").seed

__all__ = [
    "BREAK_EVEN_CALLS",
    "C1",
    "C1_THRESHOLD",
    "C3",
    "C5",
    "c1_verdict",
    "c5_verdict",
    "compile_failure",
]

#: C1: the article's figure, PyTorch 8 ms against JAX's "under 1 ms".
C1_THRESHOLD = 8.0
#: C3: a model reset more often than every this many calls is "reset often".
BREAK_EVEN_CALLS = 10.0
#: C5: the article's "1.5-2x" speed-up of torch.compile (its lower end).
C5_THRESHOLD = 1.5


def c1_verdict(
    eager: Interval, compiled: Interval, threshold: float = C1_THRESHOLD, compile_failure: str = ""
) -> str:
    """C1's rule: JAX against torch.func eager (by the article's factor) *and* torch.compile.

    ``eager`` and ``compiled`` are torch / JAX steady-time intervals.  JAX must
    beat eager torch by ``threshold`` and must not lose to compiled torch; if
    compiled torch beats JAX the claim is not simply confirmed.
    ``compile_failure``: why torch.compile gave no time (its error), stated
    in the verdict.

    Examples
    --------
    >>> from validation.claims._verdict import Interval
    >>> from validation.claims.speed import c1_verdict
    >>> c1_verdict(Interval(10, 9, 11, 9), Interval(3, 2, 4, 9))
    'confirmed'
    >>> c1_verdict(Interval(10, 9, 11, 9), Interval(0.5, 0.4, 0.6, 9))[:8]
    'depends:'
    """
    on_eager = decide(eager, threshold)
    if math.isnan(compiled.ratio):
        beats_compiled = f"not measured ({compile_failure})" if compile_failure else "not measured"
    else:
        beats_compiled = decide(compiled, 1.0)
    if on_eager == "confirmed" and beats_compiled == "confirmed":
        return "confirmed"
    if on_eager == "confirmed" and beats_compiled == "refuted":
        return (
            f"depends: JAX beats torch.func eager by {eager.ratio:.3g}x, but torch.compile "
            f"beats JAX at steady state ({1 / compiled.ratio:.3g}x) once compiled"
        )
    if on_eager == "confirmed":
        return f"depends: JAX beats eager torch; against torch.compile: {beats_compiled}"
    if on_eager == "refuted":
        return f"refuted: torch.func eager / JAX = {eager}, not the article's {threshold:g}x"
    return on_eager


def compile_failure(entry: Any) -> str:
    """Why a ``torch-compile`` entry has no time: "" if it ran, else its status and error."""
    if entry.status == "ok":
        return ""
    return f"torch.compile {entry.status}: {entry.error[:300]}"


def c5_verdict(iv: Interval, failure: str = "", threshold: float = C5_THRESHOLD) -> str:
    """C5's rule: torch eager / torch.compile steady interval against the article's 1.5x.

    ``failure`` (:func:`compile_failure`): torch.compile did not run the
    workload (it raised, or simdiff refused to compile a construction that
    crashes the process); the verdict then says so with the reason instead
    of a bare "not measurable".

    Examples
    --------
    >>> from validation.claims._verdict import Interval
    >>> import math
    >>> from validation.claims.speed import c5_verdict
    >>> c5_verdict(Interval(2.5, 2.0, 3.0, 9))
    'confirmed'
    >>> c5_verdict(Interval(math.nan, math.nan, math.nan, 0), "torch.compile error: boom")
    'depends: not measurable here: torch.compile error: boom'
    """
    if failure:
        return f"depends: not measurable here: {failure}"
    return decide(iv, threshold, condition="on the workload's size")


def C1(ctx: ClaimsContext) -> dict[str, Any]:
    """Batched 3rd derivative of the seed function at 10,000 points: JAX, torch.func, torch.compile.

    Rule (:func:`c1_verdict`): torch.func eager / JAX steady interval against
    the article's 8x, and torch.compile / JAX against 1; torch.compile's
    compile time and break-even call counts are reported.
    """
    p = seed(1)
    x = np.linspace(-2.0, 2.0, 10_000)[:, None]
    labels = ctx.pick(["derivative3"], ["derivative2", "derivative3"])
    configs = ["jax-jit", "torch-eager", "torch-compile"]
    m = measure(p, labels, configs, x=x, rounds=ctx.n_rounds)
    ctx.cache["C1"] = m
    eager = m.ratio("derivative3", "torch-eager", "jax-jit")
    compiled = m.ratio("derivative3", "torch-compile", "jax-jit")
    j, te, tc = (m.entry("derivative3", c) for c in configs)
    even = {
        "torch.compile over torch eager": break_even_calls(
            tc.first_call_s, tc.steady_s, te.first_call_s, te.steady_s
        ),
        "JAX over torch eager": break_even_calls(
            j.first_call_s, j.steady_s, te.first_call_s, te.steady_s
        ),
    }
    comp = (
        f"torch.compile {ms(tc.steady_s)} steady after a {tc.first_call_s:.1f} s first call "
        f"(compiled/JAX {compiled}; it overtakes eager torch after "
        f"{even['torch.compile over torch eager']:.0f} calls)"
        if tc.status == "ok"
        else f"torch.compile failed: {tc.error[:300]}"
    )
    measured = (
        f"3rd derivative at 10,000 points: JAX {ms(j.steady_s)} steady ({ms(j.first_call_s)} "
        f"first call); torch.func eager {ms(te.steady_s)} (torch/JAX {eager}); {comp}"
    )
    return claim_result(
        measured=measured,
        interval=eager,
        threshold=C1_THRESHOLD,
        ratio_means="torch.func eager / JAX, steady, order 3",
        verdict=c1_verdict(eager, compiled, compile_failure=compile_failure(tc)),
        series={"steady_s": {c: m.entry("derivative3", c).steady_s for c in configs}},
        details={
            "compiled_over_jax": [compiled.ratio, compiled.lo, compiled.hi],
            "break_even_calls": even,
            "compare": m.record(),
        },
        threads=m.threads,
    )


def C3(ctx: ClaimsContext) -> dict[str, Any]:
    """First call vs steady state at batch 1 (rosenbrock4: grad, hessian, hvp), JAX vs torch.

    The question: how many calls does JAX need before its compile time has
    paid off against eager torch?  Rule: the break-even count of the gradient
    (bootstrap interval over the steady samples; first calls are single
    samples) against :data:`BREAK_EVEN_CALLS`: above it the compile overhead
    matters for a model reset more often (confirmed), below it does not
    (refuted), straddling: depends.  ``inf`` (JAX never catches up) confirms.
    """
    p = rosenbrock(4)
    kinds = ["grad", "hessian", "hvp"]
    m = measure(p, kinds, ["jax-jit", "torch-eager"], rounds=ctx.n_rounds)
    rows: dict[str, Any] = {}
    intervals = {}
    for k in kinds:
        j, t = m.entry(k, "jax-jit"), m.entry(k, "torch-eager")
        if j.status != "ok" or t.status != "ok":
            continue
        jf, tf = j.first_call_s, t.first_call_s

        def even(js, ts, jf=jf, tf=tf):
            return break_even_calls(jf, float(np.median(js)), tf, float(np.median(ts)))

        iv = bootstrap(even, j.samples, t.samples)
        intervals[k] = iv
        rows[k] = {
            "jax_first": jf,
            "jax_steady": j.steady_s,
            "torch_first": tf,
            "torch_steady": t.steady_s,
            "steady_torch_over_jax": m.ratio(k, "torch-eager", "jax-jit").record(),
            "break_even_calls": [iv.ratio, iv.lo, iv.hi],
        }
    g = intervals.get("grad", Interval(math.nan, math.nan, math.nan, 0))
    verdict = decide(g, BREAK_EVEN_CALLS, condition="on how often the model is reset")
    measured = "; ".join(
        f"{k}: JAX first {ms(v['jax_first'])} then {ms(v['jax_steady'])}, torch first "
        f"{ms(v['torch_first'])} then {ms(v['torch_steady'])}; JAX ahead after "
        f"{intervals[k]} calls"
        for k, v in rows.items()
    )
    return claim_result(
        measured=measured,
        interval=g,
        threshold=BREAK_EVEN_CALLS,
        ratio_means="calls until JAX's total time drops below torch's (grad)",
        verdict=verdict,
        series=rows,
        details={"compare": m.record()},
        threads=m.threads,
    )


def C5(ctx: ClaimsContext) -> dict[str, Any]:
    """torch.compile on derivative workloads: eager / compiled steady time, compile time, failures.

    Uses C1's run (batched 3rd derivative) and times rosenbrock4's Hessian and
    3rd derivative eager vs compiled.  Rule: eager / compiled interval of the
    batched 3rd derivative against the article's 1.5x; failures are listed.
    """
    m1 = ctx.cache.get("C1")
    if m1 is None:
        C1(ctx)
        m1 = ctx.cache["C1"]
    iv = m1.ratio("derivative3", "torch-eager", "torch-compile")
    m = measure(
        rosenbrock(4),
        ["hessian", "derivative3"],
        ["torch-eager", "torch-compile"],
        rounds=ctx.n_rounds,
    )
    lines = []
    labelled = [("seed x 10,000", m1.entry("derivative3", "torch-compile"))]
    labelled += [("rosenbrock4", e) for e in m.result.entries if e.config == "torch-compile"]
    for where, e in labelled:
        lines.append(
            f"{where} {e.derivative}: "
            + (
                f"compile {e.first_call_s:.1f} s, steady {ms(e.steady_s)}"
                if e.status == "ok"
                else f"FAILED ({e.error[:400]})"
            )
        )
    small = {
        k: m.ratio(k, "torch-eager", "torch-compile").record() for k in ("hessian", "derivative3")
    }
    failures = [
        e.derivative for e in m.result.entries if e.config == "torch-compile" and e.status != "ok"
    ]
    verdict = c5_verdict(iv, compile_failure(m1.entry("derivative3", "torch-compile")))
    if failures:
        verdict += f" (fails on {', '.join(failures)})"
    return claim_result(
        measured="; ".join(lines) + f". Batched 3rd derivative: eager/compiled = {iv}",
        interval=iv,
        threshold=C5_THRESHOLD,
        ratio_means="torch eager / torch.compile, steady (batched 3rd derivative)",
        verdict=verdict,
        details={"rosenbrock4_eager_over_compiled": small, "compare": m.record()},
        threads=m.threads,
    )
