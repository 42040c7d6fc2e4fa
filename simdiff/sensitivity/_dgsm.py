"""Derivative-based global sensitivity measures (DGSM) from exact batched gradients.

For a scalar model ``f`` of independent inputs ``x_i`` the DGSM of input ``i``
is ``nu_i = E[(df/dx_i)^2]`` (Sobol & Kucherenko 2009).  It bounds the total
Sobol index: ``S_T,i <= C_i nu_i / Var f`` with ``C_i`` the Poincaré constant
of the input's distribution (``(b-a)^2/pi^2`` for uniform, ``sigma^2`` for
normal).  simdiff computes the gradients exactly, by reverse mode batched with
vmap over chunks of the sample, where SALib differentiates by finite
differences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simdiff._log import progress as progress_bar
from simdiff.core.config import Config
from simdiff.core.derivatives import Derivatives
from simdiff.core.problem import Problem
from simdiff.errors import InputError, InputTypeError, NonFiniteError, ShapeError
from simdiff.sensitivity._common import Named, check_problem, spec_of
from simdiff.sensitivity._common import derivatives as _derivatives
from simdiff.sensitivity._distributions import Distribution, LogUniform, as_distributions, sample

__all__ = ["DGSMResult", "batched_value_and_grad", "dgsm"]

#: Default points per vmapped call, by backend: eager torch pays a per-operation cost, so it
#: prefers bigger batches (docs/performance.md).
DEFAULT_CHUNK = {"jax": 256, "torch": 2048}


@dataclass
class DGSMResult(Named):
    """What :func:`dgsm` returns.

    Attributes
    ----------
    nu : ndarray, shape (n,)
        ``E[(df/dx_i)^2]`` (sample mean).
    nu_ci : ndarray, shape (2, n)
        Bootstrap percentile interval of ``nu`` (rows: low, high).
    bound : ndarray, shape (n,)
        Upper bound on the total Sobol index, ``C_i nu_i' / Var f`` (``nu_i'``
        is ``E[(x_i df/dx_i)^2]`` for log-uniform inputs, ``nu_i`` otherwise).
    bound_ci : ndarray, shape (2, n)
        Bootstrap interval of ``bound``.
    variance : float
        Sample variance of ``f``.
    constants : ndarray, shape (n,)
        Poincaré constants ``C_i``.
    values, grads : ndarray, shapes (N,) and (N, n)
        The model values and exact gradients at the sample points.
    samples : ndarray, shape (N, n)
    n_bootstrap : int
    confidence : float
    ranking : ndarray of int
        Inputs ordered from the largest bound to the smallest.
    compile_info : list of dict
        ``Derivatives.cache_info()`` of the gradient callable: the path that
        ran (``"jit"``, ``"eager"``, ``"compiled"``) and, under
        ``compile="auto"``, the numbers behind the choice and any compile error.
    spec : ParamSpec
        The inputs' names (``names``) and structure (``tree("bound")``);
        ``print(result)`` is a table of ``nu`` and the bound with their
        intervals, one row per input.
    """

    nu: np.ndarray
    nu_ci: np.ndarray
    bound: np.ndarray
    bound_ci: np.ndarray
    variance: float
    constants: np.ndarray
    values: np.ndarray = field(repr=False)
    grads: np.ndarray = field(repr=False)
    samples: np.ndarray = field(repr=False)
    n_bootstrap: int = 0
    confidence: float = 0.95
    compile_info: list = field(default_factory=list, repr=False)
    spec: Any = field(default=None, repr=False)

    def _table_columns(self) -> dict[str, Any]:
        return {"nu": self.nu, "nu_low": self.nu_ci[0], "nu_high": self.nu_ci[1],
                "bound": self.bound, "bound_low": self.bound_ci[0],
                "bound_high": self.bound_ci[1]}  # fmt: skip

    @property
    def ranking(self) -> np.ndarray:
        return np.argsort(-self.bound, kind="stable")


def batched_value_and_grad(
    problem: Problem,
    points: np.ndarray,
    *,
    backend: str = "jax",
    chunk_size: int | None = None,
    derivatives: Derivatives | None = None,
    compile: bool | str = False,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Values ``(N,)`` and exact gradients ``(N, n)`` of a scalar problem over many points.

    The points are processed in chunks of ``chunk_size`` (memory bounded by
    one chunk); each chunk is one vmapped call.  The last chunk is padded to
    ``chunk_size`` so that JAX compiles once.  Default chunk size: 256 on
    JAX, 2048 on torch (eager torch pays a per-operation cost, so it
    prefers bigger batches; see docs/sensitivity.md for the measurement).
    ``compile`` is the compile policy of :class:`simdiff.Derivatives`; the
    number of chunks is announced to it (``expect_calls``), so ``"auto"``
    compiles only when the run is long enough to pay for the compile.
    ``progress=True`` shows a bar of the chunks (tqdm, standard error).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.sensitivity import batched_value_and_grad
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2), x0=np.zeros(2))
    >>> f, g = batched_value_and_grad(p, np.ones((5, 2)), chunk_size=2)
    >>> f.shape, g[0]
    ((5,), array([2., 2.]))
    """
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != problem.n:
        raise ShapeError(
            f"points for problem {problem.name!r} must have shape (N, {problem.n}); "
            f"got {points.shape}"
        )
    if chunk_size is None:
        chunk_size = DEFAULT_CHUNK.get(derivatives.backend.name if derivatives else backend, 256)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
        raise InputTypeError(f"chunk_size must be a positive integer; got {chunk_size!r}")
    if chunk_size < 1:
        raise InputError(f"chunk_size must be a positive integer; got {chunk_size}")
    d = (
        derivatives
        if derivatives is not None
        else _derivatives(problem, Config(backend=backend, check_finite=False, compile=compile))
    )
    n_points = points.shape[0]
    size = int(min(chunk_size, n_points))
    d.expect_calls(-(-n_points // size))
    values = np.empty(n_points)
    grads = np.empty((n_points, problem.n))
    starts = range(0, n_points, size)
    for start in progress_bar(starts, desc=f"gradients {problem.name}", enabled=progress):
        chunk = points[start : start + size]
        k = chunk.shape[0]
        if k < size:  # pad: same shape, no recompilation
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], size - k, axis=0)])
        f, g = d.value_and_grad(chunk)
        values[start : start + k] = np.asarray(f)[:k]
        grads[start : start + k] = np.asarray(g)[:k]
    return values, grads


