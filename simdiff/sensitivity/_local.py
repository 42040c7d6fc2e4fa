"""Local sensitivity analysis: sensitivity matrix, Fisher information, Laplace covariance.

All three rest on exact derivatives at one parameter point: the Jacobian
``S = dy/dp`` (:func:`simdiff.jacobian`), the Gauss–Newton Fisher information
``F = J^T Sigma^{-1} J``, and the Hessian of a negative log-likelihood
(:func:`simdiff.hessian`).  A singular matrix is never an exception: the result
states the rank, the condition number and the unidentifiable directions (a
basis of the null space).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg
import scipy.stats

from simdiff.core.config import Config
from simdiff.core.problem import Problem
from simdiff.errors import InputError, ShapeError
from simdiff.sensitivity._common import Named, check_problem, derivatives, point, spec_of

__all__ = [
    "FisherInformation",
    "LaplaceResult",
    "LocalSensitivity",
    "fisher_information",
    "laplace",
    "local_sensitivity",
]


# --------------------------------------------------------------------------- sensitivity matrix


@dataclass
class LocalSensitivity(Named):
    """What :func:`local_sensitivity` returns.

    Attributes
    ----------
    x : ndarray, shape (n,)
        The parameter point.
    values : ndarray, shape (m,)
        Outputs ``y(x)`` (``m = 1`` for a scalar problem).
    jacobian : ndarray, shape (m, n)
        ``S_ij = dy_i / dx_j``.
    relative : ndarray, shape (m, n)
        Logarithmic sensitivities ``S_ij x_j / y_i = d log y_i / d log x_j``;
        NaN where ``y_i = 0``.
    importance : ndarray, shape (n,)
        Root mean square over outputs of the relative sensitivities (NaN
        entries left out).
    ranking : ndarray of int, shape (n,)
        Parameters from the most to the least important.
    spec : ParamSpec
        The parameters' names (``names``) and structure (``tree("importance")``);
        ``print(result)`` is a table of ``x`` and ``importance`` by name.
    """

    x: np.ndarray
    values: np.ndarray
    jacobian: np.ndarray
    relative: np.ndarray
    importance: np.ndarray
    ranking: np.ndarray
    spec: Any = field(default=None, repr=False)
    _columns = ("x", "importance")


def local_sensitivity(
    problem: Problem, x: Any = None, *, backend: str = "jax", mode: str = "auto"
) -> LocalSensitivity:
    """Sensitivity matrix, logarithmic sensitivities and a parameter ranking at ``x``.

    Parameters
    ----------
    problem : Problem
        Scalar or vector valued; its input is the parameter vector.
    x : array_like, shape (n,), optional
        Parameter point (default ``problem.x0``).
    backend : {"jax", "torch"}
    mode : {"auto", "fwd", "rev"}
        Jacobian mode (see :func:`simdiff.jacobian`).

    Returns
    -------
    LocalSensitivity

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.sensitivity import local_sensitivity
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1] ** 2, x[0]]),
    ...                     x0=np.array([2.0, 3.0]))
    >>> s = local_sensitivity(p)
    >>> s.relative
    array([[1., 2.],
           [1., 0.]])
    >>> s.importance, s.ranking
    (array([1.        , 1.41421356]), array([1, 0]))
    """
    problem = check_problem(problem)
    x = point(problem, x)
    d = derivatives(problem, Config(backend=backend))
    y = np.atleast_1d(np.asarray(d.value(x), dtype=np.float64))
    jac = np.asarray(d.jacobian(x, mode=mode), dtype=np.float64).reshape(y.shape[0], problem.n)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(y[:, None] != 0.0, jac * x[None, :] / y[:, None], np.nan)
    finite = np.isfinite(relative)
    counts = finite.sum(axis=0)
    sq = np.where(finite, relative, 0.0) ** 2
    importance = np.where(counts > 0, np.sqrt(sq.sum(axis=0) / np.maximum(counts, 1)), np.nan)
    ranking = np.argsort(-np.nan_to_num(importance, nan=-1.0), kind="stable")
    return LocalSensitivity(x, y, jac, relative, importance, ranking, spec_of(problem))


# --------------------------------------------------------------------------- spectra


@dataclass
class _Spectrum:
    eigenvalues: np.ndarray  # descending
    eigenvectors: np.ndarray  # columns
    rank: int
    condition: float
    null_space: np.ndarray  # (n, k): columns span the unidentifiable directions

    @property
    def identifiable(self) -> bool:
        return self.null_space.shape[1] == 0


def _spectrum_from_svd(jw: np.ndarray, rtol: float | None) -> _Spectrum:
    """Eigen-decomposition of ``jw^T jw`` through the SVD of ``jw`` (squares nothing)."""
    m, n = jw.shape
    _, s, vt = np.linalg.svd(jw, full_matrices=True)
    s = np.concatenate([s, np.zeros(n - s.shape[0])])
    tol = (max(m, n) * np.finfo(np.float64).eps if rtol is None else rtol) * (s[0] if n else 0.0)
    rank = int(np.sum(s > tol))
    condition = float(s[0] ** 2 / s[-1] ** 2) if rank == n and s[-1] > 0 else float("inf")
    return _Spectrum(s**2, vt.T, rank, condition, vt.T[:, rank:])


# --------------------------------------------------------------------------- Fisher information


@dataclass
class FisherInformation(Named):
    """What :func:`fisher_information` returns.

    Attributes
    ----------
    matrix : ndarray, shape (n, n)
        ``F = J^T Sigma^{-1} J``.
    eigenvalues : ndarray, shape (n,)
        Descending.  Large: stiff directions (well determined); small: sloppy.
    eigenvectors : ndarray, shape (n, n)
        Column ``k`` belongs to ``eigenvalues[k]``; column 0 is the stiffest
        direction, the last the sloppiest.
    rank : int
    condition : float
        ``lambda_max / lambda_min``; ``inf`` when ``F`` is singular.
    identifiable : bool
        Whether ``F`` has full rank (numerically: no singular value of the
        whitened Jacobian below ``rtol`` times the largest).
    null_space : ndarray, shape (n, n - rank)
        Columns span the parameter directions the data cannot determine.
    covariance : ndarray, shape (n, n) or None
        Cramér–Rao covariance ``F^{-1}``; ``None`` when ``F`` is singular.
    std_errors : ndarray, shape (n,) or None
    jacobian : ndarray, shape (m, n)
    message : str
    spec : ParamSpec
        The parameters' names (``names``) and structure: ``labelled("matrix")``
        and ``labelled("covariance")`` are looked up by name pairs,
        ``tree("std_errors")`` has the parameters' structure, and
        ``print(result)`` is a table of ``F_ii`` and the standard errors by name.
    """

    matrix: np.ndarray
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    rank: int
    condition: float
    identifiable: bool
    null_space: np.ndarray
    covariance: np.ndarray | None
    std_errors: np.ndarray | None
    jacobian: np.ndarray = field(repr=False)
    message: str = ""
    spec: Any = field(default=None, repr=False)

    def _table_columns(self) -> dict[str, Any]:
        cols = {"F_ii": np.diag(self.matrix)}
        if self.std_errors is not None:
            cols["std_error"] = self.std_errors
        return cols


def _whitener(sigma: Any, m: int):
    """A function applying ``Sigma^{-1/2}`` (``L^{-1}`` with ``Sigma = L L^T``) to (m, k) arrays."""
    s = np.asarray(sigma, dtype=np.float64)
    if not np.all(np.isfinite(s)):
        raise InputError("sigma must be finite")
    if s.ndim == 0 or s.shape == (m,):
        if np.any(s <= 0):
            raise InputError(f"sigma must be positive; got minimum {float(np.min(s))}")
        scale = np.broadcast_to(s, (m,))
        return lambda a: a / scale[:, None]
    if s.shape == (m, m):
        if not np.allclose(s, s.T, rtol=1e-12, atol=0.0):
            raise InputError("the noise covariance must be symmetric")
        try:
            chol = np.linalg.cholesky(s)
        except np.linalg.LinAlgError:
            raise InputError("the noise covariance must be positive definite") from None
        return lambda a: scipy.linalg.solve_triangular(chol, a, lower=True)
    raise ShapeError(
        f"sigma must be a scalar, shape ({m},) (per-output) or ({m}, {m}) (covariance); "
        f"got shape {s.shape}"
    )


def fisher_information(
    problem: Problem,
    x: Any = None,
    *,
    sigma: Any = 1.0,
    backend: str = "jax",
    rtol: float | None = None,
) -> FisherInformation:
    """Gauss–Newton Fisher information ``J^T Sigma^{-1} J`` and its eigen-decomposition.

    The model is ``data = y(x) + noise`` with Gaussian noise of covariance
    ``Sigma``: a scalar ``sigma`` (``Sigma = sigma^2 I``), per-output standard
    deviations ``sigma`` of shape ``(m,)``, or a full covariance ``(m, m)``.

    Parameters
    ----------
    problem : Problem
        The model ``y(x)``, shape ``()`` or ``(m,)``.
    x : array_like, shape (n,), optional
    sigma : float, array (m,) or array (m, m)
    backend : {"jax", "torch"}
    rtol : float, optional
        A singular value ``s_k`` of the whitened Jacobian ``L^{-1} J`` counts
        as zero when ``s_k <= rtol * s_max``; default ``max(m, n) * eps``
        (as ``numpy.linalg.matrix_rank``).

    Returns
    -------
    FisherInformation

    Notes
    -----
    The eigenvalues are the squared singular values of the whitened Jacobian,
    computed by an SVD so that the conditioning is not squared numerically.
    The sloppiest directions are the last eigenvector columns; a singular
    FIM is reported through ``identifiable=False`` and ``null_space``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.sensitivity import fisher_information
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] + x[1], 2.0 * (x[0] + x[1])]),
    ...                     x0=np.zeros(2))
    >>> fim = fisher_information(p)
    >>> fim.rank, fim.identifiable
    (1, False)
    >>> np.round(np.abs(fim.null_space[:, 0]), 6)
    array([0.707107, 0.707107])
    """
    problem = check_problem(problem)
    x = point(problem, x)
    jac = np.asarray(derivatives(problem, Config(backend=backend)).jacobian(x), dtype=np.float64)
    jac = jac.reshape(-1, problem.n)
    jw = _whitener(sigma, jac.shape[0])(jac)
    spec = _spectrum_from_svd(jw, rtol)
    matrix = jw.T @ jw
    if spec.identifiable:
        v, lam = spec.eigenvectors, spec.eigenvalues
        cov = (v / lam) @ v.T
        msg = (
            f"identifiable: rank {spec.rank} of {problem.n}, condition number {spec.condition:.3g}"
        )
        return FisherInformation(
            matrix,
            lam,
            v,
            spec.rank,
            spec.condition,
            True,
            spec.null_space,
            cov,
            np.sqrt(np.diag(cov)),
            jac,
            msg,
            spec_of(problem),
        )
    msg = (
        f"not identifiable: rank {spec.rank} of {problem.n}; {problem.n - spec.rank} "
        "direction(s) in null_space cannot be determined from these outputs"
    )
    return FisherInformation(
        matrix,
        spec.eigenvalues,
        spec.eigenvectors,
        spec.rank,
        spec.condition,
        False,
        spec.null_space,
        None,
        None,
        jac,
        msg,
        spec_of(problem),
    )


# --------------------------------------------------------------------------- Laplace


@dataclass
class LaplaceResult(Named):
    """What :func:`laplace` returns.

    Attributes
    ----------
    x : ndarray, shape (n,)
    hessian : ndarray, shape (n, n)
    eigenvalues, eigenvectors : ndarray
        Of the Hessian, eigenvalues descending.
    positive_definite : bool
        Whether ``x`` is a strict local minimum (all eigenvalues above
        ``rtol * max |lambda|``); only then are the covariance and intervals set.
    condition : float
    null_space : ndarray, shape (n, k)
        Flat directions (|lambda| <= tolerance): unidentifiable.
    negative_directions : ndarray, shape (n, j)
        Directions of negative curvature (``x`` is not a minimum).
    covariance : ndarray (n, n) or None
        ``scale * H^{-1}``.
    std_errors : ndarray (n,) or None
    ci : ndarray (2, n) or None
        ``x -+ z sqrt(diag(cov))`` at the requested level.
    level : float
    message : str
    spec : ParamSpec
        The parameters' names (``names``) and structure (``tree("std_errors")``,
        ``labelled("covariance")``); ``print(result)`` is a table of the
        estimates, standard errors and intervals by name.
    """

    x: np.ndarray
    hessian: np.ndarray
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    positive_definite: bool
    condition: float
    null_space: np.ndarray
    negative_directions: np.ndarray
    covariance: np.ndarray | None
    std_errors: np.ndarray | None
    ci: np.ndarray | None
    level: float
    message: str
    spec: Any = field(default=None, repr=False)

    def _table_columns(self) -> dict[str, Any]:
        cols: dict[str, Any] = {"estimate": self.x}
        if self.std_errors is not None and self.ci is not None:
            pct = f"{100 * self.level:g}%"
            cols |= {"std_error": self.std_errors, f"{pct} low": self.ci[0],
                     f"{pct} high": self.ci[1]}  # fmt: skip
        return cols


def laplace(
    problem: Problem,
    x: Any = None,
    *,
    backend: str = "jax",
    level: float = 0.95,
    scale: float = 1.0,
    rtol: float | None = None,
) -> LaplaceResult:
    """Laplace (Hessian-based) covariance and confidence intervals at an optimum.

    ``problem`` is a negative log-likelihood (or negative log-posterior)
    ``L(x)``; at its minimum ``x`` the posterior is approximated by a normal
    with covariance ``scale * H^{-1}``, ``H`` the exact Hessian of ``L``.

    Parameters
    ----------
    problem : Problem
        Scalar.
    x : array_like, shape (n,), optional
        The optimum (e.g. ``simdiff.minimize(...).x``); default ``problem.x0``.
    backend : {"jax", "torch"}
    level : float
        Confidence level of the normal intervals (default 0.95).
    scale : float
        Multiplies the covariance, e.g. the residual variance estimate
        ``2 L / (m - n)`` when ``L = sum r^2 / 2`` had unknown noise.
    rtol : float, optional
        Eigenvalues with ``|lambda| <= rtol * max|lambda|`` are flat
        directions; default ``n * eps``.

    Returns
    -------
    LaplaceResult
        A singular or indefinite Hessian is stated (``positive_definite=False``,
        ``null_space``, ``negative_directions``, ``message``), not raised.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.sensitivity import laplace
    >>> p = simdiff.Problem(lambda x, ops: 2.0 * x[0] ** 2 + 0.5 * x[1] ** 2, x0=np.zeros(2))
    >>> r = laplace(p)
    >>> r.covariance
    array([[0.25, 0.  ],
           [0.  , 1.  ]])
    """
    problem = check_problem(problem)
    x = point(problem, x)
    if not 0.0 < float(level) < 1.0:
        raise InputError(f"level must lie in (0, 1); got {level}")
    if not (np.isfinite(scale) and scale > 0):
        raise InputError(f"scale must be positive and finite; got {scale}")
    if not problem.is_scalar:
        raise ShapeError(
            f"laplace needs a scalar negative log-likelihood; {problem.name!r} returns shape "
            f"{problem.output_shape} (for a model y(x) use fisher_information)"
        )
    h = np.asarray(derivatives(problem, Config(backend=backend)).hessian(x), dtype=np.float64)
    h = 0.5 * (h + h.T)
    lam, vec = np.linalg.eigh(h)
    lam, vec = lam[::-1], vec[:, ::-1]
    biggest = float(np.max(np.abs(lam)))
    tol = (problem.n * np.finfo(np.float64).eps if rtol is None else rtol) * biggest
    flat = np.abs(lam) <= tol
    negative = (lam < 0) & ~flat
    pd = not (flat.any() or negative.any()) and biggest > 0
    condition = float(lam[0] / lam[-1]) if pd else float("inf")
    if pd:
        cov = scale * (vec / lam) @ vec.T
        se = np.sqrt(np.diag(cov))
        z = float(scipy.stats.norm.ppf(0.5 * (1.0 + level)))
        ci = np.stack([x - z * se, x + z * se])
        msg = f"positive definite Hessian, condition number {condition:.3g}"
    else:
        cov = se = ci = None  # type: ignore[assignment]
        parts = []
        if flat.any():
            parts.append(f"{int(flat.sum())} flat (unidentifiable) direction(s) in null_space")
        if negative.any():
            parts.append(
                f"{int(negative.sum())} direction(s) of negative curvature: x is not a minimum"
            )
        msg = "Hessian not positive definite: " + "; ".join(parts or ["zero Hessian"])
    return LaplaceResult(
        x,
        h,
        lam,
        vec,
        pd,
        condition,
        vec[:, flat],
        vec[:, negative],
        cov,
        se,
        ci,
        float(level),
        msg,
        spec_of(problem),
    )
