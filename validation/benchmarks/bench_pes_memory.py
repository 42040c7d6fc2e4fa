"""The constant of the dense AD Hessian's memory estimate (``TermEnergy.dense_hessian_bytes``).

``dense_hessian_bytes(n) = 8 * n * m * k * dim * C`` bytes for ``n`` tangents
through ``m`` terms of ``k`` atoms.  This measures ``C`` for Lennard-Jones
clusters (all pairs, and with the 2.5 sigma cutoff):

- JAX: the compiled dense Hessian's own account,
  ``jax.jit(jacfwd(jacrev(f))).lower(x).compile().memory_analysis()``
  (temporaries plus output and arguments), exact for the executable;
- torch: the peak resident memory added by one ``torch.func`` forward-over-reverse
  Hessian (``simdiff.evidence._memory.PeakRSS``), in a fresh process per point, so it
  includes the allocator's slack.

    python -m validation.benchmarks.bench_pes_memory
"""

from __future__ import annotations

import json
import subprocess
import sys

SIZES = (13, 38, 75, 150)


def _problem(n_atoms: int, cut: bool):
    from problems.pes import fcc_cluster
    from simdiff.pes import cluster_problem, lennard_jones, smooth_cutoff

    pair = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.5) if cut else lennard_jones
    return cluster_problem(pair, fcc_cluster(n_atoms))


def _jax(n_atoms: int, cut: bool) -> dict:
    import jax

    import simdiff

    jax.config.update("jax_enable_x64", True)
    p = _problem(n_atoms, cut)
    ops = simdiff.get_ops("jax")
    f = jax.jit(jax.jacfwd(jax.jacrev(lambda x: p.fn(x, ops))))
    mem = f.lower(jax.numpy.asarray(p.x0)).compile().memory_analysis()
    total = mem.temp_size_in_bytes + mem.output_size_in_bytes + mem.argument_size_in_bytes
    return {"bytes": int(total), "temp": int(mem.temp_size_in_bytes)}


def _torch(n_atoms: int, cut: bool) -> dict:
    import torch

    from simdiff.evidence._memory import PeakRSS

    torch.set_num_threads(1)
    import simdiff

    p = _problem(n_atoms, cut)
    d = simdiff.Derivatives(p, backend="torch")
    simdiff.grad(p, backend="torch")  # imports and allocator warm-up outside the probe
    with PeakRSS() as probe:
        d.hessian(method="fwd-rev")
    return {"bytes": int(probe.delta_mb * 2**20)}


def point(backend: str, n_atoms: int, cut: bool) -> dict:
    p = _problem(n_atoms, cut)
    fn = p.fn
    rec = (_jax if backend == "jax" else _torch)(n_atoms, cut)
    unit = 8 * p.n * fn.n_terms * fn.k * fn.dim
    rec.update({"backend": backend, "n_atoms": n_atoms, "cutoff": cut, "n": p.n,
                "terms": fn.n_terms, "C": rec["bytes"] / unit,
                "estimate": fn.dense_hessian_bytes(p.n)})  # fmt: skip
    return rec


def main() -> list[dict]:
    if len(sys.argv) == 4:  # child: one point
        print(json.dumps(point(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "cut")))
        return []
    rows = []
    for backend in ("jax", "torch"):
        for cut in (False, True):
            for n_atoms in SIZES:
                args = [sys.executable, "-m", "validation.benchmarks.bench_pes_memory", backend,
                        str(n_atoms), "cut" if cut else "all"]  # fmt: skip
                out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
                rows.append(json.loads(out.strip().splitlines()[-1]))
                print(rows[-1], file=sys.stderr, flush=True)
    print("| backend | pairs | N | n | terms m | measured (MB) | estimate (MB) "
          "| C = bytes / (8 n m k dim) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {'cutoff' if r['cutoff'] else 'all'} | {r['n_atoms']} "
              f"| {r['n']} | {r['terms']} | {r['bytes'] / 2**20:.1f} "
              f"| {r['estimate'] / 2**20:.1f} | {r['C']:.2f} |")  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
