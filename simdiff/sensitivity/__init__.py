"""Sensitivity analysis, optimisation and parameter sweeps with exact derivatives.

- local: :func:`local_sensitivity`, :func:`fisher_information`, :func:`laplace`,
  :func:`profile_likelihood` (likelihood-ratio intervals from exact Hessians)
- global: :func:`dgsm` over :class:`Uniform`, :class:`Normal`, :class:`LogUniform` inputs
- moments: :func:`moments` (mean and variance of ``f(X)``, Gaussian ``X``, by Taylor expansion)
- optimisation: :func:`minimize`, :func:`least_squares` (also ``simdiff.minimize``, ...)
- sweeps: :func:`sweep` (in process or on a ``dask.distributed`` cluster, HDF5, resumable)
"""

from simdiff.core.optimize import FitResult as FitResult
from simdiff.core.optimize import least_squares as least_squares
from simdiff.core.optimize import minimize as minimize
from simdiff.sensitivity._dgsm import DGSMResult as DGSMResult
from simdiff.sensitivity._dgsm import batched_value_and_grad as batched_value_and_grad
from simdiff.sensitivity._dgsm import dgsm as dgsm
from simdiff.sensitivity._distributions import Distribution as Distribution
from simdiff.sensitivity._distributions import LogUniform as LogUniform
from simdiff.sensitivity._distributions import Normal as Normal
from simdiff.sensitivity._distributions import Uniform as Uniform
from simdiff.sensitivity._distributions import as_distributions as as_distributions
from simdiff.sensitivity._distributions import sample as sample
from simdiff.sensitivity._local import FisherInformation as FisherInformation
from simdiff.sensitivity._local import LaplaceResult as LaplaceResult
from simdiff.sensitivity._local import LocalSensitivity as LocalSensitivity
from simdiff.sensitivity._local import fisher_information as fisher_information
from simdiff.sensitivity._local import laplace as laplace
from simdiff.sensitivity._local import local_sensitivity as local_sensitivity
from simdiff.sensitivity._moments import Moments as Moments
from simdiff.sensitivity._moments import MomentWarning as MomentWarning
from simdiff.sensitivity._moments import moments as moments
from simdiff.sensitivity._profile import SIDE_STATUS as SIDE_STATUS
from simdiff.sensitivity._profile import Profile as Profile
from simdiff.sensitivity._profile import ProfileLikelihood as ProfileLikelihood
from simdiff.sensitivity._profile import profile_likelihood as profile_likelihood
from simdiff.sensitivity._sweep import STATUS as STATUS
from simdiff.sensitivity._sweep import SweepResult as SweepResult
from simdiff.sensitivity._sweep import resolve_problem as resolve_problem
from simdiff.sensitivity._sweep import sweep as sweep
