"""Helpers shared by the sensitivity modules."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._api import Derivatives, cached_derivatives
from .._problem import Problem
from ..errors import InputTypeError, ShapeError


def check_problem(problem: Any) -> Problem:
    """``problem`` itself, or ``TypeError`` naming what was given instead."""
    if not isinstance(problem, Problem):
        raise InputTypeError(f"expected a simdiff.Problem; got {type(problem).__name__}")
    return problem


def point(problem: Problem, x: Any, what: str = "x") -> np.ndarray:
    """``x`` (default ``problem.x0``) as a float64 array of shape ``(n,)``."""
    x = problem.x0 if x is None else np.asarray(x, dtype=np.float64)
    if x.shape != (problem.n,):
        raise ShapeError(
            f"{what} for problem {problem.name!r} must have shape ({problem.n},); got {x.shape}"
        )
    return x


def derivatives(
    problem: Problem, backend: str, *, dtype: Any = None, check_finite: bool = True
) -> Derivatives:
    """The problem's shared :class:`~simdiff.Derivatives` (see ``cached_derivatives``)."""
    return cached_derivatives(problem, backend, dtype=dtype, check_finite=check_finite)
