"""simdiff.pde discretisation: grids, stencils, spectral derivatives, ETDRK4, convergence orders."""

from __future__ import annotations

import numpy as np
import pytest
from _numerics import path_rtol

import simdiff
from problems.pde import BURGERS_T, cole_hopf
from simdiff.ode import EULER, HEUN, RK4
from simdiff.pde import (
    Discretization,
    Grid,
    as_complex,
    burgers_equation,
    central_stencil,
    diffusion_equation,
    etdrk4_coefficients,
    etdrk4_integrate,
    fd_derivative,
    fd_laplacian,
    fd_weights,
    kuramoto_sivashinsky_equation,
    real_stability_interval,
    solve,
    spectral_derivative,
    spectral_laplacian,
    stencil_spectral_radius,
    to_fourier,
)

NP = simdiff.get_ops("numpy")


def slope(h, err):
    """Least-squares slope of log(err) against log(h)."""
    return float(np.polyfit(np.log(h), np.log(err), 1)[0])


# --------------------------------------------------------------------------- grids


def test_grid_nodes_and_spacing():
    g = Grid((8, 4), (2.0, 1.0))
    assert g.spacings == (0.25, 0.25) and g.size == 32 and g.ndim == 2
    assert g.mesh()[0].shape == (8, 4)
    d = Grid((9,), (1.0,), boundary="dirichlet")
    np.testing.assert_allclose(d.coords()[0], np.arange(1, 10) / 10)
    k = Grid((8,), (2 * np.pi,)).wavenumbers()[0]
    np.testing.assert_allclose(k, np.arange(5))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"shape": (8, 8, 8), "lengths": (1.0,) * 3}, simdiff.ShapeError, "1-D and 2-D"),
        ({"shape": (8,), "lengths": (1.0, 2.0)}, simdiff.ShapeError, "one entry per axis"),
        ({"shape": (8,), "lengths": (-1.0,)}, ValueError, "positive"),
        ({"shape": (2,), "lengths": (1.0,)}, simdiff.ShapeError, "at least 4 points"),
        ({"shape": (8,), "lengths": (1.0,), "boundary": "neumann"}, simdiff.UnsupportedError,
         r"unsupported boundary 'neumann'; expected one of \['periodic', 'dirichlet'\]"),
    ],
)  # fmt: skip
def test_grid_validation(kwargs, error, match):
    with pytest.raises(error, match=match):
        Grid(**kwargs)


def test_grid_field_shape_check():
    g = Grid((8, 4), (1.0, 1.0))
    g.check_field(np.zeros((8, 4)))
    g.check_field(np.zeros(32))
    with pytest.raises(simdiff.ShapeError, match=r"must have shape \(8, 4\).*got \(4, 8\)"):
        g.check_field(np.zeros((4, 8)), "u0")


def test_wavenumbers_need_periodic():
    with pytest.raises(simdiff.UnsupportedError, match="periodic"):
        Grid((8,), (1.0,), boundary="dirichlet").wavenumbers()


# --------------------------------------------------------------------------- stencils

TABLES = {  # Fornberg (1988), table 1 (central differences)
    (1, 2): [-1 / 2, 0, 1 / 2],
    (1, 4): [1 / 12, -2 / 3, 0, 2 / 3, -1 / 12],
    (1, 6): [-1 / 60, 3 / 20, -3 / 4, 0, 3 / 4, -3 / 20, 1 / 60],
    (2, 2): [1, -2, 1],
    (2, 4): [-1 / 12, 4 / 3, -5 / 2, 4 / 3, -1 / 12],
    (2, 6): [1 / 90, -3 / 20, 3 / 2, -49 / 18, 3 / 2, -3 / 20, 1 / 90],
    (4, 2): [1, -4, 6, -4, 1],
}


@pytest.mark.parametrize(("deriv", "order"), sorted(TABLES))
def test_central_stencils_match_tables(deriv, order):
    np.testing.assert_allclose(central_stencil(deriv, order)[1], TABLES[deriv, order], atol=1e-14)


def test_one_sided_weights_are_exact_on_polynomials():
    w = fd_weights(np.arange(6) - 1.0, 2)  # node -1..4, second derivative at 0
    for p in range(6):
        assert np.isclose(w @ (np.arange(6) - 1.0) ** p, [0, 0, 2, 0, 0, 0][p], atol=1e-10)


