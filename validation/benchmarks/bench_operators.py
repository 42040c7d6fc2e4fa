"""Benchmark: collapsed Taylor operators vs nested AD, separate Taylor passes and folx.

Workloads (float64, CPU)
------------------------
mlp        tanh MLP 50-256-256-128-1, 64 points, D = 50: the Laplacian by
           collapsed Taylor, nested forward-over-reverse (D HVPs), D separate
           Taylor passes and folx's forward Laplacian (JAX only), on JAX and
           torch; the same with weights Sigma (a full-rank random covariance;
           folx computes the Laplacian of z -> f(x + L z)); stochastic
           biharmonic (16 Gaussian samples, STDE) vs the nested biharmonic
           (Laplacian of the Laplacian) on 8 points.
lv         Laplacian of the Lotka-Volterra misfit (problems.ode, adaptive
           Dormand-Prince) wrt its 4 parameters vs the trace of the nested Hessian.
burgers    Laplacian of 0.5 mean(u(T)^2) of viscous Burgers (256-point periodic
           grid, ETDRK4, 20 steps) wrt the initial field vs the trace of the
           nested Hessian.

Timing: all configurations of one workload run interleaved (``--repeats``
rounds, 3x as many for the short JAX MLP calls, fewer for the slow
biharmonic and Burgers; first calls excluded), in a balanced order (every configuration
follows every other equally often, :func:`balanced_orders`), each twice in a
row: the median of the second calls ("steady", after a call of itself) is the
time in the tables and targets; that of the first calls ("cold", after another
configuration) is reported beside it.  Every simdiff call goes through the
public API (``Derivatives`` methods with native inputs, ``check_finite=False``).
Memory: JAX, XLA's compiled memory analysis (temporaries + output) of the
jitted function; torch, the growth of the resident set size over a steady
call (sampled every 0.2 ms, max of 3 calls) in a fresh subprocess with a
fixed malloc mmap threshold (64 KiB), so that the resident set follows the
live arrays (see :func:`torch_memory_mb`).

Usage::

    python validation/benchmarks/bench_operators.py --out docs/results/bench_operators
    python validation/benchmarks/bench_operators.py --quick      # fewer repeats, small sizes

Prints the table and the issue's targets with verdicts, and writes
``bench_operators.md`` and ``bench_operators.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import problems.ode  # noqa: E402
import simdiff  # noqa: E402
from simdiff.backends import get_backend  # noqa: E402
from simdiff.evidence._accuracy import rel_error  # noqa: E402
from simdiff.evidence._timing import balanced_orders, first_call, timed  # noqa: E402
from simdiff.pde import Grid, burgers_equation, solve  # noqa: E402

SIZES = (50, 256, 256, 128, 1)
STDE_DIRS = np.random.default_rng(5).standard_normal((16, SIZES[0]))  # 16 Gaussian samples


def mlp_problem(sizes: tuple[int, ...] = SIZES, seed: int = 0) -> simdiff.Problem:
    rng = np.random.default_rng(seed)
    Ws = [rng.normal(size=(o, i)) / np.sqrt(i) for i, o in itertools.pairwise(sizes)]
    bs = [0.1 * rng.normal(size=o) for o in sizes[1:]]

    def fn(x, ops):
        h = x
        for k, (W, b) in enumerate(zip(Ws, bs, strict=True)):
            h = ops.matmul(ops.asarray(W), h) + ops.asarray(b)
            if k < len(Ws) - 1:
                h = ops.tanh(h)
        return h[0]

    return simdiff.Problem(fn, x0=np.zeros(sizes[0]), name="mlp")


def burgers_problem(n: int = 256, steps: int = 20) -> simdiff.Problem:
    grid = Grid((n,), (2 * np.pi,))
    xs = grid.coords()[0]

    def fn(u0, ops):
        u = solve(
            burgers_equation(),
            grid,
            u0,
            ops,
            t_final=0.2,
            n_steps=steps,
            stepper="etdrk4",
            params={"viscosity": 0.1},
        )
        return 0.5 * ops.mean(u * u)

    return simdiff.Problem(fn, x0=np.sin(xs) + 0.5 * np.cos(2 * xs), name=f"burgers{n}")


def covariance(n: int, seed: int = 1) -> np.ndarray:
    a = np.random.default_rng(seed).normal(size=(n, n)) / np.sqrt(n)
    return a @ a.T + 0.1 * np.eye(n)


# --------------------------------------------------------------------------- timing


def interleave(configs: dict[str, Any], repeats: int) -> dict[str, dict[str, float]]:
    """First call of each, then ``repeats`` rounds; two medians per configuration.

    Round ``r`` runs the configurations in row ``r`` (cyclically) of
    :func:`balanced_orders`, each twice in a row: the first call ("cold")
    follows another configuration, the second ("steady", ``median_s``)
    follows a call of itself.  A call's time depends on what ran before it
    (a heavy predecessor leaves its own data in the shared L3 cache); with a
    balanced order every configuration has the same predecessors, and the
    steady call has none but itself.  (Until session 4 one call per round
    followed a seeded random order that was the same in every run: with 7
    configurations and 15 rounds, ``collapsed_sigma`` followed a heavy
    configuration 10 times, ``collapsed`` 7 times.)
    """
    first, values = {}, {}
    times: dict[str, dict[str, list[float]]] = {k: {"cold": [], "steady": []} for k in configs}
    for name, fn in configs.items():
        values[name], first[name] = first_call(fn)
    names = list(configs)
    orders = balanced_orders(len(names))
    for r in range(repeats):
        for i in orders[r % len(orders)]:
            name = names[i]
            for kind in ("cold", "steady"):
                times[name][kind].append(timed(configs[name]))
    out = {}
    for name, ts in times.items():
        q = np.percentile(ts["steady"], [25, 75])
        out[name] = {
            "median_s": statistics.median(ts["steady"]),
            "iqr_s": float(q[1] - q[0]),
            "cold_median_s": statistics.median(ts["cold"]),
            "first_s": first[name],
            "value": np.asarray(values[name]).tolist(),
        }
    return out


def _block(be: Any):
    return lambda fn: lambda: be.block_until_ready(fn())


def folx_laplacian(problem: simdiff.Problem, L: np.ndarray | None = None):
    """folx's forward Laplacian, jitted and vmapped; with ``L``, of ``z -> f(x + L z)`` at 0."""
    import folx
    import jax
    import jax.numpy as jnp

    ops = get_backend("jax").ops()
    if L is None:
        fwd = folx.forward_laplacian(lambda x: problem.fn(x, ops), sparsity_threshold=0)
        return jax.jit(jax.vmap(lambda x: fwd(x).laplacian))
    Lj = jnp.asarray(L)
    r = L.shape[1]

    def one(x):
        fwd = folx.forward_laplacian(lambda z: problem.fn(x + Lj @ z, ops), sparsity_threshold=0)
        return fwd(jnp.zeros(r)).laplacian

    return jax.jit(jax.vmap(one))


