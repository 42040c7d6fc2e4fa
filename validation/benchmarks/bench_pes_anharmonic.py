"""Cubic force constants by Taylor mode against the jvp of the AD Hessian; quartic ones.

For each case (a Lennard-Jones cluster at its minimum, ``m`` normal modes)
``simdiff.pes.cubic_force_constants`` runs with ``method="taylor"`` (third
directional derivatives along ``L_i``, ``L_i +- L_j``, ``L_i + L_j + L_k``,
polarised; the default) and ``method="hessian-jvp"`` (one ``jvp`` of the AD
Hessian per mode), and ``quartic_force_constants`` (semi-diagonal
``phi_iijj`` by Taylor mode) once.  First call (compilation included) apart,
then the median of ``--repeats`` interleaved rounds (shuffled order); the largest difference
between the two cubic tensors relative to the largest constant.

    python -m validation.benchmarks.bench_pes_anharmonic --repeats 3 --threads 1
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from simdiff.evidence._accuracy import rel_error
from simdiff.evidence._timing import Summary, first_call, interleaved

# (catalogue name or N for an fcc cluster, number of lowest modes or None for all)
CASES = (("lj7", None), ("lj13", None), ("lj38", 10), ("lj38", 30), (150, 10))


def _case(name: object, n_modes: int | None, backend: str) -> tuple[str, dict]:
    import problems
    from problems.pes import fcc_cluster
    from simdiff.pes import (
        cluster_problem,
        cubic_force_constants,
        find_minimum,
        lennard_jones,
        normal_modes,
        quartic_force_constants,
    )

    if isinstance(name, int):
        p = cluster_problem(lennard_jones, fcc_cluster(name), name=f"lj{name}-fcc")
    else:
        p = problems.get(str(name))
    x = find_minimum(p, method="trust-krylov" if p.n > 200 else "trust-exact").x
    L = normal_modes(p, x).displacements
    L = L if n_modes is None else L[:, :n_modes]
    kw = {"backend": backend, "gtol": np.inf}
    fns = {
        "cubic taylor": lambda: cubic_force_constants(p, x, L, method="taylor", **kw),
        "cubic hessian-jvp": lambda: cubic_force_constants(p, x, L, method="hessian-jvp", **kw),
        "quartic taylor": lambda: quartic_force_constants(p, x, L, **kw),
    }
    label = f"{p.name} (n = {p.n}, m = {L.shape[1]})"
    return label, fns


def measure(repeats: int, backend: str) -> list[dict]:
    rows = []
    for name, n_modes in CASES:
        label, fns = _case(name, n_modes, backend)
        first, out = {}, {}
        for k, f in fns.items():
            out[k], first[k] = first_call(f)
        times = interleaved(fns, repeats)
        a, b = out["cubic taylor"], out["cubic hessian-jvp"]
        err = rel_error(a, b)
        med = {k: Summary.of(v).median for k, v in times.items()}
        rows.append({"case": label, "first": first, "median": med, "rel_diff": err})
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backend", default="jax")
    parser.add_argument("--threads", type=int, help="intra-op threads for torch and XLA")
    args = parser.parse_args(argv)
    if args.threads:  # before JAX is imported
        os.environ["XLA_FLAGS"] = (f"--xla_cpu_multi_thread_eigen=false "
                                   f"intra_op_parallelism_threads={args.threads}")  # fmt: skip
        import torch

        torch.set_num_threads(args.threads)
    rows = measure(args.repeats, args.backend)
    from simdiff.pes import cubic_directions

    print()
    print("| case | directions (Taylor) | m n | method='auto' picks |")
    print("|---|---|---|---|")
    for r in rows:
        n, m = (int(v) for v in r["case"].split("(n = ")[1].rstrip(")").split(", m = "))
        k = len(cubic_directions(m)[0])
        pick = "taylor" if 1.5 * k <= m * n else "hessian-jvp"
        print(f"| {r['case']} | {k} | {m * n} | {pick} |")
    print()
    print("| case | cubic taylor (s) | cubic hessian-jvp (s) | jvp / taylor | quartic taylor (s) "
          "| first call taylor / hessian-jvp (s) | max diff / max abs phi |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        m, f = r["median"], r["first"]
        print(f"| {r['case']} | {m['cubic taylor']:.3g} | {m['cubic hessian-jvp']:.3g} "
              f"| {m['cubic hessian-jvp'] / m['cubic taylor']:.2g} | {m['quartic taylor']:.3g} "
              f"| {f['cubic taylor']:.3g} / {f['cubic hessian-jvp']:.3g} "
              f"| {r['rel_diff']:.1e} |")  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
