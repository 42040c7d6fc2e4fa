"""Local minimisation of the LJ38 and LJ55 global minima, perturbed, with the exact Hessian.

LJ38 is the fcc truncated octahedron (``ase.cluster.Octahedron``, length 4,
cutoff 1), LJ55 the Mackay icosahedron (``ase.cluster.Icosahedron``, 3
shells), scaled to a nearest-neighbour distance of 2^(1/6) sigma and displaced
by 0.02 sigma times a standard normal per coordinate (``default_rng(0)``).
``simdiff.pes.find_minimum`` (trust-exact, rigid-body modes projected out)
against the Cambridge Cluster Database energies (6 decimals).  One run each,
wall time including JAX compilation.

    python -m validation.benchmarks.bench_pes_minimise
"""

from __future__ import annotations

import numpy as np

from simdiff.evidence._timing import first_call

#: Cambridge Cluster Database global-minimum energies (epsilon = sigma = 1).
CCD = {"LJ38": -173.928427, "LJ55": -279.248470}


def structures() -> dict[str, np.ndarray]:
    from ase.cluster import Icosahedron, Octahedron

    out = {}
    for name, atoms in (
        ("LJ38", Octahedron("Ar", length=4, cutoff=1)),
        ("LJ55", Icosahedron("Ar", noshells=3)),
    ):
        p = atoms.get_positions()
        out[name] = p / np.linalg.norm(p[0] - p[1:], axis=1).min() * 2 ** (1 / 6)
    return out


def run(scale: float = 0.02) -> list[dict]:
    from simdiff.pes import cluster_problem, find_minimum, lennard_jones

    rng = np.random.default_rng(0)
    rows = []
    for name, p in structures().items():
        start = p + scale * rng.standard_normal(p.shape)
        res, wall = first_call(lambda s=start: find_minimum(cluster_problem(lennard_jones, s)))
        rows.append({"system": name, "converged": res.converged, "nit": res.nit,
                     "energy": res.energy, "ccd": CCD[name], "grad_norm": res.grad_norm,
                     "index": res.index, "wall_s": wall})  # fmt: skip
    return rows


def main() -> None:
    print("| system | converged | iterations | energy | CCD | gradient norm | index | wall (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in run():
        head = f"| {r['system']} | {r['converged']} | {r['nit']} | {r['energy']:.7f} | "
        print(head + f"{r['ccd']:.6f} | {r['grad_norm']:.1e} | {r['index']} | {r['wall_s']:.2f} |")


if __name__ == "__main__":
    main()
