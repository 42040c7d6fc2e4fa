"""Workflow (a): a Lotka-Volterra fit, its Laplace intervals and one profile, as a user writes it.

Four named parameters, Dopri5 at rtol 1e-10, 20 noisy observations of both
species.  ``simdiff`` side: ``simdiff.least_squares`` (exact Jacobian), ``laplace``
(exact Hessian) and ``profile_likelihood(fit, "gamma")``.  ``scipy`` side, the tool a
researcher would otherwise use: ``scipy.optimize.least_squares`` with its
finite-difference Jacobian over ``solve_ivp(method="DOP853")`` at the same
tolerances, the Gauss-Newton covariance from that Jacobian, and the profile of
gamma by re-optimising the other three parameters at 20 points over the Laplace
interval widened by half (the textbook profile).  Prints one JSON line:
``{"task": ..., "tool": ..., "wall_s": ..., "phases": {...}, "result": {...}}``.

    python -m validation.benchmarks.workflows.lv_fit simdiff
    python -m validation.benchmarks.workflows.lv_fit scipy
"""

from __future__ import annotations

import json
import sys
import time

T_START = time.perf_counter()

import numpy as np  # noqa: E402

NAMES = ("alpha", "beta", "delta", "gamma")
TRUTH = {"alpha": 1.0, "beta": 0.1, "delta": 0.075, "gamma": 1.5}
START = {"alpha": 1.15, "beta": 0.09, "delta": 0.08, "gamma": 1.4}
Y0 = (10.0, 5.0)
SPAN = (0.0, 10.0)
TIMES = np.linspace(0.5, 10.0, 20)
SIGMA = 0.5
RTOL, ATOL = 1e-10, 1e-10


def _rhs_np(t, y, a, b, d, g):
    return [a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]]


def observations(p: dict[str, float]) -> np.ndarray:
    from scipy.integrate import solve_ivp

    sol = solve_ivp(_rhs_np, SPAN, Y0, t_eval=TIMES, args=tuple(p[n] for n in NAMES),
                    method="DOP853", rtol=1e-12, atol=1e-12)  # fmt: skip
    return sol.y.T.reshape(-1)


def data() -> np.ndarray:
    return observations(TRUTH) + SIGMA * np.random.default_rng(7).standard_normal(2 * len(TIMES))


def run_simdiff() -> dict:
    phases = {}
    t0 = time.perf_counter()
    import simdiff
    from simdiff.ode import ODEProblem
    from simdiff.sensitivity import laplace, profile_likelihood

    phases["import_s"] = time.perf_counter() - t0
    obs = data()

    def lv(t, y, p, ops):
        return ops.stack([p["alpha"] * y[0] - p["beta"] * y[0] * y[1],
                          p["delta"] * y[0] * y[1] - p["gamma"] * y[1]])  # fmt: skip

    def residuals(ys, ops):
        return (ops.reshape(ys, (-1,)) - ops.asarray(obs)) / SIGMA

    def problem(observable):
        return ODEProblem(lv, list(Y0), SPAN, dict(START), save_at=TIMES, solver="dopri5",
                          rtol=RTOL, atol=ATOL, observable=observable)  # fmt: skip

    t0 = time.perf_counter()
    fit = simdiff.least_squares(problem(residuals), xtol=1e-12, ftol=1e-12)
    phases["fit_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    nll = problem(lambda ys, ops: 0.5 * ops.sum(residuals(ys, ops) ** 2))
    lap = laplace(nll, fit.params)
    phases["laplace_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    prof = profile_likelihood(fit, "gamma")
    phases["profile_s"] = time.perf_counter() - t0
    lo, hi = prof["gamma"].lower, prof["gamma"].upper
    return {
        "phases": phases,
        "result": {
            "x": [float(v) for v in fit.x],
            "std_errors": [float(v) for v in lap.std_errors],
            "gamma_interval": [float(lo), float(hi)],
        },
    }


def run_scipy() -> dict:
    phases = {}
    t0 = time.perf_counter()
    from scipy import optimize, stats

    phases["import_s"] = time.perf_counter() - t0
    obs = data()

    def res(x, fixed=None):
        p = dict(zip(NAMES, x, strict=True)) if fixed is None else fixed(x)
        return (observations(p) - obs) / SIGMA

    t0 = time.perf_counter()
    x0 = np.array([START[n] for n in NAMES])
    fit = optimize.least_squares(res, x0, xtol=1e-12, ftol=1e-12, method="trf")
    phases["fit_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    J = fit.jac
    cov = np.linalg.inv(J.T @ J)
    se = np.sqrt(np.diag(cov))
    phases["laplace_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    i = NAMES.index("gamma")
    others = [k for k in range(4) if k != i]
    lmin = 0.5 * np.sum(fit.fun**2)
    thr = stats.chi2.ppf(0.95, 1) / 2
    grid = fit.x[i] + np.linspace(-1.5, 1.5, 20) * 1.96 * se[i]
    prof = []
    start = fit.x[others]
    for c in grid:
        def fixed(z, c=c):
            x = np.empty(4)
            x[others], x[i] = z, c
            return dict(zip(NAMES, x, strict=True))

        r = optimize.least_squares(lambda z, f=fixed: res(z, f), start, xtol=1e-10, ftol=1e-10)
        prof.append(0.5 * np.sum(r.fun**2) - lmin)
    prof = np.array(prof)
    inside = grid[prof <= thr]
    phases["profile_s"] = time.perf_counter() - t0
    return {
        "phases": phases,
        "result": {
            "x": [float(v) for v in fit.x],
            "std_errors": [float(v) for v in se],
            "gamma_interval": [float(inside.min()), float(inside.max())],
        },
    }


if __name__ == "__main__":
    tool = sys.argv[1] if len(sys.argv) > 1 else "simdiff"
    out = {"simdiff": run_simdiff, "scipy": run_scipy}[tool]()
    out = {"task": "lv_fit", "tool": tool, "wall_s": time.perf_counter() - T_START, **out}
    print(json.dumps(out))
