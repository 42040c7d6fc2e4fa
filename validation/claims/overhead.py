"""C6, C7, C8: per-operation cost, memory, compile time of scan against an unrolled loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import simdiff
from simdiff.core.catalogue import catalogue

from ..simulators import lotka_volterra, op_chain
from ._common import ClaimsContext, failed, ms, part, per_round, us
from ._measure import measure
from ._records import RECORDS

__all__ = ["C6", "C7", "C8", "memory_probe"]


def _eager_builder(backend: str, k: int) -> Callable:
    """The value of a chain of ``k`` sin ops, op by op (no jit, no compile) in ``backend``."""

    def build(problem: simdiff.Problem, task: Any) -> Callable[[], Any]:
        be = simdiff.get_backend(backend)
        ops, fn = be.ops(), op_chain(k).fn
        x = be.from_numpy(np.asarray(task.x), np.float64)
        return lambda: be.block_until_ready(fn(x, ops))

    return build


def C6(ctx: ClaimsContext) -> dict[str, Any]:
    """Per-operation cost of eager JAX and eager torch (CPU proxy for the article's GPU figure).

    A chain of ``k`` elementwise ops on 4 numbers is evaluated op by op in
    both frameworks at two lengths, all four interleaved; the per-op cost is
    the slope between the lengths (fixed per-call costs cancel).  Statistic
    per round: torch's slope; JAX's beside it.  A slope can come out at or
    below zero on a loaded machine: the claim is then not measurable.
    """
    k1, k2 = 10, ctx.pick(100, 400)
    builders = {f"{b}-eager-{k}": _eager_builder(b, k) for b in ("jax", "torch") for k in (k1, k2)}
    m = measure(
        op_chain(k1),
        ["value"],
        list(builders),
        rounds=ctx.n_rounds(RECORDS["C6"]),
        builders=builders,
    )
    bad = [c for c in builders if not m.ok("value", c)]
    if bad:
        e = m.entry("value", bad[0])
        return failed(f"{bad[0]} {e.status}: {e.error[:300]}")

    def slope(b: str) -> list[float]:
        a, c = m.entry("value", f"{b}-eager-{k1}"), m.entry("value", f"{b}-eager-{k2}")
        return per_round(lambda s1, s2: (s2 - s1) / (k2 - k1), a.samples, c.samples)

    torch_op, jax_op = slope("torch"), slope("jax")
    measured = (
        f"eager, op by op (slope between {k1} and {k2} chained sin ops on 4 numbers): torch "
        f"{us(float(np.median(torch_op)))}, JAX {us(float(np.median(jax_op)))} per op (medians "
        "of one process). CPU proxy: the article's 5-10 us is a GPU kernel-launch figure"
    )
    return part(
        values=torch_op,
        beside={"JAX eager seconds per op": jax_op},
        measured=measured,
        details={"chain_lengths": [k1, k2], "compare": m.record()},
        threads=m.threads,
    )


_MEMORY_PROBE = """
import json, sys
import numpy as np
backend, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
import simdiff
from simdiff.core.catalogue import catalogue
seed = catalogue("basic").seed
warm = simdiff.Derivatives(seed(4), backend)
getattr(warm, kind)(warm.backend.from_numpy(np.linspace(0.1, 0.4, 4), np.float64))
p = seed(n)
d = simdiff.Derivatives(p, backend, check_finite=False)
x = d.backend.from_numpy(p.x0, np.float64)
from simdiff.evidence._memory import PeakRSS, release_free_memory
deltas = []
for _ in range(2):  # first call (with compilation), then the steady-state call
    release_free_memory()  # from a baseline that holds no freed memory of the last call
    with PeakRSS(0.0005) as probe:
        y = d.backend.block_until_ready(getattr(d, kind)(x))
    deltas.append(probe.delta_mb)
    del y
y = getattr(d, kind)(x)
print(json.dumps({"first_mb": deltas[0], "delta_mb": deltas[1], "base_mb": probe.base / 2**20,
                  "output_mb": float(np.prod(y.shape)) * 8 / 2**20}))
"""


def memory_probe(backend: str, kind: str, n: int) -> dict[str, float]:
    """Peak-RSS increase of one derivative of the ``n``-input seed function, in a child process.

    The same metric for both frameworks: the child imports the framework,
    warms it up on ``n=4``, then samples its resident set size every 0.5 ms
    while the derivative runs, twice (``first_mb`` with compilation,
    ``delta_mb`` steady).  ``output_mb`` is the size of the result itself.
    """
    # The child imports the simdiff and the catalogue this process uses.
    where = [Path(simdiff.__file__).parent.parent, Path(catalogue().__path__[0]).parent]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, where), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, backend, kind, str(n)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(f"memory probe {backend}/{kind} failed: {out.stderr[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def C7(ctx: ClaimsContext) -> dict[str, Any]:
    """Peak memory of a Hessian per framework, a fresh child process per measurement.

    Each round runs one child per framework (alternating order), so no
    allocator state carries over between measurements.  Statistic per
    round: torch / JAX steady peak-RSS increase; the Hessian's own size is
    reported beside it (both sides must hold it).
    """
    n = ctx.pick(1000, 3000)
    probes: dict[str, list[dict[str, float]]] = {"jax": [], "torch": []}
    for r in range(ctx.n_rounds(RECORDS["C7"])):
        for b in ("jax", "torch") if r % 2 == 0 else ("torch", "jax"):
            probes[b].append(memory_probe(b, "hessian", n))
    delta = {b: [q["delta_mb"] for q in v] for b, v in probes.items()}
    out_mb = probes["jax"][0]["output_mb"]
    beyond = {b: float(np.median(v)) - out_mb for b, v in delta.items()}
    measured = (
        f"Hessian of the seed function, n={n} (the Hessian itself is {out_mb:.1f} MB): peak RSS "
        f"increase JAX {np.median(delta['jax']):.1f} MB, torch {np.median(delta['torch']):.1f} MB "
        f"(beyond the output: JAX {beyond['jax']:.1f} MB, torch {beyond['torch']:.1f} MB), "
        f"{len(delta['jax'])} fresh processes each"
    )
    return part(
        values=per_round(
            lambda t, j: t / j if j > 0 else float("nan"), delta["torch"], delta["jax"]
        ),
        measured=measured,
        series={"delta_mb": delta},
        details={"n": n, "output_mb": out_mb, "beyond_output_mb": beyond, "probes": probes},
    )


def C8(ctx: ClaimsContext) -> dict[str, Any]:
    """Compile time of the same RK4 simulator as an unrolled Python loop vs ``ops.scan`` (JAX).

    Each round builds both variants afresh (new problems: nothing cached) in
    alternating order and times the first gradient call (trace + compile +
    run).  Statistic per round: scan / unrolled.
    """
    steps = ctx.pick(3, 16)  # unrolled compile time grows about quadratically in steps
    times: dict[str, list[float]] = {"scan": [], "unrolled": []}
    values: dict[str, Any] = {}
    for r in range(ctx.n_rounds(RECORDS["C8"])):
        for kind in ("scan", "unrolled") if r % 2 == 0 else ("unrolled", "scan"):
            d = simdiff.Derivatives(lotka_volterra(steps, unrolled=kind == "unrolled"), "jax")
            x = d.backend.from_numpy(d.problem.x0, np.float64)
            t0 = time.perf_counter()
            values[kind] = d.backend.block_until_ready(d.grad(x))
            times[kind].append(time.perf_counter() - t0)
    agree = float(np.max(np.abs(np.asarray(values["scan"]) - np.asarray(values["unrolled"]))))
    measured = (
        f"gradient of {steps} RK4 steps on JAX, first call (trace + compile): scan "
        f"{ms(float(np.median(times['scan'])))}, unrolled "
        f"{ms(float(np.median(times['unrolled'])))}; gradients agree to {agree:.1e}"
    )
    return part(
        values=per_round(lambda s_, u: s_ / u, times["scan"], times["unrolled"]),
        measured=measured,
        series={"first_call_s": times},
        details={"steps": steps, "agree": agree},
    )