def _bound_terms(grads: np.ndarray, samples: np.ndarray, dists: Sequence[Distribution]):
    """Squared derivatives in the coordinate where each input's Poincaré constant holds."""
    scaled = grads.copy()
    for i, dist in enumerate(dists):
        if isinstance(dist, LogUniform):
            scaled[:, i] *= samples[:, i]  # d f / d log x = x df/dx
    return scaled**2


def dgsm(
    problem: Problem,
    distributions: Any,
    n_samples: int = 4096,
    *,
    method: str = "sobol",
    seed: int | None = 0,
    backend: str = "jax",
    chunk_size: int | None = None,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    compile: bool | str = False,
    progress: bool = False,
) -> DGSMResult:
    """Derivative-based global sensitivity measures and the total-index bounds they give.

    Parameters
    ----------
    problem : Problem
        Scalar-valued, ``n`` inputs.
    distributions : sequence of n distributions
        :class:`Uniform`, :class:`Normal`, :class:`LogUniform` or tuples
        ``("uniform", a, b)``, ``("normal", mu, sigma)``, ``("log-uniform", a, b)``
        (one item is used for every input), or a dict by name: a scalar
        name of ``problem.param_names`` (``"alpha"``, ``"k[1]"``) or the path
        of an array-valued leaf (``"k"``: every scalar of the leaf) to its
        distribution; every input needs one.
    n_samples : int
        Sample size ``N``.
    method : {"sobol", "random"}
        Scrambled Sobol (quasi-Monte Carlo) or plain Monte Carlo sampling.
    seed : int, optional
    backend : {"jax", "torch"}
    chunk_size : int, optional
        Points per vmapped call; memory is bounded by one chunk (default
        256 on JAX, 2048 on torch).
    n_bootstrap : int
        Bootstrap resamples of the sample rows for the intervals (0: none; the
        intervals are then NaN).
    confidence : float
        Level of the percentile intervals.
    compile : {False, True, "auto"}
        Compile policy of the gradient on torch (see :class:`simdiff.Derivatives`;
        JAX always compiles).  ``"auto"`` compiles when the number of chunks
        pays for the compile; ``compile_info`` in the result says what ran.
    progress : bool
        Show a progress bar of the gradient chunks on standard error (tqdm).

    Returns
    -------
    DGSMResult

    Raises
    ------
    ValueError
        Invalid distributions, sample size or confidence level; a model with
        zero sample variance.
    NonFiniteError
        The model or its gradient is not finite at a sample point (the first
        such point is named).

    Notes
    -----
    ``nu_i`` is a sample mean of exact squared derivatives; its error is the
    sampling error only, which the bootstrap interval estimates (for Sobol
    sampling the bootstrap treats the points as independent, which
    overstates the error of a quasi-Monte Carlo mean).  The bound's
    denominator ``Var f`` is estimated from the same sample.

    References
    ----------
    I. M. Sobol and S. Kucherenko, "Derivative based global sensitivity
    measures and their link with global sensitivity indices", Math. Comput.
    Simul. 79 (2009) 3009-3017.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.sensitivity import dgsm
    >>> p = simdiff.Problem(lambda x, ops: x[0] + 2.0 * x[1], x0=np.zeros(2))
    >>> r = dgsm(p, ("uniform", 0.0, 1.0), n_samples=256, n_bootstrap=0)
    >>> r.nu
    array([1., 4.])
    """
    problem = check_problem(problem)
    if not problem.is_scalar:
        raise ShapeError(
            f"dgsm needs a scalar-valued problem; {problem.name!r} returns shape "
            f"{problem.output_shape}"
        )
    if isinstance(distributions, Mapping):  # by name: {"alpha": Uniform(...), "k": ...}
        distributions = spec_of(problem).per_scalar(distributions, "dgsm: distributions")
    dists = as_distributions(distributions, problem.n)
    if not 0.0 < float(confidence) < 1.0:
        raise InputError(f"confidence must lie in (0, 1); got {confidence}")
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)):
        raise InputTypeError(f"n_bootstrap must be a non-negative integer; got {n_bootstrap!r}")
    if n_bootstrap < 0:
        raise InputError(f"n_bootstrap must be a non-negative integer; got {n_bootstrap}")
    xs = sample(dists, n_samples, method=method, seed=seed)
    d = _derivatives(problem, Config(backend=backend, check_finite=False, compile=compile))
    values, grads = batched_value_and_grad(
        problem, xs, chunk_size=chunk_size, derivatives=d, progress=progress
    )
    bad = ~(np.isfinite(values) & np.isfinite(grads).all(axis=1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise NonFiniteError(
            f"dgsm: the model or its gradient is not finite at sample point {i}, x = {xs[i]} "
            f"({int(bad.sum())} of {len(values)} points)"
        )
    variance = float(np.var(values, ddof=1))
    if not variance > 0.0:
        raise InputError(
            f"dgsm: the model's sample variance is {variance}; the total-index bound "
            "divides by it (is the model constant over the sample?)"
        )
    constants = np.array([dist.poincare for dist in dists])
    terms = _bound_terms(grads, xs, dists)
    nu = np.mean(grads**2, axis=0)
    bound = constants * np.mean(terms, axis=0) / variance
    nu_ci = np.full((2, problem.n), math.nan)
    bound_ci = np.full((2, problem.n), math.nan)
    if n_bootstrap > 0:
        rng = np.random.default_rng(None if seed is None else seed + 1)
        n = len(values)
        boot_nu = np.empty((n_bootstrap, problem.n))
        boot_bound = np.empty((n_bootstrap, problem.n))
        for b in range(n_bootstrap):
            idx = rng.integers(0, n, n)
            boot_nu[b] = np.mean(grads[idx] ** 2, axis=0)
            boot_bound[b] = constants * np.mean(terms[idx], axis=0) / np.var(values[idx], ddof=1)
        q = [50.0 * (1.0 - confidence), 50.0 * (1.0 + confidence)]
        nu_ci = np.percentile(boot_nu, q, axis=0)
        bound_ci = np.percentile(boot_bound, q, axis=0)
    return DGSMResult(
        nu=nu,
        nu_ci=nu_ci,
        bound=bound,
        bound_ci=bound_ci,
        variance=variance,
        constants=constants,
        values=values,
        grads=grads,
        samples=xs,
        n_bootstrap=int(n_bootstrap),
        confidence=float(confidence),
        compile_info=[i for i in d.cache_info() if i["kind"] == "value_and_grad"],
        spec=spec_of(problem),
    )
