r"""Forces, cubic and quartic force constants of an energy problem.

Forces are ``-grad``; Hessians and HVPs come from :func:`simdiff.hessian` and
:func:`simdiff.hvp` directly.  Cubic force constants are third derivatives
contracted with modes, from third directional derivatives by Taylor mode along
mode combinations, combined by polarisation (or, ``method="hessian-jvp"``, the
forward-mode derivative of the AD Hessian along each mode); quartic ones (the semi-diagonal
:math:`\phi_{iijj}` of second-order vibrational perturbation theory) are
fourth directional derivatives by Taylor mode, combined by polarisation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends import get_backend
from simdiff.backends.taylor import taylor_function
from simdiff.core.derivatives import cached_derivatives
from simdiff.core.kinds import grad as _grad
from simdiff.core.problem import Problem
from simdiff.errors import InputError, NonFiniteError, ShapeError
from simdiff.pes.geometry import check_positions, cluster_info
from simdiff.pes.normal_modes import warn_if_not_stationary

__all__ = ["cubic_directions", "cubic_force_constants", "forces", "quartic_force_constants"]


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


def _hessian_jvp_fn(problem: Problem, backend: str) -> Callable[..., Any]:
    """``method="hessian-jvp"``: the compiled contraction, kept in the problem's cache."""

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

    return problem.cache.get(("pes.cubic_force_constants", backend, "hessian-jvp"), build)


def _taylor3_fn(problem: Problem, backend: str) -> Callable[..., Any]:
    """``method="taylor"``: third directional derivatives along ``combos @ modes.T``, compiled.

    ``f(x, modes, combos)`` -> ``(c,)``: :math:`D^3(v) = d^3/dt^3 E(x + t v)` for
    each row of ``combos`` (coefficients of the modes), one Taylor pass each.
    """

    def build() -> Callable[..., Any]:
        T = get_backend(backend)
        g = taylor_function(problem, T.ops(), 3)

        def d3(x: Any, modes: Any, combos: Any) -> Any:
            return T.vmap(lambda v: g(x, v)[3] * 6.0)(combos @ modes.T)

        return T.jit(d3)

    return problem.cache.get(("pes.cubic_force_constants", backend), build)


def _modes(problem: Problem, modes: Any) -> np.ndarray:
    L = np.asarray(modes, dtype=np.float64)
    if L.ndim == 1:
        L = L[:, None]
    if L.ndim != 2 or L.shape[0] != problem.n:
        raise ShapeError(f"modes must have shape ({problem.n}, m) or ({problem.n},); "
                         f"got {np.shape(modes)}")  # fmt: skip
    return L


