"""Overhead of simdiff.Derivatives against hand-written framework code.

Times ``Derivatives(problem, backend).hessian`` (``--derivative grad``: ``.grad``)
against ``jax.jit(jax.hessian(f))`` and ``torch.func.hessian(f)`` written
directly in each framework, on a Lennard-Jones cluster energy, side by side in
one interleaved run (median of repeats).  simdiff is timed at a point of the
framework's own arrays (as the hand-written code), at a numpy point (the
result a numpy array: the hand-written code's twin converts its input and
output too) and with ``check_finite=False``.  Prints a markdown table of
steady-state times, the ratio to the hand-written code and the difference
per call in microseconds (what simdiff's wrapper adds: for a small problem
the whole of it).

    python -m validation.benchmarks.bench_core --atoms 38 --repeats 30
    python -m validation.benchmarks.bench_core --atoms 2 --derivative grad --repeats 30
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import torch

import simdiff
from simdiff.evidence._timing import Summary, interleaved

jax.config.update("jax_enable_x64", True)  # before any jax array is made


def lattice(n_atoms: int, spacing: float = 1.12, seed: int = 0) -> np.ndarray:
    """First ``n_atoms`` points of a cubic lattice, slightly perturbed: a compact cluster."""
    side = int(np.ceil(n_atoms ** (1 / 3)))
    pts = np.array([(i, j, k) for i in range(side) for j in range(side) for k in range(side)])
    order = np.argsort(np.linalg.norm(pts - pts.mean(0), axis=1), kind="stable")
    rng = np.random.default_rng(seed)
    return (spacing * pts[order[:n_atoms]] + 0.03 * rng.standard_normal((n_atoms, 3))).ravel()


def lj_energy(x, ops):
    """Lennard-Jones cluster energy (reduced units) over all pairs i < j."""
    r = ops.reshape(x, (-1, 3))
    d = r[:, None, :] - r[None, :, :]
    iu = np.triu_indices(r.shape[0], 1)
    d2 = ops.sum(d * d, axis=-1)[iu]
    inv6 = 1.0 / d2**3
    return ops.sum(4.0 * (inv6 * inv6 - inv6))


def lj_jax(x):
    r = jnp.reshape(x, (-1, 3))
    d = r[:, None, :] - r[None, :, :]
    iu = np.triu_indices(r.shape[0], 1)
    d2 = jnp.sum(d * d, axis=-1)[iu]
    inv6 = 1.0 / d2**3
    return jnp.sum(4.0 * (inv6 * inv6 - inv6))


def lj_torch(x):
    r = torch.reshape(x, (-1, 3))
    d = r[:, None, :] - r[None, :, :]
    iu = torch.triu_indices(r.shape[0], r.shape[0], 1)
    d2 = torch.sum(d * d, dim=-1)[iu[0], iu[1]]
    inv6 = 1.0 / d2**3
    return torch.sum(4.0 * (inv6 * inv6 - inv6))


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atoms", type=int, default=38)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--derivative", choices=("hessian", "grad"), default="hessian")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    x0 = lattice(args.atoms)
    p = simdiff.Problem(lj_energy, x0=x0, name=f"lj{args.atoms}")
    xj, xt = jnp.asarray(x0), torch.from_numpy(x0.copy())
    dj = simdiff.Derivatives(p, backend="jax")
    dt = simdiff.Derivatives(p, backend="torch")
    djf = simdiff.Derivatives(p, backend="jax", check_finite=False)
    dtf = simdiff.Derivatives(p, backend="torch", check_finite=False)
    d = args.derivative
    hand_jax = jax.jit(getattr(jax, d)(lj_jax))
    hand_torch = getattr(torch.func, d)(lj_torch)
    hand = {"jax": f"jax: jax.jit(jax.{d}(f))", "torch": f"torch: torch.func.{d}(f)"}
    configs = {
        hand["jax"]: lambda: hand_jax(xj).block_until_ready(),
        f"jax: simdiff Derivatives.{d}": lambda: getattr(dj, d)(xj).block_until_ready(),
        "jax: simdiff, check_finite=False": lambda: getattr(djf, d)(xj).block_until_ready(),
        "jax: hand-written, numpy in and out": lambda: np.asarray(hand_jax(x0)),
        "jax: simdiff, numpy point": lambda: getattr(dj, d)(x0),
        hand["torch"]: lambda: hand_torch(xt),
        f"torch: simdiff Derivatives.{d}": lambda: getattr(dt, d)(xt),
        "torch: simdiff, check_finite=False": lambda: getattr(dtf, d)(xt),
        "torch: hand-written, numpy in and out": lambda: hand_torch(torch.from_numpy(x0)).numpy(),
        "torch: simdiff, numpy point": lambda: getattr(dt, d)(x0),
    }
    for fn in configs.values():  # first calls (compile) out of the way
        fn()
    np.testing.assert_allclose(np.asarray(getattr(dj, d)(xj)), getattr(dt, d)(xt).numpy(),
                               rtol=1e-10)  # fmt: skip
    # interleaved, so load changes hit every config alike; shuffled, because the
    # config that runs first in a round is measurably slower (cache effects)
    times = interleaved(configs, args.repeats)
    rows = []
    print(f"{d} of LJ-{args.atoms} ({3 * args.atoms} inputs), median of {args.repeats}")
    print("| configuration | median ms | ratio to hand-written | difference (us) |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        med = Summary.of(ts).median
        ref = Summary.of(times[hand[name.split(":")[0]]]).median
        rows.append({"config": name, "median_s": med, "ratio": med / ref})
        print(f"| {name} | {1e3 * med:.4g} | {med / ref:.3f} | {1e6 * (med - ref):.0f} |")
    return rows


if __name__ == "__main__":
    main()
