"""C2 and C4: batching by vmap against hand-written loops; input sizes that change every call."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

import simdiff
from simdiff._catalogue import catalogue

from ..simulators import lotka_volterra
from ._common import SPEED_MARGIN, ClaimsContext, claim_result, ms
from ._measure import measure, probe_threads
from ._verdict import Interval, bootstrap_ratio, decide

# The catalogue as installed (simdiff.problems) or in a checkout (problems).
rosenbrock = catalogue("basic").rosenbrock

__all__ = ["C2", "C2_FPS_RATIO", "C4", "c2_verdict"]

#: C2: the article's JAX 3200 FPS vs PyTorch 1400 FPS at batch 64.
C2_FPS_RATIO = 3200 / 1400


def c2_verdict(jax_gain: Interval, torch_gain: Interval, margin: float = SPEED_MARGIN) -> str:
    """C2's rule: "vmap batches; PyTorch needs manual batching".

    ``jax_gain`` and ``torch_gain`` are loop / vmap steady-time intervals
    within each framework.  Confirmed when JAX's vmap beats its loop by
    ``margin`` and torch's does not (interval wholly below ``margin``);
    refuted when torch's vmap beats its loop by ``margin`` too (PyTorch does
    not need manual batching) or JAX's vmap does not beat its loop.

    Examples
    --------
    >>> from validation.claims._verdict import Interval
    >>> from validation.claims.batching import c2_verdict
    >>> c2_verdict(Interval(20, 15, 25, 9), Interval(1.1, 1.0, 1.2, 9))
    'confirmed'
    >>> c2_verdict(Interval(20, 15, 25, 9), Interval(8, 6, 10, 9))[:7]
    'refuted'
    """
    on_jax, on_torch = decide(jax_gain, margin), decide(torch_gain, margin)
    if on_torch == "confirmed":
        return f"refuted: torch.func.vmap also batches (loop/vmap {torch_gain})"
    if on_jax == "refuted":
        return f"refuted: jax.vmap does not beat a loop here (loop/vmap {jax_gain})"
    if on_jax == "confirmed" and on_torch == "refuted":
        return "confirmed"
    return f"depends: JAX loop/vmap {jax_gain}, torch loop/vmap {torch_gain} (margin {margin:g})"


def _loop_builder(backend: str) -> Callable:
    """A hand-written batched loop: one gradient call per row, the results kept as a list."""

    def build(problem: simdiff.Problem, task: Any) -> Callable[[], Any]:
        d = simdiff.Derivatives(problem, backend, check_finite=False)
        rows = [d.backend.from_numpy(row, d.dtype) for row in task.x]

        def call() -> Any:
            return d.backend.block_until_ready([d.grad(row) for row in rows])

        return call

    return build


def C2(ctx: ClaimsContext) -> dict[str, Any]:
    """Gradients of 64 Lotka–Volterra RK4 rollouts: vmap vs a Python loop, in each framework.

    Rule (:func:`c2_verdict`) on the loop / vmap intervals of each framework;
    JAX's vmap against torch's is measured against the article's 2.3x and
    reported beside it.
    """
    steps = ctx.pick(25, 200)
    p = lotka_volterra(steps)
    rng = np.random.default_rng(1)
    x = p.x0 * (1 + 0.05 * rng.standard_normal((64, 4)))
    builders = {"jax-loop": _loop_builder("jax"), "torch-loop": _loop_builder("torch")}
    configs = ["jax-jit", "torch-eager", "jax-loop", "torch-loop"]
    m = measure(p, ["grad"], configs, x=x, rounds=ctx.n_rounds, builders=builders)
    jax_gain = m.ratio("grad", "jax-loop", "jax-jit")
    torch_gain = m.ratio("grad", "torch-loop", "torch-eager")
    across = m.ratio("grad", "torch-eager", "jax-jit")
    fps = {c: 64 / m.entry("grad", c).steady_s for c in configs if m.ok("grad", c)}
    measured = (
        "rollouts with gradients per second: "
        + ", ".join(f"{c} {v:.0f}" for c, v in fps.items())
        + f" ({steps} RK4 steps each). loop/vmap: JAX {jax_gain}, torch {torch_gain}; "
        f"torch vmap / JAX vmap {across} (article {C2_FPS_RATIO:.1f}x: "
        f"{decide(across, C2_FPS_RATIO)})"
    )
    return claim_result(
        measured=measured,
        interval=torch_gain,
        threshold=SPEED_MARGIN,
        ratio_means="torch loop / torch.func.vmap (does PyTorch need manual batching?)",
        verdict=c2_verdict(jax_gain, torch_gain),
        series={"fps": fps},
        details={
            "jax_loop_over_vmap": jax_gain.record(),
            "torch_vmap_over_jax_vmap": across.record(),
            "compare": m.record(),
        },
        threads=m.threads,
    )


def C4(ctx: ClaimsContext) -> dict[str, Any]:
    """One ``Derivatives`` object per framework cycling through batch sizes that change every call.

    Each round calls the gradient of rosenbrock8 at ``S`` batch sizes none of
    which was seen before (sizes differ between rounds too), on JAX and on
    torch in alternating order; a round's sample is the total wall time of
    the sequence.  Rule: JAX / torch total-time interval against 1.5
    (confirmed: JAX slower when sizes change every call).
    """
    n_sizes = ctx.pick(5, 10)
    rounds = ctx.n_rounds
    p = rosenbrock(8)
    ds = {b: simdiff.Derivatives(p, b, check_finite=False) for b in ("jax", "torch")}
    for d in ds.values():  # warm the frameworks (not the sizes) outside the timing
        d.grad(p.x0)
    totals: dict[str, list[float]] = {b: [] for b in ds}
    busy: dict[str, list[float]] = {b: [] for b in ds}
    rng = np.random.default_rng(4)
    for r in range(rounds):
        sizes = [2 + r + (rounds + 1) * i for i in range(n_sizes)]  # never repeated
        xs = [p.x0 + 0.1 * rng.standard_normal((s, 8)) for s in sizes]
        order = list(ds) if r % 2 == 0 else list(ds)[::-1]
        for b in order:
            d = ds[b]
            c0, t0 = time.process_time(), time.perf_counter()
            for xb in xs:
                d.backend.block_until_ready(d.grad(xb))
            wall = time.perf_counter() - t0
            totals[b].append(wall)
            busy[b].append((time.process_time() - c0) / wall)
    iv = bootstrap_ratio(totals["jax"], totals["torch"])
    comps = {b: d.compilations for b, d in ds.items()}
    steady = {b: probe_threads(lambda d=d: d.grad(p.x0)) for b, d in ds.items()}
    measured = (
        f"gradient of rosenbrock8 at {n_sizes} new batch sizes per round, {rounds} rounds: "
        f"total JAX {ms(float(np.median(totals['jax'])))} vs torch "
        f"{ms(float(np.median(totals['torch'])))} per round (JAX/torch {iv}); "
        f"JAX compiled {comps['jax']} times"
    )
    verdict = decide(iv, SPEED_MARGIN, condition="on how often sizes repeat")
    return claim_result(
        measured=measured,
        interval=iv,
        threshold=SPEED_MARGIN,
        ratio_means="JAX / torch total wall time, sizes changing every call",
        verdict=verdict,
        series={"totals_s": totals},
        details={"compilations": comps, "sizes_per_round": n_sizes},
        threads={
            **{f"cycle {b}": float(np.median(v)) for b, v in busy.items()},
            **{f"steady {b}": v for b, v in steady.items()},
        },
    )
