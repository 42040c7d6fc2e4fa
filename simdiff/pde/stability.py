"""Explicit time-step limits for the method of lines, and the error they raise."""

from __future__ import annotations

from functools import cache

import numpy as np

from ..errors import StabilityError
from ..ode.rk import ButcherTableau

__all__ = ["StabilityError", "check_explicit_step", "real_stability_interval"]


@cache
def real_stability_interval(tableau: ButcherTableau) -> float:
    """Largest ``s`` with ``|R(-t)| <= 1`` for all ``t`` in ``[0, s]``.

    ``R(z) = 1 + z b^T (I - z A)^{-1} 1`` is the method's stability function;
    ``h * |lambda| <= s`` keeps a decaying mode ``lambda < 0`` from growing.
    Euler and Heun give 2, the classical RK4 2.785.

    Examples
    --------
    >>> from simdiff.ode import RK4, EULER
    >>> from simdiff.pde import real_stability_interval
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
    t_final: float, n_steps: int, spectral_radius: float, tableau: ButcherTableau, what: str
) -> None:
    """Raise :class:`StabilityError` if ``dt * spectral_radius`` (``dt = t_final/n_steps``)
    exceeds the method's real stability interval.

    ``spectral_radius`` is the largest ``|lambda|`` of the stiff (diffusive)
    linear part, e.g. ``4 nu / dx^2`` for the second-order Laplacian; ``what``
    describes it in the message.

    Examples
    --------
    >>> from simdiff.ode import EULER
    >>> from simdiff.pde import check_explicit_step
    >>> check_explicit_step(1.0, 10, 4.0 / 0.1**2, EULER, "diffusion")
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
            f"(got {int(n_steps)}), a coarser grid, or stepper='etdrk4' (periodic, spectral)"
        )
