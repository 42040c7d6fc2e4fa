"""The diffrax engine: adjoint choice, refusals, and agreement with simdiff's own solvers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
from _shared import shared_problem

import problems.ode as po
import simdiff
from simdiff.errors import UnsupportedError
from simdiff.ode import Diffrax, ODEProblem, diffrax_problem
from simdiff.ode.solvers.diffrax import choose_adjoint


@pytest.mark.parametrize(
    ("derivative", "adjoint"),
    [("grad", "recursive"), ("vjp", "recursive"), ("jacobian-rev", "recursive"),
     ("jvp", "forward"), ("jacobian", "forward"), ("derivative", "forward"),
     ("hessian", "direct"), ("hvp", "direct"), ("derivative_tensor", "direct")],
)  # fmt: skip
def test_adjoint_choice_by_derivative(derivative: str, adjoint: str) -> None:
    assert choose_adjoint(derivative) == adjoint
    assert choose_adjoint(derivative, "direct") == "direct"  # direct supports everything


@pytest.mark.parametrize(
    ("derivative", "adjoint", "match"),
    [("hessian", "recursive", "reverse-mode only"), ("jvp", "recursive", "reverse-mode only"),
     ("grad", "forward", "forward only"), ("hvp", "forward", "forward only")],
)  # fmt: skip
def test_unsupported_adjoint_is_refused_with_reason(derivative, adjoint, match) -> None:
    with pytest.raises(UnsupportedError, match=match):
        choose_adjoint(derivative, adjoint)


def test_taylor_and_unknown_requests_are_refused() -> None:
    with pytest.raises(UnsupportedError, match="Taylor context cannot run them"):
        choose_adjoint("taylor")
    with pytest.raises(ValueError, match="unknown derivative 'laplacian'"):
        choose_adjoint("laplacian")
    with pytest.raises(ValueError, match="unknown diffrax solver 'rk4'"):
        Diffrax("rk4")


def test_diffrax_problem_runs_on_jax_only() -> None:
    p = diffrax_problem(shared_problem("ode_rk4_decay"), "grad")
    assert p.backends == ("jax",)
    with pytest.raises(UnsupportedError, match=r"runs on \['jax'\] only"):
        simdiff.grad(p, backend="torch")


def test_recursive_checkpoint_adjoint_really_has_no_forward_mode() -> None:
    # The reason choose_adjoint gives, checked against diffrax itself.
    q = diffrax_problem(shared_problem("ode_rk4_decay"), "grad", max_steps=64)
    ops = simdiff.get_ops("jax")
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jax.jvp(lambda x: q.fn(x, ops), (jnp.array([2.0]),), (jnp.array([1.0]),))


@pytest.mark.slow
def test_diffrax_derivatives_match_exact_and_simdiff() -> None:
    p = shared_problem("ode_linear_energy")
    opts = {"rtol": 1e-10, "atol": 1e-12, "max_steps": 256}
    g = simdiff.grad(diffrax_problem(p, "grad", **opts))
    # simdiff's own gradient of p matches the same exact one to 1e-8 (test_ode_derivatives.py):
    # diffrax's and simdiff's agree to 1.1e-7, without compiling simdiff's again here
    np.testing.assert_allclose(g, p.exact["grad"](p.x0), rtol=1e-7)
    H = simdiff.hessian(diffrax_problem(p, "hessian", **opts))
    np.testing.assert_allclose(H, p.exact["hessian"](p.x0), rtol=1e-6, atol=1e-8)
    v = np.array([1.0, -0.5, 0.25, 2.0])
    jv = simdiff.jvp(diffrax_problem(p, "jvp", **opts), v)
    np.testing.assert_allclose(jv, g @ v, rtol=1e-7)


@pytest.mark.slow
def test_kvaerno5_robertson_matches_radau_and_rodas3() -> None:
    p = shared_problem("robertson")
    q = ODEProblem(po.robertson_rhs, p.y0, p.t_span, p.x0, save_at=p.save_at,
                   solver=Diffrax("kvaerno5", rtol=1e-8, atol=1e-12, max_steps=2000))  # fmt: skip
    ys = q.trajectory(backend="jax")
    ref = scipy.integrate.solve_ivp(
        lambda t, y: po.robertson_rhs(t, y, p.x0, np), p.t_span, p.y0, method="Radau",
        rtol=1e-10, atol=1e-14, t_eval=p.save_at,
    ).y.T  # fmt: skip
    np.testing.assert_allclose(ys, ref, rtol=1e-5, atol=1e-11)
    np.testing.assert_allclose(ys, p.trajectory(), rtol=2e-3, atol=1e-8)  # Rodas3 at rtol 1e-4
