"""Differential operators by collapsed Taylor mode: ``laplacian``, ``biharmonic``,
``derivative_sum``, and their stochastic (Hutchinson, STDE) estimates.

The deterministic operators are :class:`~simdiff.Derivatives` methods
(:mod:`simdiff.core.operator_builders`); these functions call the problem's cached
``Derivatives``, so each operator is compiled once per shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.core.derivatives import cached_derivatives
from simdiff.core.operator_builders import covariance_factor
from simdiff.errors import OptionError, ShapeError

__all__ = [
    "StochasticEstimate",
    "biharmonic",
    "derivative_sum",
    "laplacian",
    "stochastic_biharmonic",
    "stochastic_laplacian",
]

DISTRIBUTIONS = ("rademacher", "gaussian")


def derivative_sum(
    problem: Any,
    order: int,
    directions: Any,
    x: Any = None,
    *,
    weights: Any = None,
    method: str = "auto",
    backend: str | None = None,
    dtype: Any = None,
) -> Any:
    """Weighted sum of ``order``-th directional derivatives, ``sum_d w_d D^K f(x)[v_d]^K``.

    The contraction of the order-``K`` derivative tensor with the directions
    ``v_d`` (rows of ``directions``), each ``K`` times.

    Parameters
    ----------
    problem : Problem
        Scalar or vector valued.
    order : int
        ``K >= 1``.
    directions : array_like, shape (D, n)
    x : array_like, shape (n,) or (batch, n), optional
        Default ``problem.x0``.
    weights : array_like, shape (D,) or (G, D), optional
        Default ones.  With ``(G, D)``, ``G`` weighted sums come back (shape
        ``(G, *out)``) from the same pass.
    method : {"auto", "collapsed", "taylor", "nested"}
        ``"auto"`` (default): ``"collapsed"``, or ``"nested"`` for a problem that
        does not run in the Taylor context (:meth:`Problem.from_jax`,
        :meth:`Problem.from_torch`; the reason is in ``Derivatives.cache_info()``).
        ``"collapsed"``: one collapsed Taylor pass (the top coefficient summed
        over directions as it is propagated; ``1 + (K-1) D + G`` vectors);
        ``"taylor"``: ``D`` separate Taylor passes (``D (K+1)`` vectors);
        ``"nested"``: nested AD per direction (forward over reverse for
        ``K = 2`` on scalar problems).  All agree to rounding.
    backend : {"jax", "torch", "numpy"}, optional
        Default: as :func:`simdiff.grad` (the framework of a traced ``x``, else
        ``problem.default_backend``).
        ``"numpy"`` evaluates the ``"collapsed"`` and ``"taylor"`` methods.

    Returns
    -------
    array, shape ``out`` (``(G, *out)`` for 2-D weights); a leading batch axis if ``x`` has one.

    Examples
    --------
    ``D^3 f[v]^3`` of ``f = x0^2 x1`` along ``(1, 1)`` and ``(1, -1)``: ``6`` and ``-6``.

    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1], x0=np.zeros(2))
    >>> V = np.array([[1.0, 1.0], [1.0, -1.0]])
    >>> simdiff.derivative_sum(p, 3, V, weights=np.array([[1.0, 0.0], [0.0, 1.0]]))
    array([ 6., -6.])
    """
    d = cached_derivatives(problem, backend, x, dtype=dtype)
    return d.derivative_sum(order, directions, x, weights=weights, method=method)


def laplacian(
    problem: Any,
    x: Any = None,
    *,
    weights: Any = None,
    factor: Any = None,
    method: str = "auto",
    backend: str | None = None,
    dtype: Any = None,
) -> Any:
    """The Laplacian ``tr H(x)``, or ``tr(Sigma H(x))`` with ``weights=Sigma``.

    Parameters
    ----------
    problem : Problem
        Scalar valued.
    x : array_like, shape (n,) or (batch, n), optional
    weights : array_like, shape (n, n) or (n,), optional
        ``Sigma``, symmetric positive semi-definite (1-D: its diagonal).
        ``E[f(mu + L z)] ~ f(mu) + tr(Sigma H) / 2`` for ``z ~ N(0, I)``.
    factor : array_like, shape (n, r), optional
        ``L`` with ``Sigma = L L^T`` instead of ``weights`` (``r`` directions).
    method : {"auto", "collapsed", "taylor", "nested"}
        See :func:`derivative_sum`; ``"nested"`` is ``r`` forward-over-reverse
        Hessian-vector products.
    backend : {"jax", "torch", "numpy"}, optional
        Default: as :func:`simdiff.grad` (the framework of a traced ``x``, else
        ``problem.default_backend``).

    Returns
    -------
    array, shape () or (batch,)

    Raises
    ------
    ShapeError
        A vector-valued problem; ``weights``/``factor`` of the wrong shape.
    OptionError
        ``weights`` not symmetric or not positive semi-definite; an unknown method.

    Notes
    -----
    The collapsed pass is the forward Laplacian of folx: the primal (once),
    the ``r`` first-order coefficients and the summed second-order
    coefficient, ``r + 2`` vectors, against ``3 r`` for separate Taylor
    passes, with hand-written order-2 rules for every op.  It runs through
    loops (``ops.scan``), hence through simdiff's ODE and PDE solvers.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 3), x0=np.array([1.0, 2.0]))
    >>> simdiff.laplacian(p)
    array(18.)
    >>> simdiff.laplacian(p, weights=np.diag([1.0, 0.5]), backend="torch")
    array(12.)
    """
    d = cached_derivatives(problem, backend, x, dtype=dtype)
    return d.laplacian(x, weights=weights, factor=factor, method=method)


def biharmonic(
    problem: Any,
    x: Any = None,
    *,
    weights: Any = None,
    factor: Any = None,
    method: str = "auto",
    backend: str | None = None,
    dtype: Any = None,
) -> Any:
    """The biharmonic operator ``Delta^2 f = sum_ij d^4 f / dx_i^2 dx_j^2`` (or in metric Sigma).

    With ``Sigma = L L^T``: ``sum_ij D^4 f[l_i, l_i, l_j, l_j]``.

    Parameters
    ----------
    problem, x, weights, factor, backend
        As in :func:`laplacian`.
    method : {"auto", "collapsed", "taylor", "nested"}
        ``"auto"``: as in :func:`laplacian`.  ``"collapsed"``/``"taylor"``:
        fourth-order Taylor along the ``r^2`` directions ``l_i`` and
        ``l_i +- l_j`` (weights ``1 - (r-1)/3`` and ``1/6``, from polarisation);
        ``"nested"``: the Laplacian of the Laplacian, both by forward over
        reverse (``r^2`` nested products).
        For large ``r`` use :func:`stochastic_biharmonic`.

    Returns
    -------
    array, shape () or (batch,)

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1] ** 2 + x[0] ** 4, x0=np.zeros(2))
    >>> simdiff.biharmonic(p)                 # 2 * 4 + 24
    array(32.)
    """
    d = cached_derivatives(problem, backend, x, dtype=dtype)
    return d.biharmonic(x, weights=weights, factor=factor, method=method)


# --------------------------------------------------------------------------- stochastic


@dataclass(frozen=True)
class StochasticEstimate:
    """A Monte Carlo estimate of an operator with its variance.

    Attributes
    ----------
    value : array, shape () or (batch,)
        The sample mean, an unbiased estimate of the operator.
    variance : array, like ``value``
        Estimated variance of ``value``: the sample variance of the
        per-sample values (``ddof=1``) divided by ``num_samples``.
    samples : array, shape (num_samples,) or (batch, num_samples)
        The per-sample values.
    num_samples : int
    distribution : str
    """

    value: Any
    variance: Any
    samples: Any
    num_samples: int
    distribution: str

    @property
    def stderr(self) -> Any:
        """``sqrt(variance)``."""
        return self.variance**0.5


def _samples(n_dirs: int, num_samples: Any, distribution: str, seed: Any) -> np.ndarray:  # (S, r)
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
        raise OptionError(f"num_samples must be an integer >= 2; got {num_samples!r}")
    if num_samples < 2:
        raise OptionError(f"num_samples must be >= 2 (for a variance); got {num_samples}")
    if distribution not in DISTRIBUTIONS:
        raise OptionError(
            f"unknown distribution {distribution!r}; expected one of {list(DISTRIBUTIONS)}"
        )
    rng = np.random.default_rng(seed)
    if distribution == "gaussian":
        return rng.standard_normal((int(num_samples), n_dirs))
    return rng.choice(np.array([-1.0, 1.0]), size=(int(num_samples), n_dirs))


def _estimate(samples: Any, num_samples: int, distribution: str) -> StochasticEstimate:
    mean = samples.sum(-1) / num_samples
    var = ((samples - mean[..., None]) ** 2).sum(-1) / ((num_samples - 1) * num_samples)
    return StochasticEstimate(mean, var, samples, int(num_samples), distribution)


def stochastic_laplacian(
    problem: Any,
    x: Any = None,
    *,
    weights: Any = None,
    factor: Any = None,
    num_samples: int = 16,
    distribution: str = "rademacher",
    seed: Any = 0,
    backend: str | None = None,
    dtype: Any = None,
) -> StochasticEstimate:
    """Hutchinson's estimate of ``tr(Sigma H)``: the mean of ``v^T H v`` over ``v = L z``.

    ``z`` has independent Rademacher (default) or standard normal entries, so
    ``E[v v^T] = Sigma`` and the estimate is unbiased.  The per-sample values
    come from one collapsed second-order Taylor pass with one summed
    coefficient per sample.

    Parameters
    ----------
    problem, x, weights, factor, backend
        As in :func:`laplacian`.
    num_samples : int
        ``S >= 2``.
    distribution : {"rademacher", "gaussian"}
        Rademacher has the smaller variance: ``2 (||A||_F^2 - sum_i A_ii^2) / S``
        against ``2 ||A||_F^2 / S`` for ``A = L^T H L``.
    seed : int or numpy Generator seed
        The directions are drawn on the host by ``numpy.random.default_rng(seed)``
        (the same on every backend).

    Returns
    -------
    StochasticEstimate

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2) + x[0] * x[1], x0=np.zeros(3))
    >>> est = simdiff.stochastic_laplacian(p, num_samples=256, seed=3)      # exact: 6
    >>> bool(abs(float(est.value) - 6.0) < 4 * float(est.stderr)), est.samples.shape
    (True, (256,))
    """
    d = cached_derivatives(problem, backend, x, dtype=dtype)
    d._scalar("stochastic_laplacian")
    Lr = covariance_factor(problem.n, weights, factor)
    Z = _samples(Lr.shape[0], num_samples, distribution, seed)
    V = Z @ Lr if Lr.shape[0] else np.zeros((int(num_samples), problem.n))
    per = d.derivative_sum(2, V, x, weights=np.eye(int(num_samples)))
    return _estimate(_last(per), int(num_samples), distribution)


def stochastic_biharmonic(
    problem: Any,
    x: Any = None,
    *,
    weights: Any = None,
    factor: Any = None,
    num_samples: int = 16,
    seed: Any = 0,
    backend: str | None = None,
    dtype: Any = None,
) -> StochasticEstimate:
    """Unbiased estimate of the biharmonic operator from Gaussian directions (STDE).

    For ``v = L z``, ``z ~ N(0, I)``: ``E[D^4 f[v]^4] = 3 sum_ij D^4 f[l_i, l_i, l_j, l_j]``
    (Isserlis), so the mean of ``D^4 f[v_s]^4 / 3`` over the samples is unbiased.
    One collapsed fourth-order pass: ``1 + 3 S + S`` coefficient vectors.

    Parameters
    ----------
    problem, x, weights, factor, backend
        As in :func:`biharmonic`.
    num_samples : int
        ``S >= 2``.
    seed
        See :func:`stochastic_laplacian`.

    Returns
    -------
    StochasticEstimate

    References
    ----------
    Z. Shi, Z. Hu, M. Lin, K. Kawaguchi, "Stochastic Taylor derivative
    estimator: efficient amortization for arbitrary differential operators",
    NeurIPS 2024.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 4), x0=np.zeros(3))
    >>> est = simdiff.stochastic_biharmonic(p, num_samples=4000, seed=1)
    >>> bool(abs(float(est.value) - 72.0) < 4 * float(est.stderr))     # exact: 3 * 24
    True
    """
    d = cached_derivatives(problem, backend, x, dtype=dtype)
    d._scalar("stochastic_biharmonic")
    Lr = covariance_factor(problem.n, weights, factor)
    Z = _samples(Lr.shape[0], num_samples, "gaussian", seed)
    V = Z @ Lr if Lr.shape[0] else np.zeros((int(num_samples), problem.n))
    per = d.derivative_sum(4, V, x, weights=np.eye(int(num_samples)) / 3.0)
    return _estimate(_last(per), int(num_samples), "gaussian")


def _last(per: Any) -> Any:
    """Grouped results come as ``(S,)`` or ``(batch, S)``; a check of the contract."""
    if per.ndim not in (1, 2):
        raise ShapeError(f"expected per-sample values of shape (S,) or (batch, S); got {per.shape}")
    return per
