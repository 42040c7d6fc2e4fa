"""C2 and C4: vmap against hand-batched code; a stream of input sizes that change."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import simdiff
from simdiff.core.catalogue import catalogue
from simdiff.evidence.compare.run import CONFIGS, make_task

from ..simulators import lotka_volterra, lotka_volterra_broadcast
from ._common import ClaimsContext, failed, ms, part, per_round
from ._measure import measure
from ._records import RECORDS

# The catalogue as installed (simdiff.problems) or in a checkout (problems).
basic = catalogue("basic")

__all__ = ["C2", "C4", "size_stream"]

#: C2: rollouts in the batch (the article's batch size).
C2_BATCH = 64


def _broadcast_builder(config: str, hand: simdiff.Problem) -> Callable:
    """``config``'s gradient of the hand-batched problem, returned as the ``(batch, 4)`` rows."""

    def build(problem: simdiff.Problem, task: Any) -> Callable[[], Any]:
        call = CONFIGS[config](hand, make_task(hand, "grad"))
        batch = hand.n // 4
        return lambda: call().reshape(4, batch).T

    return build


def C2(ctx: ClaimsContext) -> dict[str, Any]:
    """Gradients of 64 Lotka–Volterra RK4 rollouts: JAX vmap, torch.func.vmap, hand-batched.

    Statistic per round: throughput of JAX's vmap over torch.func.vmap's
    (torch time / JAX time).  Beside it, in each framework, the time of the
    hand-batched version (every RK4 step advances the 64 rollouts as arrays:
    :func:`validation.simulators.lotka_volterra_broadcast`) over its vmap's:
    below 1, vmap loses to batching by hand.  All four are timed in the same
    interleaved rounds; the hand-batched gradients are compared with vmap's
    (compare's reference column).
    """
    steps = ctx.pick(25, 200)
    p = lotka_volterra(steps)
    rng = np.random.default_rng(1)
    x = p.x0 * (1 + 0.05 * rng.standard_normal((C2_BATCH, 4)))
    hand = lotka_volterra_broadcast(steps, x)
    builders = {
        "jax-broadcast": _broadcast_builder("jax-jit", hand),
        "torch-broadcast": _broadcast_builder("torch-eager", hand),
    }
    configs = ["jax-jit", "torch-eager", "jax-broadcast", "torch-broadcast"]
    m = measure(p, ["grad"], configs, x=x, rounds=ctx.n_rounds(RECORDS["C2"]), builders=builders)
    bad = [c for c in configs if not m.ok("grad", c)]
    if bad:
        e = m.entry("grad", bad[0])
        return failed(f"{bad[0]} {e.status}: {e.error[:300]}")
    s = {c: m.entry("grad", c).samples for c in configs}
    fps = {c: C2_BATCH / m.entry("grad", c).steady_s for c in configs}
    err = max(m.entry("grad", c).max_rel_err for c in ("jax-broadcast", "torch-broadcast"))
    measured = (
        f"{C2_BATCH} rollouts of {steps} RK4 steps with gradients, per second: "
        + ", ".join(f"{c} {v:.0f}" for c, v in fps.items())
        + f"; hand-batched gradients agree with vmap's to {err:.1e}"
    )
    return part(
        values=per_round(lambda t, j: t / j, s["torch-eager"], s["jax-jit"]),
        beside={
            "JAX broadcast / vmap time": per_round(
                lambda b, v: b / v, s["jax-broadcast"], s["jax-jit"]
            ),
            "torch broadcast / vmap time": per_round(
                lambda b, v: b / v, s["torch-broadcast"], s["torch-eager"]
            ),
        },
        measured=measured,
        series={"fps": fps},
        details={"compare": m.record(), "steps": steps},
        threads=m.threads,
    )


def size_stream(round_: int, n_sizes: int) -> list[int]:
    """Batch sizes of one round: ``n_sizes`` sizes new to the round, each met again once.

    Every new size is followed by the one before it, so sizes differ between
    rounds (JAX meets new shapes in every round) and repeat within a round (a
    shape it compiled is met again).

    Examples
    --------
    >>> from validation.claims.batching import size_stream
    >>> size_stream(0, 3), size_stream(1, 3)
    ([16, 17, 16, 18, 17], [19, 20, 19, 21, 20])
    """
    new = [16 + round_ * n_sizes + i for i in range(n_sizes)]
    out = new[:1]
    for prev, s in itertools.pairwise(new):
        out += [s, prev]
    return out