@pytest.mark.parametrize("boundary", ["periodic", "dirichlet"])
@pytest.mark.parametrize("deriv", [1, 2])
@pytest.mark.parametrize("order", [2, 4, 6])
def test_stencil_convergence_order(boundary, deriv, order):
    ns = np.array([32, 48, 64, 96])
    errs, hs = [], []
    for n in ns:
        if boundary == "periodic":
            g = Grid((int(n),), (2 * np.pi,))
        else:
            g = Grid((int(n),), (2.0,), boundary="dirichlet",
                     boundary_values=(1.0, float(np.exp(np.sin(2.0)))))  # fmt: skip
        x = g.coords()[0]
        f = np.exp(np.sin(x))
        exact = np.cos(x) * f if deriv == 1 else (np.cos(x) ** 2 - np.sin(x)) * f
        errs.append(np.abs(fd_derivative(f, NP, g, deriv, order) - exact).max())
        hs.append(g.dx)
    if boundary == "periodic":
        assert slope(hs, errs) == pytest.approx(order, abs=0.3)
    else:  # one-sided boundary stencils of the same order: at least the order
        assert order - 0.3 < slope(hs, errs) < order + 1.0


def test_stencil_along_each_axis_of_2d_fields_and_systems():
    g = Grid((32, 24), (2 * np.pi, 2 * np.pi), boundary="dirichlet")
    X, Y = g.mesh()
    u = np.sin(X / 2) * np.sin(Y / 2)  # zero on the boundary
    lap = fd_laplacian(np.stack([u, 2 * u]), NP, g, order=4)  # leading axis carried along
    np.testing.assert_allclose(lap[1], -0.5 * 2 * u, atol=2e-5)
    dy = fd_derivative(u, NP, g, 1, 6, axis=1)
    np.testing.assert_allclose(dy, 0.5 * np.sin(X / 2) * np.cos(Y / 2), atol=1e-7)


def test_stencil_spectral_radius_of_second_order_laplacian():
    assert stencil_spectral_radius(2, 2, 0.1) == pytest.approx(4 / 0.01)
    assert stencil_spectral_radius(2, 4, 1.0) == pytest.approx(16 / 3)


def test_stencil_validation():
    g = Grid((8,), (1.0,))
    with pytest.raises(ValueError, match=r"order must be one of \(2, 4, 6\); got 3"):
        fd_derivative(np.zeros(8), NP, g, 1, 3)
    with pytest.raises(
        simdiff.ShapeError, match=r"end with the grid shape \(8,\); got shape \(7,\)"
    ):
        fd_derivative(np.zeros(7), NP, g, 1, 2)
    small = Grid((4,), (1.0,), boundary="dirichlet")
    with pytest.raises(simdiff.ShapeError, match="needs at least 6 unknowns"):
        fd_derivative(np.zeros(4), NP, small, 2, 6)


# --------------------------------------------------------------------------- spectral


def test_spectral_derivatives_exact_on_resolved_modes():
    g = Grid((16, 12), (2 * np.pi, 4 * np.pi))
    X, Y = g.mesh()
    u = np.sin(3 * X) * np.cos(1.5 * Y)
    np.testing.assert_allclose(
        spectral_derivative(u, NP, g, 1, 0), 3 * np.cos(3 * X) * np.cos(1.5 * Y), atol=1e-12
    )
    np.testing.assert_allclose(spectral_derivative(u, NP, g, 2, 1), -2.25 * u, atol=1e-12)
    np.testing.assert_allclose(
        spectral_laplacian(u, NP, g, power=2), (9 + 2.25) ** 2 * u, atol=1e-10
    )


def test_spectral_convergence_is_faster_than_any_power():
    errs = []
    for n in (8, 16, 32):
        g = Grid((n,), (2 * np.pi,))
        x = g.coords()[0]
        f = np.exp(np.sin(x))
        errs.append(np.abs(spectral_derivative(f, NP, g, 1) - np.cos(x) * f).max())
    assert errs[1] < 1e-3 * errs[0] and errs[2] < 1e-12


def test_spectral_needs_periodic_grid():
    g = Grid((8,), (1.0,), boundary="dirichlet")
    with pytest.raises(simdiff.UnsupportedError, match="periodic grid.*use method='fd'"):
        spectral_derivative(np.zeros(8), NP, g)


