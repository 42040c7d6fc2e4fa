"""MD under ``jax.jit`` with the fixed-capacity neighbour list against dense all pairs.

fcc Lennard-Jones crystals in reduced units (a = 1.5496, the lattice-sum
minimum), ``smooth_cutoff(lennard_jones, r_on=1.8, r_cut=2.0)``, skin 0.3,
rattled by 0.02 and started with Gaussian velocities (T ~ 0.6,
``default_rng(0)``).  NVE velocity Verlet, ``dt = 0.004``, in jitted
``lax.scan`` chunks of 100 steps driven by :meth:`NeighbourList.advance`.

- *list*: :class:`simdiff.pes.NeighbourList` (rebuilt inside the compiled
  step when an atom has moved more than skin / 2).
- *dense*: :func:`simdiff.pes.cluster_energy`, every minimum-image pair.

Printed per size: first chunk (trace + compile + run) and steady state per
step (median over chunks), rebuilds, traces, the total-energy drift, and the
largest difference between the list's energies and the dense energies at the
same positions (the list trajectory re-evaluated densely).

    python -m validation.benchmarks.bench_pes_neighbours [--sizes 3 4 5] [--steps 1000]
"""

from __future__ import annotations

import argparse

import numpy as np

from simdiff.evidence._timing import first_call


def _crystal(cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from ase.build import bulk

    atoms = bulk("Ar", "fcc", a=1.5496, cubic=True).repeat(cells)
    rng = np.random.default_rng(0)
    n = len(atoms)
    x = (atoms.positions + 0.02 * rng.standard_normal((n, 3))).ravel()
    v = 0.8 * rng.standard_normal((n, 3))
    return x, (v - v.mean(axis=0)).ravel(), np.diag(atoms.cell[:]).copy()


def _chunk(energy, update, steps: int, dt: float, traces: list[int]):
    import jax

    @jax.jit
    def chunk(carry, nbrs):
        traces.append(1)

        def step(c, _):
            x, v, f, nb = c
            v = v + 0.5 * dt * f
            x = x + dt * v
            nb = update(x, nb)
            e, g = jax.value_and_grad(energy)(x, nb)
            v = v - 0.5 * dt * g
            return (x, v, -g, nb), (x, e, 0.5 * (v @ v))

        x, v = carry
        f = -jax.grad(energy)(x, nbrs)
        (x, v, _, nb), (xs, e, k) = jax.lax.scan(step, (x, v, f, nbrs), None, length=steps)
        return (x, v, xs, e, k), nb

    return chunk


def run(cells: int, steps: int, chunk_steps: int = 100, dt: float = 0.004) -> dict[str, float]:
    import jax
    import jax.numpy as jnp

    import simdiff
    from simdiff.pes import NeighbourList, cluster_energy, lennard_jones, smooth_cutoff

    pair = smooth_cutoff(lennard_jones, r_on=1.8, r_cut=2.0)
    x0, v0, box = _crystal(cells)
    n = x0.size // 3
    ops = simdiff.get_ops("jax")
    nl = NeighbourList(pair, box=box, skin=0.3)

    def dense(x, _):
        return cluster_energy(x, ops, pair=pair, n_particles=n, box=box)

    out: dict[str, float] = {"atoms": n}
    for name, energy, update, nbrs in (
        ("list", nl.energy, nl.update, nl.allocate(x0)),
        ("dense", dense, lambda x, nb: nb, jnp.zeros(())),
    ):
        traces: list[int] = []
        chunk = _chunk(energy, update, chunk_steps, dt, traces)
        carry = (jnp.asarray(x0), jnp.asarray(v0))
        times, xs, es, ks = [], [], [], []
        for _ in range(steps // chunk_steps):

            def run(carry=carry, nbrs=nbrs, chunk=chunk, name=name):
                out = nl.advance(chunk, carry, nbrs) if name == "list" else chunk(carry, nbrs)
                jax.block_until_ready(out[0][3])
                return out

            ((x, v, xk, ek, kk), nbrs), seconds = first_call(run)
            times.append(seconds)
            carry = (x, v)
            xs.append(xk)
            es.append(ek)
            ks.append(kk)
        e = np.asarray(jnp.concatenate(es))
        total = e + np.asarray(jnp.concatenate(ks))
        out[f"{name}_first_s"] = times[0]
        out[f"{name}_step_us"] = 1e6 * float(np.median(times[1:])) / chunk_steps
        out[f"{name}_drift"] = float(np.abs(total - total[0]).max())
        out[f"{name}_traces"] = len(traces)
        if name == "list":
            out["rebuilds"] = int(np.asarray(nbrs.rebuilds))
            out["capacity"] = nbrs.capacity
            out["reallocations"] = nl.reallocations
            # the list's energies against dense all pairs at the same positions
            at = jax.jit(jax.vmap(lambda y: dense(y, None)))(jnp.concatenate(xs))
            out["energy_diff"] = float(np.abs(e - np.asarray(at)).max())
            out["energy_scale"] = float(np.abs(e).max())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 4, 5],
                        help="fcc cubic cells per side (4 atoms each)")  # fmt: skip
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    print(
        "atoms  list: first s  us/step  rebuilds  traces  drift     | dense: first s  "
        "us/step  drift     | speed-up  max |E_list - E_dense| / |E|"
    )
    for cells in args.sizes:
        r = run(cells, args.steps)
        speedup = r["dense_step_us"] / r["list_step_us"]
        relative = r["energy_diff"] / r["energy_scale"]
        print(f"{r['atoms']:5d}  {r['list_first_s']:13.2f}  {r['list_step_us']:7.1f}  "
              f"{r['rebuilds']:8d}  {r['list_traces']:6d}  {r['list_drift']:.2e}  | "
              f"{r['dense_first_s']:14.2f}  {r['dense_step_us']:7.1f}  {r['dense_drift']:.2e}  | "
              f"{speedup:8.2f}  {relative:.1e}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