def _stream_calls(n: int) -> dict[str, Callable[[np.ndarray], Any]]:
    """The batched gradient of rosenbrock over rows, written once in broadcast form, per framework.

    ``rosenbrock_fn`` indexes its first axis, so on ``x.T`` (``(n, batch)``)
    it sums the batch's values; its gradient is the batch's gradients.  JAX:
    ``jax.jit`` (one compilation per new shape); torch: ``torch.compile``
    with ``dynamic=True`` (one graph for every batch size) and eager.
    """
    import jax
    import torch

    fn = basic.rosenbrock_fn
    jops, tops = simdiff.get_backend("jax").ops(), simdiff.get_backend("torch").ops()
    jgrad = jax.jit(jax.grad(lambda xt: fn(xt, jops)))
    tgrad = torch.func.grad(lambda xt: fn(xt, tops))
    tcomp = torch.compile(tgrad, dynamic=True)

    def on_jax(x: np.ndarray) -> Any:
        return jgrad(jax.numpy.asarray(x.T)).block_until_ready()

    def on(call: Callable[[Any], Any]) -> Callable[[np.ndarray], Any]:
        return lambda x: call(torch.from_numpy(np.ascontiguousarray(x.T)))

    calls = {"jax-jit": on_jax, "torch-compile-dynamic": on(tcomp), "torch-eager": on(tgrad)}
    calls["jax-jit"].cache_size = jgrad._cache_size  # type: ignore[attr-defined]
    return calls


def C4(ctx: ClaimsContext) -> dict[str, Any]:
    """The gradient of rosenbrock8 over one stream of batch sizes, some repeating, per framework.

    Every framework is warmed on two sizes outside the stream (torch.compile
    compiles its dynamic graph there, timed and reported); each round then
    calls every framework, in rotating order, on the round's stream
    (:func:`size_stream`: sizes new to the round, each met again once); a
    round's sample is the stream's total wall time.  Statistic per round:
    JAX total / torch.compile(dynamic=True) total; beside it, JAX / eager
    torch.  The gradients are compared with each other on the last round.
    """
    n, n_sizes = 8, ctx.pick(4, 8)
    rounds = ctx.n_rounds(RECORDS["C4"])
    x0 = basic.rosenbrock(n).x0
    rng = np.random.default_rng(4)
    try:
        calls = _stream_calls(n)
        warm: dict[str, float] = {}
        for name, call in calls.items():
            t0 = time.perf_counter()
            for s in (3, 5):
                call(x0 + 0.1 * rng.standard_normal((s, n)))
            warm[name] = time.perf_counter() - t0
    except Exception as exc:  # torch.compile(dynamic=True) refused the function
        return failed(f"{type(exc).__name__}: {str(exc)[:300]}")
    names = list(calls)
    totals: dict[str, list[float]] = {c: [] for c in names}
    last: dict[str, np.ndarray] = {}
    for r in range(rounds):
        xs = [x0 + 0.1 * rng.standard_normal((s, n)) for s in size_stream(r, n_sizes)]
        for c in names[r % 3 :] + names[: r % 3]:
            t0 = time.perf_counter()
            for xb in xs:
                out = calls[c](xb)
            totals[c].append(time.perf_counter() - t0)
            last[c] = np.asarray(out).T
    agree = max(float(np.max(np.abs(last[c] - last["jax-jit"]))) for c in names)
    jax_compiles = calls["jax-jit"].cache_size()  # type: ignore[attr-defined]
    med = {c: float(np.median(v)) for c, v in totals.items()}
    measured = (
        f"gradient of rosenbrock8 over {len(xs)} calls per round ({n_sizes} sizes new to the "
        f"round, repeated), {rounds} rounds: JAX {ms(med['jax-jit'])}, torch.compile(dynamic) "
        f"{ms(med['torch-compile-dynamic'])} (after a {warm['torch-compile-dynamic']:.1f} s "
        f"compile outside the stream), eager torch {ms(med['torch-eager'])} per round; JAX "
        f"compiled {jax_compiles} shapes; gradients agree to {agree:.1e}"
    )
    return part(
        values=per_round(lambda j, t: j / t, totals["jax-jit"], totals["torch-compile-dynamic"]),
        beside={
            "JAX / eager torch": per_round(
                lambda j, t: j / t, totals["jax-jit"], totals["torch-eager"]
            )
        },
        measured=measured,
        series={"totals_s": totals, "warm_s": warm},
        details={"jax_compilations": jax_compiles, "sizes_per_round": n_sizes, "agree": agree},
    )
