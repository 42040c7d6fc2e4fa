"""minimize / least_squares: known optima, the derivatives each method gets, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

import problems
import simdiff

# method -> (derivative counters that must be > 0, counters that must be 0)
METHODS = {
    "trust-exact": (("ngrad", "nhess"), ("nhvp",)),
    "trust-krylov": (("ngrad", "nhvp"), ("nhess",)),
    "Newton-CG": (("ngrad", "nhvp"), ("nhess",)),
    "trust-constr": (("ngrad", "nhess"), ("nhvp",)),
    "BFGS": (("ngrad",), ("nhess", "nhvp")),
}


@pytest.fixture
def rosen() -> simdiff.Problem:
    return problems.get("rosenbrock4")  # a fresh problem: nothing compiled yet


@pytest.mark.parametrize("method", list(METHODS))
def test_minimize_reaches_rosenbrock_minimum(rosen, method, backend):
    opts = {"options": {"xtol": 1e-10}} if method == "Newton-CG" else {}
    res = simdiff.minimize(rosen, method=method, backend=backend, **opts)
    assert res.success, res.message
    np.testing.assert_allclose(res.x, rosen.meta["minimum"], atol=1e-6)
    used, unused = METHODS[method]
    assert all(res[k] > 0 for k in used) and all(res[k] == 0 for k in unused)
    assert res.backend == backend and res.method == method
    if backend == "jax":
        assert res.compilations == len(used)  # one per derivative kind, whatever the iterations
        again = simdiff.minimize(rosen, rosen.x0 + 0.1, method=method, backend=backend, **opts)
        assert again.compilations == 0  # the problem's cached Derivatives is reused


def test_bounded_minimum_matches_scipy_with_exact_derivatives(rosen, backend):
    bounds = [(-2.0, 0.5), (-2.0, 2.0), (-2.0, 2.0), (-2.0, 2.0)]
    x0 = np.array([-1.2, 1.0, -1.2, 1.0])
    res = simdiff.minimize(rosen, x0, bounds=bounds, backend=backend)
    ref = scipy.optimize.minimize(scipy.optimize.rosen, x0, jac=scipy.optimize.rosen_der,
                                  method="L-BFGS-B", bounds=bounds)  # fmt: skip
    assert res.method == "L-BFGS-B" and res.success and res.nhess == res.nhvp == 0
    assert res.x[0] == pytest.approx(0.5)  # the bound is active
    np.testing.assert_allclose(res.x, ref.x, atol=1e-6)
    assert res.fun == pytest.approx(ref.fun, rel=1e-8)


@pytest.mark.slow
def test_catalogue_fit_by_least_squares(backend):
    # Fit the Lotka-Volterra parameters to noise-free observations from a perturbed start.
    model = problems.get("lv4_observations")
    truth = model.x0
    data = model.evaluate(truth)

    def residuals(p, ops):
        return (model.fn(p, ops) - ops.asarray(data)) / 0.5

    rp = simdiff.Problem(residuals, x0=truth * np.array([1.1, 0.9, 1.05, 0.95]), name="lv-fit")
    res = simdiff.least_squares(rp, backend=backend, xtol=1e-12, ftol=1e-12)
    assert res.success and res.njac > 0 and res.njac == res.njev
    np.testing.assert_allclose(res.x, truth, rtol=1e-7)


def test_least_squares_bounds_and_counts(backend):
    t = np.linspace(0.0, 1.0, 6)
    data = 2.0 * np.exp(-0.5 * t)
    p = simdiff.Problem(lambda x, ops: x[0] * ops.exp(-x[1] * ops.asarray(t)) - ops.asarray(data),
                        x0=np.array([1.0, 1.0]))  # fmt: skip
    res = simdiff.least_squares(p, bounds=[(0.0, 1.5), (0.0, 5.0)], backend=backend)
    assert res.x[0] == pytest.approx(1.5)
    assert res.nfun == res.nfev


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"bounds": [(1.0, 0.0)] * 4}, ValueError, "bounds[0] has low > high: (1.0, 0.0)"),
        ({"bounds": [(0.0, 1.0)] * 4}, ValueError, "x0[0] = -1.2 lies outside bounds[0]"),
        ({"bounds": [(0.0, 1.0)] * 3}, simdiff.ShapeError, "bounds must be 4 (low, high) pairs"),
        ({"method": "newton"}, ValueError, "unknown method 'newton'"),
        ({"method": "trust-exact", "bounds": [(-2, 2)] * 4}, ValueError, "does not accept bounds"),
        ({"x0": np.zeros(3)}, simdiff.ShapeError, "must have shape (4,); got (3,)"),
        ({"x0": np.array([0.0, np.nan, 0, 0])}, ValueError, "x0 must be finite; x0[1] = nan"),
    ],
)
def test_minimize_bad_input(rosen, kwargs, error, message):
    with pytest.raises(error) as info:
        simdiff.minimize(rosen, **kwargs)
    assert message in str(info.value)


def test_wrong_problem_kinds(rosen):
    with pytest.raises(simdiff.ShapeError, match="use simdiff.least_squares"):
        simdiff.minimize(problems.get("spherical"))
    with pytest.raises(simdiff.ShapeError, match="use simdiff.minimize"):
        simdiff.least_squares(rosen)
    with pytest.raises(ValueError, match="method 'lm' does not accept bounds"):
        simdiff.least_squares(problems.get("spherical"), method="lm", bounds=[(0, 2)] * 3)
