"""An :class:`~simdiff.ode.ODEProblem` solved by diffrax, with the adjoint its derivative needs.

diffrax differentiates its adaptive loop through an *adjoint*, and each
adjoint supports only some derivative modes (the table of
:mod:`simdiff.ode.solvers.diffrax`); :func:`diffrax_problem` picks, for the
derivative asked for, the one that supports it most cheaply.
"""

from __future__ import annotations

from typing import Any

from simdiff.errors import InputTypeError
from simdiff.ode.problem import ODEProblem
from simdiff.ode.solvers.diffrax import Diffrax, choose_adjoint

__all__ = ["diffrax_problem"]


def diffrax_problem(
    problem: ODEProblem,
    derivative: str,
    *,
    solver: str = "tsit5",
    adjoint: str | None = None,
    **options: Any,
) -> ODEProblem:
    """The same ODEProblem solved by diffrax, with the adjoint ``derivative`` needs.

    Parameters
    ----------
    problem : ODEProblem
        Right-hand side, initial state, span, parameters, save times,
        observable and ``wrt`` are reused.
    derivative : str
        What will be computed: one of :data:`DERIVATIVES` (``"grad"``,
        ``"hessian"``, ``"jvp"``, ``"jacobian"``, ...).
    solver : {"tsit5", "dopri5", "kvaerno5"}
    adjoint : str, optional
        Force an adjoint; it is checked against ``derivative``.
    **options
        ``rtol``, ``atol``, ``max_steps``; default: those of ``problem.solver``
        where it has them.

    Returns
    -------
    ODEProblem
        Runs on backend ``"jax"`` only.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.ode import ODEProblem, diffrax_problem
    >>> p = ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
    ...                observable=lambda ys, ops: ys[-1, 0], rtol=1e-10, atol=1e-12)
    >>> g = simdiff.grad(diffrax_problem(p, "grad"))   # d/dk exp(-k) = -exp(-k)
    >>> bool(abs(g[0] + np.exp(-2.0)) < 1e-8)
    True
    """
    if not isinstance(problem, ODEProblem):
        raise InputTypeError(f"diffrax_problem needs an ODEProblem; got {type(problem).__name__}")
    chosen = choose_adjoint(derivative, adjoint)
    for key in ("rtol", "atol", "max_steps"):
        if key not in options and hasattr(problem.solver, key):
            options[key] = getattr(problem.solver, key)
    engine = Diffrax(solver=solver, adjoint=chosen, **options)
    return ODEProblem(
        problem.rhs,
        problem.y0,
        problem.t_span,
        problem.params,
        save_at=problem.save_at,
        observable=problem.observable,
        solver=engine,
        wrt=problem.wrt,
        name=f"{problem.name}[{engine.name}/{chosen}]",
        exact=problem.exact,
        meta=problem.meta,
    )
