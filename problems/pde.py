"""PDE entries: heat equation (Fourier series), Burgers (Cole–Hopf), Kuramoto–Sivashinsky.

The heat and Burgers entries have closed-form solutions, hence exact values
and derivatives in ``exact``; they are solved spectrally with ETDRK4, whose
error here is far below the tolerances in ``check_options.reference_rtol``.
"""

from __future__ import annotations

import numpy as np

import simdiff
from simdiff.pde import Grid, burgers_equation, diffusion_equation, kuramoto_sivashinsky, solve

# --------------------------------------------------------------------------- heat
# u_t = kappa u_xx on [0, 2 pi), u0 = sum_k a_k cos(k x) + b_k sin(k x), k = 1..m:
# u(x, T) = sum_k e^{-kappa k^2 T} (a_k cos kx + b_k sin kx), and on a grid that
# resolves the modes 0.5 * mean(u(T)^2) = 0.25 * sum_k (a_k^2 + b_k^2) e^{-2 kappa k^2 T}.

HEAT_N, HEAT_T, HEAT_KAPPA = 64, 0.5, 0.3
HEAT_K = np.arange(1, 5)
HEAT_MODES = np.array([1.0, -0.5, 0.25, 0.4, 0.8, 0.3, -0.6, 0.1])  # a_1..a_4, b_1..b_4
_HEAT_CITE = "Fourier (1822), Theorie analytique de la chaleur; separation of variables"


def _heat_grid() -> Grid:
    return Grid((HEAT_N,), (2 * np.pi,))


def _heat_basis() -> np.ndarray:
    x = _heat_grid().coords()[0]
    return np.concatenate([np.cos(np.outer(x, HEAT_K)), np.sin(np.outer(x, HEAT_K))], axis=1)


def _heat_weights(kappa: float) -> np.ndarray:
    return np.tile(np.exp(-2.0 * kappa * HEAT_K**2 * HEAT_T), 2)


def _heat_solve(u0, kappa, ops):
    return solve(diffusion_equation(), _heat_grid(), u0, ops, t_final=HEAT_T, n_steps=10,
                 stepper="etdrk4", params={"diffusivity": kappa})  # fmt: skip


def heat_modes() -> simdiff.Problem:
    """0.5*mean(u(T)^2) of the periodic heat equation as a function of the initial modes."""
    basis = _heat_basis()

    def fn(x, ops):
        u = _heat_solve(ops.matmul(ops.asarray(basis), x), HEAT_KAPPA, ops)
        return 0.5 * ops.mean(u * u)

    w = _heat_weights(HEAT_KAPPA)
    return simdiff.Problem(
        fn, x0=HEAT_MODES, name="heat_modes",
        exact={"value": lambda x: 0.25 * np.sum(w * x**2), "grad": lambda x: 0.5 * w * x,
               "hessian": lambda x: np.diag(0.5 * w)},
        meta={"tags": ("pde", "closed-form"), "citation": _HEAT_CITE,
              "setup": {"N": HEAT_N, "T": HEAT_T, "kappa": HEAT_KAPPA, "k": HEAT_K}},
        check_options=simdiff.CheckOptions(reference_rtol=1e-10),
    )  # fmt: skip


def _heat_kappa_exact(order: int):
    q = HEAT_MODES**2
    k2 = np.tile(HEAT_K**2, 2).astype(float)

    def f(x):
        w = 0.25 * q * _heat_weights(float(x[0])) * (-2.0 * k2 * HEAT_T) ** order
        return np.sum(w) if order == 0 else (np.array([np.sum(w)]) if order == 1
                                             else np.array([[np.sum(w)]]))  # fmt: skip

    return f


def heat_diffusivity() -> simdiff.Problem:
    """0.5*mean(u(T)^2) of the periodic heat equation as a function of the diffusivity."""
    basis = _heat_basis()

    def fn(x, ops):
        u = _heat_solve(ops.asarray(basis @ HEAT_MODES), x[0], ops)
        return 0.5 * ops.mean(u * u)

    return simdiff.Problem(
        fn, x0=np.array([HEAT_KAPPA]), name="heat_diffusivity",
        exact={"value": _heat_kappa_exact(0), "grad": _heat_kappa_exact(1),
               "hessian": _heat_kappa_exact(2)},
        meta={"tags": ("pde", "closed-form"), "citation": _HEAT_CITE},
        check_options=simdiff.CheckOptions(reference_rtol=1e-10),
    )  # fmt: skip


