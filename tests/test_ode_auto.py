"""solver="auto": the stiffness test, the choice it reports, and the solves it leads to."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate

import problems
import problems.ode
import simdiff
from simdiff.errors import InputError, SolverError
from simdiff.ode import ODEProblem, make_solver
from simdiff.ode.auto import LIMITED, SolverChoice, choose_solver
from simdiff.store import fingerprint

#: Catalogue entries and whether the test must find them stiff.
CATALOGUE = [
    ("van_der_pol_stiff", True),
    ("robertson", True),
    ("hires", True),
    ("lorenz63", False),
    ("lotka_volterra", False),
]


def _auto(name: str, **options) -> ODEProblem:
    """The catalogue entry with solver="auto" at the entry's own tolerances and budget."""
    p = problems.get(name)
    s = p.solver
    opts = {"rtol": s.rtol, "atol": s.atol, "max_steps": s.max_steps, **options}
    return ODEProblem(
        p.rhs, p.y0, p.t_span, p.params, save_at=p.save_at, observable=p.observable,
        solver="auto", **opts,
    )  # fmt: skip


@pytest.mark.parametrize(("name", "stiff"), CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_catalogue_problems_get_the_solver_their_stiffness_needs(name: str, stiff: bool) -> None:
    q = _auto(name)
    choice = q.solver_choice
    assert isinstance(choice, SolverChoice) and choice.stiff is stiff
    assert q.solver.name == choice.solver
    if stiff:
        assert q.solver.stiff and q.solver.name in ("rodas3", "rodas5p")
        # stability-limited pilot steps: h * rho at the stability boundary
        assert choice.limited_steps >= 15 and choice.stiffness_ratio > LIMITED / 3.31 - 0.1
    else:
        assert q.solver.name == "dopri5" and choice.limited_steps == 0
        assert choice.stiffness_ratio < 0.5 and choice.t_reached == q.save_at[-1]
    assert choice.reason.startswith("stiff:" if stiff else "not stiff:")


def test_robertson_is_stiff_only_after_the_start() -> None:
    """At y0 = (1, 0, 0) df/dy has eigenvalues -0.04, 0, 0: the start alone says "not stiff";
    the pilot sees the stiffness appear within t < 0.1."""
    choice = _auto("robertson").solver_choice
    assert choice.explicit_steps_at_start < 1.0 and choice.stiff
    assert choice.t_reached < 0.1


def test_loose_tolerance_chooses_rodas3_and_tight_rodas5p() -> None:
    assert _auto("van_der_pol_stiff", rtol=1e-3, atol=1e-6).solver.name == "rodas3"
    tight = _auto("van_der_pol_stiff", rtol=1e-6, atol=1e-9, controller="i")
    assert tight.solver.name == "rodas5p" and tight.solver.controller == "i"
    assert _auto("lotka_volterra", jac=None).solver.name == "dopri5"  # stiff-only options drop


def test_cache_info_reports_the_choice_and_why() -> None:
    q = _auto("van_der_pol_stiff", rtol=1e-3, atol=1e-6)
    d = simdiff.Derivatives(q, backend="torch")
    d.value()
    record = d.cache_info()[-1]
    assert record["kind"] == "solver_choice" and record["solver"] == "rodas3"
    assert record["stiff"] is True and 0.9 < record["stiffness_ratio"] < 1.2
    assert "limited by stability" in record["reason"] and record["seconds"] > 0
    named = problems.get("van_der_pol_stiff")
    assert all(r["kind"] != "solver_choice" for r in simdiff.Derivatives(named).cache_info())


def test_the_choice_is_part_of_the_fingerprint_and_stable() -> None:
    a, b = _auto("lotka_volterra"), _auto("lotka_volterra")
    assert fingerprint(a) == fingerprint(b) is not None  # the pilot's timing is not in it
    p = problems.get("lotka_volterra")
    named = ODEProblem(p.rhs, p.y0, p.t_span, p.params, save_at=p.save_at, solver=a.solver)
    assert fingerprint(named) != fingerprint(a)


def test_bad_auto_options_are_refused() -> None:
    with pytest.raises(InputError, match="needs the problem"):
        make_solver("auto")
    with pytest.raises(InputError, match=r"takes the options .*got \['n_steps'\]"):
        choose_solver(lambda t, y, p, ops: -y, np.ones(1), 0.0, 1.0, np.ones(1), n_steps=10)


# --------------------------------------------------------------------------- solves


def _forced_decay(t, y, p, ops):
    """y' = -k (y - cos t): stiff for large k, closed form below."""
    return -p[0] * (y - ops.cos(t))


def _forced_decay_exact(k: float, t: float) -> float:
    return k / (k * k + 1) * (k * np.cos(t) + np.sin(t)) - k * k / (k * k + 1) * np.exp(-k * t)


def _decay(k: float = 1e3, **options) -> ODEProblem:
    return ODEProblem(
        _forced_decay, [0.0], (0.0, 1.0), [k], observable=lambda ys, ops: ys[-1, 0],
        solver="auto", **{"rtol": 1e-8, "atol": 1e-10, **options},
    )  # fmt: skip


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_stiff_choice_matches_radau(backend: str) -> None:
    p = problems.get("van_der_pol_stiff")
    q = ODEProblem(p.rhs, p.y0, p.t_span, p.params, save_at=p.save_at, solver="auto",
                   rtol=1e-8, atol=1e-10, max_steps=2000)  # fmt: skip
    assert q.solver.name == "rodas5p"
    ref = scipy.integrate.solve_ivp(
        lambda t, y: p.rhs(t, y, p.params, np), p.t_span, p.y0, method="Radau",
        rtol=1e-12, atol=1e-14, t_eval=p.save_at,
    ).y.T  # fmt: skip
    np.testing.assert_allclose(q.trajectory(backend=backend), ref, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_explicit_choice_matches_dop853(backend: str) -> None:
    q = _auto("lotka_volterra", rtol=1e-10, atol=1e-12, max_steps=1000)
    p = problems.get("lotka_volterra")
    assert q.solver.name == "dopri5"
    ref = scipy.integrate.solve_ivp(
        lambda t, y: p.rhs(t, y, p.params, np), p.t_span, p.y0, method="DOP853",
        rtol=1e-13, atol=1e-14, t_eval=p.save_at,
    ).y.T  # fmt: skip
    np.testing.assert_allclose(q.trajectory(backend=backend), ref, rtol=1e-8)


def test_stiff_gradient_matches_central_differences(backend: str) -> None:
    """d y(1) / dk of the forced decay at k = 1e5 against central differences of the
    closed form (relative step 1e-3: truncation error ~1e-6 relative).

    (At k = 1e3 and rtol 1e-8 the test says "not stiff": Dopri5's steps there are
    limited by accuracy at h * rho / s ~ 0.4, not by stability.)"""
    k = 1e5
    q = _decay(k)
    assert q.solver.name == "rodas5p"
    fd = (_forced_decay_exact(k * 1.001, 1.0) - _forced_decay_exact(k * 0.999, 1.0)) / (2e-3 * k)
    g = float(simdiff.grad(q, backend=backend)[0])
    assert float(q.evaluate()) == pytest.approx(_forced_decay_exact(k, 1.0), rel=1e-7)
    assert g == pytest.approx(fd, rel=1e-5)


@pytest.mark.parametrize(("backend", "kind"), [("numpy", "value"), ("torch", "grad"),
                                               ("jax", "value")])  # fmt: skip
def test_a_stiffer_point_than_x0_says_to_use_a_stiff_solver(backend: str, kind: str) -> None:
    """Chosen explicit at k = 1 (x0); at k = 1e4 dopri5 exhausts its budget and says why
    (on JAX the compiled value is NaN and the boundary asks the model)."""
    q = _decay(1.0, rtol=1e-6, atol=1e-9, max_steps=200)
    assert q.solver.name == "dopri5"
    with pytest.raises(SolverError) as e:
        getattr(simdiff.Derivatives(q, backend=backend), kind)(np.array([1e4]))
    msg = str(e.value)
    assert "dopri5: max_steps=200 exhausted at t=" in msg
    assert "|lambda_max(df/dy)| = 1e+04" in msg and "solver='auto' chose dopri5 at x0" in msg
    assert "pass solver='rodas5p'" in msg


#: (name, rhs, y0, span, params, stiff) for the tolerance sweep of issue 64.
_SWEEP = [
    ("robertson", problems.ode.robertson_rhs, np.array([1.0, 0.0, 0.0]), (0.0, 40.0),
     np.log(problems.ode.ROBERTSON_K), True),
    ("hires", problems.ode.hires_log_rhs, problems.ode.HIRES_Y0, (0.0, problems.ode.HIRES_T),
     np.log(problems.ode.HIRES_K), True),
    ("lotka_volterra", problems.ode.lotka_volterra_rhs, problems.ode.LV_Y0, (0.0, 10.0),
     problems.ode.LV_PARAMS, False),
    ("lorenz63", problems.ode.lorenz_rhs, np.array([1.0, 1.0, 1.0]), (0.0, 20.0),
     np.array([10.0, 28.0, 8.0 / 3.0]), False),
]  # fmt: skip


@pytest.mark.parametrize("atol", [1e-8, 1e-12])
@pytest.mark.parametrize("rtol", [1e-4, 1e-6, 1e-8, 1e-10])
@pytest.mark.parametrize("case", _SWEEP, ids=[c[0] for c in _SWEEP])
def test_the_choice_holds_at_every_tolerance(case, rtol: float, atol: float) -> None:
    """Stiff for Robertson and HIRES, explicit for Lotka-Volterra and Lorenz, at rtol 1e-4 to
    1e-10 and atol 1e-8 and 1e-12: at tight tolerances the pilot runs out of steps before
    Hairer's test can tell, and the stability bound where it stopped decides."""
    _name, rhs, y0, (t0, t1), p, stiff = case
    solver, choice = choose_solver(rhs, y0, t0, t1, p, rtol=rtol, atol=atol)
    assert choice.stiff is stiff, choice.reason
    assert solver.stiff is stiff


def test_a_failed_explicit_choice_never_suggests_auto_again() -> None:
    from simdiff.ode.solvers._base import status_message
    from simdiff.ode.solvers.dopri5 import Dopri5

    note = "; solver='auto' chose dopri5 at x0 (not stiff: ...)"
    msg = status_message(1, 0.5, 1.0, np.zeros(2), Dopri5(), note=note)
    assert "solver='auto'" not in msg.replace(note, "")
    assert "rodas5p" in msg
    plain = status_message(1, 0.5, 1.0, np.zeros(2), Dopri5())
    assert "or solver='auto'" in plain
