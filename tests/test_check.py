"""simdiff.check: passes correct derivatives, fails planted errors, tolerances as documented."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import scipy.optimize

import problems
import simdiff
from simdiff._check import RTOL_EXACT, RTOL_FD, CheckResult, check, tolerance


def _by(res: CheckResult, derivative: str, reference: str | None = None):
    return [
        e
        for e in res.entries
        if e.derivative == derivative and (reference is None or e.reference == reference)
    ]


@pytest.mark.parametrize(
    "name", [pytest.param("seed8", marks=pytest.mark.slow), "rosenbrock4", "spherical"]
)
def test_catalogue_problems_pass(name: str) -> None:
    res = check(problems.get(name))
    assert res.passed, str(res)
    assert any(e.verdict == "pass" and e.reference == "scipy-fd" for e in res.entries)
    assert "PASS" in str(res)


def test_large_n_uses_fd_of_ad_gradient_and_directions(backend: str) -> None:
    res = check(
        problems.get("rosenbrock32"),
        derivatives=("hessian",),
        backends=(backend,),
        fd_max_n=16,
        n_directions=2,
    )
    labels = {e.derivative for e in res.entries}
    assert labels == {"hessian.v0", "hessian.v1"}
    assert {e.reference for e in res.entries} == {"scipy-fd(ad grad)", "exact"}
    assert res.passed, str(res)


def test_misplaced_stop_gradient_fails(backend: str) -> None:
    # f = sum(x^3) but one factor is under stop_gradient: AD gives x^2 instead of 3 x^2.
    p = simdiff.Problem(
        lambda x, ops: ops.sum(ops.stop_gradient(x**2) * x), x0=np.array([0.5, 1.3])
    )
    res = check(p, derivatives=("grad", "jvp"), backends=(backend,))
    assert not res.passed
    assert {e.verdict for e in _by(res, "grad", "scipy-fd")} == {"fail"}
    assert {e.verdict for e in _by(res, "jvp", "scipy-fd")} == {"fail"}


def test_second_order_only_error_is_caught(backend: str) -> None:
    # value and gradient of exp(x) are right, the Hessian is 0: only second order is wrong.
    def f(x, ops):
        s = ops.stop_gradient(x)
        return ops.sum(ops.exp(s) * (1.0 + x - s))

    res = check(
        simdiff.Problem(f, x0=np.array([0.2, -0.4])),
        backends=(backend,),
        derivatives=("grad", "hessian", "hvp"),
    )
    assert [e.verdict for e in _by(res, "grad")] == ["pass"]
    assert [e.verdict for e in _by(res, "hessian")] == ["fail"]
    assert [e.verdict for e in _by(res, "hvp")] == ["fail"]


def test_wrong_exact_reference_fails(backend: str) -> None:
    p = problems.get("rosenbrock4")
    p.exact["grad"] = lambda x: scipy.optimize.rosen_der(x) * (1 + 1e-6)
    res = check(p, derivatives=("grad",), backends=(backend,))
    assert [e.verdict for e in _by(res, "grad", "scipy-fd")] == ["pass"]
    assert [e.verdict for e in _by(res, "grad", "exact")] == ["fail"]


def test_sign_error_in_one_op_fails() -> None:
    # A custom sine whose derivative rule has the wrong sign, on the jax backend only.
    @jax.custom_jvp
    def bad_sin(x):
        return jax.numpy.sin(x)

    def wrong_rule(primals, tangents):
        return bad_sin(primals[0]), -jax.numpy.cos(primals[0]) * tangents[0]

    bad_sin.defjvp(wrong_rule)
    p = simdiff.Problem.from_jax(lambda x: jax.numpy.sum(bad_sin(x) * x), np.array([0.3, 0.9]))
    res = check(p, derivatives=("grad",), backends=("jax", "torch"))
    # The FD reference differences jax's plain values (no numpy context for from_jax).
    assert not res.passed
    assert [e.verdict for e in _by(res, "grad", "scipy-fd")] == ["fail"]
    good = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x) * x), x0=np.array([0.3, 0.9]))
    assert check(good, derivatives=("grad",), backends=("jax",)).passed
    torch_entry = [e for e in res.entries if e.backend == "torch"]
    assert torch_entry and torch_entry[0].verdict == "n/a"


def test_sign_error_through_exact_of_custom_problem(backend: str) -> None:
    # A problem whose fn has a sign error in one op relative to its documented exact gradient.
    p = simdiff.Problem(
        lambda x, ops: ops.sum(ops.sin(-x) * x),
        x0=np.array([0.3, 0.9]),
        exact={"grad": lambda x: np.sin(x) + x * np.cos(x)},
    )
    res = check(p, derivatives=("grad",), backends=(backend,))
    assert [e.verdict for e in _by(res, "grad", "scipy-fd")] == ["pass"]
    assert [e.verdict for e in _by(res, "grad", "exact")] == ["fail"]


def test_tolerance_formula() -> None:
    err = np.array([1e-9, 0.0])
    np.testing.assert_allclose(tolerance(err, 3.0, c=10.0, rtol=1e-8), [1e-8 + 3e-8, 3e-8])
    assert RTOL_FD == pytest.approx(np.sqrt(np.finfo(float).eps))
    assert RTOL_EXACT == pytest.approx(1e4 * np.finfo(float).eps)


@pytest.mark.parametrize("factor", [1.0, 1e3])
def test_tolerances_scale_with_the_problem(factor: float) -> None:
    p = simdiff.Problem(
        lambda x, ops: factor * ops.sum(ops.exp(2.0 * x)),
        x0=np.array([1.0, 2.0]),
        exact={"grad": lambda x: factor * 2 * np.exp(2 * x)},
    )
    res = check(p, derivatives=("grad",), backends=("jax",))
    assert res.passed, str(res)
    (exact,) = _by(res, "grad", "exact")
    scale = factor * 2 * np.exp(4.0)
    assert exact.tol == pytest.approx(RTOL_EXACT * scale)
    (fd,) = _by(res, "grad", "scipy-fd")
    assert fd.tol >= RTOL_FD * scale
    assert fd.tol == pytest.approx(10 * fd.err_estimate + RTOL_FD * scale, rel=1e-6)


def test_taylor_absence_is_not_a_failure() -> None:
    res = check(problems.get("seed"), derivatives=("derivative",), backends=("jax",), orders=(2,))
    (tay,) = _by(res, "derivative2.taylor")
    assert tay.verdict in ("pass", "n/a")
    assert res.passed, str(res)


def test_input_validation() -> None:
    p = problems.get("seed")
    with pytest.raises(ValueError, match=r"unknown derivatives \['laplacian'\]"):
        check(p, derivatives=("laplacian",))
    with pytest.raises(ValueError, match="backends must be a non-empty subset"):
        check(p, backends=("numpy",))
    with pytest.raises(simdiff.ShapeError, match=r"x must have shape \(1,\); got \(2,\)"):
        check(p, np.zeros(2))
    with pytest.raises(TypeError, match=r"expects a simdiff\.Problem"):
        check(lambda x: x)


def test_simdiff_check_stays_the_function_after_imports() -> None:
    import simdiff._check
    import simdiff.evidence

    assert simdiff.check is simdiff.evidence.check is simdiff._check.check
    assert simdiff.check(problems.get("seed"), derivatives=("grad",), backends=("jax",)).passed


@pytest.mark.slow
def test_ode_rollout_passes_with_the_default_fd_step(backend: str) -> None:
    # SciPy's own initial step (0.5) sends a Lotka-Volterra rollout to overflow; the
    # scale-aware default keeps the reference finite.
    from validation.simulators import lotka_volterra

    p = lotka_volterra(20)
    res = check(p, derivatives=("grad", "hvp"), backends=(backend,))
    assert res.passed, str(res)
    # A too-large step is retried at a tenth and a hundredth ...
    assert check(p, derivatives=("grad",), backends=(backend,), fd_step=5.0).passed
    # ... and a reference that stays non-finite is an error, never a pass.
    huge = check(p, derivatives=("grad",), backends=(backend,), fd_step=1e4)
    assert [e.verdict for e in _by(huge, "grad", "scipy-fd")] == ["error"]


def test_fd_floor_follows_an_adaptive_solver_tolerance() -> None:
    from simdiff._check import fd_floor

    p = problems.get("seed")
    assert fd_floor(p) == RTOL_FD
    p.meta["fd_rtol"] = 1e-6
    assert fd_floor(p) == 1e-6

    class Solver:
        rtol = 1e-7

    p.solver = Solver()
    assert fd_floor(p) == pytest.approx(1e-5)
