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
