"""Global sensitivity test functions with analytic indices, and a 4-parameter ODE model.

- Ishigami (Ishigami & Homma 1990), ``a=7, b=0.1``, inputs uniform on
  ``[-pi, pi]^3``: analytic variance, total Sobol indices and DGSM.
- Sobol G-function (Saltelli & Sobol 1995), inputs uniform on ``[0, 1]^d``:
  analytic total Sobol indices and DGSM.
- Lotka–Volterra with 4 parameters ``(alpha, beta, delta, gamma)`` integrated
  by fixed-step RK4 (:func:`simdiff.ode.rk_integrate`): observations of both
  species (vector output) and the time-averaged prey (scalar output).  It
  stands in for the ODE catalogue's model until that lands.
- A least-squares fit of exponential decay ``y(t) = A exp(-k1 k2 t)`` in
  ``(A, log k1, log k2)``: only ``A`` and ``log k1 + log k2`` are identifiable,
  the direction ``log k1 - log k2`` is not (a flat profile likelihood).

``meta["distributions"]`` gives the input distributions the indices refer to,
as tuples accepted by :func:`simdiff.sensitivity.as_distributions`.
"""

from __future__ import annotations

import math

import numpy as np

import simdiff
from simdiff.ode import rk_integrate

PI = math.pi

# --------------------------------------------------------------------------- Ishigami


def ishigami_fn(x, ops, a: float = 7.0, b: float = 0.1):
    """f = sin x1 + a sin^2 x2 + b x3^4 sin x1."""
    return ops.sin(x[0]) + a * ops.sin(x[1]) ** 2 + b * x[2] ** 4 * ops.sin(x[0])


def ishigami_indices(a: float = 7.0, b: float = 0.1) -> dict[str, np.ndarray | float]:
    """Analytic variance, first-order and total Sobol indices and DGSM of Ishigami on U(-pi, pi)^3.

    ``V = a^2/8 + b pi^4/5 + b^2 pi^8/18 + 1/2``, ``V1 = (1 + b pi^4/5)^2/2``,
    ``V2 = a^2/8``, ``V13 = 8 b^2 pi^8/225``; ``nu1 = (1 + 2 b pi^4/5 + b^2 pi^8/9)/2``,
    ``nu2 = a^2/2``, ``nu3 = 8 b^2 pi^6/7``.
    """
    v = a**2 / 8 + b * PI**4 / 5 + b**2 * PI**8 / 18 + 0.5
    v1 = 0.5 * (1 + b * PI**4 / 5) ** 2
    v2 = a**2 / 8
    v13 = 8 * b**2 * PI**8 / 225
    return {
        "variance": v,
        "first_order": np.array([v1, v2, 0.0]) / v,
        "total": np.array([v1 + v13, v2, v13]) / v,
        "dgsm": np.array(
            [0.5 * (1 + 2 * b * PI**4 / 5 + b**2 * PI**8 / 9), a**2 / 2, 8 * b**2 * PI**6 / 7]
        ),
    }


def _ishigami_grad(x: np.ndarray, a: float, b: float) -> np.ndarray:
    return np.array(
        [
            np.cos(x[0]) * (1 + b * x[2] ** 4),
            2 * a * np.sin(x[1]) * np.cos(x[1]),
            4 * b * x[2] ** 3 * np.sin(x[0]),
        ]
    )


def ishigami(a: float = 7.0, b: float = 0.1) -> simdiff.Problem:
    """The Ishigami function (3 inputs uniform on [-pi, pi])."""
    return simdiff.Problem(
        lambda x, ops: ishigami_fn(x, ops, a, b),
        x0=np.array([0.1, 0.2, 0.3]),
        name="ishigami",
        exact={
            "value": lambda x: np.sin(x[0]) + a * np.sin(x[1]) ** 2 + b * x[2] ** 4 * np.sin(x[0]),
            "grad": lambda x: _ishigami_grad(np.asarray(x), a, b),
        },
        meta={
            "tags": ("sensitivity", "closed-form", "small"),
            "distributions": [("uniform", -PI, PI)] * 3,
            **ishigami_indices(a, b),
            "citation": "Ishigami & Homma (1990), Proc. ISUMA 90, 398-403; DGSM: Sobol & "
            "Kucherenko (2009), Math. Comput. Simul. 79, 3009",
        },
    )


# --------------------------------------------------------------------------- Sobol G

SOBOL_G_A = (0.0, 1.0, 4.5, 9.0, 99.0, 99.0, 99.0, 99.0)


def sobol_g_fn(x, ops, a: tuple[float, ...] = SOBOL_G_A):
    """G = prod_i (|4 x_i - 2| + a_i) / (1 + a_i)."""
    av = ops.asarray(np.asarray(a, dtype=np.float64))
    return ops.prod((ops.abs(4.0 * x - 2.0) + av) / (1.0 + av))


