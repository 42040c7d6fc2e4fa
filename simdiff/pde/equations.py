"""The equations: diffusion, viscous Burgers, Fisher–KPP, Gray–Scott, Kuramoto–Sivashinsky.

Each comes as an :class:`~simdiff.pde.problem.Equation` factory
(``*_equation()``) and a Problem builder taking the grid, the initial field
and the physical parameters; every other keyword goes to
:func:`~simdiff.pde.problem.pde_problem` (``t_final``, ``n_steps``, ``wrt``,
``method``, ``stepper``, ``output``, ``observable``, ``checkpoint``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simdiff.backends import Ops
from simdiff.core.problem import Problem
from simdiff.errors import ShapeError
from simdiff.pde.grid import Grid
from simdiff.pde.problem import Discretization, Equation, pde_problem
from simdiff.pde.spectral import from_fourier, to_fourier

__all__ = [
    "burgers",
    "burgers_equation",
    "diffusion",
    "diffusion_equation",
    "fisher_kpp",
    "fisher_kpp_equation",
    "gray_scott",
    "gray_scott_equation",
    "kuramoto_sivashinsky",
    "kuramoto_sivashinsky_equation",
]


def _bump(grid: Grid) -> np.ndarray:
    """A smooth Gaussian bump centred in the domain (default initial field)."""
    r2 = sum(
        ((c - grid.origin - L / 2) / (L / 10)) ** 2
        for c, L in zip(grid.mesh(), grid.lengths, strict=True)
    )
    return np.exp(-0.5 * r2)


def _one_d(grid: Grid, what: str) -> None:
    if grid.ndim != 1:
        raise ShapeError(f"{what} is implemented on 1-D grids; got a {grid.ndim}-D grid")


def _u0(u0: Any, default: np.ndarray) -> np.ndarray:
    return default if u0 is None else np.asarray(u0, dtype=np.float64)


# --------------------------------------------------------------------------- diffusion


def diffusion_equation() -> Equation:
    """``u_t = kappa * Laplacian(u)``; parameter ``diffusivity`` (kappa >= 0)."""
    return Equation(
        "diffusion",
        {"diffusivity": 1.0},
        lambda p: [("laplacian", (p["diffusivity"],))],
        nonnegative=("diffusivity",),
    )


def diffusion(grid: Grid, u0: Any = None, *, diffusivity: float = 1.0, **kwargs: Any) -> Problem:
    """Heat equation ``u_t = kappa * Laplacian(u)`` in 1-D or 2-D.

    Parameters
    ----------
    grid : Grid
        Periodic or Dirichlet, 1-D or 2-D.
    u0 : array_like, optional
        Initial field of shape ``grid.shape`` (default: a Gaussian bump).
    diffusivity : float
        kappa >= 0.
    **kwargs
        ``t_final``, ``n_steps`` (required) and the options of :func:`pde_problem`.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, diffusion
    >>> p = diffusion(Grid((32,), (1.0,), "dirichlet"), diffusivity=0.1, t_final=0.1,
    ...               n_steps=40, method="fd", wrt="params")
    >>> g = simdiff.grad(p)   # d/dkappa of 0.5*mean(u(T)^2)
    >>> bool(g[0] < 0)
    True
    """
    return pde_problem(
        diffusion_equation(), grid, _u0(u0, _bump(grid)),
        params={"diffusivity": diffusivity}, **kwargs,
    )  # fmt: skip


# --------------------------------------------------------------------------- Burgers


def _advect(u: Any, p: Mapping[str, Any], D: Discretization, ops: Ops) -> Any:
    return -0.5 * D.dx(u * u, ops)  # -u u_x in conservative form (conserves mass)


def _advect_fourier(v: Any, p: Mapping[str, Any], D: Discretization, ops: Ops) -> Any:
    """:func:`_advect` on Fourier coefficients: ``-(i k / 2) F[(F^-1 v)^2]``."""
    u = from_fourier(v, ops, D.grid)
    return D.fourier_symbol((1,), ops, -0.5) * to_fourier(u * u, ops, D.grid)


def burgers_equation() -> Equation:
    """``u_t + u u_x = nu u_xx``; parameter ``viscosity`` (nu >= 0)."""
    return Equation(
        "burgers",
        {"viscosity": 0.1},
        lambda p: [("laplacian", (p["viscosity"],))],
        _advect,
        nonnegative=("viscosity",),
        fourier_nonlinear=_advect_fourier,
    )


def burgers(grid: Grid, u0: Any = None, *, viscosity: float = 0.1, **kwargs: Any) -> Problem:
    """Viscous Burgers ``u_t + u u_x = nu u_xx`` on a 1-D grid.

    The advection term is ``-(u^2/2)_x`` (conservative form).  The explicit
    stability check covers the viscous term only; keep ``dt * max|u| * k_max``
    (spectral) or ``dt * max|u| / dx`` (fd) below about 2.8 for RK4.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, burgers
    >>> g = Grid((64,), (2 * np.pi,))
    >>> p = burgers(g, np.sin(g.coords()[0]), viscosity=0.2, t_final=0.5, n_steps=50)
    >>> simdiff.grad(p).shape
    (64,)
    """
    _one_d(grid, "Burgers' equation")
    default = np.sin(2 * np.pi * (grid.coords()[0] - grid.origin) / grid.lengths[0])
    return pde_problem(
        burgers_equation(), grid, _u0(u0, default), params={"viscosity": viscosity}, **kwargs
    )


# --------------------------------------------------------------------------- Fisher–KPP


def _logistic(u: Any, p: Mapping[str, Any], D: Discretization, ops: Ops) -> Any:
    return p["rate"] * u * (1.0 - u)


def fisher_kpp_equation() -> Equation:
    """``u_t = D Laplacian(u) + r u (1 - u)``; parameters ``diffusivity``, ``rate``."""
    return Equation(
        "fisher_kpp",
        {"diffusivity": 1.0, "rate": 1.0},
        lambda p: [("laplacian", (p["diffusivity"],))],
        _logistic,
        nonnegative=("diffusivity",),
    )


def fisher_kpp(
    grid: Grid, u0: Any = None, *, diffusivity: float = 1.0, rate: float = 1.0, **kwargs: Any
) -> Problem:
    """Fisher–KPP reaction–diffusion ``u_t = D Laplacian(u) + r u (1 - u)`` (1-D or 2-D).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, fisher_kpp
    >>> p = fisher_kpp(Grid((32,), (20.0,)), t_final=1.0, n_steps=20, wrt="params")
    >>> simdiff.hessian(p, backend="torch").shape   # d^2/d(D, r)^2 of 0.5*mean(u(T)^2)
    (2, 2)
    """
    return pde_problem(
        fisher_kpp_equation(), grid, _u0(u0, _bump(grid)),
        params={"diffusivity": diffusivity, "rate": rate}, **kwargs,
    )  # fmt: skip


# --------------------------------------------------------------------------- Gray–Scott


def _gray_scott(u: Any, p: Mapping[str, Any], D: Discretization, ops: Ops) -> Any:
    a, b = u[0], u[1]
    r = a * b * b
    return ops.stack([-r + p["feed"] * (1.0 - a), r - (p["feed"] + p["kill"]) * b])


def gray_scott_equation() -> Equation:
    """Gray–Scott: ``u_t = D_u Lap u - u v^2 + F (1 - u)``, ``v_t = D_v Lap v + u v^2 - (F + k) v``.

    Parameters ``diffusivity_u``, ``diffusivity_v``, ``feed`` (F), ``kill`` (k).
    """
    return Equation(
        "gray_scott",
        {"diffusivity_u": 2e-5, "diffusivity_v": 1e-5, "feed": 0.04, "kill": 0.06},
        lambda p: [("laplacian", (p["diffusivity_u"], p["diffusivity_v"]))],
        _gray_scott,
        n_fields=2,
        nonnegative=("diffusivity_u", "diffusivity_v", "feed", "kill"),
    )


def gray_scott(
    grid: Grid,
    u0: Any = None,
    *,
    diffusivity_u: float = 2e-5,
    diffusivity_v: float = 1e-5,
    feed: float = 0.04,
    kill: float = 0.06,
    **kwargs: Any,
) -> Problem:
    """Gray–Scott reaction–diffusion (two fields; Pearson 1993's parameters by default).

    ``u0`` has shape ``(2, *grid.shape)`` (default: ``u = 1, v = 0`` with a
    bump of ``v`` in the centre).  With ``wrt="field"`` the input is the
    flattened pair.

    References
    ----------
    J. E. Pearson, "Complex patterns in a simple system", Science 261 (1993) 189-192.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, gray_scott
    >>> p = gray_scott(Grid((32,), (0.5,)), t_final=10.0, n_steps=10, wrt=("feed", "kill"))
    >>> simdiff.grad(p, backend="torch").shape
    (2,)
    """
    bump = _bump(grid)
    default = np.stack([1.0 - 0.5 * bump, 0.25 * bump])
    return pde_problem(
        gray_scott_equation(), grid, _u0(u0, default),
        params={"diffusivity_u": diffusivity_u, "diffusivity_v": diffusivity_v,
                "feed": feed, "kill": kill}, **kwargs,
    )  # fmt: skip


# --------------------------------------------------------------------------- KS


def kuramoto_sivashinsky_equation() -> Equation:
    """``u_t = -u u_x - u_xx - nu4 u_xxxx``; parameter ``hyperdiffusivity`` (nu4, 1 classically)."""
    return Equation(
        "kuramoto_sivashinsky",
        {"hyperdiffusivity": 1.0},
        lambda p: [("laplacian", (-1.0,)), ("biharmonic", (-p["hyperdiffusivity"],))],
        _advect,
        nonnegative=("hyperdiffusivity",),
        fourier_nonlinear=_advect_fourier,
    )


def kuramoto_sivashinsky(
    grid: Grid, u0: Any = None, *, hyperdiffusivity: float = 1.0, **kwargs: Any
) -> Problem:
    """Kuramoto–Sivashinsky ``u_t = -u u_x - u_xx - u_xxxx`` on a periodic 1-D grid.

    Default ``u0 = cos(x/16) (1 + sin(x/16))`` rescaled to the domain (Kassam
    and Trefethen's setup on ``[0, 32 pi]``).  Use ``stepper="etdrk4"``: the
    fourth-derivative term makes explicit steps tiny.

    References
    ----------
    A.-K. Kassam and L. N. Trefethen, SIAM J. Sci. Comput. 26 (2005) 1214-1233.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, kuramoto_sivashinsky
    >>> g = Grid((64,), (32 * np.pi,))
    >>> p = kuramoto_sivashinsky(g, t_final=5.0, n_steps=20, stepper="etdrk4")
    >>> simdiff.grad(p).shape
    (64,)
    """
    _one_d(grid, "Kuramoto-Sivashinsky")
    s = 2 * np.pi * (grid.coords()[0] - grid.origin) / grid.lengths[0]
    default = np.cos(s) * (1.0 + np.sin(s))
    return pde_problem(
        kuramoto_sivashinsky_equation(), grid, _u0(u0, default),
        params={"hyperdiffusivity": hyperdiffusivity}, **kwargs,
    )  # fmt: skip