def cubic_directions(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    r"""Mode combinations whose third directional derivatives give every :math:`\phi_{ijk}`.

    Returns ``(combos, pairs, triples, offsets)``: ``combos`` of shape
    ``(m + m(m-1) + m(m-1)(m-2)/6, m)`` holds the rows :math:`e_i`, then
    :math:`e_i + e_j` and :math:`e_i - e_j` for ``i < j`` (rows of ``pairs``),
    then :math:`e_i + e_j + e_k` for ``i < j < k`` (rows of ``triples``);
    ``offsets`` are where the four blocks start.

    Examples
    --------
    >>> combos, pairs, triples, offsets = cubic_directions(3)
    >>> combos.shape, offsets.tolist()
    ((10, 3), [0, 3, 6, 9])
    """
    eye = np.eye(m)
    pairs = np.stack(np.triu_indices(m, k=1), axis=1)
    i, j = pairs.T
    triples = np.array(list(itertools.combinations(range(m), 3)), dtype=np.int64).reshape(-1, 3)
    combos = np.concatenate([eye, eye[i] + eye[j], eye[i] - eye[j],
                             eye[triples].sum(axis=1)])  # fmt: skip
    offsets = np.cumsum([0, m, len(pairs), len(pairs)])
    return combos, pairs, triples, offsets


def _polarise_cubic(d3: np.ndarray, m: int) -> np.ndarray:
    r""":math:`\phi_{ijk}` from the third directional derivatives along :func:`cubic_directions`.

    With :math:`P(v) = \phi(v, v, v)`: :math:`\phi_{iij} = (P(e_i + e_j) - P(e_i - e_j)
    - 2 P(e_j)) / 6` and :math:`6 \phi_{ijk} = P(e_i + e_j + e_k) - P(e_i + e_j) -
    P(e_i + e_k) - P(e_j + e_k) + P(e_i) + P(e_j) + P(e_k)`.
    """
    _, pairs, triples, off = cubic_directions(m)
    single, plus, minus, triple = np.split(d3, off[1:])
    phi = np.empty((m, m, m))
    phi[np.arange(m), np.arange(m), np.arange(m)] = single
    i, j = pairs.T
    iij = (plus - minus - 2.0 * single[j]) / 6.0  # phi(e_i, e_i, e_j)
    ijj = (plus + minus - 2.0 * single[i]) / 6.0  # phi(e_i, e_j, e_j)
    for u, v, val in ((i, j, iij), (j, i, ijj)):  # phi(e_u, e_u, e_v) in its three places
        phi[u, u, v] = phi[u, v, u] = phi[v, u, u] = val
    if triples.size:
        p2 = np.zeros((m, m))
        p2[i, j] = p2[j, i] = plus
        ti, tj, tk = triples.T
        val = (triple - p2[ti, tj] - p2[ti, tk] - p2[tj, tk] + single[ti] + single[tj]
               + single[tk]) / 6.0  # fmt: skip
        for a, b, c in itertools.permutations((ti, tj, tk)):
            phi[a, b, c] = val
    return phi


def cubic_force_constants(
    problem: Problem,
    x: Any,
    modes: Any,
    *,
    backend: str = "jax",
    method: str = "auto",
    chunk: int | None = None,
    gtol: float = 1e-6,
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
    method : {"auto", "taylor", "hessian-jvp"}
        ``"taylor"``: third directional derivatives by Taylor mode along mode
        combinations, polarised (Notes); ``"hessian-jvp"``: one forward-mode
        ``jvp`` of the dense AD Hessian per mode.  ``"auto"`` (default) takes
        the cheaper by the measured cost model of the Notes:
        ``"taylor"`` when ``1.5 * len(cubic_directions(m)[0]) <= m * n``.
    chunk : int, optional
        Directions (``"taylor"``, default 1024) or modes (``"hessian-jvp"``,
        default 32) per vectorised batch; bounds memory.
    gtol : float
        Warn (:class:`~simdiff.errors.StationarityWarning`) when ``|grad E(x)|``
        exceeds it: force constants describe a stationary point.

    Returns
    -------
    ndarray, shape (m, m, m)
        Symmetric in its three indices.

    Notes
    -----
    ``"taylor"``: with :math:`P(v) = d^3/dt^3 E(x + t v)` from one Taylor-mode
    pass of order 3 per direction, over the ``m + m(m-1) + m(m-1)(m-2)/6``
    directions :math:`L_i`, :math:`L_i \pm L_j`, :math:`L_i + L_j + L_k`
    (:func:`cubic_directions`), the symmetric trilinear form is recovered by
    polarisation: :math:`\phi_{iij} = (P(L_i + L_j) - P(L_i - L_j) - 2P(L_j))/6`
    and :math:`6\phi_{ijk} = P(L_i+L_j+L_k) - P(L_i+L_j) - P(L_i+L_k) - P(L_j+L_k)
    + P(L_i) + P(L_j) + P(L_k)`.  Each pass costs a few energy evaluations, so
    the total is about :math:`m^3/6` of them, independent of ``n``;
    ``"hessian-jvp"`` differentiates the ``n x n`` Hessian along each of the
    ``m`` modes, about :math:`m n` HVP-like passes.  With a Taylor direction
    costing about 1.5 Hessian-jvp columns (the factor ``"auto"`` uses;
    measured on LJ clusters by ``python -m validation.benchmarks.bench_pes_anharmonic``,
    docs/pes.md section 10 and docs/performance.md), Taylor mode wins for a
    few modes of a large system (:math:`1.5\, m^3/6 \ll m n`) and loses for all
    modes of a small one.  On JAX each is jit-compiled once per problem.

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
    L = _modes(problem, modes)
    if method not in ("auto", "taylor", "hessian-jvp"):
        raise InputError(f"method must be 'auto', 'taylor' or 'hessian-jvp'; got {method!r}")
    m = L.shape[1]
    if method == "auto":
        n_dirs = m + m * (m - 1) + m * (m - 1) * (m - 2) // 6
        method = "taylor" if 1.5 * n_dirs <= m * problem.n else "hessian-jvp"
    chunk = (1024 if method == "taylor" else 32) if chunk is None else chunk
    if chunk < 1:
        raise InputError(f"chunk must be a positive integer; got {chunk}")
    warn_if_not_stationary(problem, xx, gtol, "cubic force constants", backend)
    T = get_backend(backend)
    problem.require(T.name)
    xb = T.from_numpy(xx, np.float64)
    lb = T.from_numpy(L, np.float64)
    if method == "taylor":
        fn = _taylor3_fn(problem, T.name)
        combos = cubic_directions(m)[0]
        size = min(chunk, len(combos))
        parts = []
        for s in range(0, len(combos), size):  # fixed-size batches: one compilation
            part = combos[s : s + size]
            pad = np.concatenate([part, np.zeros((size - len(part), m))])
            parts.append(T.to_numpy(fn(xb, lb, T.from_numpy(pad, np.float64)))[: len(part)])
        full = _polarise_cubic(np.concatenate(parts), m)
    else:
        fn = _hessian_jvp_fn(problem, T.name)
        parts = [
            T.to_numpy(fn(xb, lb, T.from_numpy(L[:, s : s + chunk], np.float64)))
            for s in range(0, m, chunk)
        ]
        full = np.concatenate(parts, axis=0).transpose(1, 2, 0)
    if not np.all(np.isfinite(full)):
        raise NonFiniteError(f"cubic force constants of {problem.name!r} are not finite at x")
    return full


def quartic_force_constants(
    problem: Problem, x: Any, modes: Any, *, backend: str = "jax", gtol: float = 1e-6
) -> np.ndarray:
    r"""Semi-diagonal quartic force constants :math:`\phi_{iijj}` along ``modes``: shape ``(m, m)``.

    .. math:: \phi_{iijj} = \sum_{abcd} \frac{\partial^4 E}{\partial x_a \partial x_b
              \partial x_c \partial x_d} L_{ai} L_{bi} L_{cj} L_{dj}

    the quartic constants second-order vibrational perturbation theory needs.

    Parameters
    ----------
    problem : Problem
        Scalar energy.
    x : array_like, shape (n,)
        Geometry (normally a minimum).
    modes : array_like, shape (n, m) or (n,)
        Columns ``L[:, i]`` (e.g. ``NormalModes.displacements``).
    backend : {"jax", "torch"}
    gtol : float
        Warn (:class:`~simdiff.errors.StationarityWarning`) when ``|grad E(x)|`` exceeds it.

    Returns
    -------
    ndarray, shape (m, m)
        Symmetric; the diagonal is :math:`\phi_{iiii}`.

    Notes
    -----
    Fourth directional derivatives :math:`D^4(v) = d^4/dt^4 E(x + t v)` come from
    one Taylor-mode pass each (:func:`simdiff.derivative`, ``method="taylor"``),
    all ``m + m(m-1)`` directions in one vectorised call.  Polarisation gives

    .. math:: 12\,\phi_{iijj} = D^4(L_i + L_j) + D^4(L_i - L_j) - 2 D^4(L_i) - 2 D^4(L_j),

    since :math:`D^4(u \pm v)` expands to
    :math:`\phi_{uuuu} \pm 4\phi_{uuuv} + 6\phi_{uuvv} \pm 4\phi_{uvvv} + \phi_{vvvv}`.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.pes import cluster_problem, morse
    >>> p = cluster_problem(morse, [[0, 0, 0], [1.0, 0, 0]])
    >>> u = np.array([-1.0, 0, 0, 1.0, 0, 0])   # stretch: dr = 2 dt
    >>> round(float(quartic_force_constants(p, p.x0, u)[0, 0]), 10)  # 16 V''''(r0) = 16 (14 D a^4)
    224.0
    """
    xx = _point(problem, x)
    L = _modes(problem, modes)
    warn_if_not_stationary(problem, xx, gtol, "quartic force constants", backend)
    m = L.shape[1]
    i, j = np.triu_indices(m, k=1)
    dirs = np.concatenate([L.T, (L[:, i] + L[:, j]).T, (L[:, i] - L[:, j]).T], axis=0)
    d = cached_derivatives(problem, backend)
    d4 = np.asarray(d.derivative(4, dirs, xx, method="taylor"))
    diag, plus, minus = d4[:m], d4[m : m + i.size], d4[m + i.size :]
    phi = np.diag(diag)
    off = (plus + minus - 2.0 * diag[i] - 2.0 * diag[j]) / 12.0
    phi[i, j] = off
    phi[j, i] = off
    if not np.all(np.isfinite(phi)):
        raise NonFiniteError(f"quartic force constants of {problem.name!r} are not finite at x")
    return phi
