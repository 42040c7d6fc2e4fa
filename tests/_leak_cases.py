"""Shared by the torch leak-guard tests: a problem that leaks only away from x0, and a call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import simdiff

#: The point the problem is built at (its branch without the leak) and one past the branch.
X0 = np.array([0.5, 2.0])
FAR = np.array([2.0, 3.0])


def leaking_problem(cut: Callable[[Any], Any], name: str) -> simdiff.Problem:
    """``x0 x1 + x1^2``, with ``cut(x1)`` for ``x1`` where ``x0 > 1`` (at FAR, not at X0)."""

    def fn(x, ops):
        if float(ops.stop_gradient(x[0])) > 1.0:
            return x[0] * cut(x[1]) + x[1] ** 2
        return x[0] * x[1] + x[1] ** 2

    return simdiff.Problem(fn, x0=X0, name=name, backends=("torch",))


def call(d: simdiff.Derivatives, kind: str, x: np.ndarray) -> Any:
    """``kind`` ("grad", "hessian", "hvp" along e_0) of ``d`` at ``x``."""
    if kind == "hvp":
        return d.hvp(np.array([1.0, 0.0]), x)
    return getattr(d, kind)(x)
