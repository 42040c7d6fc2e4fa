"""Benchmark: Taylor mode vs nested forward mode, orders 1..10, JAX vs torch.

Workloads
---------
seed   f(x) = sin(x^2) + exp(cos(x)) (``problems.get("seed")``) at 10,000 points
       (x of shape (10000, 1), one direction), batched by vmap.
lj38   a 38-atom Lennard-Jones cluster energy along one random unit direction
       (one point, n = 114), written in ``ops`` below.

For every order, backend and method the script builds a fresh
``simdiff.Derivatives`` (so the first call includes JAX's trace and compile),
records the first-call time, then times ``--repeats`` steady calls (once
only for eager torch calls slower than 2 s: nested mode at high order),
interleaving all configurations of that order round by round, in a shuffled
order, so that machine noise hits them alike; it reports the median and the
interquartile range.
Inputs are native arrays and ``check_finite=False``, so the time is the
derivative itself, not conversions.  Every Taylor result is compared with the
nested result of the same order and backend (``max_rel_diff``).

Usage::

    python validation/benchmarks/bench_taylor.py --out results/bench_taylor/
    python validation/benchmarks/bench_taylor.py --orders 1-4 --repeats 5 --nested-budget 2

Writes ``bench_taylor.csv``, ``bench_taylor.md`` and ``bench_taylor.png`` to
``--out`` and prints the table and the issue's targets with their verdicts.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import problems  # noqa: E402
import simdiff  # noqa: E402
from simdiff.evidence._timing import Summary, first_call_cpu, interleaved  # noqa: E402

N_ATOMS = 38


# --------------------------------------------------------------------------- workloads


def lj_energy(x: Any, ops: Any) -> Any:
    """Lennard-Jones energy sum_{i<j} 4 (r^-12 - r^-6) (epsilon = sigma = 1).

    The diagonal gets r^2 + 1 (instead of 0) before the division so that no
    infinite value enters a masked branch: the mask then removes it exactly
    (the "safe where" pattern; an inf there would make higher derivatives NaN).
    """
    n = x.shape[0] // 3
    r = ops.reshape(x, (n, 3))
    d = r[:, None, :] - r[None, :, :]
    eye = ops.eye(n)
    r2 = ops.sum(d * d, axis=-1) + eye
    inv6 = (1.0 / r2) ** 3
    upper = ops.asarray(np.triu(np.ones((n, n), dtype=bool), k=1))
    return ops.sum(ops.where(upper, 4.0 * (inv6 * inv6 - inv6), 0.0))


def lj_cluster(n: int = N_ATOMS, seed: int = 0) -> np.ndarray:
    """``n`` fcc lattice sites nearest the origin (nearest-neighbour distance 2^(1/6)), jittered.

    A compact cluster near (not at) a local minimum; the timings do not
    depend on the geometry.
    """
    a = 2 ** (1 / 6) * math.sqrt(2)
    g = np.arange(-3, 4)
    cube = np.array(np.meshgrid(g, g, g, indexing="ij")).reshape(3, -1).T
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    sites = (cube[:, None, :] + basis[None]).reshape(-1, 3) * a
    sites = sites[np.argsort(np.linalg.norm(sites - 0.25 * a, axis=1), kind="stable")[:n]]
    return (sites + 0.02 * np.random.default_rng(seed).standard_normal(sites.shape)).ravel()


def workloads(points: int) -> dict[str, tuple[simdiff.Problem, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(1)
    seed = problems.get("seed")
    xs = rng.uniform(-2.0, 2.0, (points, 1))
    x_lj = lj_cluster()
    v_lj = rng.standard_normal(x_lj.size)
    lj = simdiff.Problem(lj_energy, x0=x_lj, name=f"lj{N_ATOMS}")
    return {
        "seed": (seed, xs, np.ones(1)),
        f"lj{N_ATOMS}": (lj, x_lj, v_lj / np.linalg.norm(v_lj)),
    }


# --------------------------------------------------------------------------- timing


def _native(backend: str, a: np.ndarray) -> Any:
    if backend == "jax":
        import jax.numpy as jnp

        return jnp.asarray(a)
    import torch

    return torch.as_tensor(a)


def _block(backend: str, y: Any) -> Any:
    if backend == "jax":
        y.block_until_ready()
    return y


def _to_numpy(y: Any) -> np.ndarray:
    return np.asarray(y.detach() if hasattr(y, "detach") else y)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    skip: set[tuple[str, str, str]] = set()  # nested configs past the time budget
    for wname, (problem, x, v) in workloads(args.points).items():
        for order in args.orders:
            configs = []
            for backend in args.backends:
                for method in ("taylor", "nested"):
                    if (wname, backend, method) in skip:
                        continue
                    d = simdiff.Derivatives(problem, backend, check_finite=False)
                    xn, vn = _native(backend, x), _native(backend, v)

                    def call(d=d, xn=xn, vn=vn, m=method, b=backend, k=order):
                        return _block(b, d.derivative(k, vn, xn, method=m))

                    y, first, first_cpu = first_call_cpu(call)

                    configs.append({"workload": wname, "backend": backend, "method": method,
                                    "order": order, "first_call_s": first,
                                    "first_call_cpu_s": first_cpu, "call": call,
                                    "slow_eager": backend == "torch" and first > 2.0,
                                    "value": _to_numpy(y)})  # fmt: skip
            times = interleaved(
                {i: c["call"] for i, c in enumerate(configs)},
                args.repeats,
                skip=lambda i, r, cs=configs: r > 0 and cs[i]["slow_eager"],
            )
            for i, c in enumerate(configs):
                c.pop("call")
                c.pop("slow_eager")
                st = Summary.of(times[i])
                c["steady_s"], c["iqr_s"] = st.median, st.q75 - st.q25
                ref = next((r for r in configs if r["backend"] == c["backend"]
                            and r["method"] == "nested"), None)  # fmt: skip
                if c["method"] == "taylor" and ref is not None:
                    scale = max(1e-300, float(np.max(np.abs(ref["value"]))))
                    c["max_rel_diff"] = float(np.max(np.abs(c["value"] - ref["value"]))) / scale
                else:
                    c["max_rel_diff"] = float("nan")
                if c["method"] == "nested" and c["steady_s"] > args.nested_budget:
                    skip.add((wname, c["backend"], "nested"))
                print(f"{wname:6s} {c['backend']:5s} {c['method']:6s} order {order:2d}: "
                      f"first {c['first_call_s']:.4f} s, steady {c['steady_s'] * 1e3:.3f} ms",
                      flush=True)  # fmt: skip
            rows.extend({k: v for k, v in c.items() if k != "value"} for c in configs)
    return rows


# --------------------------------------------------------------------------- report


def _get(rows: list[dict], **key: Any) -> dict | None:
    return next((r for r in rows if all(r[k] == v for k, v in key.items())), None)


def targets(rows: list[dict], order: int = 8) -> list[str]:
    """The issue's targets, each with the measured ratio and a verdict."""
    out = []
    for w in sorted({r["workload"] for r in rows}):
        tt, tn = (
            _get(rows, workload=w, backend="torch", method="taylor", order=order),
            _get(rows, workload=w, backend="torch", method="nested", order=order),
        )
        jt = _get(rows, workload=w, backend="jax", method="taylor", order=order)
        if tt and tn:
            r = tn["steady_s"] / tt["steady_s"]
            out.append(f"{w}: torch nested / torch Taylor at order {order} = {r:.1f}x "
                       f"(target >= 100x: {'met' if r >= 100 else 'missed'})")  # fmt: skip
        if tt and jt:
            r = tt["steady_s"] / jt["steady_s"]
            out.append(f"{w}: torch Taylor / JAX Taylor at order {order} = {r:.2f}x "
                       f"(target <= 3x: {'met' if r <= 3 else 'missed'})")  # fmt: skip
        if jt:
            c, cc = jt["first_call_s"], jt["first_call_cpu_s"]
            out.append(f"{w}: JAX Taylor first call (trace + compile) at order {order} = {c:.3f} s "
                       f"wall, {cc:.3f} s CPU (target < 1 s: wall {'met' if c < 1 else 'missed'}, "
                       f"CPU {'met' if cc < 1 else 'missed'})")  # fmt: skip
        for b in ("jax", "torch"):
            hi = _get(rows, workload=w, backend=b, method="taylor", order=order)
            lo = _get(rows, workload=w, backend=b, method="taylor", order=1)
            if hi and lo:
                r = hi["steady_s"] / lo["steady_s"]
                out.append(f"{w}: {b} Taylor steady order {order} / order 1 = {r:.1f}x "
                           f"(target <= 10x: {'met' if r <= 10 else 'missed'})")  # fmt: skip
    return out


