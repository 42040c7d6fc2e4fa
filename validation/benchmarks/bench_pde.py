"""Benchmark: gradient of a PDE functional w.r.t. the initial field, JAX vs torch.

Kuramoto–Sivashinsky on [0, 32 pi) (Kassam–Trefethen setup), spectral in
space, ETDRK4 with h = 1/4 for ``--steps`` steps; the functional is
0.5*mean(u(T)^2) and the input the initial field of N points.  For each N,
backend and checkpointing choice a fresh subprocess measures

* forward time and gradient time (median of ``--repeats`` steady-state calls
  through ``simdiff.Derivatives``, the two interleaved in a shuffled order;
  JAX jit-compiled, torch eager torch.func),
* the first gradient call (JAX: trace + compile + run),
* the peak resident memory *added* by one steady-state gradient call, in a
  separate process started with ``MALLOC_MMAP_THRESHOLD_=4096`` (so freed
  buffers go back to the kernel and RSS tracks live memory): the kernel's
  high-water mark (VmHWM) is reset through /proc/self/clear_refs before the
  call and read after it (Linux only), minus the RSS before it.

exponax (the JAX ecosystem's ETDRK library) is not installed in this
environment, so no peer row is printed.

Usage::

    python validation/benchmarks/bench_pde.py                        # N = 256, 1024, 4096, 16384
    python validation/benchmarks/bench_pde.py --sizes 256 1024 --steps 100 --repeats 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def _peak_added_mib(fn) -> float:
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status_kib("VmRSS")
    fn()
    return (_status_kib("VmHWM") - before) / 1024


def one(
    backend: str, n: int, checkpoint: bool, steps: int, repeats: int, mode: str, threads: int
) -> dict:
    """Measure one configuration (runs in its own process); mode "time" or "memory"."""
    sys.path.insert(0, str(ROOT))
    import numpy as np
    import torch

    if threads > 0:
        torch.set_num_threads(threads)

    import simdiff
    from simdiff.evidence._timing import Summary, first_call, interleaved
    from simdiff.pde import Grid, kuramoto_sivashinsky

    grid = Grid((n,), (32 * np.pi,))
    p = kuramoto_sivashinsky(grid, t_final=0.25 * steps, n_steps=steps, stepper="etdrk4",
                             checkpoint=checkpoint)  # fmt: skip
    d = simdiff.Derivatives(p, backend=backend)
    x = p.x0
    g, first = first_call(lambda: d.grad(x))
    d.value(x)
    if mode == "memory":
        return {"peak_mib": _peak_added_mib(lambda: d.grad(x))}

    t = interleaved({"value": lambda: d.value(x), "grad": lambda: d.grad(x)}, repeats)
    fwd, grd = Summary.of(t["value"]).median, Summary.of(t["grad"]).median
    return {"backend": backend, "n": n, "checkpoint": checkpoint, "first_grad_s": first,
            "torch_threads": torch.get_num_threads(),
            "forward_s": fwd, "grad_s": grd, "ratio": grd / fwd,
            "grad_norm": float(np.linalg.norm(g))}  # fmt: skip


def _run(backend: str, n: int, ckpt: bool, args: argparse.Namespace) -> dict | None:
    row: dict = {}
    for mode in ("time", "memory"):
        cmd = [sys.executable, __file__, "--one", backend, str(n), "1" if ckpt else "0", mode,
               "--steps", str(args.steps), "--repeats", str(args.repeats),
               "--torch-threads", str(args.torch_threads)]  # fmt: skip
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "4096"} if mode == "memory" else None
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if out.returncode != 0:
            print(f"FAILED {backend} N={n} checkpoint={ckpt} {mode}: {out.stderr[-2000:]}")
            return None
        row.update(json.loads(out.stdout.strip().splitlines()[-1]))
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backends", nargs="+", default=["jax", "torch"])
    ap.add_argument("--torch-threads", type=int, default=0, help="0: torch's default")
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)  # backend n checkpoint mode
    args = ap.parse_args(argv)
    if args.one:
        b, n, c, mode = args.one
        print(
            json.dumps(one(b, int(n), c == "1", args.steps, args.repeats, mode, args.torch_threads))
        )
        return
    if importlib.util.find_spec("exponax") is None:
        print("exponax is not installed: no JAX ecosystem peer row.\n")
    rows = []
    for n in args.sizes:
        for backend in args.backends:
            for ckpt in (False, True):
                row = _run(backend, n, ckpt, args)
                if row is not None:
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"KS, ETDRK4, {args.steps} steps; gradient of 0.5*mean(u(T)^2) w.r.t. u0 "
          f"(median of {args.repeats})\n")  # fmt: skip
    print("| N | backend | checkpoint | forward (ms) | gradient (ms) | gradient/forward "
          "| first gradient call (s) | peak added memory (MiB) | torch threads |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']} | {r['backend']} | {'yes' if r['checkpoint'] else 'no'} "
              f"| {1e3 * r['forward_s']:.2f} | {1e3 * r['grad_s']:.2f} | {r['ratio']:.1f} "
              f"| {r['first_grad_s']:.2f} | {r['peak_mib']:.1f} "
              f"| {r['torch_threads']} |")  # fmt: skip
    agree = {}
    for r in rows:
        agree.setdefault(r["n"], []).append(r["grad_norm"])
    for n, norms in agree.items():
        spread = (max(norms) - min(norms)) / max(norms)
        print(f"\nN={n}: |grad| agrees across the {len(norms)} configurations to {spread:.1e}")


if __name__ == "__main__":
    main()
