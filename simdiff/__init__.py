"""simdiff: higher-order derivatives of differentiable simulators on JAX and PyTorch.

One problem definition (``fn(x, ops)``), every derivative on both frameworks,
validated against SciPy finite differences and exact references, and timed
side by side.  Importing simdiff imports neither jax nor torch; a backend's
framework is imported the first time it is used.
"""

import importlib as _importlib
from typing import Any as _Any

from . import backends as backends
from . import errors as errors
from . import taylor_tensor as taylor_tensor
from ._api import Derivatives as Derivatives
from ._api import derivative as derivative
from ._api import derivative_tensor as derivative_tensor
from ._api import grad as grad
from ._api import hessian as hessian
from ._api import hvp as hvp
from ._api import jacobian as jacobian
from ._api import jvp as jvp
from ._api import taylor as taylor
from ._api import value_and_grad as value_and_grad
from ._api import vjp as vjp
from ._labelled import Labelled as Labelled
from ._operators import StochasticEstimate as StochasticEstimate
from ._operators import biharmonic as biharmonic
from ._operators import derivative_sum as derivative_sum
from ._operators import laplacian as laplacian
from ._operators import stochastic_biharmonic as stochastic_biharmonic
from ._operators import stochastic_laplacian as stochastic_laplacian
from ._params import ParamSpec as ParamSpec
from ._problem import CheckOptions as CheckOptions
from ._problem import Problem as Problem
from .backends import get_backend as get_backend
from .backends import get_ops as get_ops
from .errors import ArgumentOrderError as ArgumentOrderError
from .errors import BackendUnavailable as BackendUnavailable
from .errors import CatalogueUnavailable as CatalogueUnavailable
from .errors import DTypeError as DTypeError
from .errors import InputError as InputError
from .errors import InputTypeError as InputTypeError
from .errors import InvalidIndexError as InvalidIndexError
from .errors import LeakError as LeakError
from .errors import MemoryBudgetError as MemoryBudgetError
from .errors import MomentWarning as MomentWarning
from .errors import NeighbourListError as NeighbourListError
from .errors import NonFiniteError as NonFiniteError
from .errors import NotFoundError as NotFoundError
from .errors import OptionError as OptionError
from .errors import OutOfRangeError as OutOfRangeError
from .errors import PrecisionWarning as PrecisionWarning
from .errors import ProblemNotFound as ProblemNotFound
from .errors import ShapeError as ShapeError
from .errors import SimdiffError as SimdiffError
from .errors import SimdiffWarning as SimdiffWarning
from .errors import SolverError as SolverError
from .errors import StabilityError as StabilityError
from .errors import StationarityWarning as StationarityWarning
from .errors import StoreError as StoreError
from .errors import StructureError as StructureError
from .errors import UnsupportedError as UnsupportedError
from .errors import UsageError as UsageError

__version__ = "0.1.0"

__all__ = [
    "ArgumentOrderError",
    "BackendUnavailable",
    "CatalogueUnavailable",
    "CheckOptions",
    "DTypeError",
    "Derivatives",
    "InputError",
    "InputTypeError",
    "InvalidIndexError",
    "Labelled",
    "LeakError",
    "MemoryBudgetError",
    "MomentWarning",
    "NeighbourListError",
    "NonFiniteError",
    "NotFoundError",
    "OptionError",
    "OutOfRangeError",
    "ParamSpec",
    "PrecisionWarning",
    "Problem",
    "ProblemNotFound",
    "ShapeError",
    "SimdiffError",
    "SimdiffWarning",
    "SolverError",
    "StabilityError",
    "StationarityWarning",
    "StochasticEstimate",
    "StoreError",
    "StructureError",
    "UnsupportedError",
    "UsageError",
    "backends",
    "biharmonic",
    "check",
    "compare",
    "derivative",
    "derivative_sum",
    "derivative_tensor",
    "errors",
    "evidence",
    "get_backend",
    "get_ops",
    "grad",
    "hessian",
    "hvp",
    "jacobian",
    "jvp",
    "laplacian",
    "least_squares",
    "minimize",
    "ode",
    "pde",
    "pes",
    "sensitivity",
    "stochastic_biharmonic",
    "stochastic_laplacian",
    "store",
    "sweep",
    "taylor",
    "taylor_tensor",
    "value_and_grad",
    "vjp",
]

# Subpackages and evidence functions are imported on first access (they pull in
# h5py/scipy.optimize/matplotlib, which a plain derivative call does not need).
_LAZY_MODULES = ("ode", "pes", "pde", "sensitivity", "store", "evidence")
_LAZY_ATTRS = {
    "check": ("evidence", "check"),
    "compare": ("evidence", "compare"),
    "minimize": ("sensitivity", "minimize"),
    "least_squares": ("sensitivity", "least_squares"),
    "sweep": ("sensitivity", "sweep"),
}


def __getattr__(name: str) -> _Any:
    if name in _LAZY_ATTRS:
        module, attr = _LAZY_ATTRS[name]
        return getattr(_importlib.import_module(f"simdiff.{module}"), attr)
    if name in _LAZY_MODULES:
        return _importlib.import_module(f"simdiff.{name}")
    raise AttributeError(f"module 'simdiff' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API (``__all__``) and ``__version__``; not the modules' own imports."""
    return sorted([*__all__, "__version__"])
