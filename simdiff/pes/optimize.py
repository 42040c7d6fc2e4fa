"""Minima and first-order saddles of a potential-energy surface, with their index.

:func:`find_minimum` drives :func:`scipy.optimize.minimize` with simdiff's
energy, gradient, Hessian or Hessian-vector product; :func:`find_saddle` is a
partitioned rational-function optimisation (P-RFO, eigenvector following) on
the exact Hessian; :func:`stationary_index` counts negative curvatures with the
rigid-body modes removed.  Every point either search returns carries its index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.optimize

from simdiff.core.config import Config
from simdiff.core.kinds import hessian as _hessian
from simdiff.core.kinds import value_and_grad as _value_and_grad
from simdiff.core.optimize import minimize
from simdiff.core.problem import Problem
from simdiff.errors import InputError, InvalidIndexError
from simdiff.pes.derivatives import _point
from simdiff.pes.geometry import cluster_info
from simdiff.pes.normal_modes import _normal_modes, internal_basis, rigid_body_basis

__all__ = ["MINIMIZE_METHODS", "StationaryPoint", "find_minimum", "find_saddle", "stationary_index"]

#: scipy.optimize.minimize methods and the derivatives simdiff feeds them.
MINIMIZE_METHODS: dict[str, str] = {
    "trust-exact": "hess",
    "trust-krylov": "hessp",
    "trust-ncg": "hessp",
    "Newton-CG": "hessp",
    "L-BFGS-B": "grad",
    "BFGS": "grad",
}
_RUNAWAY = 1e100  # |energy| beyond this: the saddle search has left the surface's region


@dataclass
class StationaryPoint:
    """A stationary point found by :func:`find_minimum` or :func:`find_saddle`.

    Attributes
    ----------
    x : ndarray, shape (n,)
    energy : float
    grad_norm : float
        Euclidean norm of the gradient at ``x``.
    index : int
        Number of negative Hessian eigenvalues, rigid-body modes excluded
        (0: minimum, 1: first-order saddle).
    eigenvalues : ndarray
        Eigenvalues of the projected mass-weighted Hessian (ascending).
    converged : bool
        The search met its gradient tolerance.
    message : str
    nit : int
        Iterations (scipy's count, or P-RFO steps).
    method : str
    """

    x: np.ndarray
    energy: float
    grad_norm: float
    index: int
    eigenvalues: np.ndarray
    converged: bool
    message: str
    nit: int
    method: str
    extra: dict[str, Any] = field(default_factory=dict)


def stationary_index(
    problem: Problem,
    x: Any,
    *,
    backend: str = "jax",
    tol: float | None = None,
    hessian: Any = None,
) -> tuple[int, np.ndarray]:
    r"""Index of a stationary point: the number of negative Hessian eigenvalues.

    Rigid-body modes of a cluster (6, or 5 for a linear one, 3 in a periodic
    box) are projected out first (:func:`~simdiff.pes.normal_modes`), so they
    are not counted either way.

    Parameters
    ----------
    problem : Problem
    x : array_like, shape (n,)
    backend : {"jax", "torch"}
    tol : float, optional
        Eigenvalues below ``-tol`` count as negative.  Default
        :math:`\sqrt{\varepsilon}\,\max_i |\lambda_i|` with the float64
        machine epsilon: curvatures smaller than that are not distinguishable
        from zero at a point whose gradient vanishes only to rounding.
    hessian : array_like, optional
        Precomputed Hessian at ``x``.

    Returns
    -------
    index : int
    eigenvalues : ndarray
        Of the projected mass-weighted Hessian, ascending.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.pes import muller_brown
    >>> stationary_index(muller_brown(), np.array([-0.82200156, 0.6243128]))[0]
    1
    """
    lam = _normal_modes(problem, _point(problem, x), backend, hessian=hessian).eigenvalues
    if tol is None:
        tol = _curvature_tol(lam)
    return int(np.sum(lam < -tol)), lam


def _curvature_tol(lam: np.ndarray) -> float:
    """Curvatures within this of zero are zero: ``sqrt(eps) * max |lam|`` (float64 eps)."""
    return math.sqrt(np.finfo(np.float64).eps) * float(np.max(np.abs(lam), initial=0.0))


def _result(problem, x, backend, converged, message, nit, method, extra=None) -> StationaryPoint:
    e, g = _value_and_grad(problem, x, backend=backend)
    h = _hessian(problem, x, backend=backend)
    index, lam = stationary_index(problem, x, backend=backend, hessian=h)
    extra = dict(extra or {})
    account = getattr(problem.fn, "neighbour_list", None)
    lists = account() if callable(account) else None
    if lists is not None:  # a cutoff list that follows the atoms: how often it was rebuilt
        extra["neighbour_list"] = lists
    return StationaryPoint(np.asarray(x), float(e), float(np.linalg.norm(g)), index, lam,
                           bool(converged), message, int(nit), method, extra)  # fmt: skip


def find_minimum(
    problem: Problem,
    x0: Any = None,
    *,
    method: str = "trust-exact",
    backend: str = "jax",
    gtol: float = 1e-8,
    maxiter: int = 2000,
    compile: bool | str = False,
) -> StationaryPoint:
    """Local minimum by :func:`scipy.optimize.minimize` with exact derivatives.

    The derivatives reach SciPy through :func:`simdiff.minimize`
    (:mod:`simdiff.core.optimize`), simdiff's one optimiser adapter (it
    compiles each derivative once and counts the calls).

    Parameters
    ----------
    problem : Problem
        Scalar energy.
    x0 : array_like, shape (n,), optional
        Start (default ``problem.x0``).
    method : str
        One of :data:`MINIMIZE_METHODS`: ``"trust-exact"`` gets the Hessian,
        ``"trust-krylov"``, ``"trust-ncg"`` and ``"Newton-CG"`` Hessian-vector
        products (never forming the Hessian), ``"L-BFGS-B"`` and ``"BFGS"`` the
        gradient.  Energy and gradient come from one reverse pass.
    backend : {"jax", "torch"}
    gtol : float
        Gradient-norm tolerance handed to SciPy (``xtol`` for Newton-CG,
        ``pgtol`` for L-BFGS-B).
    maxiter : int
    compile : {False, True, "auto"}
        Compile policy of the derivatives on torch (see :class:`simdiff.Derivatives`).

    Returns
    -------
    StationaryPoint
        With the index checked at the point reached (0 for a true minimum).

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.pes import cluster_problem, lennard_jones
    >>> tri = cluster_problem(lennard_jones, [[0, 0, 0], [1.2, 0, 0], [0.5, 1.0, 0.1]])
    >>> res = find_minimum(tri)
    >>> round(res.energy, 10), res.index
    (-3.0, 0)
    """
    if method not in MINIMIZE_METHODS:
        raise InputError(f"unknown method {method!r}; expected one of {list(MINIMIZE_METHODS)}")
    start = _point(problem, x0)
    if method == "Newton-CG":
        options: dict[str, Any] = {"maxiter": maxiter, "xtol": gtol}
    elif method == "L-BFGS-B":
        options = {"maxiter": maxiter, "gtol": gtol, "ftol": 0.0, "maxcor": 30}
    else:
        options = {"maxiter": maxiter, "gtol": gtol}
    config = Config(backend=backend, compile=compile)
    if method == "trust-exact" and cluster_info(problem) is not None:
        res = _projected_trust_exact(problem, start, config, options)
    else:
        res = minimize(problem, start, method, backend=backend, options=options, compile=compile)
    return _result(problem, res.x, backend, res.success, str(res.message), res.nit, method)


def _projected_trust_exact(
    problem: Problem, start: np.ndarray, config: Config, options: dict[str, Any]
) -> Any:
    """``trust-exact`` on the internal coordinates of a cluster.

    The rigid-body modes (3 translations and 3 rotations of a free cluster,
    the 3 translations of a periodic box) have zero curvature: a trust region
    on the raw Hessian wanders along them and stalls ("a bad approximation").
    Here the gradient is projected onto the internal subspace ``Q`` (so the
    tolerance holds for the projected gradient) and the Hessian is
    ``Q Q^T H Q Q^T + s (I - Q Q^T)`` with ``s`` the largest curvature: the
    rigid directions are stiff and no step follows them.
    """
    backend, compile = config.backend, config.compile

    def proj(x):
        q = _search_basis(problem, x)
        return q @ q.T

    def fun(x):
        e, g = _value_and_grad(problem, x, backend=backend, compile=compile)
        return float(e), proj(x) @ np.asarray(g, dtype=float)

    def hess(x):
        p = proj(x)
        h = p @ np.asarray(_hessian(problem, x, backend=backend, compile=compile)) @ p
        s = max(float(np.max(np.abs(np.linalg.eigvalsh(h)), initial=0.0)), 1.0)
        return h + s * (np.eye(x.size) - p)

    res = scipy.optimize.minimize(fun, start, method="trust-exact", jac=True, hess=hess,
                                  options=options)  # fmt: skip
    # Near the minimum the energy change of a step, g^2 / curvature, falls below the
    # rounding of E (about eps * |E| * n_pairs) and SciPy's ratio test stops it with the
    # gradient still above gtol.  Newton steps there need no energy comparison: they are
    # taken while the projected gradient shrinks (quadratically, from a point this close).
    x, g = np.asarray(res.x, dtype=float), fun(res.x)[1]
    gnorm = float(np.linalg.norm(g))
    for _ in range(20):
        if gnorm < options["gtol"]:
            break
        x_new = x - np.linalg.solve(hess(x), g)
        g_new = fun(x_new)[1]
        if not float(np.linalg.norm(g_new)) < gnorm:
            break
        x, g, gnorm = x_new, g_new, float(np.linalg.norm(g_new))
        res.nit += 1
    res.x = x
    res.success = gnorm < options["gtol"]
    if res.success:
        res.message = "projected gradient below gtol"
    else:
        res.message = f"projected gradient {gnorm:.3g} above gtol: {res.message}"
    return res


def _search_basis(problem: Problem, x: np.ndarray) -> np.ndarray:
    info = cluster_info(problem)
    if info is None:
        return np.eye(problem.n)
    rigid = rigid_body_basis(info.positions(x), periodic=info.box is not None, mass_weighted=False)
    return internal_basis(rigid)


def _prfo_step(b: np.ndarray, F: np.ndarray, k: int) -> np.ndarray:
    """P-RFO step in the Hessian eigenbasis: maximise along mode ``k``, minimise along the rest."""
    step = np.zeros_like(F)
    root = math.sqrt(b[k] ** 2 + 4.0 * F[k] ** 2)
    # b - lam_p with lam_p = (b + root) / 2; for b > 0 without cancellation (a small F
    # along a stiff mode made it 0.0: an infinite step)
    gap = 0.5 * (b[k] - root) if b[k] <= 0.0 else -2.0 * F[k] ** 2 / (b[k] + root)
    if abs(F[k]) > 0.0 and gap != 0.0:
        step[k] = -F[k] / gap
    rest = np.delete(np.arange(b.size), k)
    if rest.size:
        br, Fr = b[rest], F[rest]
        aug = np.zeros((rest.size + 1, rest.size + 1))
        aug[:-1, :-1] = np.diag(br)
        aug[:-1, -1] = aug[-1, :-1] = Fr
        lam_n = np.linalg.eigvalsh(aug)[0]
        denom = br - lam_n
        ok = np.abs(denom) > 1e-14 * max(1.0, float(np.max(np.abs(br))))
        step[rest] = np.where(ok, -Fr / np.where(ok, denom, 1.0), 0.0)
    return step


def find_saddle(
    problem: Problem,
    x0: Any = None,
    *,
    mode: int = 0,
    backend: str = "jax",
    gtol: float = 1e-8,
    max_steps: int = 500,
    trust_radius: float = 0.1,
    max_trust: float = 0.5,
    compile: bool | str = False,
) -> StationaryPoint:
    r"""First-order saddle point by partitioned rational-function optimisation (P-RFO).

    Each step diagonalises the exact Hessian (rigid-body modes of a cluster
    removed), maximises the energy along one eigenvector and minimises it
    along all others (Baker 1986), and is capped at a trust radius updated
    from the agreement of the quadratic model with the actual energy change.

    Parameters
    ----------
    problem : Problem
        Scalar energy.
    x0 : array_like, shape (n,), optional
        Start (default ``problem.x0``); from a minimum, the search climbs along
        the followed mode.
    mode : int
        Which eigenvector to follow at the first step (0: lowest curvature;
        ``0 <= mode < n_internal``, else :class:`~simdiff.errors.InvalidIndexError`);
        afterwards the eigenvector with the largest overlap with the previous
        one is followed.
    backend : {"jax", "torch"}
    gtol : float
        Stop when the norm of the gradient projected onto the internal
        subspace (rigid-body modes of a cluster removed) is below ``gtol``.
    max_steps : int
    trust_radius, max_trust : float
        Initial and largest step length (in the problem's length unit).
    compile : {False, True, "auto"}
        Compile policy of the derivatives on torch (see :class:`simdiff.Derivatives`).

    Returns
    -------
    StationaryPoint
        ``converged`` says whether ``gtol`` was met in ``max_steps`` at a point
        of index 1; ``index`` is checked at the point reached.  A point with a
        vanishing gradient and another index (a flat direction, a dissociated
        fragment) comes back with ``converged=False`` and a message saying so.

    References
    ----------
    J. Baker, J. Comput. Chem. 7, 385 (1986); A. Banerjee, N. Adams, J. Simons
    and R. Shepard, J. Phys. Chem. 89, 52 (1985).

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.pes import muller_brown
    >>> s = find_saddle(muller_brown(), np.array([-0.7, 0.7]))
    >>> s.x.round(3), s.index
    (array([-0.822,  0.624]), 1)
    """
    x = _point(problem, x0).copy()
    n_modes = _search_basis(problem, x).shape[1]
    if (
        isinstance(mode, bool)
        or not isinstance(mode, (int, np.integer))
        or not (0 <= mode < n_modes)
    ):
        raise InvalidIndexError(
            f"mode={mode!r} is not a mode of {problem.name!r}: it has {n_modes} internal "
            f"modes (rigid-body modes removed), so mode must be in 0..{n_modes - 1}"
        )
    followed: np.ndarray | None = None
    trust = float(trust_radius)
    e, g = _value_and_grad(problem, x, backend=backend, compile=compile)
    e, g = float(e), np.asarray(g)
    for step_no in range(max_steps):
        q = _search_basis(problem, x)
        gq = q.T @ g
        hq = q.T @ np.asarray(_hessian(problem, x, backend=backend, compile=compile)) @ q
        b, V = np.linalg.eigh(hq)
        k = mode if followed is None else int(np.argmax(np.abs(V.T @ (q.T @ followed))))
        followed = q @ V[:, k]
        F = V.T @ gq
        if np.linalg.norm(gq) < gtol:  # the projected gradient: rigid-body parts excluded
            # the tolerance of stationary_index: a curvature within rounding of zero (a
            # flat or dissociated direction) is not the negative one of a saddle
            tol = _curvature_tol(b)
            if b[k] < -tol and np.all(np.delete(b, k) > tol):
                return _saddle(problem, x, backend, step_no)
            s = np.zeros_like(F)  # stationary but not a saddle along mode k: step out along it
            s[k] = trust
        else:
            s = _prfo_step(b, F, k)
        length = float(np.linalg.norm(s))
        if length > trust:
            s *= trust / length
        predicted = float(F @ s + 0.5 * s @ (b * s))
        x_new = x + q @ (V @ s)
        e_new, g_new = _value_and_grad(problem, x_new, backend=backend, compile=compile)
        if not abs(float(e_new)) < _RUNAWAY:
            return _result(
                problem,
                x,
                backend,
                False,
                "energy diverged: the followed mode leaves the region (try another mode or start)",
                step_no,
                "P-RFO",
            )
        ratio = (float(e_new) - e) / predicted if predicted != 0.0 else 1.0
        if 0.75 < ratio < 1.33 and length >= 0.99 * trust:
            trust = min(2.0 * trust, max_trust)
        elif ratio < 0.25 or ratio > 3.0:
            trust = max(0.5 * trust, 1e-6)
        x, e, g = x_new, float(e_new), np.asarray(g_new)
    q = _search_basis(problem, x)
    if np.linalg.norm(q.T @ g) < gtol:
        return _saddle(problem, x, backend, max_steps)
    return _result(
        problem, x, backend, False, f"gtol not met in max_steps={max_steps}", max_steps, "P-RFO"
    )


def _saddle(problem: Problem, x: np.ndarray, backend: str, nit: int) -> StationaryPoint:
    """The P-RFO result at a point whose gradient is below ``gtol``: converged only at index 1."""
    point = _result(problem, x, backend, True, "gradient below gtol", nit, "P-RFO")
    if point.index != 1:
        point.converged = False
        point.message = (
            f"gradient below gtol at a stationary point of index {point.index}, not a "
            "first-order saddle (a flat direction or a dissociated fragment?): try another "
            "mode or start"
        )
    return point