# --------------------------------------------------------------------------- Burgers
# Cole–Hopf: u = -2 nu phi_x / phi with phi_t = nu phi_xx.  phi = A0 + A1 e^{-nu t} cos x
# gives u(x, t) = 2 nu A1 e^{-nu t} sin x / (A0 + A1 e^{-nu t} cos x), 2 pi-periodic.

BURGERS_A0, BURGERS_A1, BURGERS_NU, BURGERS_T = 1.0, 0.9, 0.2, 1.0
BURGERS_N, BURGERS_STEPS = 128, 100
_BURGERS_CITE = ("Cole (1951), Q. Appl. Math. 9, 225; Hopf (1950), Comm. Pure Appl. Math. 3, 201; "
                 "Whitham (1974), Linear and Nonlinear Waves, ch. 4")  # fmt: skip


def cole_hopf(x: np.ndarray, t: float, nu: float) -> np.ndarray:
    """The Cole–Hopf solution above (numpy)."""
    e = BURGERS_A1 * np.exp(-nu * t)
    return 2.0 * nu * e * np.sin(x) / (BURGERS_A0 + e * np.cos(x))


def cole_hopf_dnu(x: np.ndarray, t: float, nu: float) -> np.ndarray:
    """d/dnu of :func:`cole_hopf` (closed form, by the quotient rule)."""
    e = BURGERS_A1 * np.exp(-nu * t)
    num, den = 2.0 * nu * e * np.sin(x), BURGERS_A0 + e * np.cos(x)
    dnum = 2.0 * e * np.sin(x) * (1.0 - nu * t)
    dden = -t * e * np.cos(x)
    return (dnum * den - num * dden) / den**2


def burgers_colehopf() -> simdiff.Problem:
    """0.5*mean(u(T)^2) of viscous Burgers over the Cole–Hopf family u0(nu), as a function of nu.

    Both the initial field and the evolution depend on nu, so the derivative
    runs through the initial condition and the solver.
    """
    grid = Grid((BURGERS_N,), (2 * np.pi,))
    xs = grid.coords()[0]
    sin, cos = np.sin(xs), np.cos(xs)

    def fn(x, ops):
        nu = x[0]
        u0 = 2.0 * nu * BURGERS_A1 * ops.asarray(sin) / (BURGERS_A0 + BURGERS_A1 * ops.asarray(cos))
        u = solve(burgers_equation(), grid, u0, ops, t_final=BURGERS_T, n_steps=BURGERS_STEPS,
                  stepper="etdrk4", params={"viscosity": nu})  # fmt: skip
        return 0.5 * ops.mean(u * u)

    def value(x):
        return 0.5 * np.mean(cole_hopf(xs, BURGERS_T, x[0]) ** 2)

    def grad(x):
        nu = x[0]
        return np.array([np.mean(cole_hopf(xs, BURGERS_T, nu) * cole_hopf_dnu(xs, BURGERS_T, nu))])

    return simdiff.Problem(
        fn, x0=np.array([BURGERS_NU]), name="burgers_colehopf",
        exact={"value": value, "grad": grad},
        meta={"tags": ("pde", "closed-form"), "citation": _BURGERS_CITE,
              "setup": {"N": BURGERS_N, "T": BURGERS_T, "A0": BURGERS_A0, "A1": BURGERS_A1}},
        check_options=simdiff.CheckOptions(reference_rtol=1e-8),
    )  # fmt: skip


# --------------------------------------------------------------------------- KS

KS_N, KS_T, KS_STEPS = 128, 20.0, 80


def ks_field() -> simdiff.Problem:
    """KS on [0, 32 pi) with u0 = cos(x/16)(1 + sin(x/16)), ETDRK4 with h = 1/4
    (Kassam & Trefethen's setup, to T = 20): 0.5*mean(u(T)^2) as a function of u0."""
    grid = Grid((KS_N,), (32 * np.pi,))
    return kuramoto_sivashinsky(
        grid, t_final=KS_T, n_steps=KS_STEPS, stepper="etdrk4", name="ks_field",
        meta={"tags": ("pde", "large"),
              "citation": "Kassam & Trefethen (2005), SIAM J. Sci. Comput. 26, 1214, fig. 3.1",
              "setup": {"N": KS_N, "T": KS_T, "h": KS_T / KS_STEPS, "L": 32 * np.pi}},
    )  # fmt: skip


ENTRIES = {
    "heat_modes": heat_modes,
    "heat_diffusivity": heat_diffusivity,
    "burgers_colehopf": burgers_colehopf,
    "ks_field": ks_field,
}
