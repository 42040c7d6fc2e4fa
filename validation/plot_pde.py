"""Figures and numbers of docs/pde.md (sensitivities of PDE solutions).

Usage::

    python validation/plot_pde.py            # writes docs/img/pde_ks_sensitivity.png,
                                             # docs/img/pde_burgers_viscosity.png
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import problems  # noqa: E402
import simdiff  # noqa: E402
from simdiff.pde import Grid, fisher_kpp, solve  # noqa: E402

IMG = ROOT / "docs" / "img"


def ks_figure() -> None:
    p = problems.get("ks_field")  # N = 128, T = 20, ETDRK4 h = 1/4
    setup = p.meta["setup"]
    grid = Grid((setup["N"],), (setup["L"],))
    x = grid.coords()[0]
    eq = simdiff.pde.kuramoto_sivashinsky_equation()
    uT = solve(eq, grid, p.x0, simdiff.get_ops("numpy"), t_final=setup["T"],
               n_steps=int(setup["T"] / setup["h"]), stepper="etdrk4")  # fmt: skip
    g_jax = simdiff.grad(p, backend="jax")
    g_torch = simdiff.grad(p, backend="torch")
    v = np.random.default_rng(0).standard_normal(p.n)
    h = 1e-4
    f = [p.evaluate(p.x0 + s * h * v) for s in (-2, -1, 1, 2)]
    fd = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
    print(f"KS: J = {p.evaluate():.10f}; grad.v = {g_jax @ v:.12f}, 4th-order FD = {fd:.12f}; "
          f"max|grad_jax - grad_torch| = {np.abs(g_jax - g_torch).max():.1e}")  # fmt: skip
    fig, ax = plt.subplots(2, 1, figsize=(6.4, 4.6), sharex=True, dpi=90)
    ax[0].plot(x, p.x0, label="$u_0$")
    ax[0].plot(x, uT, label=f"$u(T={setup['T']:g})$")
    ax[0].legend(loc="upper right", fontsize=8)
    ax[0].set_ylabel("u")
    ax[1].plot(x, g_jax / grid.dx, color="C3")
    ax[1].set_ylabel(r"$\delta J / \delta u_0(x)$")
    ax[1].set_xlabel("x")
    ax[0].set_title(r"Kuramoto–Sivashinsky: sensitivity of $J = \frac{1}{2}\overline{u(T)^2}$")
    fig.tight_layout()
    fig.savefig(IMG / "pde_ks_sensitivity.png")


def burgers_figure() -> None:
    from problems.pde import burgers_colehopf

    p = burgers_colehopf()
    nus = np.linspace(0.05, 0.5, 10)
    d = simdiff.Derivatives(p, backend="jax")
    ad = np.array([d.grad(np.array([nu]))[0] for nu in nus])
    exact = np.array([p.exact["grad"](np.array([nu]))[0] for nu in nus])
    print(f"Burgers/Cole-Hopf: max relative error of dJ/dnu over nu in [0.05, 0.5]: "
          f"{np.max(np.abs(ad - exact) / np.abs(exact)):.1e}")  # fmt: skip
    fine = np.linspace(0.05, 0.5, 200)
    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=90)
    ax.plot(fine, [p.exact["grad"](np.array([nu]))[0] for nu in fine], label="Cole–Hopf (exact)")
    ax.plot(nus, ad, "o", label="AD through ETDRK4 (jax)")
    ax.set_xlabel(r"viscosity $\nu$")
    ax.set_ylabel(r"$dJ/d\nu$")
    ax.legend(fontsize=8)
    ax.set_title(
        r"Burgers: $J(\nu) = \frac{1}{2}\overline{u(T;\nu)^2}$, $u_0$ from the same family"
    )
    fig.tight_layout()
    fig.savefig(IMG / "pde_burgers_viscosity.png")


def fisher_hessian() -> None:
    g = Grid((64,), (40.0,))
    p = fisher_kpp(g, diffusivity=1.0, rate=1.0, t_final=5.0, n_steps=100, method="fd",
                   order=4, wrt="params")  # fmt: skip
    for backend in ("jax", "torch"):
        print(f"Fisher-KPP ({backend}): grad = {simdiff.grad(p, backend=backend)}, "
              f"hessian = {simdiff.hessian(p, backend=backend).tolist()}")  # fmt: skip


if __name__ == "__main__":
    IMG.mkdir(parents=True, exist_ok=True)
    ks_figure()
    burgers_figure()
    fisher_hessian()
