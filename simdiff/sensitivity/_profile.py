"""Profile likelihoods traced with exact Hessians, and likelihood-ratio intervals.

The profile of parameter ``i`` is ``PL(c) = min { L(theta) : theta_i = c }``.
Along the path of constrained optima ``theta(c)`` the free parameters ``r``
satisfy ``grad_r L(theta(c)) = 0``; differentiating gives the profile ODE
(Stapor, Froehlich & Hasenauer 2018)

    d theta_r / dc = -H_rr^{-1} H_ri,

with ``H`` the exact Hessian of ``L``.  :func:`profile_likelihood` integrates
it by Euler predictor steps, each corrected by Newton steps on the
constrained optimum, the step size chosen from the local quadratic model of
the profile (slope ``g_i``, curvature the Schur complement
``H_ii - H_ir H_rr^{-1} H_ri``) so that each step raises ``L`` by a fixed
fraction of the threshold.  Where ``H_rr`` is singular or ill-conditioned, or
Newton does not converge, that point is re-optimised by SciPy instead and the
point is marked.  All sides of all profiles are traced in lockstep, their
derivatives evaluated in one batched call per round.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.stats

from simdiff.core.config import Config
from simdiff.core.optimize import check_bounds
from simdiff.core.problem import Problem
from simdiff.errors import InputError, InputTypeError, OutOfRangeError
from simdiff.sensitivity._common import derivatives
from simdiff.sensitivity._local import LaplaceResult, laplace
from simdiff.sensitivity._profile_tracer import COUNTS, Tracer

__all__ = ["Profile", "ProfileLikelihood", "profile_likelihood"]

#: How a side of a profile ended: ``"threshold"`` (the interval end was found),
#: ``"bound"`` (the parameter reached its bound below the threshold), ``"flat"``
#: (the profile stayed flat at the largest step: not identifiable that way),
#: ``"max_steps"`` (the step budget ran out below the threshold).
SIDE_STATUS = ("threshold", "bound", "flat", "max_steps")

_COSTS: weakref.WeakKeyDictionary[Problem, Problem] = weakref.WeakKeyDictionary()


def _cost_problem(residuals: Problem) -> Problem:
    """``L(x) = 1/2 sum r(x)^2`` for a residual problem (one per residual problem, cached)."""
    cost = _COSTS.get(residuals)
    if cost is None:
        fn = residuals.fn

        def cost_fn(x: Any, ops: Any) -> Any:
            return 0.5 * ops.sum(fn(x, ops) ** 2)

        cost = Problem(
            cost_fn, x0=residuals.x0, name=f"{residuals.name}_cost", backends=residuals.backends
        )
        _COSTS[residuals] = cost
    return cost


# --------------------------------------------------------------------------- results


@dataclass
class Profile:
    """The profile of one parameter.

    Attributes
    ----------
    index : int
    name : str
    estimate : float
        The parameter at the optimum.
    c : ndarray, shape (k,)
        The values of the parameter on the traced path, ascending (the optimum included).
    objective : ndarray, shape (k,)
        The profile objective ``PL(c)`` (the fit's ``L``: ``1/2 sum r^2`` for a
        least-squares fit, the negative log-likelihood for a likelihood fit).
    ratio : ndarray, shape (k,)
        The likelihood-ratio statistic ``2 (PL(c) - L_min) / scale``.
    theta : ndarray, shape (k, n)
        All parameters along the path (column ``index`` is ``c``).
    reoptimised : ndarray of bool, shape (k,)
        Points found by SciPy re-optimisation (the Newton path was singular there).
    lower, upper : float or None
        Ends of the likelihood-ratio interval; ``None`` where the profile did
        not reach the threshold on that side (see ``lower_status``).
    lower_status, upper_status : str
        One of :data:`SIDE_STATUS`.
    lower_message, upper_message : str
    wald : tuple of float or None
        The Laplace (Wald) interval at the same level, ``None`` when the
        Hessian at the optimum is not positive definite.
    counts : dict
        ``steps`` (accepted path steps), ``rejected`` (halved steps),
        ``newton`` (corrector iterations), ``reoptimised`` (SciPy fallbacks),
        ``nfun``, ``ngrad``, ``nhess`` (exact derivative calls).
    """

    index: int
    name: str
    estimate: float
    c: np.ndarray
    objective: np.ndarray
    ratio: np.ndarray
    theta: np.ndarray
    reoptimised: np.ndarray
    lower: float | None
    upper: float | None
    lower_status: str
    upper_status: str
    lower_message: str
    upper_message: str
    wald: tuple[float, float] | None
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def interval(self) -> tuple[float | None, float | None]:
        return (self.lower, self.upper)


@dataclass
class ProfileLikelihood:
    """What :func:`profile_likelihood` returns.

    Attributes
    ----------
    profiles : list of Profile
        One per profiled parameter, in the order asked for.
    x : ndarray, shape (n,)
        The optimum the profiles start from (the fit's ``x`` after at most a few
        Newton steps that tighten it).
    objective : float
        ``L_min = L(x)``.
    level : float
    threshold : float
        ``PL(c) - L_min`` at the interval ends: ``scale * chi2(1).ppf(level) / 2``.
    scale : float
    backend : str
    laplace : LaplaceResult
        The Laplace (Wald) approximation at ``x``, same level and scale.
    counts : dict
        Totals over the profiles (plus the start's Newton polish); ``batches``
        is the number of batched derivative calls they were evaluated in.
    message : str
    """

    profiles: list[Profile]
    x: np.ndarray
    objective: float
    level: float
    threshold: float
    scale: float
    backend: str
    laplace: LaplaceResult = field(repr=False)
    counts: dict[str, int] = field(default_factory=dict)
    message: str = ""
    _tracer: Any = field(default=None, repr=False, compare=False)

    def __getitem__(self, key: int | str) -> Profile:
        for p in self.profiles:
            if key == p.name or (isinstance(key, (int, np.integer)) and key == p.index):
                return p
        raise OutOfRangeError(
            f"no profile for {key!r}; profiled: {[p.name for p in self.profiles]}"
        )

    def at(self, key: int | str, c: float) -> tuple[float, np.ndarray]:
        """``(PL(c), theta(c))`` at any ``c``, by Newton from the nearest traced point."""
        p = self[key]
        return self._tracer.evaluate(p.index, float(c))

    def table(self) -> str:
        """A text table: estimate, Wald and likelihood-ratio intervals, status, cost."""
        pct = f"{100 * self.level:g} %"
        head = (
            f"{'parameter':<12} {'estimate':>12} {'Wald ' + pct + ' interval':>29} "
            f"{'profile ' + pct + ' interval':>29} {'lower':>9} {'upper':>9} "
            f"{'points':>6} {'hess':>5} {'reopt':>5}"
        )
        lines = [head, "-" * len(head)]

        def num(v: float | None) -> str:
            return "—" if v is None else f"{v:.6g}"

        for p in self.profiles:
            wald = "—" if p.wald is None else f"[{p.wald[0]:.6g}, {p.wald[1]:.6g}]"
            prof = f"[{num(p.lower)}, {num(p.upper)}]"
            lines.append(
                f"{p.name:<12} {p.estimate:>12.6g} {wald:>29} {prof:>29} "
                f"{p.lower_status:>9} {p.upper_status:>9} {p.c.shape[0]:>6} "
                f"{p.counts['nhess']:>5} {p.counts['reoptimised']:>5}"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table() + "\n" + self.message

    def plot(self, *, ncols: int = 2) -> Any:
        """A matplotlib figure: each profile's ratio statistic, the threshold, the Wald parabola.

        The dashed curve is the Laplace quadratic ``((c - x_i) / se_i)^2``;
        dots mark the traced points (open where SciPy re-optimised), vertical
        lines the likelihood-ratio (solid) and Wald (dotted) interval ends.
        """
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        k = len(self.profiles)
        ncols = max(1, min(ncols, k))
        nrows = -(-k // ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.2 * nrows), squeeze=False)
        cut = 2.0 * self.threshold / self.scale
        se = self.laplace.std_errors
        for ax, p in zip(axes.ravel(), self.profiles, strict=False):
            ax.plot(p.c, p.ratio, "-", color="C0", label="profile")
            ok = ~p.reoptimised
            ax.plot(p.c[ok], p.ratio[ok], "o", color="C0", ms=3)
            if p.reoptimised.any():
                ax.plot(p.c[~ok], p.ratio[~ok], "o", mfc="none", color="C3", ms=5, label="re-opt")
            if se is not None:
                grid = np.linspace(p.c[0], p.c[-1], 200)
                ax.plot(
                    grid,
                    ((grid - p.estimate) / se[p.index]) ** 2,
                    "--",
                    color="C1",
                    label="Laplace",
                )
                for v in p.wald or ():
                    ax.axvline(v, color="C1", ls=":")
            for end in (p.lower, p.upper):
                if end is not None:
                    ax.axvline(end, color="C0", lw=0.8)
            ax.axhline(cut, color="grey", lw=0.8)
            ax.set_xlabel(p.name)
            ax.set_ylabel("2 ΔL / scale")
            ax.set_ylim(0.0, 1.6 * cut)
        for ax in axes.ravel()[k:]:
            ax.set_visible(False)
        axes.ravel()[0].legend(fontsize=7)
        fig.tight_layout()
        return fig


# --------------------------------------------------------------------------- entry point


def _fit_problem(fit: Any) -> tuple[Problem, Problem, np.ndarray]:
    """(the fit's problem, the objective L as a scalar problem, the optimum)."""
    problem = fit.get("problem") if isinstance(fit, dict) else None
    if not isinstance(problem, Problem) or "x" not in fit:
        raise InputTypeError(
            "profile_likelihood: expected the result of simdiff.least_squares or "
            "simdiff.minimize (an OptimizeResult with .x and .problem); got "
            f"{type(fit).__name__}"
            + ("" if not isinstance(fit, dict) else f" with keys {sorted(fit)}")
        )
    x = np.asarray(fit["x"], dtype=np.float64)
    if x.shape != (problem.n,) or not np.all(np.isfinite(x)):
        raise InputError(
            f"profile_likelihood: fit.x must be a finite array of shape ({problem.n},); "
            f"got shape {x.shape}"
        )
    return problem, (problem if problem.is_scalar else _cost_problem(problem)), x


def _names(problem: Problem, names: Any) -> list[str]:
    n = problem.n
    if names is None:
        names = problem.param_names
    names = [str(v) for v in names]
    if len(names) != n or len(set(names)) != n:
        raise InputError(
            f"profile_likelihood: names must be {n} distinct strings (one per parameter); "
            f"got {names}"
        )
    return names


def _indices(params: Any, names: list[str]) -> list[int]:
    n = len(names)
    if params is None:
        return list(range(n))
    scalar = isinstance(params, (str, int, np.integer)) or not hasattr(params, "__iter__")
    items = [params] if scalar else list(params)
    out = []
    for it in items:
        if isinstance(it, str):
            if it not in names:
                raise InputError(
                    f"profile_likelihood: unknown parameter {it!r}; expected one of {names}"
                )
            out.append(names.index(it))
        elif isinstance(it, (int, np.integer)) and not isinstance(it, bool):
            if not -n <= int(it) < n:
                raise OutOfRangeError(
                    f"profile_likelihood: parameter index {int(it)} out of range for {n} parameters"
                )
            out.append(int(it) % n)
        else:
            raise InputTypeError(
                "profile_likelihood: params must be parameter names or integer indices; "
                f"got {type(it).__name__} {it!r}"
            )
    if len(set(out)) != len(out):
        raise InputError(f"profile_likelihood: params repeat a parameter: {items}")
    if not out:
        raise InputError("profile_likelihood: params is empty")
    return out


def _positive(value: Any, what: str, *, integer: bool = False, upper: float = np.inf) -> Any:
    ok = (
        isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if integer
        else isinstance(value, (int, float, np.floating, np.integer))
        and not isinstance(value, bool)
        and np.isfinite(value)
    )
    if not ok or not 0 < value <= upper:
        kind = "a positive integer" if integer else "a positive finite number"
        extra = "" if upper == np.inf else f" at most {upper}"
        raise InputError(f"profile_likelihood: {what} must be {kind}{extra}; got {value!r}")
    return value


def profile_likelihood(
    fit: Any,
    params: Any = None,
    *,
    level: float = 0.95,
    backend: str | None = None,
    scale: float = 1.0,
    bounds: Any = None,
    names: Any = None,
    max_steps: int = 60,
    max_step: Any = None,
    step_fraction: float = 0.25,
    newton_steps: int = 6,
    rcond: float = 1e-10,
    flat_steps: int = 4,
    batch: int = 16,
) -> ProfileLikelihood:
    """Profile likelihoods and likelihood-ratio intervals, traced with exact Hessians.

    For each parameter ``i`` the profile ``PL(c) = min {L(theta) : theta_i = c}``
    is traced from the optimum in both directions until the likelihood ratio
    ``2 (PL(c) - L_min) / scale`` passes ``chi2(1).ppf(level)``; the interval
    ends are the roots of ``PL(c) = L_min + scale * chi2(1).ppf(level) / 2``.

    Parameters
    ----------
    fit : OptimizeResult
        The result of :func:`simdiff.least_squares` (``L = 1/2 sum r^2``, so
        residuals divided by their noise standard deviation give the Gaussian
        negative log-likelihood) or of :func:`simdiff.minimize` on a negative
        log-likelihood ``L``.  Its ``problem``, ``x`` and ``bounds`` are used.
    params : int, str or sequence of them, optional
        The parameters to profile, by index or name (default: all).
    level : float
        Confidence level (default 0.95).
    backend : {"jax", "torch"}, optional
        Default: the fit's backend.
    scale : float
        Multiplies the threshold (and the Laplace covariance), e.g. a residual
        variance estimate when the noise level was unknown.
    bounds : sequence of (low, high) pairs, optional
        Default: the fit's bounds.  A profile that reaches a bound below the
        threshold ends there with status ``"bound"``.
    names : sequence of str, optional
        Parameter names (default ``problem.meta["parameters"]`` or ``x[k]``).
    max_steps : int
        Path steps per side at most (default 60); then status ``"max_steps"``.
    max_step : float or array (n,), optional
        Largest step in ``c``; default ``0.5 * max(|x_i|, se_i)`` (``se_i``
        the Laplace standard error), or 0.5 where both are 0.
    step_fraction : float
        Each step aims to raise ``L`` by this fraction of the threshold, on the
        local quadratic model (default 0.25: about four steps to each interval end).
    newton_steps : int
        Corrector iterations before a step is halved (default 6).
    rcond : float
        ``H_rr`` counts as singular when its smallest eigenvalue is at most
        ``rcond`` times its largest; such points are re-optimised by SciPy
        (``trust-exact``, or ``L-BFGS-B`` with bounds) and marked in
        ``Profile.reoptimised``.
    flat_steps : int
        That many consecutive steps of size ``max_step`` raising ``L`` by less
        than ``1e-6`` of the threshold end a side with status ``"flat"``.
    batch : int
        Most points per batched derivative call (default 16).  The
        ``2 * len(params)`` sides are traced in lockstep, their next points
        evaluated together in calls of ``min(batch, 2 * len(params))`` points;
        1 evaluates each point alone (less memory for a large problem).

    Returns
    -------
    ProfileLikelihood
        ``profiles[k]`` per parameter (path, objective, interval, status,
        counts), ``table()``, ``plot()``, ``at(param, c)``.

    Notes
    -----
    Path: Euler steps along ``d theta_r / dc = -H_rr^{-1} H_ri`` (Stapor et
    al. 2018), each corrected by Newton on ``grad_r L = 0`` until the Newton
    decrement ``g_r^T H_rr^{-1} g_r / 2`` is below ``1e-12 max(1, |L_min|)``.
    The step ``h`` solves ``|g_i| h + S h^2 / 2 = step_fraction * threshold``
    with ``S`` the Schur complement (the profile's curvature), grows at most
    4x a step, and is halved when Newton fails or ``L`` rises by more than 4x
    the aim.  Interval ends: safeguarded Newton on ``PL(c)`` with the exact
    slope ``dPL/dc = dL/dtheta_i``, bracketed by the last two path points.
    Exact derivatives come from :class:`simdiff.Derivatives` on the chosen
    backend; the counts say how many.  The two sides of every profiled
    parameter are traced in lockstep: the points all running paths need next
    are evaluated together, value and gradient in one batched call and the
    Hessians in another (``vmap``), padded to ``min(batch, 2 * len(params))``
    rows so that one compilation serves every round; a round with one point
    left makes the plain call.  Each path takes the same steps as it would
    alone.  Should a batched call raise (a problem the framework cannot
    ``vmap``), the points are evaluated one at a time and ``message`` says so.

    References
    ----------
    P. Stapor, F. Froehlich, J. Hasenauer, "Optimization and profile
    calculation of ODE models using second order adjoint sensitivity
    analysis", Bioinformatics 34 (2018) i151-i159.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.sensitivity import profile_likelihood
    >>> t = np.linspace(0.0, 1.0, 6)
    >>> data = np.array([1.0, 1.9, 3.1, 3.9, 5.2, 6.0])
    >>> res = simdiff.least_squares(simdiff.Problem(
    ...     lambda x, ops: x[0] + x[1] * ops.asarray(t) - ops.asarray(data), x0=np.zeros(2)))
    >>> prof = profile_likelihood(res)
    >>> p = prof[1]
    >>> p.lower_status, np.allclose([p.lower, p.upper], p.wald, rtol=1e-10)
    ('threshold', True)
    """
    problem, objective, x = _fit_problem(fit)
    if not (isinstance(level, (int, float)) and 0.0 < float(level) < 1.0):
        raise InputError(f"profile_likelihood: level must lie in (0, 1); got {level!r}")
    _positive(scale, "scale")
    _positive(max_steps, "max_steps", integer=True)
    _positive(newton_steps, "newton_steps", integer=True)
    _positive(flat_steps, "flat_steps", integer=True)
    _positive(batch, "batch", integer=True)
    _positive(step_fraction, "step_fraction", upper=1.0)
    _positive(rcond, "rcond", upper=1.0)
    backend = str(fit.get("backend", "jax")) if backend is None else backend
    n = problem.n
    labels = _names(problem, names)
    which = _indices(params, labels)
    b = fit.get("bounds") if bounds is None else bounds
    if b is not None:
        b = check_bounds(b, x, "profile_likelihood")
    d = derivatives(objective, Config(backend=backend))
    threshold = 0.5 * float(scale) * float(scipy.stats.chi2.ppf(level, 1))
    f0 = float(np.asarray(d.value(x)))
    ftol = 1e-12 * max(1.0, abs(f0))
    tracer = Tracer(d, b, newton_steps=newton_steps, rcond=rcond, ftol=ftol)
    x, polish = tracer.polish(x)
    lap = laplace(objective, x, backend=backend, level=level, scale=scale)
    if max_step is None:
        se = lap.std_errors if lap.std_errors is not None else np.zeros(n)
        steps = 0.5 * np.maximum(np.abs(x), se)
        steps = np.where(steps > 0, steps, 0.5)
    else:
        steps = np.broadcast_to(np.asarray(max_step, dtype=np.float64), (n,)).copy()
        if not np.all(np.isfinite(steps) & (steps > 0)):
            raise InputError(f"profile_likelihood: max_step must be positive; got {max_step!r}")
    tracer.width = min(int(batch), 2 * len(which))
    counts = {i: dict.fromkeys(COUNTS, 0) for i in which}
    starts = tracer.lockstep([(tracer.solve(i, x.copy(), counts[i]), counts[i]) for i in which])
    sides = [(k, i, direction) for k, i in enumerate(which) for direction in (-1, 1)]
    traced = tracer.lockstep(
        [
            (
                tracer.side(
                    i,
                    starts[k],
                    direction,
                    counts[i],
                    lmin=starts[k].value,
                    threshold=threshold,
                    bound=(np.inf * direction if b is None else b[i, 0 if direction < 0 else 1]),
                    max_step=float(steps[i]),
                    max_steps=max_steps,
                    step_fraction=step_fraction,
                    flat_steps=flat_steps,
                ),
                counts[i],
            )
            for k, i, direction in sides
        ]
    )
    ends = {(i, direction): out for (_, i, direction), out in zip(sides, traced, strict=True)}
    profiles = []
    for k, i in enumerate(which):
        start, lower, upper = starts[k], ends[i, -1], ends[i, 1]
        pts = sorted([*lower[0], start, *upper[0]], key=lambda p: p.c)
        tracer.points[i] = pts
        for name in COUNTS:
            tracer.counts[name] += counts[i][name]
        counts[i]["steps"] = len(lower[0]) + len(upper[0])
        wald = None if lap.ci is None else (float(lap.ci[0, i]), float(lap.ci[1, i]))
        obj = np.array([p.value for p in pts])
        profiles.append(
            Profile(
                i,
                labels[i],
                float(x[i]),
                np.array([p.c for p in pts]),
                obj,
                2.0 * (obj - start.value) / scale,
                np.array([p.theta for p in pts]),
                np.array([p.reoptimised for p in pts]),
                lower[1],
                upper[1],
                lower[2],
                upper[2],
                lower[3],
                upper[3],
                wald,
                counts[i],
            )
        )
    lmin = min(p.value for p in starts)
    reopt = sum(p.counts["reoptimised"] for p in profiles)
    lowest = min(float(np.min(p.objective)) for p in profiles)
    notes = [polish]
    if tracer.unbatched is not None:
        notes.append(
            f"a batched derivative call raised ({tracer.unbatched}); points evaluated one at a time"
        )
    if reopt:
        notes.append(
            f"{reopt} point(s) re-optimised by SciPy where H_rr was singular or "
            "ill-conditioned or Newton did not converge"
        )
    if lowest < f0 - max(ftol, 1e-9 * threshold):
        notes.append(
            f"a profile went below the fit's objective ({lowest:.10g} < {f0:.10g}): "
            "fit.x is not the global minimum"
        )
    return ProfileLikelihood(
        profiles,
        x,
        float(lmin),
        float(level),
        threshold,
        float(scale),
        backend,
        lap,
        dict(tracer.counts),
        "; ".join(notes),
        tracer,
    )
