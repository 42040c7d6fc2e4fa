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

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from simdiff.backends import Ops
from simdiff.core.cache import RecentlyUsed
from simdiff.errors import InputError
from simdiff.pde.marching import march
from simdiff.pde.spectral import as_complex

__all__ = ["etdrk4_coefficients", "etdrk4_integrate", "etdrk4_step"]

_COEFFS = ("E", "E2", "Q", "f1", "f2", "f3")


def _contour(n_points: int) -> tuple[np.ndarray, np.ndarray]:
    """The upper half of the circle's points and their weights (summing to 1).

    The points ``exp(2 pi i (j - 1/2)/M)`` come in conjugate pairs (``j`` and
    ``M + 1 - j``; for odd ``M`` the point ``-1`` pairs with itself), and
    ``f(conj w) = conj f(w)`` for the real-analytic ``f`` averaged here, so the
    mean over the circle is ``Re sum_j w_j f(z + r_j)`` over the upper half,
    ``w_j = 2/M`` (``1/M`` for ``-1``): half the complex arithmetic.
    """
    half = (n_points + 1) // 2
    r = np.exp(2j * np.pi * (np.arange(1, half + 1) - 0.5) / n_points)
    w = np.full(half, 2.0 / n_points)
    if n_points % 2:
        r[-1], w[-1] = -1.0, 1.0 / n_points
    return r, w


def etdrk4_coefficients(hL: Any, ops: Ops, n_points: int = 64) -> dict[str, Any]:
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
        Points on the unit circle around each ``z`` (the full circle; by
        conjugate symmetry only its upper half is evaluated, and the mean is
        real).

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
    points, weights = _contour(n_points)
    r = ops.asarray(points)
    z = as_complex(hL[..., None], ops) + r
    ez, ez2 = ops.exp(z), ops.exp(z / 2)
    z3 = z * z * z
    w = ops.asarray(weights)

    def mean(a: Any) -> Any:
        return ops.matmul(a.real, w)

    return {
        "E": ops.exp(hL),
        "E2": ops.exp(hL / 2),
        "Q": mean((ez2 - 1.0) / z),
        "f1": mean((-4.0 - z + ez * (4.0 - 3.0 * z + z * z)) / z3),
        "f2": mean((2.0 + z + ez * (z - 2.0)) / z3),
        "f3": mean((-4.0 - 3.0 * z - z * z + ez * (4.0 - z)) / z3),
    }


#: What a constant (numpy) ``L`` gives, by its key (its bytes or the caller's ``key``), the
#: step and ``n_points``: the complex ``h``-scaled coefficients, or ``e^{T L}``.
_CONSTANT: RecentlyUsed[tuple[Any, ...], Any] = RecentlyUsed(16)


def _constant_coefficients(hL: np.ndarray, h: float, n_points: int) -> dict[str, np.ndarray]:
    """The coefficients of a numpy ``h*L``: complex, the non-exponential ones times ``h``."""
    from simdiff.backends import get_ops

    coeffs = etdrk4_coefficients(hL, get_ops("numpy"), n_points)
    c = {
        k: np.asarray(v if k in ("E", "E2") else v * h, dtype=np.complex128)
        for k, v in coeffs.items()
    }
    return {**c, "2Q": 2.0 * c["Q"], "2f2": 2.0 * c["f2"]}


def etdrk4_step(v: Any, nonlinear: Callable[[Any], Any], c: dict[str, Any]) -> Any:
    """One ETDRK4 step of ``v' = L v + N(v)`` with complex coefficients ``c``
    (``E, E2`` and ``h*Q, h*f1, h*f2, h*f3``).

    Cox & Matthews' stages ``a = E2 v + Q N(v)``, ``b = E2 v + Q N(a)``,
    ``c = E2 a + Q (2 N(b) - N(v))`` and ``E v + f1 N(v) + 2 f2 (N(a) + N(b)) + f3 N(c)``,
    with ``E2 v`` and ``Q N(v)`` formed once (fewer operations per step on an
    eager backend).  ``c`` may also hold ``"2Q"`` and ``"2f2"`` (``2 Q``, ``2 f2``:
    :func:`etdrk4_integrate` adds them; a factor 2 is exact, so the values are the same).
    """
    q2, f22 = c.get("2Q"), c.get("2f2")
    nv = nonlinear(v)
    e2v, qnv = c["E2"] * v, c["Q"] * nv
    a = e2v + qnv
    na = nonlinear(a)
    b = e2v + c["Q"] * na
    nb = nonlinear(b)
    cc = c["E2"] * a + ((c["Q"] * (2.0 * nb) if q2 is None else q2 * nb) - qnv)
    nc = nonlinear(cc)
    nab = na + nb
    last = c["f2"] * (2.0 * nab) if f22 is None else f22 * nab
    return c["E"] * v + c["f1"] * nv + last + c["f3"] * nc


