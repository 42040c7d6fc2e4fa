"""check's finite-difference step: relative to each parameter, inside the domain.

The user's problem of issue 64: Lotka-Volterra with named rates of very different sizes
(beta = 0.1, delta = 0.075 beside gamma = 1.5).  One absolute step for all (0.15) pushed
beta and delta below zero and the solve blew up; per-element steps keep every perturbed
point beside its own parameter, and ``simdiff.check`` passes with its defaults.
"""

from __future__ import annotations

import numpy as np
import pytest

import simdiff
from simdiff.evidence.check.fd import FiniteDifferences, default_fd_step
from simdiff.ode import ODEProblem


def lv(t, y, p, ops):
    return ops.stack(
        [p["alpha"] * y[0] - p["beta"] * y[0] * y[1], p["delta"] * y[0] * y[1] - p["gamma"] * y[1]]
    )


PROB = ODEProblem(
    lv, [10.0, 5.0], (0.0, 6.0), {"alpha": 1.0, "beta": 0.1, "gamma": 1.5, "delta": 0.075},
    save_at=np.linspace(1, 6, 6), rtol=1e-8, atol=1e-10,
    observable=lambda ys, ops: ops.sum(ys[:, 0] * ys[:, 1]) / 100, name="my_lv",
)  # fmt: skip


def test_the_default_step_is_relative_to_each_element() -> None:
    x = PROB.x0
    h = default_fd_step(PROB, x)
    np.testing.assert_allclose(h, np.minimum(0.15, x / 2), rtol=1e-15)
    assert np.all(x - h >= x / 2)  # no rate pushed to zero or below
    assert default_fd_step(PROB, np.array([1.0, 2.0])) == 0.2  # one scalar where none is small
    p = simdiff.Problem(
        lambda x, ops: ops.sum(x), x0=np.zeros(2), check_options=simdiff.CheckOptions(fd_step=2)
    )
    assert default_fd_step(p, np.zeros(2)) == 2.0


def test_a_field_crossing_zero_keeps_the_scalar_step() -> None:
    """Elements far below the scale (a field near a zero crossing) are no scale of their own."""
    x = np.array([1.0, -0.5, 1e-6, 0.0, 0.3])
    p = simdiff.Problem(lambda x, ops: ops.sum(x), x0=x)
    assert default_fd_step(p, x) == pytest.approx(0.1, rel=1e-15)
    x = np.array([2.0, 0.08, 1e-6])
    np.testing.assert_allclose(default_fd_step(p, x), [0.2, 0.04, 0.2], rtol=1e-15)


def test_a_direction_takes_one_step_for_the_line() -> None:
    fd = FiniteDifferences(np.array([0.1, 0.01]))
    seen = []

    def f(pts):
        seen.append(np.asarray(pts))
        return np.sum(np.asarray(pts) ** 2, axis=0)

    x, v = np.array([1.0, 0.1]), np.array([1.0, 2.0])
    d, _err, _ok = fd.direction(f, x, v)
    assert d == pytest.approx(2 * x @ v, rel=1e-8)
    moved = np.concatenate([s.reshape(2, -1) for s in seen], axis=1) - x[:, None]
    assert np.max(np.abs(moved[1])) == pytest.approx(0.1, rel=1e-12)  # 0.1 / max|v| along v


def test_the_users_lv_check_passes_with_defaults() -> None:
    r = simdiff.check(PROB, derivatives=("grad",), backends=("jax",))
    assert r.passed, str(r)


def test_the_hessian_reference_stays_inside_a_positive_domain() -> None:
    """A simulator that refuses a non-positive rate (raises, like a solve that blows up): the
    default step keeps every perturbed point positive, and the Hessian is right."""
    x = np.array([1.5, 0.075])
    problem = simdiff.Problem(lambda x, ops: ops.sum(ops.log(x)), x0=x)

    def f(pts):
        pts = np.asarray(pts)
        if np.any(pts <= 0):
            raise simdiff.SolverError(f"rate out of domain: {pts.min()}")
        return np.sum(np.log(pts), axis=0)

    fd = FiniteDifferences(default_fd_step(problem, x))
    ddf, _err, ok = fd.hessian(f, x)
    np.testing.assert_allclose(ddf, np.diag(-1 / x**2), rtol=1e-6, atol=1e-6)
    assert ok[0, 0] and ok[1, 1]