def markdown(rows: list[dict]) -> str:
    lines = ["| workload | backend | method | order | first call (s) | first call CPU (s) "
             "| steady (ms) | IQR (ms) | max rel. diff vs nested |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        diff = "" if math.isnan(r["max_rel_diff"]) else f"{r['max_rel_diff']:.1e}"
        lines.append(f"| {r['workload']} | {r['backend']} | {r['method']} | {r['order']} | "
                     f"{r['first_call_s']:.3f} | {r['first_call_cpu_s']:.3f} | "
                     f"{r['steady_s'] * 1e3:.3f} | "
                     f"{r['iqr_s'] * 1e3:.3f} | {diff} |")  # fmt: skip
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r["workload"] for r in rows}, key=lambda w: w != "seed")
    fig, axes = plt.subplots(2, len(names), figsize=(5.5 * len(names), 8), squeeze=False)
    for col, w in enumerate(names):
        for b in ("jax", "torch"):
            for m, style in (("taylor", "-o"), ("nested", "--s")):
                sel = [r for r in rows if (r["workload"], r["backend"], r["method"]) == (w, b, m)]
                if not sel:
                    continue
                o = [r["order"] for r in sel]
                axes[0, col].semilogy(
                    o, [r["steady_s"] * 1e3 for r in sel], style, label=f"{b} {m}"
                )
                axes[1, col].semilogy(o, [r["first_call_s"] for r in sel], style, label=f"{b} {m}")
        axes[0, col].set(title=f"{w}: steady time", xlabel="order", ylabel="ms (median)")
        axes[1, col].set(title=f"{w}: first call", xlabel="order", ylabel="s")
        for ax in axes[:, col]:
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _orders(text: str) -> list[int]:
    if "-" in text:
        lo, hi = (int(s) for s in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(s) for s in text.split(",")]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=_orders, default=list(range(1, 11)), help="e.g. 1-10 or 1,2,8")
    ap.add_argument("--backends", nargs="+", default=["jax", "torch"])
    ap.add_argument("--points", type=int, default=10_000, help="seed-function batch size")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--nested-budget", type=float, default=3.0,
                    help="stop nested mode of a backend once a call takes longer (s)")  # fmt: skip
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads, torch and XLA (see docs/taylor.md)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_taylor")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if "jax" in sys.modules:
        raise RuntimeError("set the thread count before jax is imported")
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen="
                               f"{'true' if args.threads > 1 else 'false'} "
                               f"intra_op_parallelism_threads={args.threads}").strip()  # fmt: skip
    import jax
    import torch

    torch.set_num_threads(args.threads)

    rows = run(args)
    with open(args.out / "bench_taylor.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    env = (f"python {platform.python_version()}, jax {jax.__version__}, torch {torch.__version__}, "
           f"{args.threads} intra-op thread(s), {platform.machine()}, float64")  # fmt: skip
    text = "\n\n".join([markdown(rows), "Targets:\n\n" + "\n".join(f"- {t}" for t in targets(rows)),
                        f"Environment: {env}; repeats {args.repeats}."])  # fmt: skip
    (args.out / "bench_taylor.md").write_text(text + "\n")
    plot(rows, args.out / "bench_taylor.png")
    print(text)


if __name__ == "__main__":
    main()