def sobol_g_indices(a: tuple[float, ...] = SOBOL_G_A) -> dict[str, np.ndarray | float]:
    """Analytic variance, total Sobol indices and DGSM of the G-function on U(0, 1)^d.

    ``V_i = 1 / (3 (1 + a_i)^2)``, ``V = prod(1 + V_i) - 1``,
    ``S_T,i = V_i prod_{j != i} (1 + V_j) / V``,
    ``nu_i = 16 / (1 + a_i)^2 prod_{j != i} (1 + V_j)``.
    """
    av = np.asarray(a, dtype=np.float64)
    vi = 1.0 / (3.0 * (1.0 + av) ** 2)
    v = float(np.prod(1.0 + vi) - 1.0)
    others = np.array([np.prod(np.delete(1.0 + vi, i)) for i in range(len(av))])
    return {
        "variance": v,
        "first_order": vi / v,
        "total": vi * others / v,
        "dgsm": 16.0 / (1.0 + av) ** 2 * others,
    }


def _sobol_g_value(x: np.ndarray, a: tuple[float, ...]) -> float:
    av = np.asarray(a)
    return float(np.prod((np.abs(4 * x - 2) + av) / (1 + av)))


def _sobol_g_grad(x: np.ndarray, a: tuple[float, ...]) -> np.ndarray:
    av = np.asarray(a)
    g = (np.abs(4 * x - 2) + av) / (1 + av)
    dg = 4 * np.sign(4 * x - 2) / (1 + av)
    return np.array([dg[i] * np.prod(np.delete(g, i)) for i in range(len(av))])


def sobol_g(a: tuple[float, ...] = SOBOL_G_A) -> simdiff.Problem:
    """The Sobol G-function with coefficients ``a`` (default 8 inputs, a = 0, 1, 4.5, 9, 99 x4)."""
    a = tuple(float(v) for v in a)
    return simdiff.Problem(
        lambda x, ops: sobol_g_fn(x, ops, a),
        x0=np.full(len(a), 0.3),
        name="sobol_g",
        exact={
            "value": lambda x: _sobol_g_value(np.asarray(x), a),
            "grad": lambda x: _sobol_g_grad(np.asarray(x), a),
        },
        meta={
            "tags": ("sensitivity", "closed-form", "small"),
            "distributions": [("uniform", 0.0, 1.0)] * len(a),
            "a": a,
            **sobol_g_indices(a),
            "citation": "Saltelli & Sobol (1995), Reliab. Eng. Syst. Saf. 50, 225; DGSM: "
            "Sobol & Kucherenko (2009), Math. Comput. Simul. 79, 3009",
        },
    )


# --------------------------------------------------------------------------- Lotka-Volterra

LV_PARAMS = np.array([1.0, 0.1, 0.075, 1.5])  # alpha, beta, delta, gamma
LV_Y0 = (10.0, 5.0)
LV_T1, LV_STEPS, LV_EVERY = 12.0, 240, 20  # RK4 with h = 0.05; observe every 1.0


def lv_rhs(t, y, p, ops):
    """Prey ``u``, predator ``v``: ``u' = alpha u - beta u v``, ``v' = delta u v - gamma v``."""
    u, v = y[0], y[1]
    return ops.stack([p[0] * u - p[1] * u * v, p[2] * u * v - p[3] * v])


def lv_trajectory(p, ops):
    """States after each of the ``LV_STEPS`` RK4 steps, shape ``(LV_STEPS, 2)``."""
    y0 = ops.asarray(np.array(LV_Y0))
    _, ys = rk_integrate(lv_rhs, y0, 0.0, LV_T1, LV_STEPS, p, ops)
    return ys


def lv_observations_fn(p, ops):
    """Both species at t = 1, 2, ..., 12, flattened: shape (24,) as (u1, v1, u2, v2, ...)."""
    ys = lv_trajectory(p, ops)
    return ops.reshape(ys[LV_EVERY - 1 :: LV_EVERY], (-1,))


def lv_mean_prey_fn(p, ops):
    """Time-averaged prey population over [0, 12] (mean of the RK4 states)."""
    return ops.mean(lv_trajectory(p, ops)[:, 0])


