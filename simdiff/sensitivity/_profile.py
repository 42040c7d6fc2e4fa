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
point is marked.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.optimize
import scipy.stats

from .._api import Derivatives
from .._problem import Problem
from ..errors import InputError, InputTypeError, OutOfRangeError
from ._common import derivatives
from ._local import LaplaceResult, laplace

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
        Totals over the profiles (plus the start's Newton polish).
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
        """``(PL(c), theta(c))``: the profile at any ``c``, by Newton from the nearest traced point."""
        p = self[key]
        return self._tracer.evaluate(p, float(c))

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
                ax.plot(grid, ((grid - p.estimate) / se[p.index]) ** 2, "--", color="C1",
                        label="Laplace")
                for v in p.wald or ():
                    ax.axvline(v, color="C1", ls=":")
            for v in (p.lower, p.upper):
                if v is not None:
                    ax.axvline(v, color="C0", lw=0.8)
            ax.axhline(cut, color="grey", lw=0.8)
            ax.set_xlabel(p.name)
            ax.set_ylabel("2 ΔL / scale")
            ax.set_ylim(0.0, 1.6 * cut)
        for ax in axes.ravel()[k:]:
            ax.set_visible(False)
        axes.ravel()[0].legend(fontsize=7)
        fig.tight_layout()
        return fig
