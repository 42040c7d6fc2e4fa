"""Closed-form test problems: the seed function, Rosenbrock, a spherical-coordinate map."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import simdiff

# --------------------------------------------------------------------------- seed
# g(x) = sin(x^2) + exp(cos(x)); derivatives 0..4 from sympy (tests re-derive them).


def _g(x: np.ndarray, k: int) -> np.ndarray:
    s2, c2, ex, s, c = np.sin(x**2), np.cos(x**2), np.exp(np.cos(x)), np.sin(x), np.cos(x)
    if k == 0:
        return s2 + ex
    if k == 1:
        return 2 * x * c2 - ex * s
    if k == 2:
        return -4 * x**2 * s2 + ex * s**2 - ex * c + 2 * c2
    if k == 3:
        return -8 * x**3 * c2 - 12 * x * s2 + ex * s * c**2 + 3 * ex * s * c
    if k == 4:
        return (
            16 * x**4 * s2
            - 48 * x**2 * c2
            + ex * (c**4 + 6 * c**3 + 5 * c**2 - 5 * c - 3)
            - 12 * s2
        )
    raise ValueError(f"closed forms of the seed function exist for orders 0..4; got {k}")


def seed_fn(x, ops):
    """f(x) = sum_i sin(x_i^2) + exp(cos(x_i)): separable, so every derivative is closed-form."""
    return ops.sum(ops.sin(x**2) + ops.exp(ops.cos(x)))


def _seed_tensor(x: np.ndarray, order: int) -> np.ndarray:
    n = x.shape[0]
    if order == 0:
        return np.asarray(_g(x, 0).sum())
    t = np.zeros((n,) * order)
    idx = np.arange(n)
    t[(idx,) * order] = _g(x, order)
    return t


def seed(n: int = 1) -> simdiff.Problem:
    """The seed function of claims C1 (n inputs; batched use: x of shape (batch, n))."""
    x0 = np.linspace(0.3, 1.2, n)
    return simdiff.Problem(
        seed_fn,
        x0=x0,
        name="seed" if n == 1 else f"seed{n}",
        exact={
            "value": lambda x: _g(x, 0).sum(),
            "grad": lambda x: _g(x, 1),
            "hessian": lambda x: np.diag(_g(x, 2)),
            "derivative": lambda x, k, v: np.sum(_g(x, k) * v**k),
            "derivative_tensor": _seed_tensor,
        },
        meta={
            "tags": ("closed-form", "small", "seed"),
            "citation": "shared/claims.md C1",
        },
        check_options=simdiff.CheckOptions(max_exact_order=4),
    )


# --------------------------------------------------------------------------- Rosenbrock


def rosenbrock_fn(x, ops):
    """Extended Rosenbrock function sum 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2."""
    return ops.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


# scipy.optimize's references, imported when called (listing the catalogue stays cheap);
# module functions, so a problem holding them pickles.
def _rosen(x: np.ndarray) -> Any:
    import scipy.optimize

    return scipy.optimize.rosen(x)


def _rosen_der(x: np.ndarray) -> Any:
    import scipy.optimize

    return scipy.optimize.rosen_der(x)


def _rosen_hess(x: np.ndarray) -> Any:
    import scipy.optimize

    return scipy.optimize.rosen_hess(x)


def rosenbrock(n: int = 4) -> simdiff.Problem:
    """n-dimensional Rosenbrock; exact gradient and Hessian from scipy.optimize.rosen_der/hess."""
    x0 = np.array([-1.2 if i % 2 == 0 else 1.0 for i in range(n)])
    return simdiff.Problem(
        rosenbrock_fn,
        x0=x0,
        name=f"rosenbrock{n}",
        exact={
            "value": _rosen,
            "grad": _rosen_der,
            "hessian": _rosen_hess,
        },
        meta={
            "tags": ("closed-form", "small", "optimisation"),
            "minimum": np.ones(n),
            "citation": "Rosenbrock (1960), Comput. J. 3, 175",
        },
    )


# --------------------------------------------------------------------------- spherical map


def spherical_fn(x, ops):
    """(r, theta, phi) -> (r sin(theta) cos(phi), r sin(theta) sin(phi), r cos(theta))."""
    r, th, ph = x[0], x[1], x[2]
    return ops.stack(
        [r * ops.sin(th) * ops.cos(ph), r * ops.sin(th) * ops.sin(ph), r * ops.cos(th)]
    )


def _spherical_jac(x: np.ndarray) -> np.ndarray:
    r, th, ph = x
    st, ct, sp, cp = math.sin(th), math.cos(th), math.sin(ph), math.cos(ph)
    return np.array(
        [
            [st * cp, r * ct * cp, -r * st * sp],
            [st * sp, r * ct * sp, r * st * cp],
            [ct, -r * st, 0.0],
        ]
    )


def spherical() -> simdiff.Problem:
    """Vector-valued: spherical to Cartesian coordinates; Jacobian determinant r^2 sin(theta)."""
    return simdiff.Problem(
        spherical_fn,
        x0=np.array([1.5, 0.7, 0.4]),
        name="spherical",
        exact={
            "value": lambda x: np.array(
                [
                    x[0] * np.sin(x[1]) * np.cos(x[2]),
                    x[0] * np.sin(x[1]) * np.sin(x[2]),
                    x[0] * np.cos(x[1]),
                ]
            ),
            "jacobian": _spherical_jac,
        },
        meta={"tags": ("closed-form", "small", "vector")},
    )


ENTRIES = {
    "seed": seed,
    "seed8": lambda: seed(8),
    "rosenbrock4": rosenbrock,
    "rosenbrock32": lambda: rosenbrock(32),
    "spherical": spherical,
}