def constant_operands(
    L: np.ndarray,
    t_final: float,
    n_steps: int,
    linear: bool,
    n_points: int = 64,
    key: Hashable | None = None,
) -> Any:
    """What :func:`etdrk4_integrate` multiplies by for a constant (numpy) ``L``, kept.

    ``linear``: ``e^{t_final L}`` (complex numpy); else the dict of complex
    coefficients (``E, E2``, ``h*Q, h*f1, h*f2, h*f3``).  Computed once per
    ``(key or L's bytes, t_final, n_steps, n_points)`` and then only looked up,
    so a traced solve (Dynamo) runs no numpy arithmetic;
    :func:`~simdiff.pde.pde_problem` computes them when it builds the problem.
    """
    name = ("bytes", L.shape, L.dtype.str, L.tobytes()) if key is None else ("key", key)
    T, h = float(t_final), float(t_final) / int(n_steps)
    if linear:
        return _CONSTANT.get((*name, "exp", T), lambda: np.exp(T * L).astype(np.complex128))
    return _CONSTANT.get((*name, h, n_points), lambda: _constant_coefficients(h * L, h, n_points))


def etdrk4_integrate(
    L: Any,
    nonlinear: Callable[[Any], Any] | None,
    v0: Any,
    t_final: float,
    n_steps: int,
    ops: Ops,
    *,
    checkpoint: bool | int = False,
    n_points: int = 64,
    key: Hashable | None = None,
) -> Any:
    """Integrate ``v' = L v + N(v)`` (diagonal ``L``) from 0 to ``t_final`` in ``n_steps``.

    Parameters
    ----------
    L : array
        Real diagonal of the linear operator, broadcastable against ``v0``; a
        numpy array is precomputed in numpy (once per ``h*L``, kept for the
        next call), an array of the context is differentiated through.
    nonlinear : callable or None
        ``N(v)``: complex array of ``v``'s shape.  ``None``: ``N = 0``; then an
        ETDRK4 step is ``v -> e^{hL} v`` exactly (every other term is a product
        with ``N = 0``), so the ``n_steps`` steps are one product with
        ``e^{t_final L}`` and no contour integral is evaluated.
    v0 : complex array
        Initial state (e.g. Fourier coefficients).
    checkpoint : bool or int
        Rematerialisation in reverse mode, see :func:`simdiff.pde.marching.march`.
    key : hashable, optional
        A name for a numpy ``L`` under which its coefficients are kept (it must
        determine ``L``; :func:`~simdiff.pde.solve` passes the grid and the
        linear terms).  Without it they are kept under ``L``'s bytes.

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
    n_steps = int(n_steps)
    h = float(t_final) / n_steps
    if isinstance(L, np.ndarray):
        kept = constant_operands(L, t_final, n_steps, nonlinear is None, n_points, key)
        if nonlinear is None:
            return ops.asarray(kept) * v0
        c = {k: ops.asarray(v) for k, v in kept.items()}
    elif nonlinear is None:
        return as_complex(ops.exp(float(t_final) * L), ops) * v0
    else:
        coeffs = etdrk4_coefficients(h * L, ops, n_points)
        c = {k: as_complex(v if k in ("E", "E2") else v * h, ops) for k, v in coeffs.items()}
        c["2Q"], c["2f2"] = 2.0 * c["Q"], 2.0 * c["f2"]
    return march(lambda v: etdrk4_step(v, nonlinear, c), v0, n_steps, ops, checkpoint)
