"""ODE simulators whose every derivative is available on both backends.

``ODEProblem`` turns an initial-value problem into a :class:`simdiff.Problem`
of its parameters and/or initial state; the solvers (:class:`FixedStep`
(RK4), :class:`Dopri5`, :class:`Rodas3`, :class:`Rodas5P`) are written once over ``ops``, and
:class:`Diffrax` / :func:`diffrax_problem` run the same problem with diffrax
on JAX.  The solvers live in :mod:`simdiff.ode.solvers` (one module each, and
the registry of their names).
"""

from typing import Any

from simdiff.errors import AttributeNotFoundError as _AttributeNotFoundError
from simdiff.ode._sparsity import JacobianSparsity as JacobianSparsity
from simdiff.ode._sparsity import detect_sparsity as detect_sparsity
from simdiff.ode.adjoint import Adjoint as Adjoint
from simdiff.ode.adjoint import CheckpointAdjoint as CheckpointAdjoint
from simdiff.ode.adjoint import DirectAdjoint as DirectAdjoint
from simdiff.ode.adjoint import ForwardAdjoint as ForwardAdjoint
from simdiff.ode.events import Event as Event
from simdiff.ode.events import EventRecord as EventRecord
from simdiff.ode.problem import ODEProblem as ODEProblem
from simdiff.ode.problem import solve as solve
from simdiff.ode.solvers import SOLVERS as SOLVERS
from simdiff.ode.solvers import STATUS as STATUS
from simdiff.ode.solvers import SolveInfo as SolveInfo
from simdiff.ode.solvers import Solver as Solver
from simdiff.ode.solvers import make_solver as make_solver
from simdiff.ode.solvers.dopri5 import DOPRI5 as DOPRI5
from simdiff.ode.solvers.dopri5 import Dopri5 as Dopri5
from simdiff.ode.solvers.rk import FixedStep as FixedStep
from simdiff.ode.solvers.rk import rk_integrate as rk_integrate
from simdiff.ode.solvers.rk import rk_step as rk_step
from simdiff.ode.solvers.rodas5p import Rodas5P as Rodas5P
from simdiff.ode.solvers.rosenbrock import Rodas3 as Rodas3
from simdiff.ode.tableau import EULER as EULER
from simdiff.ode.tableau import HEUN as HEUN
from simdiff.ode.tableau import RK4 as RK4
from simdiff.ode.tableau import ButcherTableau as ButcherTableau


def __getattr__(name: str) -> Any:  # the diffrax engine imports jax: load it on first use
    if name in ("Diffrax", "ADJOINTS"):
        from simdiff.ode.solvers import diffrax

        return getattr(diffrax, name)
    if name == "diffrax_problem":
        from simdiff.ode import diffrax_engine

        return diffrax_engine.diffrax_problem
    raise _AttributeNotFoundError(f"module 'simdiff.ode' has no attribute {name!r}")
