"""The numbers of docs/pes.md: LJ13 minimum, frequencies, finite-difference checks, saddles.

python -m validation.pes_tutorial
"""

from __future__ import annotations

import time

import numpy as np
import scipy.differentiate

import problems
import simdiff
from problems.pes import LJEnergyNumpy
from simdiff.pes import (
    cubic_force_constants,
    find_minimum,
    find_saddle,
    normal_modes,
)


def main() -> None:
    np.set_printoptions(precision=6, suppress=True)
    p = problems.get("lj13")  # perturbed icosahedron, reduced LJ units
    print("start energy", float(p.evaluate()))

    # 1. minimise with exact Hessians (JAX) and with HVPs only (torch)
    for method, backend in [("trust-exact", "jax"), ("trust-krylov", "torch")]:
        t = time.perf_counter()
        m = find_minimum(p, method=method, backend=backend)
        print(f"{method:12s} {backend:5s} E = {m.energy:.8f}  |g| = {m.grad_norm:.1e}  "
              f"index = {m.index}  iterations = {m.nit}  "
              f"{time.perf_counter() - t:.2f} s")  # fmt: skip
    e_lit = p.meta["global_minimum_energy"]
    print(f"literature {e_lit}, relative difference {abs(m.energy - e_lit) / abs(e_lit):.1e}")
    x = find_minimum(p).x

    # 2. normal modes
    nm = normal_modes(p, x)
    print("rigid-body modes removed:", nm.n_rigid, " vibrational modes:", nm.frequencies.size)
    w = nm.frequencies
    groups = np.split(w, np.flatnonzero(np.diff(w) > 1e-6 * w.max()) + 1)
    print("distinct frequencies (degeneracy):")
    print(", ".join(f"{g.mean():.4f} ({g.size})" for g in groups))
    full = np.linalg.eigvalsh(simdiff.hessian(p, x))
    small = ", ".join(f"{v:.1e}" for v in np.sort(np.abs(full))[:7])
    print("seven smallest |eigenvalues| of the unprojected Hessian:", small)

    # 3. compare with finite differences
    h = simdiff.hessian(p, x)
    ht = simdiff.hessian(p, x, backend="torch")
    res = scipy.differentiate.hessian(LJEnergyNumpy(13), x, initial_step=0.05, order=8,
                                      tolerances={"atol": 1e-9, "rtol": 1e-12})  # fmt: skip
    step = 1e-5
    g = simdiff.grad(p, np.vstack([x + step * np.eye(39), x - step * np.eye(39)]))
    fd_ad = (g[:39] - g[39:]) / (2 * step)
    scale = np.abs(h).max()
    print(f"max |H| = {scale:.3f}")
    print(f"jax vs torch            max abs diff {np.abs(h - ht).max():.1e}")
    print(f"jax vs SciPy FD         max abs diff {np.abs(h - res.ddf).max():.1e} "
          f"(SciPy error estimate max {res.error.max():.1e})")  # fmt: skip
    print(f"jax vs FD of AD grad    max abs diff {np.abs(h - fd_ad).max():.1e}")
    w_fd = normal_modes(p, x, hessian=0.5 * (res.ddf + res.ddf.T)).frequencies
    print(f"frequencies from SciPy FD Hessian: max abs diff {np.abs(w - w_fd).max():.1e}")

    # 4. cubic force constants in mass-weighted normal coordinates
    L = nm.displacements
    phi = cubic_force_constants(p, x, L)
    phi_t = cubic_force_constants(p, x, L, backend="torch")
    print(f"cubic constants: shape {phi.shape}, max |phi| = {np.abs(phi).max():.3f}, "
          f"jax vs torch {np.abs(phi - phi_t).max():.1e}")  # fmt: skip

    # 5. saddles: LJ7 from 0.05 off its minimum (the minimum's softest mode is degenerate),
    # Müller–Brown near the literature saddles
    lj7 = problems.get("lj7")
    m7 = find_minimum(lj7)
    d = np.random.default_rng(2).standard_normal(lj7.n)
    s7 = find_saddle(lj7, m7.x + 0.05 * d / np.linalg.norm(d), mode=0)
    print(f"LJ7 minimum {m7.energy:.6f}; saddle {s7.energy:.6f} index {s7.index} "
          f"after {s7.nit} P-RFO steps, barrier {s7.energy - m7.energy:.6f}")  # fmt: skip
    mb = problems.get("muller-brown")
    for sx, sy, se in mb.meta["saddles"]:
        s = find_saddle(mb, np.array([sx + 0.06, sy - 0.04]))
        print(f"Müller–Brown saddle {s.x} V = {s.energy:.4f} index {s.index} "
              f"(literature ({sx}, {sy}), {se})")  # fmt: skip


if __name__ == "__main__":
    main()
