"""ODE simulators whose every derivative is available on both backends.

``ODEProblem`` turns an initial-value problem into a :class:`simdiff.Problem`
of its parameters and/or initial state; the solvers (:class:`FixedStep`
(RK4), :class:`Dopri5`, :class:`Rodas3`, :class:`Rodas5P`) are written once over ``ops``, and
:class:`Diffrax` / :func:`diffrax_problem` run the same problem with diffrax
on JAX.
"""

from simdiff.errors import AttributeNotFoundError
from simdiff.ode._base import STATUS as STATUS
from simdiff.ode._base import SolveInfo as SolveInfo
from simdiff.ode._base import Solver as Solver
from simdiff.ode._sparsity import JacobianSparsity as JacobianSparsity
from simdiff.ode._sparsity import detect_sparsity as detect_sparsity
from simdiff.ode.adjoint import Adjoint as Adjoint
from simdiff.ode.adjoint import CheckpointAdjoint as CheckpointAdjoint
from simdiff.ode.adjoint import DirectAdjoint as DirectAdjoint
from simdiff.ode.adjoint import ForwardAdjoint as ForwardAdjoint
from simdiff.ode.dopri5 import DOPRI5 as DOPRI5
from simdiff.ode.dopri5 import Dopri5 as Dopri5
from simdiff.ode.events import Event as Event
from simdiff.ode.events import EventRecord as EventRecord
from simdiff.ode.fixed import FixedStep as FixedStep
from simdiff.ode.problem import SOLVERS as SOLVERS
from simdiff.ode.problem import ODEProblem as ODEProblem
from simdiff.ode.problem import make_solver as make_solver
from simdiff.ode.problem import solve as solve
from simdiff.ode.rk import EULER as EULER
from simdiff.ode.rk import HEUN as HEUN
from simdiff.ode.rk import RK4 as RK4
from simdiff.ode.rk import ButcherTableau as ButcherTableau
from simdiff.ode.rk import rk_integrate as rk_integrate
from simdiff.ode.rk import rk_step as rk_step
from simdiff.ode.rodas5p import Rodas5P as Rodas5P
from simdiff.ode.rosenbrock import Rodas3 as Rodas3


def __getattr__(name: str):  # the diffrax engine imports jax: load it on first use
    if name in ("Diffrax", "diffrax_problem", "ADJOINTS"):
        from simdiff.ode import diffrax_engine

        return getattr(diffrax_engine, name)
    raise AttributeNotFoundError(f"module 'simdiff.ode' has no attribute {name!r}")
