"""simdiff: higher-order derivatives of differentiable simulators on JAX and PyTorch.

One problem definition (``fn(x, ops)``), every derivative on both frameworks,
validated against SciPy finite differences and exact references, and timed
side by side.  Importing simdiff imports neither jax nor torch; a backend's
framework is imported the first time it is used.
"""

import importlib as _importlib
from typing import Any as _Any

from simdiff import backends as backends
from simdiff import errors as errors
from simdiff._version import __version__ as __version__
from simdiff.backends import get_backend as get_backend
from simdiff.backends import get_ops as get_ops
from simdiff.core import taylor_tensor as taylor_tensor
from simdiff.core.derivatives import Derivatives as Derivatives
from simdiff.core.kinds import derivative as derivative
from simdiff.core.kinds import derivative_tensor as derivative_tensor
from simdiff.core.kinds import grad as grad
from simdiff.core.kinds import hessian as hessian
from simdiff.core.kinds import hvp as hvp
from simdiff.core.kinds import jacobian as jacobian
from simdiff.core.kinds import jvp as jvp
from simdiff.core.kinds import taylor as taylor
from simdiff.core.kinds import value_and_grad as value_and_grad
from simdiff.core.kinds import vjp as vjp
from simdiff.core.labelled import Labelled as Labelled
from simdiff.core.operators import StochasticEstimate as StochasticEstimate
from simdiff.core.operators import biharmonic as biharmonic
from simdiff.core.operators import derivative_sum as derivative_sum
from simdiff.core.operators import laplacian as laplacian
from simdiff.core.operators import stochastic_biharmonic as stochastic_biharmonic
from simdiff.core.operators import stochastic_laplacian as stochastic_laplacian
from simdiff.core.params import ParamSpec as ParamSpec
from simdiff.core.problem import CheckOptions as CheckOptions
from simdiff.core.problem import Problem as Problem
from simdiff.errors import ArgumentOrderError as ArgumentOrderError
from simdiff.errors import AttributeNotFoundError as AttributeNotFoundError
from simdiff.errors import BackendUnavailable as BackendUnavailable
from simdiff.errors import CacheWarning as CacheWarning
from simdiff.errors import CatalogueUnavailable as CatalogueUnavailable
from simdiff.errors import DTypeError as DTypeError
from simdiff.errors import InputError as InputError
from simdiff.errors import InputTypeError as InputTypeError
from simdiff.errors import InvalidIndexError as InvalidIndexError
from simdiff.errors import LeakError as LeakError
from simdiff.errors import MemoryBudgetError as MemoryBudgetError
from simdiff.errors import MomentWarning as MomentWarning
from simdiff.errors import NeighbourListError as NeighbourListError
from simdiff.errors import NonFiniteError as NonFiniteError
from simdiff.errors import NotFoundError as NotFoundError
from simdiff.errors import OptionError as OptionError
from simdiff.errors import OutOfRangeError as OutOfRangeError
from simdiff.errors import PrecisionWarning as PrecisionWarning
from simdiff.errors import ProblemNotFound as ProblemNotFound
from simdiff.errors import PropertyUnavailable as PropertyUnavailable
from simdiff.errors import ShapeError as ShapeError
from simdiff.errors import SimdiffError as SimdiffError
from simdiff.errors import SimdiffWarning as SimdiffWarning
from simdiff.errors import SolverError as SolverError
from simdiff.errors import StabilityError as StabilityError
from simdiff.errors import StationarityWarning as StationarityWarning
from simdiff.errors import StoreError as StoreError
from simdiff.errors import StructureError as StructureError
from simdiff.errors import UnsupportedError as UnsupportedError
from simdiff.errors import UsageError as UsageError

__all__ = [
    "ArgumentOrderError",
    "AttributeNotFoundError",
    "BackendUnavailable",
    "CacheWarning",
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
    "PropertyUnavailable",
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
    "jax",
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
    "torch",
    "value_and_grad",
    "vjp",
]

# Subpackages and evidence functions are imported on first access (they pull in
# h5py/scipy.optimize/matplotlib, which a plain derivative call does not need); the
# function faces simdiff.jax and simdiff.torch import their framework.
_LAZY_MODULES = ("ode", "pes", "pde", "sensitivity", "store", "evidence", "jax", "torch")
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
    raise AttributeNotFoundError(f"module 'simdiff' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API (``__all__``) and ``__version__``; not the modules' own imports."""
    return sorted([*__all__, "__version__"])
