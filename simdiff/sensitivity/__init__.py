"""Sensitivity analysis, optimisation and parameter sweeps with exact derivatives.

- local: :func:`local_sensitivity`, :func:`fisher_information`, :func:`laplace`,
  :func:`profile_likelihood` (likelihood-ratio intervals from exact Hessians)
- global: :func:`dgsm` over :class:`Uniform`, :class:`Normal`, :class:`LogUniform` inputs
- moments: :func:`moments` (mean and variance of ``f(X)``, Gaussian ``X``, by Taylor expansion)
- optimisation: :func:`minimize`, :func:`least_squares` (also ``simdiff.minimize``, ...)
- sweeps: :func:`sweep` (in process or on a ``dask.distributed`` cluster, HDF5, resumable)
"""

from ._dgsm import DGSMResult as DGSMResult
from ._dgsm import batched_value_and_grad as batched_value_and_grad
from ._dgsm import dgsm as dgsm
from ._distributions import Distribution as Distribution
from ._distributions import LogUniform as LogUniform
from ._distributions import Normal as Normal
from ._distributions import Uniform as Uniform
from ._distributions import as_distributions as as_distributions
from ._distributions import sample as sample
from ._local import FisherInformation as FisherInformation
from ._local import LaplaceResult as LaplaceResult
from ._local import LocalSensitivity as LocalSensitivity
from ._local import fisher_information as fisher_information
from ._local import laplace as laplace
from ._local import local_sensitivity as local_sensitivity
from ._moments import Moments as Moments
from ._moments import MomentWarning as MomentWarning
from ._moments import moments as moments
from ._optimize import FitResult as FitResult
from ._optimize import least_squares as least_squares
from ._optimize import minimize as minimize
from ._profile import SIDE_STATUS as SIDE_STATUS
from ._profile import Profile as Profile
from ._profile import ProfileLikelihood as ProfileLikelihood
from ._profile import profile_likelihood as profile_likelihood
from ._sweep import STATUS as STATUS
from ._sweep import SweepResult as SweepResult
from ._sweep import resolve_problem as resolve_problem
from ._sweep import sweep as sweep
