"""Hessian of LJ-N at scale: structured (sum of pair terms) vs dense AD vs ASE's Vibrations.

For each N (compact fcc fragments, ``problems.pes.fcc_cluster``; free clusters)
the configurations below are built, called once (first call: compile and
warm-up, reported apart), then timed in ``--repeats`` interleaved rounds (each
round calls every configuration once, in a shuffled order) and summarised by the
median.  One process, one run: ratios within a size are comparable.

- ``struct-jax``, ``struct-torch``: ``simdiff.hessian(p)`` on the all-pairs
  Lennard-Jones problem, assembled from the 6x6 pair Hessians (dense output)
- ``struct-cut-jax``, ``struct-cut-torch``: the same with the C2-switched
  potential, ``r_on = 2.0``, ``r_cut = 2.5`` sigma (pairs within ``r_cut``
  plus the skin at the geometry)
- ``struct-cut-sparse``: ``simdiff.hessian(p, sparse=True)`` (JAX): the same
  Hessian as a ``scipy.sparse.csr_array``, no ``n^2`` output
- ``blocks-jax``, ``blocks-cut-jax``: only the pair blocks (the batched
  vmapped block Hessians, what every output needs), for the profile of where
  the time goes
- ``zeros-touch``: ``np.zeros((n, n))`` with one entry per 4 KiB page written:
  what any fresh dense ``(n, n)`` result costs (the kernel zeroes every page
  it hands out), the floor of a dense output
- ``rebuild-cut-jax``: what a new geometry costs: ``cluster_problem`` at the
  start geometry plus a fresh random displacement of 0.01 sigma (a new
  neighbour list, a new problem) and its ``simdiff.hessian``; the compiled
  term Hessian is reused while the pair count stays in its padding bucket
- ``dense-ad-jax``: ``simdiff.hessian(p, method="fwd-rev")``, the dense AD
  Hessian of the all-pairs problem (``N <= --dense-max``)
- ``ase-vib``: ASE's ``Vibrations`` (central differences of forces, 6N force
  calls, step 0.01) with ASE's ``LennardJones`` calculator (``rc = 100``, so
  every pair interacts, as in the all-pairs problem); one timed call
  (``N <= --ase-max``)

Accuracy: the largest deviation from ``struct-jax`` (exact to rounding)
relative to its largest entry; ``struct-cut-*`` are compared with
``struct-cut-jax``, and ``struct-cut-jax`` with the dense AD Hessian of the
switched all-pairs energy where that is measured.

    python -m validation.benchmarks.bench_pes_scaling --sizes 38 150 500 1000 2000 --repeats 5 \
        --threads 1 --profile

``--threads 1`` pins torch's and XLA's intra-op threads: on an oversubscribed
machine torch's default of one thread per core slowed the torch term Hessians
about sixfold (N = 1000 with cutoff: 3.3 s with 2 threads, 0.54 s with 1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable

import numpy as np

from simdiff.evidence._accuracy import rel_error
from simdiff.evidence._timing import Summary, first_call, interleaved

CONFIGS = ("struct-jax", "struct-torch", "struct-cut-jax", "struct-cut-torch",
           "struct-cut-sparse", "rebuild-cut-jax", "dense-ad-jax", "ase-vib", "blocks-jax",
           "blocks-cut-jax", "zeros-touch")  # fmt: skip
#: what each configuration returns (the verdicts name the output an exponent is for)
OUTPUT = {"struct-cut-sparse": "sparse", "blocks-jax": "blocks only",
          "blocks-cut-jax": "blocks only", "zeros-touch": "dense zeros only"}  # fmt: skip


def _builders(n_atoms: int, args: argparse.Namespace) -> dict[str, Callable[[], object]]:
    import simdiff
    from problems.pes import fcc_cluster
    from simdiff.core.config import Config
    from simdiff.pes import cluster_problem, lennard_jones, smooth_cutoff
    from simdiff.pes.hessian_layout import Displacements
    from simdiff.pes.terms import PAIR_CHUNK

    pos = fcc_cluster(n_atoms)
    full = cluster_problem(lennard_jones, pos, name=f"lj{n_atoms}")
    pair = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.5)
    cut = cluster_problem(pair, pos, name=f"lj{n_atoms}-cut")
    rng = np.random.default_rng(n_atoms)

    def rebuild() -> object:
        moved = pos + 0.01 * rng.standard_normal(pos.shape)
        return simdiff.hessian(cluster_problem(pair, moved, name=f"lj{n_atoms}-cut-moved"))

    def blocks(p: simdiff.Problem) -> Callable[[], object]:
        fn = p.fn  # the pair blocks alone, batch by batch, as the assembly computes them
        pos_ = p.x0.reshape(-1, 3)
        disp = Displacements(pos_, fn._first, fn._second)  # per batch, as the assembly

        def run() -> None:  # each batch dropped after use, as the dense assembly does
            for _ in fn.hessians.batches("difference", disp, Config(backend="jax"), PAIR_CHUNK):
                pass

        return run

    n = 3 * n_atoms

    def zeros_touch() -> np.ndarray:
        h = np.zeros((n, n))
        h.reshape(-1)[::512] = 1.0
        return h

    fns: dict[str, Callable[[], object]] = {
        "struct-jax": lambda: simdiff.hessian(full),
        "struct-cut-jax": lambda: simdiff.hessian(cut),
        "struct-cut-sparse": lambda: simdiff.hessian(cut, sparse=True),
        "struct-cut-torch": lambda: simdiff.hessian(cut, backend="torch"),
        "rebuild-cut-jax": rebuild,
    }
    if args.profile:
        fns["blocks-jax"] = blocks(full)
        fns["blocks-cut-jax"] = blocks(cut)
        fns["zeros-touch"] = zeros_touch
    if n_atoms <= args.torch_max:
        fns["struct-torch"] = lambda: simdiff.hessian(full, backend="torch")
    if n_atoms <= args.dense_max:
        fns["dense-ad-jax"] = lambda: simdiff.hessian(full, method="fwd-rev")
    fns["_pairs"] = lambda: (full.fn.n_terms, cut.fn.n_terms)  # type: ignore[assignment]
    return fns


def _ase_vibrations(n_atoms: int) -> tuple[float, np.ndarray]:
    from ase import Atoms
    from ase.calculators.lj import LennardJones
    from ase.vibrations import Vibrations

    from problems.pes import fcc_cluster

    atoms = Atoms(f"Ar{n_atoms}", positions=fcc_cluster(n_atoms))
    atoms.calc = LennardJones(sigma=1.0, epsilon=1.0, rc=100.0)
    with tempfile.TemporaryDirectory() as tmp:

        def run() -> np.ndarray:
            vib = Vibrations(atoms, delta=0.01, nfree=2, name=f"{tmp}/vib")
            vib.run()
            return vib.get_vibrations().get_hessian_2d()

        h, seconds = first_call(run)
        return seconds, h


def _dense(h: object) -> np.ndarray:
    return h.toarray() if hasattr(h, "toarray") else np.asarray(h)


def measure(n_atoms: int, args: argparse.Namespace) -> list[dict]:
    fns = _builders(n_atoms, args)
    n_pairs, n_cut = fns.pop("_pairs")()  # type: ignore[misc]
    recs: dict[str, dict] = {}
    results: dict[str, np.ndarray] = {}
    for name, fn in fns.items():
        dense = not name.startswith(("blocks", "zeros"))
        out, first = first_call(lambda fn=fn, dense=dense: _dense(fn()) if dense else fn())
        if dense:
            results[name] = out
        recs[name] = {"config": name, "n_atoms": n_atoms, "first_s": first}
    for name, ts in interleaved(fns, args.repeats).items():
        recs[name]["times"] = ts
    if n_atoms <= args.ase_max:
        t, h = _ase_vibrations(n_atoms)
        results["ase-vib"] = h
        recs["ase-vib"] = {"config": "ase-vib", "n_atoms": n_atoms, "first_s": t, "times": [t]}
    ref, ref_cut = results["struct-jax"], results["struct-cut-jax"]
    out = []
    for name, rec in recs.items():
        base = ref_cut if name.startswith("struct-cut") and name != "struct-cut-jax" else ref
        if name in ("struct-cut-jax", "rebuild-cut-jax") or name not in results:
            rec["rel_err"] = None
        else:
            rec["rel_err"] = rel_error(results[name], base)
        st = Summary.of(rec["times"])
        rec["median_s"], rec["min_s"] = st.median, st.min
        rec["pairs"] = n_cut if "cut" in name else (None if name == "zeros-touch" else n_pairs)
        del rec["times"]
        out.append(rec)
        print(json.dumps(rec), file=sys.stderr, flush=True)
    return out


def _slope(ns: list[int], ts: list[float]) -> float:
    if len(ns) < 2:
        return float("nan")
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


def print_tables(records: list[dict]) -> None:
    by = {(r["config"], r["n_atoms"]): r for r in records}
    sizes = sorted({r["n_atoms"] for r in records})
    print("| N | n = 3N | configuration | pairs | first call (s) | median (s) | min (s) "
          "| max error / max abs H |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for n_atoms in sizes:
        for c in CONFIGS:
            r = by.get((c, n_atoms))
            if r is None:
                continue
            err = "-" if r["rel_err"] is None else f"{r['rel_err']:.1e}"
            if c == "struct-jax":
                err = "(reference)"
            pairs = "-" if r["pairs"] is None else r["pairs"]
            print(f"| {n_atoms} | {3 * n_atoms} | {c} | {pairs} | {r['first_s']:.3g} "
                  f"| {r['median_s']:.3g} | {r['min_s']:.3g} | {err} |")  # fmt: skip
    print()
    print("| configuration | output | sizes | exponent k, median time ~ N^k | k over N >= 500 "
          "| k over N >= 500 of the minima |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for c in CONFIGS:
        ns = [n for n in sizes if (c, n) in by]
        if not ns:
            continue
        k = _slope(ns, [by[(c, n)]["median_s"] for n in ns])
        big = [n for n in ns if n >= 500]
        k_big = _slope(big, [by[(c, n)]["median_s"] for n in big])
        k_min = _slope(big, [by[(c, n)]["min_s"] for n in big])
        out = OUTPUT.get(c, "dense")
        print(f"| {c} | {out} | {', '.join(map(str, ns))} | {k:.2f} | {k_big:.2f} | {k_min:.2f} |")
    print()
    print("| N | ASE Vibrations time / struct-jax median | ASE max error / max abs H |")
    print("|---|---|---|")
    for n_atoms in sizes:
        if ("ase-vib", n_atoms) in by:
            a, s = by[("ase-vib", n_atoms)], by[("struct-jax", n_atoms)]
            print(f"| {n_atoms} | {a['median_s'] / s['median_s']:.0f}x | {a['rel_err']:.1e} |")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[38, 150, 500, 1000, 2000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dense-max", type=int, default=150, help="largest N for dense AD")
    parser.add_argument("--torch-max", type=int, default=1000, help="largest N, torch all pairs")
    parser.add_argument("--ase-max", type=int, default=150, help="largest N for ASE Vibrations")
    parser.add_argument("--threads", type=int, help="intra-op threads for torch and XLA")
    parser.add_argument("--profile", action="store_true",
                        help="also time the pair blocks alone and dense zeros")  # fmt: skip
    args = parser.parse_args(argv)
    if args.threads:  # before JAX is imported (the builders import it)
        os.environ["XLA_FLAGS"] = (f"--xla_cpu_multi_thread_eigen=false "
                                   f"intra_op_parallelism_threads={args.threads}")  # fmt: skip
        import torch

        torch.set_num_threads(args.threads)
    records = []
    for n_atoms in args.sizes:
        records += measure(n_atoms, args)
    print_tables(records)
    return records


if __name__ == "__main__":
    main()
