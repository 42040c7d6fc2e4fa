"""Sensitivity analysis, optimisation and parameter sweeps with exact derivatives."""

from .dgsm import DGSMResult as DGSMResult
from .dgsm import batched_value_and_grad as batched_value_and_grad
from .dgsm import dgsm as dgsm
from .distributions import Distribution as Distribution
from .distributions import LogUniform as LogUniform
from .distributions import Normal as Normal
from .distributions import Uniform as Uniform
from .distributions import as_distributions as as_distributions
from .distributions import sample as sample
from .local import FisherInformation as FisherInformation
from .local import LaplaceResult as LaplaceResult
from .local import LocalSensitivity as LocalSensitivity
from .local import fisher_information as fisher_information
from .local import laplace as laplace
from .local import local_sensitivity as local_sensitivity
from .optimize import least_squares as least_squares
from .optimize import minimize as minimize
from .sweep import SweepResult as SweepResult
from .sweep import resolve_problem as resolve_problem
from .sweep import sweep as sweep
