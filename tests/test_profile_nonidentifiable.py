"""Profile likelihood on the catalogue's non-identifiable fit ``decay_product_fit``.

``y(t) = A exp(-k1 k2 t)`` in ``(A, log k1, log k2)``: the objective is constant
along ``(0, 1, -1)``, so the profiles of ``log_k1`` and ``log_k2`` must end
"flat" (not identifiable) after a few steps instead of running to the step
budget, while ``A`` and the rate ``s = log k1 + log k2`` get finite intervals.
Reference for the intervals: the profile in closed form, since for fixed ``s``
the best ``A`` is linear least squares, ``A*(s) = sum e y / sum e^2`` with
``e = exp(-exp(s) t)``, and the interval ends are roots found by ``brentq``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from _shared import shared_problem

import simdiff
from problems.sensitivity import DECAY_DATA, DECAY_SIGMA, DECAY_TIMES, decay_product_fit_fn
from simdiff.sensitivity import profile_likelihood

MAX_STEPS = 30


def _profile_of_rate(s: float) -> float:
    """min over A of L at log k1 + log k2 = s (closed form)."""
    e = np.exp(-np.exp(s) * DECAY_TIMES)
    y = DECAY_DATA
    return 0.5 * (y @ y - (e @ y) ** 2 / (e @ e)) / DECAY_SIGMA**2


def _rate_problem() -> simdiff.Problem:
    """The same fit in the identifiable parameters (A, s)."""

    def fn(x, ops):
        return decay_product_fit_fn(ops.stack([x[0], x[1], 0.0 * x[1]]), ops)

    return simdiff.Problem(fn, x0=np.array([1.5, 0.0]), name="decay_rate_fit",
                           meta={"parameters": ("A", "s")})  # fmt: skip


@pytest.fixture(scope="module", params=["jax", "torch"])
def profiles(request):
    backend = request.param
    fit = simdiff.minimize(shared_problem("decay_product_fit"), backend=backend)
    rate_fit = simdiff.minimize(_rate_problem(), backend=backend)
    return (
        profile_likelihood(fit, max_steps=MAX_STEPS),
        profile_likelihood(rate_fit, max_steps=MAX_STEPS),
    )


def test_non_identifiable_direction_ends_flat(profiles):
    prof, _ = profiles
    x = prof.x
    for name in ("log_k1", "log_k2"):
        p = prof[name]
        assert (p.lower, p.upper) == (None, None)
        assert (p.lower_status, p.upper_status) == ("flat", "flat")
        assert "not identifiable" in p.lower_message and "not identifiable" in p.upper_message
        assert p.counts["steps"] < MAX_STEPS  # ended by flatness, not by the step budget
        # along the flat path only log k1 - log k2 moves: the rate and A stay at the optimum
        np.testing.assert_allclose(p.theta[:, 1] + p.theta[:, 2], x[1] + x[2], atol=1e-8)
        np.testing.assert_allclose(p.theta[:, 0], x[0], atol=1e-8)
        assert np.ptp(p.c) > 1.0
        np.testing.assert_allclose(p.ratio, 0.0, atol=1e-8)
    # the Hessian is singular at the optimum: no Wald interval, and the A profile says so
    assert prof.laplace.ci is None
    assert "re-optimised" in prof.message


def test_identifiable_parameters_get_the_closed_form_intervals(profiles):
    prof, rate = profiles
    lmin = rate.objective
    sol = scipy.optimize.minimize_scalar(_profile_of_rate, bracket=(0.0, 0.5), tol=1e-12)
    np.testing.assert_allclose(lmin, sol.fun, rtol=1e-10)
    np.testing.assert_allclose(prof.objective, lmin, rtol=1e-10)
    s_hat = rate.x[1]
    np.testing.assert_allclose(s_hat, sol.x, atol=1e-6)
    level = lmin + rate.threshold

    def excess(s):
        return _profile_of_rate(s) - level

    lo = scipy.optimize.brentq(excess, s_hat - 1.0, s_hat, xtol=1e-14)
    hi = scipy.optimize.brentq(excess, s_hat, s_hat + 1.0, xtol=1e-14)
    p = rate["s"]
    assert (p.lower_status, p.upper_status) == ("threshold", "threshold")
    np.testing.assert_allclose([p.lower, p.upper], [lo, hi], atol=1e-8)
    # A: the same finite interval whether the rate is one parameter or the product of two
    a3, a2 = prof["A"], rate["A"]
    assert (a3.lower_status, a3.upper_status) == ("threshold", "threshold")
    np.testing.assert_allclose([a3.lower, a3.upper], [a2.lower, a2.upper], atol=1e-9)
    assert a2.lower < a2.estimate < a2.upper
