"""PDE problems: an equation, a grid, a discretisation and a stepper make a ``Problem``.

An :class:`Equation` is ``u_t = sum_terms c_term(p) * Op_term(u) + N(u, p)``
with linear operators ``Op`` from {``"laplacian"``, ``"biharmonic"``} and a
nonlinear part ``N`` written over ``ops`` with the discretisation's
derivatives.  :func:`pde_problem` turns it into a :class:`simdiff.Problem` of
either the initial field (``wrt="field"``) or the physical parameters
(``wrt="params"`` or a tuple of names), whose output is a final-time
functional (scalar) or the final field (vector).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simdiff.backends import Ops, get_ops
from simdiff.core.cache import RecentlyUsed
from simdiff.core.problem import CheckOptions, Problem
from simdiff.errors import InputError, UnsupportedError
from simdiff.ode.solvers.rk import rk_step
from simdiff.ode.stability import check_explicit_step
from simdiff.ode.tableau import EULER, HEUN, RK4, ButcherTableau
from simdiff.pde.etdrk import constant_operands, etdrk4_integrate
from simdiff.pde.grid import Grid
from simdiff.pde.marching import block_size, march
from simdiff.pde.spectral import (
    apply_symbol,
    derivative_orders,
    from_fourier,
    kept_symbol,
    laplacian_symbol,
    to_fourier,
)
from simdiff.pde.stencils import fd_derivative, fd_laplacian, stencil_spectral_radius

__all__ = ["METHODS", "STEPPERS", "Discretization", "Equation", "pde_problem", "solve"]

#: Spatial discretisations.
METHODS = ("spectral", "fd")
#: Time steppers by name (a :class:`~simdiff.ode.ButcherTableau` is accepted too).
STEPPERS: dict[str, ButcherTableau | str] = {
    "rk4": RK4, "heun": HEUN, "euler": EULER, "etdrk4": "etdrk4",
}  # fmt: skip
_TERMS = ("laplacian", "biharmonic")

LinearTerms = Callable[[Mapping[str, Any]], list[tuple[str, tuple[Any, ...]]]]
Nonlinear = Callable[[Any, Mapping[str, Any], "Discretization", Any], Any]


@dataclass(frozen=True)
class Equation:
    """A semilinear evolution equation ``u_t = L(p) u + N(u, p)``.

    Parameters
    ----------
    name : str
    params : dict
        Parameter names and default values (the order of ``wrt="params"``).
    linear : callable
        ``linear(p) -> [(term, coefficients), ...]``: ``term`` in
        ``("laplacian", "biharmonic")`` and one coefficient per field.
    nonlinear : callable or None
        ``nonlinear(u, p, D, ops)`` with ``D`` the :class:`Discretization`;
        returns an array of ``u``'s shape.
    n_fields : int
        Number of coupled fields (``u`` has shape ``(n_fields, *grid.shape)``
        when above 1, else ``grid.shape``).
    nonnegative : tuple of str
        Parameters that must be >= 0 (diffusivities, viscosities).
    fourier_nonlinear : callable or None
        The same ``N`` on the Fourier coefficients, ``fourier_nonlinear(v, p, D,
        ops)`` with ``v = to_fourier(u)``, returning ``to_fourier(N(u))``.
        ETDRK4 steps in Fourier space and uses it when given: a term like
        ``-(u^2/2)_x`` is then one inverse and one forward transform instead of
        two of each (``to_fourier(D.dx(w))`` transforms ``w`` back and forth).
        It must equal ``to_fourier(nonlinear(from_fourier(v)))`` to rounding
        (tests/test_pde_discretisation.py checks the library's).
    """

    name: str
    params: dict[str, float]
    linear: LinearTerms
    nonlinear: Nonlinear | None = None
    n_fields: int = 1
    nonnegative: tuple[str, ...] = field(default_factory=tuple)
    fourier_nonlinear: Nonlinear | None = None


class Discretization:
    """Spatial derivatives on a grid: Fourier spectral or finite differences of ``order``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Discretization, Grid
    >>> D = Discretization(Grid((32,), (2 * np.pi,)), "spectral")
    >>> x = D.grid.coords()[0]
    >>> bool(np.allclose(D.dx(np.sin(x), simdiff.get_ops("numpy")), np.cos(x)))
    True
    """

    def __init__(self, grid: Grid, method: str = "spectral", order: int = 4) -> None:
        if method not in METHODS:
            raise InputError(f"unknown method {method!r}; expected one of {list(METHODS)}")
        if method == "spectral" and not grid.periodic:
            raise UnsupportedError(
                f"method='spectral' needs a periodic grid; got boundary {grid.boundary!r} "
                "(use method='fd')"
            )
        if method == "fd" and order not in (2, 4, 6):
            raise InputError(f"finite-difference order must be 2, 4 or 6; got {order!r}")
        self.grid, self.method, self.order = grid, method, int(order)
        self._operands: dict[tuple[Any, ...], tuple[Ops, Any]] = {}

    def fourier_symbol(self, orders: tuple[int, ...] | int, ops: Ops, scale: float = 1.0) -> Any:
        """``scale`` times a Fourier symbol as an array of ``ops`` (spectral only).

        ``orders``: derivative orders per axis (``(1,)`` is ``d/dx`` in 1-D) or
        an int power of the Laplacian (see
        :func:`~simdiff.pde.spectral.kept_symbol`).  Converted once per
        ``ops`` and kept by this object: a solve builds one Discretization, so
        its time steps reuse the arrays instead of converting them per step.
        """
        key = (orders, float(scale), id(ops))
        hit = self._operands.get(key)
        if hit is None or hit[0] is not ops:
            hit = self._operands[key] = (ops, ops.asarray(kept_symbol(self.grid, orders, scale)))
        return hit[1]

    def _spectral(self, u: Any, ops: Ops, orders: tuple[int, ...] | int) -> Any:
        return apply_symbol(u, ops, self.grid, lambda: self.fourier_symbol(orders, ops))

    def dx(self, u: Any, ops: Ops, axis: int = 0) -> Any:
        """First derivative along ``axis``."""
        if self.method == "spectral":
            return self._spectral(u, ops, derivative_orders(self.grid, 1, axis))
        return fd_derivative(u, ops, self.grid, 1, self.order, axis)

    def laplacian(self, u: Any, ops: Ops) -> Any:
        """Sum of second derivatives."""
        if self.method == "spectral":
            return self._spectral(u, ops, 1)
        return fd_laplacian(u, ops, self.grid, self.order)

    def biharmonic(self, u: Any, ops: Ops) -> Any:
        """The Laplacian applied twice (periodic grids; 1-D fd uses the 4th-derivative stencil)."""
        if self.method == "spectral":
            return self._spectral(u, ops, 2)
        if not self.grid.periodic:
            raise UnsupportedError(
                "the biharmonic operator needs two boundary conditions per side; only "
                f"periodic grids support it, got boundary {self.grid.boundary!r}"
            )
        if self.grid.ndim == 1:
            return fd_derivative(u, ops, self.grid, 4, self.order, 0)
        return self.laplacian(self.laplacian(u, ops), ops)

    def apply(self, term: str, u: Any, ops: Ops) -> Any:
        """``Op_term(u)`` for a linear term name."""
        return self.laplacian(u, ops) if term == "laplacian" else self.biharmonic(u, ops)

    def symbol(self, term: str) -> np.ndarray:
        """Real Fourier symbol of a linear term on the transform grid (spectral only)."""
        lap = laplacian_symbol(self.grid)
        return lap if term == "laplacian" else lap**2

    def spectral_radius(self, term: str) -> float:
        """Largest eigenvalue modulus of ``Op_term`` on this grid."""
        if self.method == "spectral":
            return float(np.abs(self.symbol(term)).max())
        lap = sum(stencil_spectral_radius(2, self.order, h) for h in self.grid.spacings)
        return lap if term == "laplacian" else lap**2


# --------------------------------------------------------------------------- validation


def _stepper(stepper: str | ButcherTableau) -> ButcherTableau | str:
    if isinstance(stepper, ButcherTableau):
        return stepper
    if stepper not in STEPPERS:
        raise InputError(
            f"unknown stepper {stepper!r}; expected one of {list(STEPPERS)} or a ButcherTableau"
        )
    return STEPPERS[stepper]


def _params(equation: Equation, params: Mapping[str, float] | None) -> dict[str, float]:
    out = dict(equation.params)
    unknown = set(params or {}) - set(out)
    if unknown:
        raise InputError(
            f"unknown parameters {sorted(unknown)} for {equation.name}; "
            f"expected a subset of {list(out)}"
        )
    out.update({k: float(v) for k, v in (params or {}).items()})
    for name, value in out.items():
        if not np.isfinite(value):
            raise InputError(f"parameter {name} must be finite; got {value}")
        if name in equation.nonnegative and value < 0:
            raise InputError(f"parameter {name} must be >= 0; got {value}")
    return out


def _check_march(
    equation: Equation,
    D: Discretization,
    kind: ButcherTableau | str,
    values: dict[str, float],
    t_final: float,
    n_steps: int,
) -> None:
    """The one rule for construction and evaluation: parameters in their domain
    (:func:`_params`) and an explicit step within its stability limit for them."""
    if not isinstance(kind, ButcherTableau):  # etdrk4 is exact in its linear part
        return
    terms = equation.linear(values)
    radius = sum(max(abs(float(c)) for c in cs) * D.spectral_radius(t) for t, cs in terms)
    what = f"{equation.name}, {D.method}" + (f" order {D.order}" if D.method == "fd" else "")
    check_explicit_step(t_final, n_steps, radius, kind, what)


class PDEProblem(Problem):
    """The :class:`~simdiff.Problem` :func:`pde_problem` returns: it checks each point.

    At every evaluation (value and every derivative, on every backend) the
    parameters of ``x`` pass the construction rule again (:meth:`check_point`):
    each within its domain (a negative diffusivity is refused) and the explicit
    step within its stability limit for them.  ``parameters`` names the
    inputs for ``wrt`` parameters (empty for the initial field): they label
    the sensitivity results (:attr:`param_names`).
    """

    def __init__(
        self, fn: Any, x0: Any, *, domain: Any, parameters: tuple[str, ...] = (), **kwargs: Any
    ) -> None:
        super().__init__(fn, x0, **kwargs)
        self.domain = domain
        self.parameters = tuple(parameters)

    def __fingerprint__(self) -> dict[str, Any]:
        return {**super().__fingerprint__(), "domain": self.domain}

    @property
    def param_names(self) -> list[str]:
        """One name per input: the parameters' names, or those of :class:`simdiff.Problem`
        (``x[0]``, ...) for the initial field."""
        if self.parameters:
            return list(self.parameters)
        return super().param_names

    def check_point(self, x: np.ndarray) -> None:
        """Raise :class:`~simdiff.errors.InputError` or :class:`~simdiff.errors.StabilityError`
        when the parameters of ``x`` are refused (the construction rule)."""
        self.domain(x)


def _field_shape(equation: Equation, grid: Grid) -> tuple[int, ...]:
    return grid.shape if equation.n_fields == 1 else (equation.n_fields, *grid.shape)


def _linear_rhs(equation: Equation, D: Discretization, u: Any, p: Mapping, ops: Ops) -> Any:
    terms = equation.linear(p)
    if equation.n_fields == 1:
        return sum(c[0] * D.apply(t, u, ops) for t, c in terms)
    return ops.stack(
        [sum(c[i] * D.apply(t, u[i], ops) for t, c in terms) for i in range(equation.n_fields)]
    )


#: Constant Fourier diagonals of ``L`` (numpy), by the grid and the linear terms' numbers.
_LINEAR: RecentlyUsed[Hashable, Any] = RecentlyUsed(16)


def _fourier_linear(
    equation: Equation, D: Discretization, p: Mapping, ops: Ops
) -> tuple[Any, Hashable | None]:
    """The diagonal of ``L`` in Fourier space and, when it is constant (numpy), its key.

    A constant ``L`` is built once per key and then only looked up, so that a
    traced solve (Dynamo) runs no numpy arithmetic on it.
    """
    terms = equation.linear(p)
    traced = any(not isinstance(ci, (int, float)) for _, c in terms for ci in c)
    n = equation.n_fields
    if traced:
        rows = [sum(c[i] * ops.asarray(D.symbol(t)) for t, c in terms) for i in range(n)]
        return (rows[0] if n == 1 else ops.stack(rows)), None

    def build() -> np.ndarray:
        rows = [sum(float(c[i]) * D.symbol(t) for t, c in terms) for i in range(n)]
        return np.asarray(rows[0] if n == 1 else np.stack(rows))

    # the grid's fields, not the Grid: Dynamo cannot rebuild a frozen dataclass in a key
    g = D.grid
    key = (g.shape, g.lengths, g.boundary, g.origin, n,
           tuple((t, tuple(float(ci) for ci in c)) for t, c in terms))  # fmt: skip
    return _LINEAR.get(key, build), key


def _linear_only(equation: Equation) -> bool:
    return equation.nonlinear is None and equation.fourier_nonlinear is None


def solve(
    equation: Equation,
    grid: Grid,
    u0: Any,
    ops: Ops,
    *,
    t_final: float,
    n_steps: int,
    params: Mapping[str, Any] | None = None,
    method: str = "spectral",
    order: int = 4,
    stepper: str | ButcherTableau = "rk4",
    checkpoint: bool | int = False,
) -> Any:
    """The field at ``t_final`` (array of ``ops``, shape ``(n_fields, *grid.shape)`` or
    ``grid.shape``).

    ``params`` values may be arrays of the context (then they are
    differentiated through).  No stability check happens here (see
    :func:`pde_problem`).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, solve, diffusion_equation
    >>> g = Grid((32,), (2 * np.pi,))
    >>> x = g.coords()[0]
    >>> u = solve(diffusion_equation(), g, np.sin(x), simdiff.get_ops("numpy"),
    ...           t_final=1.0, n_steps=8, stepper="etdrk4", params={"diffusivity": 0.5})
    >>> bool(np.allclose(u, np.exp(-0.5) * np.sin(x)))
    True
    """
    kind = _stepper(stepper)
    D = Discretization(grid, method, order)
    p = {**equation.params, **(params or {})}
    grid.check_field(u0, "u0", equation.n_fields)
    u = ops.reshape(ops.asarray(u0), _field_shape(equation, grid))
    if kind == "etdrk4":
        if method != "spectral":
            raise UnsupportedError("stepper='etdrk4' needs method='spectral' (a diagonal L)")
        L, key = _fourier_linear(equation, D, p, ops)
        nl, fnl = equation.nonlinear, equation.fourier_nonlinear

        def nonlinear(v: Any) -> Any:
            if fnl is not None:
                return fnl(v, p, D, ops)
            assert nl is not None
            return to_fourier(nl(from_fourier(v, ops, grid), p, D, ops), ops, grid)

        v = etdrk4_integrate(
            L, None if _linear_only(equation) else nonlinear, to_fourier(u, ops, grid), t_final,
            n_steps,
            ops, checkpoint=checkpoint, key=key,
        )  # fmt: skip
        return from_fourier(v, ops, grid)

    def rhs(t: Any, y: Any, q: Any, ops: Ops) -> Any:
        out = _linear_rhs(equation, D, y, q, ops)
        return out if equation.nonlinear is None else out + equation.nonlinear(y, q, D, ops)

    h = float(t_final) / int(n_steps)
    assert isinstance(kind, ButcherTableau)  # every other stepper is a tableau
    return march(lambda y: rk_step(rhs, 0.0, y, h, p, ops, kind), u, n_steps, ops, checkpoint)


def _mean_square(u: Any, ops: Ops) -> Any:
    return 0.5 * ops.mean(u * u)


def pde_problem(
    equation: Equation,
    grid: Grid,
    u0: Any,
    *,
    t_final: float,
    n_steps: int,
    params: Mapping[str, float] | None = None,
    wrt: str | tuple[str, ...] = "field",
    method: str = "spectral",
    order: int = 4,
    stepper: str | ButcherTableau = "rk4",
    output: str = "functional",
    observable: Callable[[Any, Any], Any] | None = None,
    checkpoint: bool | int = False,
    name: str | None = None,
    exact: Mapping[str, Callable[..., Any]] | None = None,
    meta: Mapping[str, Any] | None = None,
    check_options: CheckOptions | None = None,
) -> Problem:
    """A :class:`simdiff.Problem` whose input is the initial field or the parameters.

    Parameters
    ----------
    equation : Equation
    grid : Grid
    u0 : array_like, shape ``grid.shape`` (``(n_fields, *grid.shape)`` for systems) or flat
        Initial field.
    t_final : float
        Final time (> 0).
    n_steps : int
        Number of equal time steps.
    params : dict, optional
        Parameter values overriding the equation's defaults.
    wrt : "field", "params" or tuple of parameter names
        The problem's input ``x``: the flattened initial field (``n = u0.size``),
        all parameters in ``equation.params`` order, or the named ones.
    method : {"spectral", "fd"}
        Fourier spectral (periodic) or finite differences of ``order`` (2, 4, 6).
    stepper : {"rk4", "heun", "euler", "etdrk4"} or ButcherTableau
        Method of lines with an explicit Runge–Kutta step
        (:func:`simdiff.ode.rk_step`), or ETDRK4 (spectral only).
    output : {"functional", "field"}
        Scalar ``observable(u(T), ops)`` (default ``0.5 * mean(u(T)**2)``) or the
        flattened final field (vector output).
    checkpoint : bool or int
        Rematerialisation for long horizons (see :func:`simdiff.pde.marching.march`;
        bounds memory on JAX; the identity under torch.func).
    name, exact, meta, check_options
        Passed to :class:`simdiff.Problem` (``meta`` gains the setup).  For
        ``wrt`` parameters the problem's ``parameters`` (and ``param_names``)
        are their names, which label the sensitivity results.

    Returns
    -------
    Problem

    Raises
    ------
    StabilityError
        An explicit stepper's ``dt = t_final/n_steps`` exceeds its real
        stability interval over the largest eigenvalue of the stiff linear part
        at the given parameters (e.g. ``dt <= 2.785/(4 nu/dx^2)`` for RK4 and
        second-order diffusion; ``dt <= dx^2/(2 nu)`` for Euler).  Advection is
        not checked.
    ShapeError
        ``u0`` does not match the grid.
    ValueError
        Negative diffusivity or viscosity, unknown parameters, bad options.
    UnsupportedError
        A spectral method or ETDRK4 on a non-periodic grid.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pde import Grid, pde_problem, diffusion_equation
    >>> g = Grid((16,), (2 * np.pi,))
    >>> x = g.coords()[0]
    >>> p = pde_problem(diffusion_equation(), g, np.sin(x), t_final=1.0, n_steps=4,
    ...                 stepper="etdrk4", wrt="params")
    >>> bool(np.isclose(simdiff.grad(p)[0], -0.5 * np.exp(-2.0)))
    True
    """
    kind = _stepper(stepper)
    D = Discretization(grid, method, order)
    values = _params(equation, params)
    shape = _field_shape(equation, grid)
    u0 = np.asarray(u0, dtype=np.float64)
    grid.check_field(u0, "u0", equation.n_fields)
    if not np.all(np.isfinite(u0)):
        raise InputError("u0 must be finite")
    u0 = u0.reshape(shape)
    if not (np.isfinite(t_final) and t_final > 0):
        raise InputError(f"t_final must be positive and finite; got {t_final!r}")
    if isinstance(n_steps, bool) or int(n_steps) != n_steps or int(n_steps) < 1:
        raise InputError(f"n_steps must be a positive integer; got {n_steps!r}")
    if output not in ("functional", "field"):
        raise InputError(f"output must be 'functional' or 'field'; got {output!r}")
    if output == "field" and observable is not None:
        raise InputError("observable applies to output='functional' only")
    if checkpoint is not False:
        block_size(checkpoint, int(n_steps))
    terms = equation.linear(values)
    if any(t == "biharmonic" for t, _ in terms) and not grid.periodic:
        raise UnsupportedError(
            "the biharmonic operator needs two boundary conditions per side; only "
            f"periodic grids support it, got boundary {grid.boundary!r}"
        )
    _check_march(equation, D, kind, values, t_final, int(n_steps))
    if wrt == "field":
        names: tuple[str, ...] = ()
        x0 = u0.reshape(-1)
    else:
        names = tuple(equation.params) if wrt == "params" else tuple(wrt)
        unknown = [n for n in names if n not in equation.params]
        if unknown or not names:
            raise InputError(
                f"wrt must be 'field', 'params' or parameter names from {list(equation.params)}; "
                f"got {wrt!r}"
            )
        x0 = np.array([values[n] for n in names])
    if kind == "etdrk4" and method == "spectral" and grid.periodic:
        L, key = _fourier_linear(equation, D, values, get_ops("numpy"))
        if key is not None:  # compute the constant coefficients now, outside any trace
            constant_operands(L, t_final, int(n_steps), _linear_only(equation), key=key)
    functional = observable or _mean_square
    opts: dict[str, Any] = {"t_final": float(t_final), "n_steps": int(n_steps), "method": method,
            "order": order, "stepper": stepper, "checkpoint": checkpoint}  # fmt: skip

    def fn(x: Any, ops: Ops) -> Any:
        if names:
            p = {**values, **{n: x[i] for i, n in enumerate(names)}}
            u = solve(equation, grid, u0, ops, params=p, **opts)
        else:
            u = solve(equation, grid, ops.reshape(x, shape), ops, params=values, **opts)
        return functional(u, ops) if output == "functional" else ops.reshape(u, (-1,))

    fn.__name__ = equation.name

    def domain(x: np.ndarray) -> None:
        if names:
            p = _params(
                equation,
                {n: float(x[i]) for i, n in enumerate(names)}
                | {k: v for k, v in values.items() if k not in names},
            )
            _check_march(equation, D, kind, p, float(t_final), int(n_steps))

    setup = {"equation": equation.name, "grid": grid, "params": values,
             "wrt": names or "field", "output": output, **opts}  # fmt: skip
    return PDEProblem(
        fn,
        x0=x0,
        domain=domain,
        name=name or f"{equation.name}_{'field' if not names else '_'.join(names)}",
        exact=exact,
        parameters=names,
        meta={"tags": ("pde",), "setup": setup, **(meta or {})},
        check_options=check_options,
    )