def lv_invariant(u: np.ndarray, v: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The conserved quantity ``delta u - gamma log u + beta v - alpha log v``."""
    return p[2] * u - p[3] * np.log(u) + p[1] * v - p[0] * np.log(v)


_LV_META = {
    "citation": "Lotka (1925), Elements of Physical Biology; Volterra (1926), Nature 118, 558",
    "parameters": ("alpha", "beta", "delta", "gamma"),
    "y0": LV_Y0,
    "invariant": lv_invariant,
    "distributions": [("uniform", 0.8 * v, 1.2 * v) for v in LV_PARAMS],
}


def lotka_volterra_observations() -> simdiff.Problem:
    """Vector output: the 24 observations as a function of the 4 parameters."""
    return simdiff.Problem(
        lv_observations_fn,
        x0=LV_PARAMS.copy(),
        name="lv4_observations",
        meta={"tags": ("sensitivity", "rk4-model", "vector"), **_LV_META},
    )


def lotka_volterra_mean_prey() -> simdiff.Problem:
    """Scalar output: time-averaged prey as a function of the 4 parameters."""
    return simdiff.Problem(
        lv_mean_prey_fn,
        x0=LV_PARAMS.copy(),
        name="lv4_mean_prey",
        meta={"tags": ("sensitivity", "rk4-model"), **_LV_META},
    )


# --------------------------------------------------------------------------- non-identifiable fit

DECAY_TIMES = np.linspace(0.0, 2.0, 12)
DECAY_SIGMA = 0.05
DECAY_TRUE = (2.0, 1.3)  # A, k = k1 k2


def _decay_data() -> np.ndarray:
    a, k = DECAY_TRUE
    noise = np.random.default_rng(30).standard_normal(DECAY_TIMES.shape[0])
    return a * np.exp(-k * DECAY_TIMES) + DECAY_SIGMA * noise


DECAY_DATA = _decay_data()


def decay_product_fit_fn(x, ops):
    """L = 1/2 sum ((A exp(-exp(x1 + x2) t_i) - y_i) / sigma)^2 with x = (A, log k1, log k2)."""
    t = ops.asarray(DECAY_TIMES)
    r = (x[0] * ops.exp(-ops.exp(x[1] + x[2]) * t) - ops.asarray(DECAY_DATA)) / DECAY_SIGMA
    return 0.5 * ops.sum(r**2)


def _decay_parts(x: np.ndarray):
    """Residuals r, Jacobian columns (dr/dA, dr/ds) and second derivatives, s = x1 + x2."""
    a, k, t = x[0], np.exp(x[1] + x[2]), DECAY_TIMES
    e = np.exp(-k * t)
    r = (a * e - DECAY_DATA) / DECAY_SIGMA
    ja, js = e / DECAY_SIGMA, -a * k * t * e / DECAY_SIGMA
    jas = -k * t * e / DECAY_SIGMA
    jss = -a * k * t * e * (1.0 - k * t) / DECAY_SIGMA
    return r, ja, js, jas, jss


def _decay_value(x) -> float:
    r = _decay_parts(np.asarray(x, dtype=np.float64))[0]
    return float(0.5 * r @ r)


def _decay_grad(x) -> np.ndarray:
    r, ja, js, _, _ = _decay_parts(np.asarray(x, dtype=np.float64))
    gs = r @ js
    return np.array([r @ ja, gs, gs])


def _decay_hessian(x) -> np.ndarray:
    r, ja, js, jas, jss = _decay_parts(np.asarray(x, dtype=np.float64))
    haa, has, hss = ja @ ja, ja @ js + r @ jas, js @ js + r @ jss
    return np.array([[haa, has, has], [has, hss, hss], [has, hss, hss]])


def decay_product_fit() -> simdiff.Problem:
    """Least-squares misfit of y = A exp(-k1 k2 t): the Hessian is singular in (0, 1, -1)."""
    return simdiff.Problem(
        decay_product_fit_fn,
        x0=np.array([1.5, 0.0, 0.0]),
        name="decay_product_fit",
        exact={"value": _decay_value, "grad": _decay_grad, "hessian": _decay_hessian},
        meta={
            "tags": ("sensitivity", "closed-form", "small", "optimisation", "non-identifiable"),
            "parameters": ("A", "log_k1", "log_k2"),
            "times": DECAY_TIMES,
            "data": DECAY_DATA,
            "sigma": DECAY_SIGMA,
            "true_values": {"A": DECAY_TRUE[0], "k1 k2": DECAY_TRUE[1]},  # of the data
            "identifiable": "A and log k1 + log k2 (the rate k1 k2)",
            "non_identifiable": "log k1 - log k2: the objective is constant along (0, 1, -1), "
            "so the Hessian is singular everywhere and the profiles of log_k1 and log_k2 are flat",
            "citation": "structural non-identifiability of a product of rates: Raue et al. "
            "(2009), Bioinformatics 25, 1923",
        },
    )


ENTRIES = {
    "ishigami": ishigami,
    "sobol_g": sobol_g,
    "lv4_observations": lotka_volterra_observations,
    "lv4_mean_prey": lotka_volterra_mean_prey,
    "decay_product_fit": decay_product_fit,
}
