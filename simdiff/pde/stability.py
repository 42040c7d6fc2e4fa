"""Explicit time-step limits for the method of lines, and the error they raise.

The check lives with the ODE solvers (:mod:`simdiff.ode.stability`), which
use it too; it is re-exported here for the PDE layer.
"""

from __future__ import annotations

from simdiff.errors import StabilityError
from simdiff.ode.stability import check_explicit_step, real_stability_interval

__all__ = ["StabilityError", "check_explicit_step", "real_stability_interval"]
