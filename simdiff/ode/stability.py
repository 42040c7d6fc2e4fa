"""Explicit step-size limits: the real stability interval of a tableau and the check that uses it.

Used by :class:`~simdiff.ode.FixedStep` (the spectral radius of the
right-hand side's Jacobian at the start, estimated here) and by the method of
lines in :mod:`simdiff.pde` (the spectral radius of the discretised operator,
known in closed form there).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from simdiff.errors import StabilityError
from simdiff.ode.tableau import ButcherTableau

__all__ = [
    "check_explicit_step",
    "real_stability_interval",
    "rhs_spectral_radius",
]


@cache
def real_stability_interval(tableau: ButcherTableau) -> float:
    """Largest ``s`` with ``|R(-t)| <= 1`` for all ``t`` in ``[0, s]``.

    ``R(z) = 1 + z b^T (I - z A)^{-1} 1`` is the method's stability function;
    ``h * |lambda| <= s`` keeps a decaying mode ``lambda < 0`` from growing.
    Euler and Heun give 2, the classical RK4 2.785.

    Examples
    --------
    >>> from simdiff.ode import RK4, EULER
    >>> from simdiff.ode.stability import real_stability_interval
    >>> round(real_stability_interval(EULER), 6), round(real_stability_interval(RK4), 3)
    (2.0, 2.785)
    """
    s = tableau.stages
    A = np.zeros((s, s))
    for i, row in enumerate(tableau.a):
        A[i, : len(row)] = row
    b = np.asarray(tableau.b)
    # explicit methods: A is nilpotent, R(z) = 1 + sum_k z^k b^T A^(k-1) 1
    coeffs = [1.0] + [float(b @ np.linalg.matrix_power(A, k - 1) @ np.ones(s))
                      for k in range(1, s + 1)]  # fmt: skip
    t = np.linspace(0.0, 10.0, 200001)
    R = np.polyval(coeffs[::-1], -t)
    bad = np.flatnonzero(np.abs(R) > 1.0 + 1e-12)
    return float(t[bad[0] - 1]) if bad.size else float(t[-1])


def check_explicit_step(
    t_final: float,
    n_steps: int,
    spectral_radius: float,
    tableau: ButcherTableau,
    what: str,
    remedy: str = "a coarser grid, or stepper='etdrk4' (periodic, spectral)",
) -> None:
    """Raise :class:`StabilityError` if ``dt * spectral_radius`` (``dt = t_final/n_steps``)
    exceeds the method's real stability interval.

    ``spectral_radius`` is the largest ``|lambda|`` of the stiff (decaying)
    part, e.g. ``4 nu / dx^2`` for the second-order Laplacian; ``what``
    describes it and ``remedy`` names an alternative in the message.

    Examples
    --------
    >>> from simdiff.ode import EULER
    >>> from simdiff.ode.stability import check_explicit_step
    >>> rho = 4.0 / 0.1**2
    >>> check_explicit_step(1.0, 10, rho, EULER, "diffusion")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    simdiff.errors.StabilityError: time step dt=0.1 is beyond the explicit stability
    limit of euler: dt <= 2/|lambda_max| = 0.005 with |lambda_max| = 400 (diffusion); use
    n_steps >= 200 (got 10), a coarser grid, or stepper='etdrk4' (periodic, spectral)
    """
    limit = real_stability_interval(tableau)
    dt = float(t_final) / int(n_steps)
    if spectral_radius > 0 and dt * spectral_radius > limit:
        raise StabilityError(
            f"time step dt={dt:.6g} is beyond the explicit stability limit of "
            f"{tableau.name}: dt <= {limit:.4g}/|lambda_max| = {limit / spectral_radius:.6g} "
            f"with |lambda_max| = {spectral_radius:.6g} ({what}); "
            f"use n_steps >= {int(np.ceil(float(t_final) * spectral_radius / limit))} "
            f"(got {int(n_steps)}), {remedy}"
        )


def rhs_spectral_radius(
    f: Callable[[np.ndarray], np.ndarray], y: np.ndarray, *, iterations: int = 30
) -> float:
    """Largest ``|lambda|`` over the non-growing eigenvalues of ``df/dy`` at ``y`` (numpy ``f``).

    Jacobian-vector products are central differences of ``f`` (step
    ``eps^(1/3) max(1, |y|)``).  Up to 64 dimensions the Jacobian is formed
    (``dim`` products) and its eigenvalues computed; beyond, power iteration
    (``iterations`` products) estimates ``max |lambda|``.  In the small case
    only eigenvalues with a real part ``<= 0`` count (decaying and oscillating
    modes, which an explicit step too long makes grow; a growing mode grows
    anyway), compared by modulus with the real stability interval.  An
    estimate at one point: a check that passes does not prove stability
    along the whole trajectory.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.ode.stability import rhs_spectral_radius
    >>> round(rhs_spectral_radius(lambda y: -100.0 * y, np.ones(2)), 6)
    100.0
    """
    y = np.asarray(y, dtype=np.float64)
    eps = np.finfo(np.float64).eps ** (1 / 3) * max(1.0, float(np.max(np.abs(y))))

    def jv(v: np.ndarray) -> np.ndarray:
        return (np.asarray(f(y + eps * v)) - np.asarray(f(y - eps * v))) / (2 * eps)

    n = int(y.shape[0])
    if n <= 64:
        J = np.stack([jv(e) for e in np.eye(n)], axis=1)
        lam = np.linalg.eigvals(J)
        scale = float(np.max(np.abs(lam))) if lam.size else 0.0
        kept = lam[lam.real <= 1e-8 * scale]
        return float(np.max(np.abs(kept))) if kept.size else 0.0
    v = np.random.default_rng(0).standard_normal(n)
    rho = 0.0
    for _ in range(int(iterations)):
        w = jv(v / np.linalg.norm(v))
        rho = float(np.linalg.norm(w))
        if not np.isfinite(rho) or rho == 0.0:
            return 0.0 if rho == 0.0 else float("inf")
        v = w
    return rho