# --------------------------------------------------------------------------- memory


MEMORY_SNIPPET = r"""
import sys, numpy as np
sys.path.insert(0, {root!r})
from validation.benchmarks.bench_operators import mlp_problem
from simdiff.evidence._memory import PeakRSS
import simdiff, torch
p = mlp_problem(); d = simdiff.Derivatives(p, backend="torch", check_finite=False)
X = torch.as_tensor(np.random.default_rng(0).normal(size=({points}, 50)))
d.laplacian(X, method={method!r})          # warm-up builds the callable
peaks = []
for _ in range(3):
    with PeakRSS(interval=0.0002) as probe:
        d.laplacian(X, method={method!r})
    peaks.append(probe.delta_mb)
print(max(peaks))
"""


def torch_memory_mb(method: str, points: int) -> float:
    """Peak RSS growth of a steady call in a fresh process.

    glibc's malloc serves large blocks from ``mmap`` (returned to the system
    when freed) or, once its adaptive threshold has grown, from the heap
    (kept and reused): the RSS growth then depends on the allocation
    history, and repeated runs gave ratios from 0.2 to 1.0.  A fixed mmap
    threshold of 64 KiB (``MALLOC_MMAP_THRESHOLD_``) makes every large
    array a mapping of its own, so the RSS follows the live arrays.
    """
    code = MEMORY_SNIPPET.format(root=str(ROOT), method=method, points=points)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return float(out.stdout.strip().splitlines()[-1])


