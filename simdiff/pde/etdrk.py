"""ETDRK4: exponential time differencing Runge–Kutta of order four.

For ``v' = L v + N(v)`` with ``L`` diagonal (here: in Fourier space), Cox and
Matthews' ETDRK4 integrates the linear part exactly and the nonlinear part to
fourth order, so stiff linear terms (diffusion, hyperdiffusion) put no limit
on the step.  Its coefficients contain ``phi``-functions such as
``(e^z - 1 - z) / z^2`` that cancel catastrophically for small ``|z|``;
Kassam and Trefethen evaluate them as means over a circle in the complex
plane around each ``z = h L``, which is what :func:`etdrk4_coefficients` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError
from .marching import march
from .spectral import as_complex

__all__ = ["etdrk4_coefficients", "etdrk4_integrate", "etdrk4_step"]

_COEFFS = ("E", "E2", "Q", "f1", "f2", "f3")


def etdrk4_coefficients(hL: Any, ops: Any, n_points: int = 64) -> dict[str, Any]:
    """ETDRK4 coefficients for ``z = h*L`` (real, any shape) by the contour-integral mean.

    Parameters
    ----------
    hL : array
        Step size times the diagonal of ``L`` (real).  A numpy array with the
        numpy ops gives numpy coefficients (precomputation); an array of the
        active context is differentiated through (e.g. ``L`` depends on a
        diffusivity one differentiates with respect to).
    ops : the ops namespace the arithmetic runs in.
    n_points : int
        Points on the unit circle around each ``z`` (the full circle, so the
        mean of a real-analytic function is real up to rounding).

    Returns
    -------
    dict with real arrays ``E = e^z``, ``E2 = e^{z/2}`` and ``Q``, ``f1``,
    ``f2``, ``f3``: Kassam & Trefethen's coefficients without their factor
    ``h`` (:func:`etdrk4_integrate` multiplies by ``h``).

    Notes
    -----
    ``Q = mean((e^{z/2} - 1)/z)``, ``f1 = mean((-4 - z + e^z (4 - 3z + z^2))/z^3)``,
    ``f2 = mean((2 + z + e^z (z - 2))/z^3)``,
    ``f3 = mean((-4 - 3z - z^2 + e^z (4 - z))/z^3)``, each mean over
    ``z + exp(2 pi i (j - 1/2)/M)``, ``j = 1..M``.

    References
    ----------
    S. M. Cox and P. C. Matthews, J. Comput. Phys. 176 (2002) 430-455.
    A.-K. Kassam and L. N. Trefethen, SIAM J. Sci. Comput. 26 (2005) 1214-1233.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import etdrk4_coefficients
    >>> c = etdrk4_coefficients(np.array([0.0, -1e-9]), simdiff.get_ops("numpy"))
    >>> bool(np.allclose(c["f1"], 1 / 6) and np.allclose(c["Q"], 0.5))
    True
    """
    r = np.exp(2j * np.pi * (np.arange(1, n_points + 1) - 0.5) / n_points)
    z = as_complex(hL[..., None], ops) + ops.asarray(r)
    ez, ez2 = ops.exp(z), ops.exp(z / 2)
    z3 = z * z * z

    def mean(a: Any) -> Any:
        return ops.mean(a, axis=-1).real

    return {
        "E": ops.exp(hL),
        "E2": ops.exp(hL / 2),
        "Q": mean((ez2 - 1.0) / z),
        "f1": mean((-4.0 - z + ez * (4.0 - 3.0 * z + z * z)) / z3),
        "f2": mean((2.0 + z + ez * (z - 2.0)) / z3),
        "f3": mean((-4.0 - 3.0 * z - z * z + ez * (4.0 - z)) / z3),
    }


def _complex_coefficients(coeffs: dict[str, Any], h: float, ops: Any) -> dict[str, Any]:
    scaled = {k: (v if k in ("E", "E2") else v * h) for k, v in coeffs.items()}
    if all(isinstance(v, np.ndarray) for v in scaled.values()):
        return {k: ops.asarray(np.asarray(v, dtype=np.complex128)) for k, v in scaled.items()}
    return {k: as_complex(v, ops) for k, v in scaled.items()}


def etdrk4_step(v: Any, nonlinear: Callable[[Any], Any], c: dict[str, Any]) -> Any:
    """One ETDRK4 step of ``v' = L v + N(v)`` with complex coefficients ``c``
    (``E, E2`` and ``h*Q, h*f1, h*f2, h*f3``)."""
    nv = nonlinear(v)
    a = c["E2"] * v + c["Q"] * nv
    na = nonlinear(a)
    b = c["E2"] * v + c["Q"] * na
    nb = nonlinear(b)
    cc = c["E2"] * a + c["Q"] * (2.0 * nb - nv)
    nc = nonlinear(cc)
    return c["E"] * v + c["f1"] * nv + c["f2"] * (2.0 * (na + nb)) + c["f3"] * nc


def etdrk4_integrate(
    L: Any,
    nonlinear: Callable[[Any], Any],
    v0: Any,
    t_final: float,
    n_steps: int,
    ops: Any,
    *,
    checkpoint: bool | int = False,
    n_points: int = 64,
) -> Any:
    """Integrate ``v' = L v + N(v)`` (diagonal ``L``) from 0 to ``t_final`` in ``n_steps``.

    Parameters
    ----------
    L : array
        Real diagonal of the linear operator, broadcastable against ``v0``; a
        numpy array is precomputed in numpy, an array of the context is
        differentiated through.
    nonlinear : callable
        ``N(v)``: complex array of ``v``'s shape.
    v0 : complex array
        Initial state (e.g. Fourier coefficients).
    checkpoint : bool or int
        Rematerialisation in reverse mode, see :func:`simdiff.pde.marching.march`.

    Returns
    -------
    The state at ``t_final`` (complex, shape of ``v0``).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import etdrk4_integrate
    >>> ops = simdiff.get_ops("numpy")
    >>> v = etdrk4_integrate(np.array([-1.0]), lambda v: 0.0 * v, np.ones(1, complex), 2.0, 4, ops)
    >>> bool(np.allclose(v, np.exp(-2.0)))
    True
    """
    if isinstance(n_steps, bool) or int(n_steps) != n_steps or int(n_steps) < 1:
        raise InputError(f"n_steps must be a positive integer; got {n_steps!r}")
    h = float(t_final) / int(n_steps)
    if isinstance(L, np.ndarray):
        from ..backends import get_ops

        coeffs = etdrk4_coefficients(h * L, get_ops("numpy"), n_points)
    else:
        coeffs = etdrk4_coefficients(h * L, ops, n_points)
    c = _complex_coefficients(coeffs, h, ops)

    return march(lambda v: etdrk4_step(v, nonlinear, c), v0, int(n_steps), ops, checkpoint)
