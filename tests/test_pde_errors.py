"""Bad input to simdiff.pde raises clear errors naming what was expected."""

from __future__ import annotations

import numpy as np
import pytest

import simdiff
from simdiff.ode import EULER
from simdiff.pde import (
    Grid,
    StabilityError,
    burgers,
    diffusion,
    diffusion_equation,
    etdrk4_integrate,
    gray_scott,
    kuramoto_sivashinsky,
    march,
    pde_problem,
)

G1 = Grid((32,), (2 * np.pi,))
RUN = {"t_final": 0.1, "n_steps": 100}


def test_euler_limit_is_dx2_over_2nu():
    """Explicit Euler and second-order diffusion: dt <= dx^2 / (2 kappa)."""
    g = Grid((50,), (1.0,))
    kappa = 0.5
    limit = g.dx**2 / (2 * kappa)
    n_ok = int(np.ceil(0.1 / limit))
    diffusion(g, diffusivity=kappa, t_final=0.1, n_steps=n_ok, method="fd", order=2,
              stepper=EULER)  # fmt: skip
    with pytest.raises(StabilityError, match=rf"dt <= 2/\|lambda_max\| = {limit:.6g}") as e:
        diffusion(g, diffusivity=kappa, t_final=0.1, n_steps=n_ok - 1, method="fd", order=2,
                  stepper="euler")  # fmt: skip
    assert f"n_steps >= {n_ok}" in str(e.value)
    assert isinstance(e.value, simdiff.SimdiffError) and isinstance(e.value, ValueError)


def test_rk4_limit_names_its_interval():
    with pytest.raises(StabilityError, match=r"limit of rk4: dt <= 2\.785/\|lambda_max\|"):
        diffusion(Grid((256,), (2 * np.pi,)), t_final=1.0, n_steps=10)


def test_ks_explicit_steps_point_to_etdrk4():
    with pytest.raises(StabilityError, match="stepper='etdrk4'"):
        kuramoto_sivashinsky(Grid((128,), (32 * np.pi,)), t_final=10.0, n_steps=40)
    kuramoto_sivashinsky(Grid((128,), (32 * np.pi,)), t_final=10.0, n_steps=40, stepper="etdrk4")


def test_shape_mismatch():
    with pytest.raises(simdiff.ShapeError, match=r"u0 must have shape \(32,\).*got \(31,\)"):
        diffusion(G1, np.zeros(31), **RUN)
    with pytest.raises(simdiff.ShapeError, match=r"u0 must have shape \(2, 16\)"):
        gray_scott(Grid((16,), (1.0,)), np.zeros(16), t_final=1.0, n_steps=1)
    with pytest.raises(simdiff.ShapeError, match="1-D grids; got a 2-D grid"):
        burgers(Grid((8, 8), (1.0, 1.0)), **RUN)


def test_grad_at_wrong_shape_names_expected_shape():
    p = diffusion(G1, **RUN)
    with pytest.raises(simdiff.ShapeError, match=r"\(32,\)"):
        simdiff.grad(p, np.zeros(30))


@pytest.mark.parametrize("value", [-0.1, -1e-12])
def test_negative_diffusivity(value):
    with pytest.raises(ValueError, match=rf"parameter diffusivity must be >= 0; got {value}"):
        diffusion(G1, diffusivity=value, **RUN)


def test_unsupported_boundary_and_methods():
    with pytest.raises(simdiff.UnsupportedError, match="unsupported boundary 'robin'"):
        Grid((8,), (1.0,), boundary="robin")
    dirichlet = Grid((16,), (1.0,), boundary="dirichlet")
    with pytest.raises(simdiff.UnsupportedError, match="method='spectral' needs a periodic grid"):
        diffusion(dirichlet, **RUN)
    with pytest.raises(simdiff.UnsupportedError, match="etdrk4' needs method='spectral'"):
        diffusion(G1, method="fd", stepper="etdrk4", **RUN).evaluate()
    with pytest.raises(simdiff.UnsupportedError, match="biharmonic.*periodic"):
        kuramoto_sivashinsky(Grid((16,), (10.0,), boundary="dirichlet"), method="fd", **RUN)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"wrt": ("nu",)}, r"wrt must be 'field', 'params' or parameter names from \['diffusivity'\]"),
        ({"stepper": "rk45"}, r"unknown stepper 'rk45'; expected one of"),
        ({"method": "fem"}, r"unknown method 'fem'; expected one of \['spectral', 'fd'\]"),
        ({"method": "fd", "order": 3}, "order must be 2, 4 or 6; got 3"),
        ({"output": "trajectory"}, "output must be 'functional' or 'field'"),
        ({"params": {"viscosity": 1.0}}, r"unknown parameters \['viscosity'\] for diffusion"),
        ({"t_final": -1.0}, "t_final must be positive"),
        ({"n_steps": 0}, "n_steps must be a positive integer; got 0"),
        ({"checkpoint": -2}, "checkpoint must be False, True or a positive block size"),
    ],
)  # fmt: skip
def test_bad_options(kwargs, match):
    opts = {**RUN, **kwargs}
    with pytest.raises(ValueError, match=match):
        pde_problem(diffusion_equation(), G1, np.zeros(32), **opts).evaluate()


def test_nonfinite_initial_field():
    u0 = np.zeros(32)
    u0[3] = np.nan
    with pytest.raises(ValueError, match="u0 must be finite"):
        diffusion(G1, u0, **RUN)


def test_low_level_step_counts():
    ops = simdiff.get_ops("numpy")
    with pytest.raises(ValueError, match="n_steps must be a positive integer; got 0"):
        march(lambda s: s, ops.asarray(1.0), 0, ops)
    with pytest.raises(ValueError, match=r"n_steps must be a positive integer; got 2\.5"):
        etdrk4_integrate(np.zeros(1), lambda v: v, np.ones(1, complex), 1.0, 2.5, ops)


def test_solve_checks_the_field_shape():
    ops = simdiff.get_ops("numpy")
    with pytest.raises(simdiff.ShapeError, match=r"u0 must have shape \(32,\)"):
        simdiff.pde.solve(diffusion_equation(), G1, np.zeros(16), ops, t_final=1.0, n_steps=2)
