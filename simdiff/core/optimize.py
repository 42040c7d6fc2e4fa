"""The optimiser adapter: SciPy's optimisers fed exact derivatives (``simdiff.minimize``).

Each method gets the derivatives it can use: gradients for quasi-Newton and
bound-constrained methods, the exact Hessian for ``trust-exact``, ``dogleg``
and ``trust-constr``, Hessian-vector products (forward over reverse, the
Hessian never formed) for ``Newton-CG``, ``trust-ncg`` and ``trust-krylov``.
One :class:`simdiff.Derivatives` object (cached on the problem) serves the
whole run, so each derivative is compiled once; the result carries the evaluation counts.

This is simdiff's one adapter to ``scipy.optimize``, below both of its users:
the PES minimiser (:mod:`simdiff.pes.optimize`) and the sensitivity analyses
(:mod:`simdiff.sensitivity` re-exports :func:`minimize`, :func:`least_squares`
and :class:`FitResult`; profile likelihoods reuse :func:`check_bounds`).  They
call :func:`minimize` with the typed ``gtol``/``maxiter`` keywords, which it
maps to each method's own option names (:data:`GTOL_OPTION`,
:data:`MAXITER_OPTION`), instead of keeping a method table of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.optimize

from simdiff._log import ProgressCounter, get_logger
from simdiff.core.config import Config
from simdiff.core.derivatives import Derivatives, cached_derivatives
from simdiff.core.labelled import columns_table
from simdiff.core.params import ParamSpec
from simdiff.core.problem import Problem
from simdiff.errors import InputError, InputTypeError, OptionError, ShapeError

__all__ = [
    "FED",
    "GTOL_OPTION",
    "HESSIAN_METHODS",
    "HVP_METHODS",
    "MAXITER_OPTION",
    "FitResult",
    "check_bounds",
    "least_squares",
    "minimize",
]

_log = get_logger(__name__)

#: Methods given the exact Hessian.
HESSIAN_METHODS = ("trust-exact", "dogleg", "trust-constr")
#: Methods given Hessian-vector products.
HVP_METHODS = ("newton-cg", "trust-ncg", "trust-krylov")
#: Methods given the gradient only.
GRADIENT_METHODS = ("bfgs", "l-bfgs-b", "cg", "slsqp", "tnc")
#: Derivative-free methods (accepted for comparison; no derivative is passed).
FREE_METHODS = ("nelder-mead", "powell", "cobyla", "cobyqa")
BOUNDED_METHODS = (
    "l-bfgs-b",
    "tnc",
    "slsqp",
    "powell",
    "trust-constr",
    "nelder-mead",
    "cobyla",
    "cobyqa",
)
_ALL = HESSIAN_METHODS + HVP_METHODS + GRADIENT_METHODS + FREE_METHODS
#: What each method (lower case) is fed: ``"hess"``, ``"hessp"``, ``"grad"`` or ``"none"``.
FED: dict[str, str] = {
    **dict.fromkeys(HESSIAN_METHODS, "hess"),
    **dict.fromkeys(HVP_METHODS, "hessp"),
    **dict.fromkeys(GRADIENT_METHODS, "grad"),
    **dict.fromkeys(FREE_METHODS, "none"),
}
#: The option each method takes the gradient tolerance ``gtol`` through.  Newton-CG has
#: none; its ``xtol`` (the average relative step) is the closest it offers.
GTOL_OPTION: dict[str, str] = {
    **dict.fromkeys(("bfgs", "cg", "l-bfgs-b", "tnc", "trust-constr"), "gtol"),
    **dict.fromkeys(("trust-exact", "dogleg", "trust-ncg", "trust-krylov"), "gtol"),
    "newton-cg": "xtol",
}
#: The option that bounds the iterations (TNC counts function evaluations instead).
MAXITER_OPTION: dict[str, str] = {**dict.fromkeys(_ALL, "maxiter"), "tnc": "maxfun"}


def _start(problem: Any, x0: Any, what: str) -> np.ndarray:
    """``x0`` (default ``problem.x0``; flat or in the parameters' structure), finite, ``(n,)``."""
    if not isinstance(problem, Problem):
        raise InputTypeError(f"expected a simdiff.Problem; got {type(problem).__name__}")
    if x0 is None:
        x0 = problem.x0
    else:
        x0 = np.asarray(problem.flatten(x0, f"{what}: x0"), dtype=np.float64)
    if x0.shape != (problem.n,):
        raise ShapeError(
            f"{what}: x0 for problem {problem.name!r} must have shape ({problem.n},); "
            f"got {x0.shape}"
        )
    if not np.all(np.isfinite(x0)):
        i = int(np.flatnonzero(~np.isfinite(x0))[0])
        raise InputError(f"{what}: x0 must be finite; x0[{i}] = {x0[i]}")
    return x0


def _spec(problem: Problem) -> ParamSpec:
    """The problem's parameter structure, or a flat one named by ``problem.param_names``."""
    return problem.param_spec or ParamSpec.named(problem.param_names)


def _derivatives(problem: Problem, config: Config) -> Derivatives:
    """The problem's shared :class:`~simdiff.Derivatives` for ``config``."""
    return cached_derivatives(problem, config=config)


def check_bounds(bounds: Any, x0: np.ndarray, what: str, spec: Any = None) -> np.ndarray | None:
    """Validate ``bounds`` as an (n, 2) array of (low, high) with low <= x0 <= high.

    A mapping gives ``(low, high)`` by parameter name or leaf path
    (:meth:`simdiff.ParamSpec.per_scalar` of ``spec``); a parameter it does
    not name is unbounded.
    """
    if bounds is None:
        return None
    if isinstance(bounds, Mapping):
        if spec is None:
            raise InputTypeError(f"{what}: bounds by name need the problem's parameter names")
        bounds = spec.per_scalar(bounds, f"{what}: bounds", default=(None, None))
    if isinstance(bounds, scipy.optimize.Bounds):
        b = np.stack(np.broadcast_arrays(bounds.lb, bounds.ub), axis=-1).astype(np.float64)
    else:
        b = np.array(
            [[-np.inf if lo is None else lo, np.inf if hi is None else hi] for lo, hi in bounds],
            dtype=np.float64,
        )
    n = x0.shape[0]
    if b.shape != (n, 2):
        raise ShapeError(f"{what}: bounds must be {n} (low, high) pairs; got shape {b.shape}")
    if np.isnan(b).any():
        raise InputError(f"{what}: bounds must not be NaN")
    bad = np.flatnonzero(b[:, 0] > b[:, 1])
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{what}: bounds[{i}] has low > high: ({b[i, 0]}, {b[i, 1]})")
    out = np.flatnonzero((x0 < b[:, 0]) | (x0 > b[:, 1]))
    if out.size:
        i = int(out[0])
        raise InputError(
            f"{what}: x0[{i}] = {x0[i]} lies outside bounds[{i}] = ({b[i, 0]}, {b[i, 1]})"
        )
    return b


class _Counted:
    """Counts calls to the derivative callables handed to SciPy."""

    def __init__(self, d: Derivatives, bar: ProgressCounter | None = None) -> None:
        self.d = d
        self.bar = bar if bar is not None else ProgressCounter(desc="")
        self.compilations0 = d.compilations
        self.counts = {"nfun": 0, "ngrad": 0, "nhess": 0, "nhvp": 0, "njac": 0}

    def value_and_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        self.counts["nfun"] += 1
        self.counts["ngrad"] += 1
        f, g = self.d.value_and_grad(np.asarray(x, dtype=np.float64))
        self.bar.update(1, f=f"{float(f):.6g}")
        return float(f), np.asarray(g)

    def value(self, x: np.ndarray) -> Any:
        self.counts["nfun"] += 1
        y = np.asarray(self.d.value(np.asarray(x, dtype=np.float64)))
        if y.ndim == 0:
            self.bar.update(1, f=f"{float(y):.6g}")
            return float(y)
        self.bar.update(1, cost=f"{0.5 * float(np.sum(y * y)):.6g}")
        return y

    def hessian(self, x: np.ndarray, *args: Any) -> np.ndarray:
        self.counts["nhess"] += 1
        return np.asarray(self.d.hessian(np.asarray(x, dtype=np.float64)))

    def hvp(self, x: np.ndarray, v: np.ndarray, *args: Any) -> np.ndarray:
        self.counts["nhvp"] += 1
        return np.asarray(self.d.hvp(np.asarray(v, np.float64), np.asarray(x, dtype=np.float64)))

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        self.counts["njac"] += 1
        return np.asarray(self.d.jacobian(np.asarray(x, dtype=np.float64)))


def _method_options(
    key: str, method: str, gtol: float | None, maxiter: int | None, options: Any
) -> dict[str, Any]:
    """``options`` for scipy with ``gtol``/``maxiter`` under the method's own names."""
    out = dict(options or {})
    typed = {}
    if gtol is not None:
        if key not in GTOL_OPTION:
            raise OptionError(
                f"minimize: method {method!r} has no gradient tolerance; gtol applies to "
                f"{sorted(GTOL_OPTION)}"
            )
        if not (isinstance(gtol, (int, float)) and gtol > 0):
            raise OptionError(f"minimize: gtol must be a positive number; got {gtol!r}")
        typed[GTOL_OPTION[key]] = float(gtol)
    if maxiter is not None:
        if isinstance(maxiter, bool) or not isinstance(maxiter, (int, np.integer)) or maxiter < 1:
            raise OptionError(f"minimize: maxiter must be a positive integer; got {maxiter!r}")
        typed[MAXITER_OPTION[key]] = int(maxiter)
    clash = sorted(set(typed) & set(out))
    if clash:
        raise OptionError(
            f"minimize: options {clash} are also set by gtol=/maxiter=; give each once"
        )
    return {**out, **typed}


class FitResult(scipy.optimize.OptimizeResult):
    """SciPy's ``OptimizeResult`` with the parameters' names.

    ``names`` (one per parameter), ``params`` (``x`` in the structure of the
    problem's parameters: a dict for a dict ``x0``; ``x`` itself for a flat
    one) and ``table()``, the estimates by name.
    """

    def table(self, digits: int = 8) -> str:
        """The estimates ``x`` as a table, one row per parameter name."""
        return columns_table({"estimate": self["x"]}, self["names"], digits)


def _annotate(
    res: scipy.optimize.OptimizeResult,
    c: _Counted,
    method: str,
    problem: Problem,
    bounds: np.ndarray | None,
):
    res = FitResult(res)
    res.update(c.counts)
    res["names"] = problem.param_names
    res["params"] = problem.unflatten(np.asarray(res["x"]))
    res["problem"] = problem
    res["bounds"] = bounds
    res["method"] = method
    res["backend"] = c.d.backend.name
    res["compilations"] = c.d.compilations - c.compilations0
    res["compile_info"] = c.d.cache_info()
    c.bar.close()
    _log.info(
        "%s of %r (%s, %s): %s; %s", "minimize" if c.d.problem.is_scalar else "least_squares",
        c.d.problem.name, method, c.d.backend.name, res.get("message", ""),
        ", ".join(f"{k} {v}" for k, v in c.counts.items() if v),
    )  # fmt: skip
    return res


def minimize(
    problem: Problem,
    x0: Any = None,
    method: str | None = None,
    *,
    backend: str = "jax",
    bounds: Any = None,
    dtype: Any = None,
    gtol: float | None = None,
    maxiter: int | None = None,
    compile: bool | str = False,
    progress: bool = False,
    **options: Any,
) -> FitResult:
    """Minimise a scalar problem with ``scipy.optimize.minimize`` and exact derivatives.

    Parameters
    ----------
    problem : Problem
        Scalar-valued.
    x0 : array_like, shape (n,), optional
        Starting point (default ``problem.x0``).
    method : str, optional
        Any method of ``scipy.optimize.minimize``.  Default: ``"L-BFGS-B"``
        with bounds, else ``"trust-exact"`` for ``n <= 500`` and
        ``"trust-krylov"`` above.  Derivatives passed: the Hessian to
        trust-exact, dogleg and trust-constr; Hessian-vector products to
        Newton-CG, trust-ncg and trust-krylov; the gradient to the others
        that take one; none to the derivative-free methods.
    backend : {"jax", "torch"}
    bounds : sequence of (low, high) pairs, scipy.optimize.Bounds or dict, optional
        ``None`` for an unbounded side.  ``x0`` must lie inside.  A dict gives
        ``(low, high)`` by parameter name (``"alpha"``, ``"k[1]"``) or leaf
        path (``"k"``: every scalar of the leaf); parameters it does not name
        are unbounded.
    dtype : {"float64", "float32"}, optional
    gtol : float, optional
        Gradient-norm tolerance, passed under the method's own option name
        (:data:`GTOL_OPTION`: ``gtol``; ``xtol`` for Newton-CG, which has no
        gradient test).  A derivative-free method given ``gtol`` raises.
    maxiter : int, optional
        Iteration limit (``maxfun`` for TNC).
    compile : {False, True, "auto"}
        Compile policy on torch (see :class:`simdiff.Derivatives`): an
        optimisation calls its derivatives many times, and ``"auto"`` compiles
        each once the eager time spent reaches the compile time; the result's
        ``compile_info`` says which path ran.
    progress : bool
        Show a progress bar of the function evaluations (with the current
        objective) on standard error (tqdm).
    **options
        Passed to ``scipy.optimize.minimize`` (``tol``, ``options``,
        ``constraints``, ``callback``).  ``options`` must not repeat what
        ``gtol``/``maxiter`` set.

    Returns
    -------
    FitResult
        SciPy's ``OptimizeResult`` plus ``names``, ``params`` (``x`` in the
        structure of the problem's parameters), ``table()``, ``nfun``,
        ``ngrad``, ``nhess``, ``nhvp`` (calls
        of the exact derivatives), ``method``, ``backend``,
        ``compilations`` (derivative compilations during this call),
        ``problem`` and ``bounds`` (an ``(n, 2)`` array or ``None``), which
        :func:`profile_likelihood` reads.

    Examples
    --------
    >>> import problems, simdiff
    >>> res = simdiff.minimize(problems.get("rosenbrock4"), method="trust-exact")
    >>> bool(res.success), res.x.round(6), res.nhvp
    (True, array([1., 1., 1., 1.]), 0)
    """
    x0 = _start(problem, x0, "minimize")
    if not problem.is_scalar:
        raise ShapeError(
            f"minimize needs a scalar-valued problem; {problem.name!r} returns shape "
            f"{problem.output_shape} (use simdiff.least_squares for residual vectors)"
        )
    b = check_bounds(bounds, x0, "minimize", _spec(problem))
    if method is None:
        method = (
            "L-BFGS-B" if b is not None else ("trust-exact" if problem.n <= 500 else "trust-krylov")
        )
    if not isinstance(method, str) or method.lower() not in _ALL:
        raise InputError(
            f"unknown method {method!r}; expected one of scipy.optimize.minimize's "
            f"methods {[m for m in _ALL]}"
        )
    key = method.lower()
    if b is not None and key not in BOUNDED_METHODS:
        raise InputError(
            f"method {method!r} does not accept bounds; use one of {list(BOUNDED_METHODS)}"
        )
    kwargs: dict[str, Any] = dict(options)
    kwargs["options"] = _method_options(key, method, gtol, maxiter, kwargs.get("options"))
    bar = ProgressCounter(desc=f"minimize {problem.name}", enabled=progress)
    config = Config(backend=backend, dtype=dtype, compile=compile)
    c = _Counted(_derivatives(problem, config), bar)
    if b is not None:
        kwargs["bounds"] = scipy.optimize.Bounds(b[:, 0], b[:, 1])
    fed = FED[key]
    if fed == "none":
        res = scipy.optimize.minimize(c.value, x0, method=method, **kwargs)
        return _annotate(res, c, method, problem, b)
    if fed == "hess":
        kwargs["hess"] = c.hessian
    elif fed == "hessp":
        kwargs["hessp"] = c.hvp
    res = scipy.optimize.minimize(c.value_and_grad, x0, method=method, jac=True, **kwargs)
    return _annotate(res, c, method, problem, b)


def least_squares(
    problem: Problem,
    x0: Any = None,
    *,
    backend: str = "jax",
    bounds: Any = None,
    method: str = "trf",
    dtype: Any = None,
    compile: bool | str = False,
    progress: bool = False,
    **options: Any,
) -> FitResult:
    """Solve ``min 1/2 sum r_i(x)^2`` with ``scipy.optimize.least_squares`` and the exact Jacobian.

    Parameters
    ----------
    problem : Problem
        Vector-valued: the residuals ``r(x)``, shape ``(m,)``.
    x0 : array_like, shape (n,), optional
    backend : {"jax", "torch"}
    bounds : sequence of (low, high) pairs, scipy.optimize.Bounds or dict, optional
        As for :func:`minimize` (a dict by parameter name or leaf path).
    method : {"trf", "dogbox", "lm"}
    dtype : {"float64", "float32"}, optional
    compile : {False, True, "auto"}
        Compile policy on torch (see :class:`simdiff.Derivatives`): an
        optimisation calls its derivatives many times, and ``"auto"`` compiles
        each once the eager time spent reaches the compile time; the result's
        ``compile_info`` says which path ran.
    progress : bool
        Show a progress bar of the function evaluations (with the current
        objective) on standard error (tqdm).
    **options
        Passed to ``scipy.optimize.least_squares`` (``ftol``, ``xtol``,
        ``loss``, ``x_scale``, ...).

    Returns
    -------
    FitResult
        SciPy's ``OptimizeResult`` plus ``names``, ``params`` (``x`` in the
        structure of the problem's parameters), ``table()``, ``nfun`` and
        ``njac`` (exact Jacobians computed),
        ``backend``, ``compilations``, ``problem`` and ``bounds`` (an
        ``(n, 2)`` array or ``None``), which :func:`profile_likelihood` reads.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> t = np.linspace(0.0, 1.0, 5)
    >>> data = 2.0 * np.exp(-0.5 * t)
    >>> p = simdiff.Problem(lambda x, ops: x[0] * ops.exp(-x[1] * ops.asarray(t)) -
    ...                     ops.asarray(data), x0=np.array([1.0, 1.0]))
    >>> res = simdiff.least_squares(p)
    >>> res.x.round(8), bool(res.njac > 0)
    (array([2. , 0.5]), True)
    """
    x0 = _start(problem, x0, "least_squares")
    if problem.is_scalar:
        raise ShapeError(
            f"least_squares needs a vector of residuals; {problem.name!r} returns "
            "a scalar (use simdiff.minimize)"
        )
    b = check_bounds(bounds, x0, "least_squares", _spec(problem))
    if method not in ("trf", "dogbox", "lm"):
        raise InputError(f"unknown method {method!r}; expected one of ['trf', 'dogbox', 'lm']")
    if b is not None and method == "lm":
        raise InputError("method 'lm' does not accept bounds; use 'trf' or 'dogbox'")
    bar = ProgressCounter(desc=f"least_squares {problem.name}", enabled=progress)
    config = Config(backend=backend, dtype=dtype, compile=compile)
    c = _Counted(_derivatives(problem, config), bar)
    kwargs: dict[str, Any] = dict(options)
    if b is not None:
        kwargs["bounds"] = (b[:, 0], b[:, 1])
    res = scipy.optimize.least_squares(c.value, x0, jac=c.jacobian, method=method, **kwargs)
    res = _annotate(res, c, method, problem, b)
    res["method"] = method
    return res
