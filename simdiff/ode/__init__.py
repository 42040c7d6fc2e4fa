"""ODE simulators whose every derivative is available on both backends.

``ODEProblem`` turns an initial-value problem into a :class:`simdiff.Problem`
of its parameters and/or initial state; the solvers (:class:`FixedStep`
(RK4), :class:`Dopri5`, :class:`Rodas3`, :class:`Rodas5P`) are written once over ``ops``, and
:class:`Diffrax` / :func:`diffrax_problem` run the same problem with diffrax
on JAX.
"""

from ._base import STATUS as STATUS
from ._base import SolveInfo as SolveInfo
from ._base import Solver as Solver
from ._sparsity import JacobianSparsity as JacobianSparsity
from ._sparsity import detect_sparsity as detect_sparsity
from .adjoint import Adjoint as Adjoint
from .adjoint import CheckpointAdjoint as CheckpointAdjoint
from .adjoint import DirectAdjoint as DirectAdjoint
from .adjoint import ForwardAdjoint as ForwardAdjoint
from .dopri5 import DOPRI5 as DOPRI5
from .dopri5 import Dopri5 as Dopri5
from .events import Event as Event
from .events import EventRecord as EventRecord
from .fixed import FixedStep as FixedStep
from .problem import SOLVERS as SOLVERS
from .problem import ODEProblem as ODEProblem
from .problem import make_solver as make_solver
from .problem import solve as solve
from .rk import EULER as EULER
from .rk import HEUN as HEUN
from .rk import RK4 as RK4
from .rk import ButcherTableau as ButcherTableau
from .rk import rk_integrate as rk_integrate
from .rk import rk_step as rk_step
from .rodas5p import Rodas5P as Rodas5P
from .rosenbrock import Rodas3 as Rodas3


def __getattr__(name: str):  # the diffrax engine imports jax: load it on first use
    if name in ("Diffrax", "diffrax_problem", "ADJOINTS"):
        from . import diffrax_engine

        return getattr(diffrax_engine, name)
    raise AttributeError(f"module 'simdiff.ode' has no attribute {name!r}")
