"""Moment propagation: mean and variance of ``f(X)`` for Gaussian ``X`` by Taylor expansion.

For ``X ~ N(mu, Sigma)``, ``Sigma = L L^T`` (columns ``l_i``), expanding ``f``
about ``mu`` (``g`` the gradient, ``H`` the Hessian, ``T`` the third
derivative) and taking Gaussian moments (Isserlis):

- ``E[f(X)] = f(mu) + tr(Sigma H) / 2 + O(Sigma^2)``
- ``Var f(X) = g^T Sigma g + tr((Sigma H)^2) / 2 + tau_3 + O(Sigma^3)``,
  ``tau_3 = sum_i T[Sigma g, l_i, l_i]`` (from ``2 Cov(g^T d, T[d]^3 / 6)``).

The mean shift is a collapsed Laplacian; ``tr((Sigma H)^2) = ||L^T H L||_F^2``
comes from ``r`` Hessian-vector products; ``tau_3`` from one collapsed
third-order pass by polarisation, ``6 sum_i T[l_i, l_i, u] =
sum_i (T[l_i + u]^3 - T[l_i - u]^3) - 2 r T[u]^3``.  ``tau_3`` is the leading
term the second-order variance leaves out: a warning says when it is not
small against the variance.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simdiff._log import ProgressCounter
from simdiff.core.config import Config
from simdiff.core.operator_builders import covariance_factor
from simdiff.errors import MomentWarning, OptionError, ShapeError
from simdiff.sensitivity._common import Named, check_problem, derivatives, point, spec_of

__all__ = ["MomentWarning", "Moments", "moments"]


@dataclass(frozen=True)
class Moments(Named):
    """Mean and variance of ``f(X)``, ``X ~ N(mu, Sigma)``, by Taylor expansion.

    Attributes
    ----------
    mean, variance : float
        The estimates (``order=1``: ``f(mu)`` and ``g^T Sigma g``).
    value : float
        ``f(mu)``.
    mean_shift : float
        ``tr(Sigma H) / 2`` (0 for ``order=1``).
    variance_terms : dict
        ``{"gradient": g^T Sigma g, "hessian": tr((Sigma H)^2) / 2}``.
    third_order : float
        ``tau_3``, the neglected third-order variance term (estimated by Taylor mode).
    order : int
    gradient : ndarray, shape (n,)
        ``g``, the gradient at ``mean``.
    variance_contributions : ndarray, shape (n,)
        The first-order variance split by parameter, ``g_i (Sigma g)_i``
        (``g_i^2 Sigma_ii`` for a diagonal ``Sigma``; negative terms are
        possible with correlations); they sum to ``variance_terms["gradient"]``.
    spec : ParamSpec
        The parameters' names (``names``) and structure
        (``tree("variance_contributions")``); ``print(result)`` gives the mean
        and variance and a table of ``gradient`` and
        ``variance_contributions``, one row per parameter.
    """

    mean: float
    variance: float
    value: float
    mean_shift: float
    variance_terms: dict
    third_order: float
    order: int
    gradient: np.ndarray | None = field(default=None, repr=False)
    variance_contributions: np.ndarray | None = field(default=None, repr=False)
    spec: Any = field(default=None, repr=False)
    _columns = ("gradient", "variance_contributions")

    def __str__(self) -> str:
        head = f"mean {self.mean:.6g}, variance {self.variance:.6g} (order {self.order})"
        table = self.table()
        return head + (f"\n{table}" if table else "")


def moments(
    problem: Any,
    mean: Any,
    cov: Any,
    order: int = 2,
    *,
    backend: str = "jax",
    warn_rtol: float = 0.1,
    progress: bool = False,
) -> Moments:
    """Mean and variance of ``f(X)`` for Gaussian ``X ~ N(mean, cov)`` by Taylor expansion.

    Parameters
    ----------
    problem : Problem
        Scalar valued.
    mean : array_like, shape (n,)
    cov : array_like, shape (n, n) or (n,), or dict
        Symmetric positive semi-definite (1-D: the diagonal).  A dict gives
        the variances (a diagonal ``Sigma``) by parameter name or leaf path
        (:meth:`simdiff.ParamSpec.per_scalar`); every parameter needs one.
    order : {1, 2}
        ``1``: ``f(mu)``, ``g^T Sigma g`` (the delta method); ``2``: with the
        mean shift ``tr(Sigma H)/2`` and the variance term ``tr((Sigma H)^2)/2``.
    backend : {"jax", "torch"}
    warn_rtol : float
        A :class:`MomentWarning` is issued when ``|tau_3| > warn_rtol * variance``.
    progress : bool
        Show a progress bar of the derivative stages (gradient, third-order
        sum, Laplacian, Hessian-vector products) on standard error (tqdm);
        each stage is one compiled call, the first of which pays the compile.

    Returns
    -------
    Moments

    Examples
    --------
    ``f = x0^2 + x0 x1``, ``X ~ N((1, 2), diag(0.1, 0.2))``: exact mean
    ``f(mu) + 0.1 = 3.1``, variance ``g^T Sigma g + tr((Sigma H)^2)/2 =
    1.8 + 0.04 = 1.84`` (a quadratic: the expansion is exact).

    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 + x[0] * x[1], x0=np.zeros(2))
    >>> m = simdiff.sensitivity.moments(p, np.array([1.0, 2.0]), np.array([0.1, 0.2]))
    >>> round(m.mean, 12), round(m.variance, 12)
    (3.1, 1.84)
    """
    problem = check_problem(problem)
    if not problem.is_scalar:
        raise ShapeError(
            f"moments needs a scalar-valued problem; {problem.name!r} returns shape "
            f"{problem.output_shape}"
        )
    if order not in (1, 2) or isinstance(order, bool):
        raise OptionError(f"moments: order must be 1 or 2; got {order!r}")
    mu = point(problem, mean, "mean")
    if isinstance(cov, Mapping):
        cov = np.asarray(spec_of(problem).per_scalar(cov, "moments: cov"), dtype=np.float64)
    Lr = covariance_factor(problem.n, weights=cov)  # (r, n); validates cov
    d = derivatives(problem, Config(backend=backend))
    r = Lr.shape[0]
    stages = 1 + (r > 0) * (1 + 2 * (order == 2))
    bar = ProgressCounter(desc=f"moments {problem.name}", total=stages, enabled=progress)
    with bar:
        value, g = (float(np.asarray(a)) if np.ndim(a) == 0 else np.asarray(a) for a in
                    d.value_and_grad(mu))  # fmt: skip
        bar.update(1)
        Lg = Lr @ g
        grad_var = float(Lg @ Lg)
        sigma_g = Lr.T @ Lg  # Sigma g
        shift, hess_var, tau3 = 0.0, 0.0, 0.0
        if r:
            u = Lr.T @ Lg  # Sigma g
            V = np.concatenate([Lr + u, Lr - u, u[None]])
            w = np.concatenate([np.full(r, 1.0 / 6.0), np.full(r, -1.0 / 6.0), [-r / 3.0]])
            tau3 = float(np.asarray(d.derivative_sum(3, V, mu, weights=w)))
            bar.update(1)
            if order == 2:
                shift = 0.5 * float(np.asarray(d.laplacian(mu, factor=Lr.T)))
                bar.update(1)
                A = np.asarray(d.hvp(Lr, mu)) @ Lr.T  # L^T H L, r Hessian-vector products
                hess_var = 0.5 * float(np.sum(A * A))
                bar.update(1)
    variance = grad_var + hess_var
    if abs(tau3) > warn_rtol * variance:
        warnings.warn(
            f"moments of {problem.name!r}: the third-order variance term tau_3 = {tau3:.4g} is "
            f"not small against the order-{order} variance {variance:.4g} (warn_rtol="
            f"{warn_rtol}); the Taylor expansion may be inaccurate at this covariance",
            MomentWarning,
            stacklevel=2,
        )
    return Moments(
        mean=float(value) + shift,
        variance=variance,
        value=float(value),
        mean_shift=shift,
        variance_terms={"gradient": grad_var, "hessian": hess_var},
        third_order=tau3,
        order=int(order),
        gradient=np.asarray(g, dtype=np.float64).reshape(problem.n),
        variance_contributions=np.asarray(g, dtype=np.float64).reshape(problem.n) * sigma_g,
        spec=spec_of(problem),
    )
