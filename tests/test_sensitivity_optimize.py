"""minimize / least_squares: known optima, the derivatives each method gets, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from _shared import shared_problem

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
    return problems.get("rosenbrock4")  # a fresh problem: nothing compiled yet (tests/_shared.py)


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
    model = shared_problem("lv4_observations")
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
        simdiff.minimize(shared_problem("spherical"))
    with pytest.raises(simdiff.ShapeError, match="use simdiff.minimize"):
        simdiff.least_squares(rosen)
    with pytest.raises(ValueError, match="method 'lm' does not accept bounds"):
        simdiff.least_squares(shared_problem("spherical"), method="lm", bounds=[(0, 2)] * 3)


# --------------------------------------------------------------------------- one adapter


def test_gtol_reaches_each_method_under_its_own_name(rosen):
    loose = simdiff.minimize(rosen, method="BFGS", gtol=1e-2)
    tight = simdiff.minimize(rosen, method="BFGS", gtol=1e-9)
    assert np.linalg.norm(loose.jac) <= 1e-2 < np.linalg.norm(rosen.x0)
    assert np.linalg.norm(tight.jac) <= 1e-9 and tight.nit > loose.nit
    # Newton-CG takes it as xtol (its only stopping tolerance): scipy sees the same run
    ours = simdiff.minimize(rosen, method="Newton-CG", gtol=1e-10)
    ref = simdiff.minimize(rosen, method="Newton-CG", options={"xtol": 1e-10})
    np.testing.assert_array_equal(ours.x, ref.x)
    assert ours.nit == ref.nit


def test_maxiter_and_tnc_maxfun(rosen):
    assert simdiff.minimize(rosen, method="BFGS", maxiter=3).nit == 3
    res = simdiff.minimize(rosen, method="TNC", maxiter=5)
    assert res.nfev <= 5 + 1 and not res.success


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "Nelder-Mead", "gtol": 1e-6}, "'Nelder-Mead' has no gradient tolerance"),
        ({"method": "BFGS", "gtol": -1.0}, "gtol must be a positive number; got -1.0"),
        ({"method": "BFGS", "maxiter": 0}, "maxiter must be a positive integer; got 0"),
        (
            {"method": "BFGS", "gtol": 1e-6, "options": {"gtol": 1e-3}},
            r"options \['gtol'\] are also set by gtol=/maxiter=",
        ),
    ],
)
def test_typed_options_bad_input(rosen, kwargs, message):
    with pytest.raises(ValueError, match=message):
        simdiff.minimize(rosen, **kwargs)


@pytest.mark.parametrize("method", ["trust-exact", "trust-krylov", "L-BFGS-B"])
def test_pes_minimisation_through_the_one_adapter(method):
    # what pes.find_minimum does with its own scipy call, done through sensitivity.minimize
    from simdiff.pes import cluster_problem, find_minimum, lennard_jones

    tri = cluster_problem(lennard_jones, [[0, 0, 0], [1.2, 0, 0], [0.5, 1.0, 0.1]])
    extra = {"options": {"ftol": 0.0, "maxcor": 30}} if method == "L-BFGS-B" else {}
    res = simdiff.minimize(tri, method=method, gtol=1e-8, maxiter=2000, **extra)
    ref = find_minimum(tri, method=method, gtol=1e-8, maxiter=2000)
    assert res.success and ref.converged
    np.testing.assert_allclose(res.fun, -3.0, rtol=0, atol=1e-10)  # three pairs at r = 2**(1/6)
    np.testing.assert_allclose(res.fun, ref.energy, rtol=0, atol=1e-12)
    if method == "trust-exact":
        # find_minimum runs trust-exact on a cluster's internal coordinates (rigid-body
        # modes projected out, Newton finish): a different iteration, the same minimum
        assert ref.message == "projected gradient below gtol"
    else:
        assert res.nit == ref.nit
