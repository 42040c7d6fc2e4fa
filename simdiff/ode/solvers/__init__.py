"""simdiff's ODE solvers, one file each, and the registry of their names.

The solver contract is :class:`Solver` (``solvers/_base.py``); every solver
but :class:`~simdiff.ode.solvers.diffrax.Diffrax` steps in the one shared
loop (:func:`~simdiff.ode.solvers.driver.drive`, entered through
:func:`~simdiff.ode.solvers.driver.integrate_steps`), with the adaptive
machinery of :mod:`~simdiff.ode.solvers.adaptive` for the embedded pairs.

=================  ========================================  ==============================
module             solvers                                   kind
=================  ========================================  ==============================
``rk``             :class:`FixedStep` (RK4, Heun, Euler)     fixed-step explicit
``dopri5``         :class:`Dopri5`                           adaptive explicit, order 5
``rosenbrock``     :class:`Rodas3`                           adaptive stiff, order 3
``rodas5p``        :class:`Rodas5P`                          adaptive stiff, order 5
``diffrax``        ``Diffrax`` (jax only, loaded on use)     diffrax's solvers
=================  ========================================  ==============================
"""

from __future__ import annotations

from typing import Any

from simdiff.errors import AttributeNotFoundError, InputError
from simdiff.ode.solvers._base import STATUS as STATUS
from simdiff.ode.solvers._base import Rhs as Rhs
from simdiff.ode.solvers._base import SolveInfo as SolveInfo
from simdiff.ode.solvers._base import Solver as Solver
from simdiff.ode.solvers.dopri5 import DOPRI5 as DOPRI5
from simdiff.ode.solvers.dopri5 import Dopri5 as Dopri5
from simdiff.ode.solvers.rk import EULER as EULER
from simdiff.ode.solvers.rk import HEUN as HEUN
from simdiff.ode.solvers.rk import RK4 as RK4
from simdiff.ode.solvers.rk import ButcherTableau as ButcherTableau
from simdiff.ode.solvers.rk import FixedStep as FixedStep
from simdiff.ode.solvers.rk import rk_integrate as rk_integrate
from simdiff.ode.solvers.rk import rk_step as rk_step
from simdiff.ode.solvers.rodas5p import Rodas5P as Rodas5P
from simdiff.ode.solvers.rosenbrock import Rodas3 as Rodas3

#: Solver names accepted by ``solver=``; ``diffrax-*`` run on the jax backend only.
SOLVERS = (
    "rk4",
    "dopri5",
    "rodas3",
    "rodas5p",
    "auto",
    "diffrax-tsit5",
    "diffrax-dopri5",
    "diffrax-kvaerno5",
)

#: The solver classes by name (``"auto"`` and ``"diffrax-*"`` are made apart: see
#: :func:`make_solver`).
REGISTRY: dict[str, type[Solver]] = {
    "rk4": FixedStep,
    "dopri5": Dopri5,
    "rodas3": Rodas3,
    "rodas5p": Rodas5P,
}


def make_solver(solver: str | Solver, **options: Any) -> Solver:
    """A solver object from a name in :data:`SOLVERS` (``options`` go to its constructor).

    Examples
    --------
    >>> from simdiff.ode import make_solver
    >>> make_solver("dopri5", rtol=1e-8).rtol
    1e-08
    """
    if isinstance(solver, Solver):
        if options:
            raise InputError(f"solver options {sorted(options)} need a solver name, not an object")
        return solver
    if isinstance(solver, str) and solver in REGISTRY:
        return REGISTRY[solver](**options)
    if solver == "auto":
        raise InputError(
            "solver='auto' chooses from the problem's stiffness, so it needs the problem: "
            "pass it to ODEProblem(..., solver='auto') or simdiff.ode.solve(..., solver='auto')"
        )
    if isinstance(solver, str) and solver.startswith("diffrax-"):
        # imports jax and diffrax: loaded when asked for, so that importing simdiff does not
        from simdiff.ode.solvers.diffrax import Diffrax

        return Diffrax(solver=solver.removeprefix("diffrax-"), **options)
    raise InputError(f"unknown solver {solver!r}; expected one of {list(SOLVERS)} or a Solver")


def __getattr__(name: str) -> Any:  # the diffrax solver imports jax: load it on first use
    if name in ("Diffrax", "ADJOINTS", "DERIVATIVES", "choose_adjoint"):
        from simdiff.ode.solvers import diffrax

        return getattr(diffrax, name)
    raise AttributeNotFoundError(f"module 'simdiff.ode.solvers' has no attribute {name!r}")