def test_as_complex_is_exact():
    a = np.array([1.5, -2.0, 1e-300])
    assert np.array_equal(as_complex(a, NP), a.astype(complex))


# --------------------------------------------------------------------------- ETDRK4


def test_etdrk4_coefficients_match_closed_forms_and_limits():
    z = np.array([-50.0, -3.0, -0.5, -1e-6, 0.0, 0.7])
    c = etdrk4_coefficients(z, NP)
    big = np.abs(z) > 0.1
    zb = z[big]
    ez = np.exp(zb)
    np.testing.assert_allclose(c["Q"][big], (np.exp(zb / 2) - 1) / zb, rtol=1e-13)
    np.testing.assert_allclose(
        c["f1"][big], (-4 - zb + ez * (4 - 3 * zb + zb**2)) / zb**3, rtol=1e-12
    )
    np.testing.assert_allclose(c["f2"][big], (2 + zb + ez * (zb - 2)) / zb**3, rtol=1e-12)
    np.testing.assert_allclose(
        c["f3"][big], (-4 - 3 * zb - zb**2 + ez * (4 - zb)) / zb**3, rtol=1e-12
    )
    # z -> 0: Q -> 1/2, f1 = f2 = f3 -> 1/6 (where the closed forms cancel catastrophically)
    np.testing.assert_allclose(
        [c[k][4] for k in ("Q", "f1", "f2", "f3")], [0.5] + [1 / 6] * 3, rtol=1e-13
    )
    np.testing.assert_allclose(c["f1"][3], 1 / 6 - 1e-6 / 6, rtol=1e-10)  # 1/6 + z/6 + O(z^2)


@pytest.mark.parametrize("n_points", [64, 31])
def test_etdrk4_half_contour_equals_the_full_circle_mean(n_points):
    """The coefficients average over the upper half-circle (conjugate pairs; odd M keeps -1):
    the same as Kassam & Trefethen's full-circle mean, to rounding."""
    z = np.array([-80.0, -3.0, -0.5, 0.0, 0.7])
    c = etdrk4_coefficients(z, NP, n_points)
    w = z[:, None] + np.exp(2j * np.pi * (np.arange(1, n_points + 1) - 0.5) / n_points)
    ew = np.exp(w)
    full = {
        "Q": (np.exp(w / 2) - 1) / w,
        "f1": (-4 - w + ew * (4 - 3 * w + w * w)) / w**3,
        "f2": (2 + w + ew * (w - 2)) / w**3,
        "f3": (-4 - 3 * w - w * w + ew * (4 - w)) / w**3,
    }
    for k, v in full.items():
        np.testing.assert_allclose(c[k], v.mean(-1).real, rtol=1e-13, atol=1e-16, err_msg=k)


def test_etdrk4_without_nonlinear_part_is_one_exponential_product():
    """nonlinear=None: n ETDRK4 steps of v' = L v are v0 e^{T L}, as the steps with N = 0 give."""
    rng = np.random.default_rng(1)
    L = -np.abs(rng.standard_normal(9)) * 20
    v0 = rng.standard_normal(9) + 1j * rng.standard_normal(9)
    fast = etdrk4_integrate(L, None, v0, 0.7, 12, NP)
    steps = etdrk4_integrate(L, lambda v: 0.0 * v, v0, 0.7, 12, NP)
    np.testing.assert_allclose(fast, steps, rtol=1e-13)
    # 12 steps of exp(h L) against one exp(0.7 L): 12 roundings a path
    np.testing.assert_allclose(fast, v0 * np.exp(0.7 * L), rtol=path_rtol(12))


@pytest.mark.parametrize("equation", [burgers_equation, kuramoto_sivashinsky_equation])
def test_fourier_nonlinear_is_the_nonlinear_term_in_fourier_space(equation):
    """ETDRK4 uses Equation.fourier_nonlinear: it must be to_fourier(N(from_fourier(v)))."""
    eq = equation()
    g = Grid((32,), (2 * np.pi,))
    D = Discretization(g)
    u = np.random.default_rng(2).standard_normal(32)
    v = to_fourier(u, NP, g)
    direct = to_fourier(eq.nonlinear(u, eq.params, D, NP), NP, g)
    np.testing.assert_allclose(eq.fourier_nonlinear(v, eq.params, D, NP), direct, atol=1e-12)


