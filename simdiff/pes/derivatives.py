"""Forces and cubic force constants of an energy problem.

Forces are ``-grad``; Hessians and HVPs come from :func:`simdiff.hessian` and
:func:`simdiff.hvp` directly.  Cubic force constants are third derivatives
contracted with modes, computed as the forward-mode derivative (``jvp``) of
the AD Hessian along each mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._api import grad as _grad
from .._problem import Problem
from ..backends import get_backend
from ..errors import InputError, NonFiniteError, ShapeError
from .cluster import check_positions, cluster_info

__all__ = ["cubic_force_constants", "forces"]


def _point(problem: Problem, x: Any) -> np.ndarray:
    x = problem.x0 if x is None else np.asarray(x, dtype=np.float64)
    info = cluster_info(problem)
    if info is not None:
        return check_positions(x, info.n_particles, info.dim, info.box).reshape(-1)
    if x.shape != (problem.n,):
        raise ShapeError(f"x for problem {problem.name!r} must have shape ({problem.n},); "
                         f"got {x.shape}")  # fmt: skip
    return x


def forces(problem: Problem, x: Any = None, *, backend: str = "jax") -> np.ndarray:
    """Forces ``-grad E(x)``, shape ``(n,)``, after checking the geometry.

    For a cluster problem, coincident particles raise a ``ValueError`` naming
    them (instead of the NaN gradient the energy has there).

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.pes import cluster_problem, lennard_jones
    >>> p = cluster_problem(lennard_jones, [[0, 0, 0], [1.0, 0, 0]])
    >>> forces(p)   # repulsive at r = 1 < 2**(1/6): 24 (2 - 1) along the axis
    array([-24.,   0.,   0.,  24.,   0.,   0.])
    """
    return 0.0 - np.asarray(_grad(problem, _point(problem, x), backend=backend))  # no -0.0


def _third_fn(problem: Problem, backend: str) -> Callable[..., Any]:
    """The compiled contraction, kept in the problem's derivative cache."""

    def build() -> Callable[..., Any]:
        T = get_backend(backend)
        ops = T.ops()

        def f(y: Any) -> Any:
            return problem.fn(y, ops)

        hess = T.jacfwd(T.grad(f))

        def contract(x: Any, modes: Any, block: Any) -> Any:
            def dh(v: Any) -> Any:  # d/dt H(x + t v): (n, n)
                return T.jvp(hess, (x,), (v,))[1]

            dhs = T.vmap(dh)(block.T)  # (c, n, n): H'[block[:, k]]
            return modes.T @ dhs @ modes  # (c, m, m): phi[i, j, k] at [k, i, j]

        return T.jit(contract)

    return problem.cache.get(("pes.cubic_force_constants", backend), build)


def cubic_force_constants(
    problem: Problem, x: Any, modes: Any, *, backend: str = "jax", chunk: int = 32
) -> np.ndarray:
    r"""Third derivatives of the energy contracted with ``modes``: shape ``(m, m, m)``.

    .. math:: \phi_{ijk} = \sum_{abc} \frac{\partial^3 E}{\partial x_a \partial x_b
              \partial x_c} L_{ai} L_{bj} L_{ck}

    Parameters
    ----------
    problem : Problem
        Scalar energy.
    x : array_like, shape (n,)
        Geometry (normally a minimum).
    modes : array_like, shape (n, m) or (n,)
        Columns ``L[:, i]``.  With ``NormalModes.displacements`` the result is
        the cubic force constants in mass-weighted normal coordinates
        (:math:`E = E_0 + \frac12\sum_i \omega_i^2 Q_i^2
        + \frac16\sum \phi_{ijk} Q_i Q_j Q_k + \dots`).
    backend : {"jax", "torch"}
    chunk : int
        Modes per vectorised batch (bounds memory at ``chunk * n * n`` numbers).

    Returns
    -------
    ndarray, shape (m, m, m)
        Symmetric in its three indices (to rounding).

    Notes
    -----
    For each mode ``L[:, k]`` the directional derivative of the Hessian
    :math:`H'(x)[L_k] = \frac{d}{dt} H(x + t L_k)` is one forward-mode ``jvp``
    of the forward-over-reverse Hessian (cost about ``n`` gradient
    evaluations); then :math:`\phi_{:,:,k} = L^T H'[L_k] L`.  The modes are
    vmapped in chunks and, on JAX, jit-compiled once per problem.

    Raises
    ------
    NonFiniteError
        A non-finite result (e.g. coincident particles).

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.pes import cluster_problem, morse
    >>> p = cluster_problem(morse, [[0, 0, 0], [1.0, 0, 0]])
    >>> u = np.array([-1.0, 0, 0, 1.0, 0, 0])   # stretch: dr = 2 dt
    >>> float(cubic_force_constants(p, p.x0, u)[0, 0, 0])   # 8 V'''(r0) = 8 (-6 D a^3)
    -48.0
    """
    xx = _point(problem, x)
    L = np.asarray(modes, dtype=np.float64)
    if L.ndim == 1:
        L = L[:, None]
    if L.ndim != 2 or L.shape[0] != problem.n:
        raise ShapeError(f"modes must have shape ({problem.n}, m) or ({problem.n},); "
                         f"got {np.shape(modes)}")  # fmt: skip
    if chunk < 1:
        raise InputError(f"chunk must be a positive integer; got {chunk}")
    T = get_backend(backend)
    problem.require(T.name)
    fn = _third_fn(problem, T.name)
    xb = T.from_numpy(xx, np.float64)
    lb = T.from_numpy(L, np.float64)
    parts = [
        T.to_numpy(fn(xb, lb, T.from_numpy(L[:, s : s + chunk], np.float64)))
        for s in range(0, L.shape[1], chunk)
    ]
    full = np.concatenate(parts, axis=0).transpose(1, 2, 0)
    if not np.all(np.isfinite(full)):
        raise NonFiniteError(f"cubic force constants of {problem.name!r} are not finite at x")
    return full