def jax_compiled_memory_mb(fn: Any, *args: Any) -> float:
    import jax

    stats = jax.jit(fn).lower(*args).compile().memory_analysis()
    return (stats.temp_size_in_bytes + stats.output_size_in_bytes) / 2**20


# --------------------------------------------------------------------------- workloads


def bench_mlp(points: int, repeats: int, bih_points: int) -> dict[str, Any]:
    import jax.numpy as jnp
    import torch

    p = mlp_problem()
    n = SIZES[0]
    rng = np.random.default_rng(0)
    Xn = rng.normal(size=(points, n))
    S = covariance(n)
    L = np.linalg.cholesky(S)
    res: dict[str, Any] = {}
    for bname in ("jax", "torch"):
        be = get_backend(bname)
        d = simdiff.Derivatives(p, backend=bname, check_finite=False)
        X = jnp.asarray(Xn) if bname == "jax" else torch.as_tensor(Xn)
        blk = _block(be)
        cfg = {
            "collapsed": blk(lambda d=d, X=X: d.laplacian(X)),
            "nested": blk(lambda d=d, X=X: d.laplacian(X, method="nested")),
            "taylor": blk(lambda d=d, X=X: d.laplacian(X, method="taylor")),
            "collapsed_sigma": blk(lambda d=d, X=X: d.laplacian(X, factor=L)),
            "nested_sigma": blk(lambda d=d, X=X: d.laplacian(X, factor=L, method="nested")),
        }
        if bname == "jax":
            f1, f2 = folx_laplacian(p), folx_laplacian(p, L)
            cfg["folx"] = blk(lambda X=X, f1=f1: f1(X))
            cfg["folx_sigma"] = blk(lambda X=X, f2=f2: f2(X))
        # the JAX calls are short (~15 ms): 3x the rounds for the same wall time's noise
        res[bname] = interleave(cfg, 3 * repeats if bname == "jax" else repeats)
        # stochastic biharmonic vs nested, fewer points (nested is r^2 fourth-order products)
        Xb = X[:bih_points]
        cfg_b = {
            "stochastic_biharmonic16": blk(
                lambda d=d, Xb=Xb: d.derivative_sum(4, STDE_DIRS, Xb, weights=np.eye(16) / 3.0)
            ),
            "nested_biharmonic": blk(lambda d=d, Xb=Xb: d.biharmonic(Xb, method="nested")),
        }
        res[bname + "_biharmonic"] = interleave(cfg_b, max(3, repeats // 4))
    res["memory_mb"] = mlp_memory(p, Xn, points)
    return res


def mlp_memory(p: simdiff.Problem, Xn: np.ndarray, points: int) -> dict[str, float]:
    import jax
    import jax.numpy as jnp

    from simdiff.core.operator_builders import build_operator

    be = get_backend("jax")
    ops = be.ops()
    V, w = jnp.eye(SIZES[0]), jnp.ones(SIZES[0])
    out = {}
    for method in ("collapsed", "nested", "taylor"):
        kind = "derivative_sum_nested" if method == "nested" else "derivative_sum"
        params = {"order": 2, "method": method, "grouped": False, "unit": True}  # as laplacian()
        core = build_operator(kind, params, p, ops, be)
        fn = jax.vmap(core, in_axes=(0, None, None))
        out[f"jax_{method}"] = jax_compiled_memory_mb(fn, jnp.asarray(Xn), V, w)
    for method in ("collapsed", "nested"):
        out[f"torch_{method}"] = torch_memory_mb(method, points)
    return out


def bench_simulators(repeats: int, burgers_n: int) -> dict[str, Any]:
    import jax.numpy as jnp
    import torch

    res: dict[str, Any] = {}
    for label, p in (
        ("lv", problems.ode.lotka_volterra_fit()),
        ("burgers", burgers_problem(burgers_n)),
    ):
        for bname in ("jax", "torch"):
            be = get_backend(bname)
            d = simdiff.Derivatives(p, backend=bname, check_finite=False)
            x = jnp.asarray(p.x0) if bname == "jax" else torch.as_tensor(p.x0)
            blk = _block(be)
            cfg = {
                "collapsed": blk(lambda d=d, x=x: d.laplacian(x)),
                "trace_nested_hessian": blk(lambda d=d, x=x: d.hessian(x).diagonal().sum()),
            }
            reps = repeats if label == "lv" else max(3, repeats // 4)
            res[f"{label}_{bname}"] = interleave(cfg, reps)
    return res


def sigma_probe(points: int, repeats: int) -> str:
    """Where the time of the Laplacian with weights goes (JAX, the MLP, one interleaved run).

    The same operator with identity directions (``I``) and with the columns of
    a Cholesky factor ``L``: through the API (``api_*``), the API's compiled
    function called with device arrays (``fn_*``: no host work per call), a
    fresh ``jax.jit`` of the one-point core with the directions as an argument
    (``jit_*``) or closed over as constants, as folx's function closes over
    ``L`` (``jit_L_const``); folx's two variants beside them.
    """
    import jax
    import jax.numpy as jnp

    from simdiff.core.operator_builders import build_operator

    be = get_backend("jax")  # float64 on (before any array is made)
    p = mlp_problem()
    n = SIZES[0]
    X = jnp.asarray(np.random.default_rng(0).normal(size=(points, n)))
    assert X.dtype == jnp.float64
    L = np.linalg.cholesky(covariance(n))
    d = simdiff.Derivatives(p, backend="jax", check_finite=False)
    d.laplacian(X)
    (fn,) = d._fns.values()  # the one compiled laplacian
    params = {"order": 2, "method": "collapsed", "grouped": False, "unit": True}
    core = build_operator("derivative_sum", params, p, be.ops(), be)
    jc = jax.jit(jax.vmap(core, in_axes=(0, None, None)))
    VI, VL, w = jnp.eye(n), jnp.asarray(np.ascontiguousarray(L.T)), jnp.ones(n)
    const = jax.jit(jax.vmap(lambda x: core(x, jnp.asarray(L.T), jnp.ones(n))))
    f1, f2 = folx_laplacian(p), folx_laplacian(p, L)
    blk = _block(be)
    cfg = {
        "api_I": blk(lambda: d.laplacian(X)),
        "api_L": blk(lambda: d.laplacian(X, factor=L)),
        "fn_I": blk(lambda: fn(X, VI, w)),
        "fn_L": blk(lambda: fn(X, VL, w)),
        "jit_I": blk(lambda: jc(X, VI, w)),
        "jit_L": blk(lambda: jc(X, VL, w)),
        "jit_L_const": blk(lambda: const(X)),
        "folx": blk(lambda: f1(X)),
        "folx_sigma": blk(lambda: f2(X)),
    }
    r = interleave(cfg, repeats)
    ref = r["folx_sigma"]
    lines = [
        f"### Laplacian with weights: where the time goes ({points} points, JAX, "
        f"median of {repeats})",
        "",
        "| variant | steady ms | cold ms | steady / folx_sigma | cold / folx_sigma |",
        "|---|---|---|---|---|",
    ]
    for name, v in r.items():
        lines.append(
            f"| {name} | {v['median_s'] * 1e3:.2f} | {v['cold_median_s'] * 1e3:.2f} | "
            f"{v['median_s'] / ref['median_s']:.3f} | "
            f"{v['cold_median_s'] / ref['cold_median_s']:.3f} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- report


def _div(a: float, b: float) -> float:
    return a / b if b else float("nan")


def _ratio(r: dict, a: str, b: str, key: str = "median_s") -> float:
    return _div(r[a][key], r[b][key])


def _agree(r: dict, a: str, b: str) -> float:
    return rel_error(r[a]["value"], r[b]["value"], floor=1.0)


def report(res: dict[str, Any], points: int, bih_points: int) -> str:
    lines = [
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
        f"load average {os.getloadavg()[0]:.1f} / {os.getloadavg()[1]:.1f} (1 / 5 min) at the end",
        "",
        f"### MLP 50-256-256-128-1, {points} points, D = 50, float64 (per point, median)",
        "",
        "| method | JAX ms/point | torch ms/point | JAX vs nested | torch vs nested "
        "| JAX cold ms/point | torch cold ms/point |",
        "|---|---|---|---|---|---|---|",
    ]
    mj, mt = res["mlp"]["jax"], res["mlp"]["torch"]
    for name in (
        "collapsed",
        "nested",
        "taylor",
        "folx",
        "collapsed_sigma",
        "nested_sigma",
        "folx_sigma",
    ):
        tj = mj[name]["median_s"] / points * 1e3 if name in mj else float("nan")
        tt = mt[name]["median_s"] / points * 1e3 if name in mt else float("nan")
        ref = "nested_sigma" if "sigma" in name else "nested"
        rj = _ratio(mj, name, ref) if name in mj else float("nan")
        rt = _ratio(mt, name, ref) if name in mt else float("nan")
        cj = mj[name]["cold_median_s"] / points * 1e3 if name in mj else float("nan")
        ct = mt[name]["cold_median_s"] / points * 1e3 if name in mt else float("nan")
        lines.append(
            f"| {name} | {tj:.4f} | {tt:.4f} | {rj:.3f} | {rt:.3f} | {cj:.4f} | {ct:.4f} |"
        )
    lines += [
        "",
        f"### Biharmonic, {bih_points} points (per point, median)",
        "",
        "| method | JAX ms/point | torch ms/point |",
        "|---|---|---|",
    ]
    bj, bt = res["mlp"]["jax_biharmonic"], res["mlp"]["torch_biharmonic"]
    for name in ("stochastic_biharmonic16", "nested_biharmonic"):
        lines.append(
            f"| {name} | {bj[name]['median_s'] / bih_points * 1e3:.3f} | "
            f"{bt[name]['median_s'] / bih_points * 1e3:.3f} |"
        )
    lines += [
        "",
        "### Through simulators (one point)",
        "",
        "| workload | backend | collapsed ms | trace(nested Hessian) ms | ratio | rel. diff |",
        "|---|---|---|---|---|---|",
    ]
    for key, r in res["sim"].items():
        label, bname = key.rsplit("_", 1)
        lines.append(
            f"| {label} | {bname} | {r['collapsed']['median_s'] * 1e3:.2f} | "
            f"{r['trace_nested_hessian']['median_s'] * 1e3:.2f} | "
            f"{_ratio(r, 'collapsed', 'trace_nested_hessian'):.3f} | "
            f"{_agree(r, 'collapsed', 'trace_nested_hessian'):.1e} |"
        )
    mem = res["mlp"]["memory_mb"]
    lines += ["", "### Memory (MB)", "", "| config | MB |", "|---|---|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in mem.items()]
    lines += ["", "### Targets", ""]
    mem_j, mem_t = (_div(mem[f"{b}_collapsed"], mem[f"{b}_nested"]) for b in ("jax", "torch"))
    checks = [
        *_timed_checks(res, "median_s"),
        ("memory collapsed <= 0.5 nested (JAX)", mem_j, 0.5),
        ("memory collapsed <= 0.5 nested (torch)", mem_t, 0.5),
    ]
    for key, r in res["sim"].items():
        checks.append(
            (f"{key}: agrees to 1e-10", _agree(r, "collapsed", "trace_nested_hessian"), 1e-10)
        )
    checks += [
        ("MLP collapsed vs nested (JAX)", _agree(mj, "collapsed", "nested"), 1e-10),
        ("MLP collapsed vs folx (JAX)", _agree(mj, "collapsed", "folx"), 1e-10),
        ("MLP collapsed vs nested (torch)", _agree(mt, "collapsed", "nested"), 1e-10),
        (
            "MLP collapsed JAX vs torch",
            _agree({"a": mj["collapsed"], "b": mt["collapsed"]}, "a", "b"),
            1e-10,
        ),
    ]
    lines += [_verdict(*c) for c in checks]
    lines += [
        "",
        "### Timing targets, cold calls (each after another configuration, balanced order)",
        "",
    ]
    lines += [_verdict(*c) for c in _timed_checks(res, "cold_median_s")]
    return "\n".join(lines)


def _verdict(name: str, value: float, limit: float) -> str:
    return f"- {name}: {value:.3g} (target <= {limit:g}): {'MET' if value <= limit else 'NOT MET'}"


def _timed_checks(res: dict[str, Any], key: str) -> list[tuple[str, float, float]]:
    """The timing targets from the medians ``key`` (``median_s`` or ``cold_median_s``)."""
    mj, mt = res["mlp"]["jax"], res["mlp"]["torch"]
    bj, bt = res["mlp"]["jax_biharmonic"], res["mlp"]["torch_biharmonic"]
    sig = ("collapsed_sigma", "nested_sigma")
    bih = ("stochastic_biharmonic16", "nested_biharmonic")
    out = [
        ("collapsed <= folx (JAX)", _ratio(mj, "collapsed", "folx", key), 1.0),
        ("collapsed_sigma <= folx_sigma (JAX)", _ratio(mj, sig[0], "folx_sigma", key), 1.0),
        ("collapsed <= 0.5 nested (JAX)", _ratio(mj, "collapsed", "nested", key), 0.5),
        ("collapsed <= 0.5 nested (torch)", _ratio(mt, "collapsed", "nested", key), 0.5),
        ("collapsed_sigma <= 0.5 nested_sigma (JAX)", _ratio(mj, *sig, key), 0.5),
        ("collapsed_sigma <= 0.5 nested_sigma (torch)", _ratio(mt, *sig, key), 0.5),
        ("stochastic biharmonic >= 5x faster (JAX)", _ratio(bj, *bih, key), 0.2),
        ("stochastic biharmonic >= 5x faster (torch)", _ratio(bt, *bih, key), 0.2),
    ]
    for name, r in res["sim"].items():
        out.append(
            (
                f"{name}: collapsed faster than trace(nested Hessian)",
                _ratio(r, "collapsed", "trace_nested_hessian", key),
                1.0,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--points", type=int, default=64)
    ap.add_argument("--bih-points", type=int, default=8)
    ap.add_argument("--burgers-n", type=int, default=256)
    ap.add_argument("--quick", action="store_true", help="3 repeats, 64-point Burgers grid")
    ap.add_argument(
        "--sigma-probe", action="store_true", help="only the variants of the Sigma Laplacian"
    )
    args = ap.parse_args()
    if args.sigma_probe:
        load0 = os.getloadavg()
        text = sigma_probe(args.points, args.repeats)
        load1 = os.getloadavg()
        print(f"load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end\n\n{text}")
        return
    if args.quick:
        args.repeats, args.burgers_n = 3, 64
    load0 = os.getloadavg()
    res = {
        "mlp": bench_mlp(args.points, args.repeats, args.bih_points),
        "sim": bench_simulators(args.repeats, args.burgers_n),
    }
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_operators.json").write_text(json.dumps(res, indent=1, default=float))
    text = f"load average at the start {load0[0]:.1f} / {load0[1]:.1f}; " + report(
        res, args.points, args.bih_points
    )
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        cmd = "python validation/benchmarks/bench_operators.py " + " ".join(sys.argv[1:])
        (args.out / "bench_operators.md").write_text(f"Command: `{cmd}`\n\n{text}\n")
        (args.out / "bench_operators.json").write_text(json.dumps(res, indent=1, default=float))


if __name__ == "__main__":
    main()