def test_stability_intervals():
    assert real_stability_interval(EULER) == pytest.approx(2.0, abs=1e-4)
    assert real_stability_interval(HEUN) == pytest.approx(2.0, abs=1e-4)
    assert real_stability_interval(RK4) == pytest.approx(2.7853, abs=1e-3)


# --------------------------------------------------------------------------- PDE convergence


@pytest.mark.parametrize("order", [2, 4, 6])
def test_heat_dirichlet_spatial_order(order):
    """u = sin(pi x) exp(-kappa pi^2 t) on [0, 1]: error of the fd solution vs exact."""
    hs, errs = [], []
    for n in (31, 47, 63, 95):
        g = Grid((n,), (1.0,), boundary="dirichlet")
        x = g.coords()[0]
        u = solve(diffusion_equation(), g, np.sin(np.pi * x) + np.sin(2 * np.pi * x), NP,
                  t_final=0.02, n_steps=400, method="fd", order=order,
                  params={"diffusivity": 0.5})  # fmt: skip
        exact = np.sin(np.pi * x) * np.exp(-0.5 * np.pi**2 * 0.02) + np.sin(2 * np.pi * x) * np.exp(
            -2 * np.pi**2 * 0.02
        )
        hs.append(g.dx)
        errs.append(np.abs(u - exact).max())
    assert order - 0.3 < slope(hs, errs) < order + 2.0  # boundary closures: at least the order


@pytest.mark.parametrize(("stepper", "order"), [("rk4", 4), ("etdrk4", 4), ("heun", 2)])
def test_burgers_temporal_order(stepper, order):
    """Cole–Hopf initial data, spectral N = 64; error against the same discretisation
    with 8x the finest step count (so only the time error remains)."""
    g = Grid((64,), (2 * np.pi,))
    x = g.coords()[0]
    nu = 0.2
    steps = np.array([120, 160, 240, 320]) if stepper != "etdrk4" else np.array([10, 14, 20, 28])

    def run(n):
        return solve(burgers_equation(), g, cole_hopf(x, 0.0, nu), NP, t_final=BURGERS_T,
                     n_steps=int(n), stepper=stepper, params={"viscosity": nu})  # fmt: skip

    ref = run(8 * steps[-1])
    assert np.abs(ref - cole_hopf(x, BURGERS_T, nu)).max() < 1e-6  # and it is the right solution
    errs = [np.abs(run(n) - ref).max() for n in steps]
    assert slope(BURGERS_T / steps, errs) == pytest.approx(order, abs=0.35)


def test_periodic_diffusion_conserves_mass_2d():
    g = Grid((16, 12), (2.0, 1.5))
    X, Y = g.mesh()
    u0 = np.exp(np.sin(np.pi * X) + np.cos(4 * np.pi * Y / 1.5)) + X
    mass0 = float(g.integrate(u0, NP))
    for method, stepper in (("fd", "rk4"), ("spectral", "rk4"), ("spectral", "etdrk4")):
        u = solve(diffusion_equation(), g, u0, NP, t_final=0.1, n_steps=50, method=method,
                  stepper=stepper, params={"diffusivity": 0.05})  # fmt: skip
        assert float(g.integrate(u, NP)) == pytest.approx(mass0, rel=1e-13)
        assert np.ptp(u) < np.ptp(u0)  # and it does diffuse


def test_heat_2d_dirichlet_exact_solution():
    """u = sin(pi x) sin(2 pi y) exp(-5 kappa pi^2 t) on the unit square, fd order 2 and 4."""
    errs = {}
    for order in (2, 4):
        for n in (15, 31):
            g = Grid((n, n), (1.0, 1.0), boundary="dirichlet")
            X, Y = g.mesh()
            mode = np.sin(np.pi * X) * np.sin(2 * np.pi * Y)
            u = solve(diffusion_equation(), g, mode, NP, t_final=0.01, n_steps=100, method="fd",
                      order=order, params={"diffusivity": 0.5})  # fmt: skip
            errs[order, n] = np.abs(u - mode * np.exp(-5 * 0.5 * np.pi**2 * 0.01)).max()
    assert errs[2, 31] < 1e-3 and errs[4, 31] < 1e-5
    assert np.log2(errs[2, 15] / errs[2, 31]) == pytest.approx(2, abs=0.2)
    assert np.log2(errs[4, 15] / errs[4, 31]) > 3.8
