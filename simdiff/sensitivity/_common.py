"""Helpers shared by the sensitivity modules."""

from __future__ import annotations

from typing import Any

import numpy as np

from simdiff.core.config import Config
from simdiff.core.derivatives import Derivatives, cached_derivatives
from simdiff.core.labelled import Labelled, columns_table
from simdiff.core.params import ParamSpec
from simdiff.core.problem import Problem
from simdiff.errors import InputTypeError, ShapeError


def check_problem(problem: Any) -> Problem:
    """``problem`` itself, or ``TypeError`` naming what was given instead."""
    if not isinstance(problem, Problem):
        raise InputTypeError(f"expected a simdiff.Problem; got {type(problem).__name__}")
    return problem


def point(problem: Problem, x: Any, what: str = "x") -> np.ndarray:
    """``x`` (default ``problem.x0``; flat or in the problem's structure) as a float64
    array of shape ``(n,)``."""
    x = problem.x0 if x is None else np.asarray(problem.flatten(x, what), dtype=np.float64)
    if x.shape != (problem.n,):
        raise ShapeError(
            f"{what} for problem {problem.name!r} must have shape ({problem.n},); got {x.shape}"
        )
    return x


def labelled(problem: Problem, matrix: Any) -> Labelled | None:
    """``matrix`` (``(n, n)``, or None) with the problem's parameter names on both axes."""
    if matrix is None:
        return None
    spec = problem.param_spec or ParamSpec.named(problem.param_names)
    return Labelled(np.asarray(matrix), spec, 2)


def derivatives(problem: Problem, config: Config) -> Derivatives:
    """The problem's shared :class:`~simdiff.Derivatives` for ``config`` (``cached_derivatives``).

    The public functions build ``config`` once from their keywords (``backend=``,
    ``compile=``); nothing below them takes a loose flag.
    """
    return cached_derivatives(problem, config=config)


def spec_of(problem: Problem) -> ParamSpec:
    """The problem's parameter structure, or a flat one named by ``problem.param_names``."""
    return problem.param_spec or ParamSpec.named(problem.param_names)


class Named:
    """Parameter names for a result (a mixin: the result has a field ``spec``).

    ``names`` (one per parameter, flat order), ``tree(attr)`` (a vector field
    in the parameters' structure), ``labelled(attr)`` (a matrix field as a
    :class:`simdiff.Labelled`, looked up by name pairs), ``table()`` and
    ``str(result)``: the labelled table.
    """

    spec: ParamSpec | None
    _columns: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """One name per parameter, in flat order (``"alpha"``, ``"k[0]"``, or ``"x[0]"``)."""
        return [] if self.spec is None else list(self.spec.names)

    def tree(self, attr: str) -> Any:
        """The vector field ``attr`` (last axis ``n``) in the structure of the parameters."""
        value = getattr(self, attr)
        return None if value is None or self.spec is None else self.spec.unflatten(value)

    def labelled(self, attr: str) -> Labelled | None:
        """The matrix field ``attr`` (``(n, n)``) with the parameter names on both axes."""
        value = getattr(self, attr)
        return None if value is None or self.spec is None else Labelled(value, self.spec, 2)

    def _table_columns(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in self._columns if getattr(self, c) is not None}

    def table(self, digits: int = 6) -> str:
        """One row per parameter, one column per per-parameter result."""
        cols = self._table_columns()
        if not cols or self.spec is None:
            return ""
        return columns_table(cols, self.names, digits)

    def __str__(self) -> str:
        message = getattr(self, "message", "")
        return self.table() + (f"\n{message}" if message else "")
