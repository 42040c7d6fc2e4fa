"""validation/: the catalogue plan (what is checked, what is skipped and why) and verdict rules."""

from __future__ import annotations

import numpy as np

import problems
import simdiff
from validation.catalogue import plan


def test_plan_small_scalar_problem_gets_everything() -> None:
    pl = plan(problems.get("rosenbrock4"), quick=True)
    assert pl.check_derivatives == ("grad", "hessian", "hvp", "jvp", "vjp", "derivative")
    assert pl.compare_derivatives == ["grad", "hessian", "hvp"]
    assert pl.configs == ["jax-jit", "torch-eager", "scipy-fd", "numdifftools"]
    assert [w for w, _ in pl.skipped] == ["torch-compile"]
    full = plan(problems.get("rosenbrock4"), quick=False)
    assert "torch-compile" in full.configs and full.orders == (2, 3)


def test_plan_heavy_problem_in_quick_says_what_it_leaves_out() -> None:
    p = simdiff.Problem(lambda x, ops: ops.sum(x**2), x0=np.zeros(40), meta={"tags": ("pde",)})
    pl = plan(p, quick=True)
    assert pl.check_derivatives == ("grad",) and pl.compare_derivatives == ["grad"]
    reasons = dict(pl.skipped)
    assert "check hessian, hvp, jvp, vjp, derivative" in reasons
    assert "scipy-fd / numdifftools timing" in reasons
    v = simdiff.Problem(lambda x, ops: x * 2.0, x0=np.zeros(3), meta={"tags": ("large",)})
    assert plan(v, quick=True).check_derivatives == ("jvp", "vjp")
    assert plan(v, quick=True).compare_derivatives == ["jvp"]


def test_plan_quick_times_no_finite_differences_of_a_small_simulator() -> None:
    """A heavy problem small enough for FD timings gets none in --quick, with the reason."""
    p = simdiff.Problem(lambda x, ops: ops.sum(x**2), x0=np.zeros(4), meta={"tags": ("ode",)})
    quick, full = plan(p, quick=True), plan(p, quick=False)
    assert "scipy-fd" not in quick.configs and "scipy-fd" in full.configs
    assert "finite differences" in dict(quick.skipped)["scipy-fd / numdifftools timing"]
