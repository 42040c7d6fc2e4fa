"""simdiff.check: passes correct derivatives, fails planted errors, tolerances as documented."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import scipy.optimize
from _shared import shared_problem

import problems
import simdiff
from simdiff.evidence.check.run import (
    FLOOR,
    RTOL_CROSS,
    RTOL_EXACT,
    RTOL_FD,
    CheckResult,
    check,
    rtols,
    tolerance,
)
from simdiff.evidence.check.tolerance import compare_arrays


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
    res = check(shared_problem(name))
    assert res.passed, str(res)
    assert any(e.verdict == "pass" and e.reference == "scipy-fd" for e in res.entries)
    assert "PASS" in str(res)


def test_large_n_uses_fd_of_ad_gradient_and_directions(backend: str) -> None:
    res = check(
        shared_problem("rosenbrock32"),
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
    p = problems.get("rosenbrock4")  # its own: the test changes it
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
    err = np.array([1e-9, 0.0, 0.0])
    ref = np.array([2.0, -3.0, 0.0])
    want = 10.0 * err + 1e-8 * (np.abs(ref) + FLOOR * 3.0)
    np.testing.assert_allclose(tolerance(err, ref, 3.0, c=10.0, rtol=1e-8), want)
    assert RTOL_FD == pytest.approx(np.sqrt(np.finfo(float).eps))
    assert RTOL_EXACT == RTOL_CROSS == pytest.approx(1e4 * np.finfo(float).eps)


@pytest.mark.parametrize("factor", [1.0, 1e3])
def test_tolerances_are_elementwise_and_scale_with_the_problem(factor: float) -> None:
    p = simdiff.Problem(
        lambda x, ops: factor * ops.sum(ops.exp(2.0 * x)),
        x0=np.array([1.0, 2.0]),
        exact={"grad": lambda x: factor * 2 * np.exp(2 * x)},
    )
    res = check(p, derivatives=("grad",), backends=("jax",))
    assert res.passed, str(res)
    (exact,) = _by(res, "grad", "exact")
    g = factor * 2 * np.exp(np.array([2.0, 4.0]))
    # the largest element's tolerance: rtol * (|g| + FLOOR * S), S = max(max|g|, max|f| / |x|)
    fscale = factor * (np.exp(2.0) + np.exp(4.0)) / 2.0
    assert exact.tol == pytest.approx(RTOL_EXACT * (g[1] + FLOOR * max(g[1], fscale)))
    (fd,) = _by(res, "grad", "scipy-fd")
    assert fd.tol >= RTOL_FD * g[1]


def test_rtols_follow_the_typed_options_and_never_loosen_cross_backend() -> None:
    p = simdiff.Problem(lambda x, ops: ops.sum(x**2), x0=np.ones(2))
    assert rtols(p) == {"fd": RTOL_FD, "exact": RTOL_EXACT, "cross": RTOL_CROSS}
    q = simdiff.Problem(
        lambda x, ops: ops.sum(x**2),
        x0=np.ones(2),
        check_options=simdiff.CheckOptions(solver_rtol=1e-4, reference_rtol=1e-6, fd_rtol=1e-3),
    )
    got = rtols(q)
    assert got["fd"] == pytest.approx(1e-2) and got["exact"] == pytest.approx(1e-2)
    assert got["cross"] == RTOL_CROSS
    assert rtols(q, rtol_cross=1e-9)["cross"] == 1e-9


def test_catalogue_loosenings_are_gone() -> None:
    # lj13's literature tolerance is a fact for people, not a check tolerance.
    lj = shared_problem("lj13")
    assert lj.meta["literature_rtol"] == 1e-6 and "rtol" not in lj.meta
    assert rtols(lj) == {"fd": RTOL_FD, "exact": RTOL_EXACT, "cross": RTOL_CROSS}
    # An ODE problem declares its solver; the cross-backend comparison stays tight.
    rob = shared_problem("robertson")
    assert rob.check_options.solver_rtol == rob.solver.rtol
    assert rtols(rob)["cross"] == RTOL_CROSS
    assert not any("check_rtol" in shared_problem(n).meta for n in problems.names("ode"))


def test_taylor_absence_is_not_a_failure() -> None:
    res = check(shared_problem("seed"), derivatives=("derivative",), backends=("jax",), orders=(2,))
    (tay,) = _by(res, "derivative2.taylor")
    assert tay.verdict in ("pass", "n/a")
    assert res.passed, str(res)


def test_input_validation() -> None:
    p = shared_problem("seed")
    with pytest.raises(ValueError, match=r"unknown derivatives \['laplacian'\]"):
        check(p, derivatives=("laplacian",))
    with pytest.raises(ValueError, match="backends must be a non-empty subset"):
        check(p, backends=("numpy",))
    with pytest.raises(simdiff.ShapeError, match=r"x must have shape \(1,\); got \(2,\)"):
        check(p, np.zeros(2))
    with pytest.raises(TypeError, match=r"expects a simdiff\.Problem"):
        check(lambda x: x)


def test_simdiff_check_stays_the_function_after_imports() -> None:
    import simdiff.evidence
    from simdiff.evidence.check import run

    assert simdiff.check is simdiff.evidence.check is run.check
    assert simdiff.check(shared_problem("seed"), derivatives=("grad",), backends=("jax",)).passed


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


def test_a_wrapped_adaptive_solve_declares_its_accuracy(backend: str) -> None:
    # A user problem wrapping an adaptive solve (no .solver attribute): the declared
    # solver accuracy floors the FD comparison, not the cross-backend one.
    from simdiff.ode import ODEProblem

    inner = ODEProblem(
        lambda t, y, p, ops: -p[0] * y * (1.0 + 0.5 * ops.sin(t * y)), [1.0], (0.0, 2.0), [1.3],
        observable=lambda ys, ops: ys[-1, 0], rtol=1e-4, atol=1e-7,
    )  # fmt: skip

    def fn(x, ops):
        return inner.fn(x, ops)

    opts = simdiff.CheckOptions(solver_rtol=1e-4)
    p = simdiff.Problem(fn, x0=np.array([1.3]), name="wrapped", check_options=opts)
    res = check(p, derivatives=("grad",), backends=("jax", "torch"))
    assert res.verdict == "pass", str(res)
    (cross,) = _by(res, "grad", "cross:jax")
    assert cross.tol < 1e-10


def test_unknown_exact_keys_are_an_error() -> None:
    with pytest.raises(simdiff.OptionError, match=r"unknown keys \['gradient'\].*'grad'"):
        simdiff.Problem(lambda x, ops: ops.sum(x), x0=np.ones(2), exact={"gradient": np.ones})
    p = simdiff.Problem(lambda x, ops: ops.sum(x), x0=np.ones(2))
    p.exact["hesian"] = np.zeros  # a misspelling added after construction
    with pytest.raises(simdiff.OptionError, match="accepted keys are"):
        check(p)
    assert issubclass(simdiff.OptionError, (simdiff.SimdiffError, ValueError))


def test_check_options_validate() -> None:
    with pytest.raises(simdiff.OptionError, match="solver_rtol must be a finite float >= 0"):
        simdiff.CheckOptions(solver_rtol=-1.0)
    with pytest.raises(simdiff.OptionError, match="check_options must be a simdiff.CheckOptions"):
        simdiff.Problem(lambda x, ops: ops.sum(x), x0=np.ones(2), check_options={"fd_step": 1})


def test_all_not_applicable_is_not_checked_not_fail() -> None:
    # A vector problem asked only for scalar-only derivatives: nothing was checked.
    res = check(shared_problem("spherical"), derivatives=("grad", "hessian"), backends=("jax",))
    assert res.verdict == "not checked" and not res.passed and res.exit_code == 2
    assert "FAIL" not in str(res) and "not checked: grad/*, hessian/*" in str(res)


def test_na_never_counts_as_a_pass() -> None:
    p = simdiff.Problem.from_jax(lambda x: jax.numpy.sum(x**2), np.array([0.3, 0.9]))
    res = check(p, derivatives=("grad",), backends=("jax", "torch"))
    assert res.verdict == "pass"  # jax passed; torch is named as not checked
    assert "not checked: */torch" in str(res)
    assert [e.backend for e in res.not_checked()] == ["torch"]


def test_kink_hessian_is_not_a_pass(backend: str) -> None:
    # |x| at its kink: SciPy does not converge; its error estimate must not become a tolerance.
    p = simdiff.Problem(lambda x, ops: ops.abs(x[0]) + x[1] ** 2, x0=np.array([0.0, 0.5]))
    res = check(p, derivatives=("hessian",), backends=(backend,))
    (h,) = _by(res, "hessian", "scipy-fd")
    assert h.verdict in ("inconclusive", "fail"), str(res)
    assert res.verdict in ("inconclusive", "fail") and res.exit_code != 0


def test_non_converged_reference_is_inconclusive() -> None:
    got = np.array([2.0, 1.0])
    ref = np.array([2.0, 1.0])
    conv = np.array([True, False])
    res = compare_arrays(got, ref, rtol=RTOL_FD, err=np.array([0.0, 0.5]), converged=conv)
    assert res.verdict == "inconclusive" and "not converged" in res.message
    # a structural zero SciPy cannot converge on, with a negligible estimate, is resolved
    ok = compare_arrays(
        np.array([2.0, 0.0]), np.array([2.0, 1e-13]), rtol=RTOL_FD,
        err=np.array([0.0, 1e-13]), converged=conv,
    )  # fmt: skip
    assert ok.verdict == "pass"


def test_large_n_never_forms_the_full_hessian(backend: str, monkeypatch) -> None:
    def no_hessian(self, *args, **kwargs):
        raise AssertionError("the full Hessian was formed")

    monkeypatch.setattr(simdiff.Derivatives, "hessian", no_hessian)
    monkeypatch.setattr(simdiff.Derivatives, "jacobian", no_hessian)
    res = check(
        shared_problem("rosenbrock32"),
        derivatives=("hessian", "hvp"),
        backends=(backend,),
        fd_max_n=16,
        n_directions=2,
    )
    assert res.passed, str(res)


# ------------------------------------------------- across backends: the measured rounding noise


def _rippled(k: float, torch_factor: float) -> simdiff.Problem:
    """A smooth bowl with a fine ripple, its torch result scaled by ``torch_factor``.

    ``f = x.x / 2 + (1e-4 / k) sum(sin(k x))``: the ripple adds ``1e-4 cos(k x)`` to
    the gradient (small enough for the leak probe's central differences), and at
    ``k = 1e10`` that term changes by ~1e-10 when ``x`` moves by a few ulps: rounding
    noise far above ``1e4 eps``.  ``torch_factor`` plants a gap between the backends."""

    def fn(x, ops):
        f = 0.5 * ops.sum(x * x) + (1e-4 / k) * ops.sum(ops.sin(k * x))
        return f * torch_factor if type(x).__module__.startswith("torch") else f

    return simdiff.Problem(fn, x0=np.array([0.3, 0.7]), name=f"rippled{k:g}")


def _cross(res) -> simdiff.evidence.CheckEntry:
    (entry,) = [e for e in res.entries if e.reference.startswith("cross:")]
    return entry


@pytest.mark.parametrize(
    ("k", "factor", "verdict"),
    [
        (1e10, 1 + 1e-11, "pass"),  # above 1e4 eps, within the gradient's measured noise
        (1e10, 1 + 1e-6, "fail"),  # far above that noise
        (1.0, 1 + 1e-11, "fail"),  # no noise to speak of: 1e4 eps holds
    ],
)
def test_cross_backend_tolerance_is_the_measured_rounding_noise(k, factor, verdict) -> None:
    res = simdiff.check(_rippled(k, factor), derivatives=("grad",))
    entry = _cross(res)
    assert entry.verdict == verdict, str(res)
    if k == 1.0:
        assert entry.gap < 1e-14, str(res)  # measured, and at the rounding level
    else:
        assert 1e-12 < entry.gap < 1e-8, str(res)  # 1e-4 k (a few ulps of x)


def test_an_inconclusive_fd_entry_is_decided_by_a_passing_exact_reference() -> None:
    from simdiff.evidence import CheckEntry, CheckResult

    def res(exact: str) -> CheckResult:
        r = CheckResult("p", np.zeros(1))
        r.entries = [
            CheckEntry("grad", "jax", "scipy-fd", verdict="inconclusive"),
            CheckEntry("grad", "jax", "exact", verdict=exact),
            CheckEntry("hessian", "jax", "scipy-fd", verdict="pass"),
        ]
        return r

    assert res("pass").verdict == "pass"
    assert res("inconclusive").verdict == "inconclusive"
    assert res("fail").verdict == "fail"
    other = res("pass")
    other.entries.append(CheckEntry("hessian", "torch", "scipy-fd", verdict="inconclusive"))
    assert other.verdict == "inconclusive"  # no exact reference decided that one
