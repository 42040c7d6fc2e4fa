"""Taylor coefficients to order 10 against an exact oracle, on random expression trees.

hypothesis draws expression trees (depth <= 3) over every elementwise op with
a Taylor rule; arguments of functions with a restricted domain are mapped into
it (``log(u^2 + 1/2)``, ``asin(4/5 tanh u)``, ...), so every tree is analytic
at the expansion point.  Each tree is built twice: as a sympy expression with
rational constants (the exact oracle) and over ``ops``.

The oracle's coefficients: ``sympy.series`` to order 10 took 3-127 s per
expression on the reference machine (``acos(4/5 tanh(sin x))``: 127 s), far too
slow for a property test, so the sympy expression is lambdified to mpmath and
expanded by ``mpmath.taylor`` (arbitrary-precision differentiation) at 40 and
at 60 significant digits; the two must agree to 1e-25, which bounds the
oracle's own error 15 orders below the tolerance.

Tolerance: coefficient ``c_k`` comes out of recurrences that add ``O(k)``
products per node, each rounded to float64 (eps = 2.2e-16) relative to the
largest term, which is bounded by ``M_k = max_{j<=k} |c_j|`` times the growth
of the inner series.  Over trees of depth 3 at order 10 this stays below
``1e3 * eps * M_k``; the test uses ``atol_k = 1e-10 * max(1, M_k)``, six
orders above float64 resolution yet far below the O(1) relative error a
wrong recurrence produces.
"""

from __future__ import annotations

import functools

import mpmath
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from simdiff.backends import get_ops
from simdiff.backends.taylor import TaylorOps

ORDER = 10
t = sp.Symbol("t")

# name -> (sympy builder, ops builder); the domain guards are part of both.
UNARY = {
    "negative": (lambda u: -u, lambda u, o: o.negative(u)),
    "square": (lambda u: u**2, lambda u, o: o.square(u)),
    "sqrt": (lambda u: sp.sqrt(u**2 + sp.Rational(1, 2)), lambda u, o: o.sqrt(u * u + 0.5)),
    "exp": (lambda u: sp.exp(u), lambda u, o: o.exp(u)),
    "expm1": (lambda u: sp.exp(u) - 1, lambda u, o: o.expm1(u)),
    "log": (lambda u: sp.log(u**2 + sp.Rational(1, 2)), lambda u, o: o.log(u * u + 0.5)),
    "log1p": (lambda u: sp.log(1 + u**2), lambda u, o: o.log1p(u * u)),
    "sin": (sp.sin, lambda u, o: o.sin(u)),
    "cos": (sp.cos, lambda u, o: o.cos(u)),
    "tan": (lambda u: sp.tan(sp.tanh(u)), lambda u, o: o.tan(o.tanh(u))),
    "asin": (
        lambda u: sp.asin(sp.Rational(4, 5) * sp.tanh(u)),
        lambda u, o: o.asin(0.8 * o.tanh(u)),
    ),
    "acos": (
        lambda u: sp.acos(sp.Rational(4, 5) * sp.tanh(u)),
        lambda u, o: o.acos(0.8 * o.tanh(u)),
    ),
    "atan": (sp.atan, lambda u, o: o.atan(u)),
    "sinh": (sp.sinh, lambda u, o: o.sinh(u)),
    "cosh": (sp.cosh, lambda u, o: o.cosh(u)),
    "tanh": (sp.tanh, lambda u, o: o.tanh(u)),
    "asinh": (sp.asinh, lambda u, o: o.asinh(u)),
    "acosh": (lambda u: sp.acosh(u**2 + sp.Rational(3, 2)), lambda u, o: o.acosh(u * u + 1.5)),
    "atanh": (
        lambda u: sp.atanh(sp.Rational(4, 5) * sp.tanh(u)),
        lambda u, o: o.atanh(0.8 * o.tanh(u)),
    ),
    "pow_int": (lambda u: u**3, lambda u, o: u**3),
    "pow_neg": (lambda u: (u**2 + 1) ** -2, lambda u, o: (u * u + 1.0) ** -2),
    "pow_real": (lambda u: (u**2 + 1) ** sp.Rational(-3, 2), lambda u, o: (u * u + 1.0) ** -1.5),
}
BINARY = {
    "add": (lambda a, b: a + b, lambda a, b, o: a + b),
    "subtract": (lambda a, b: a - b, lambda a, b, o: a - b),
    "multiply": (lambda a, b: a * b, lambda a, b, o: a * b),
    "divide": (lambda a, b: a / (b**2 + 1), lambda a, b, o: a / (b * b + 1.0)),
    "pow": (lambda a, b: (a**2 + 1) ** sp.sin(b), lambda a, b, o: o.pow(a * a + 1.0, o.sin(b))),
    "atan2": (lambda a, b: sp.atan2(a, b**2 + 1), lambda a, b, o: o.atan2(a, b * b + 1.0)),
}
CONSTANTS = [sp.Rational(1, 3), sp.Rational(-5, 4), sp.Integer(2)]


def _trees(depth: int):
    leaf = st.sampled_from(["x", "x", "x", *range(len(CONSTANTS))])  # mostly the variable
    if depth == 0:
        return leaf
    sub = _trees(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(sorted(UNARY)), sub),
        st.tuples(st.sampled_from(sorted(BINARY)), sub, sub),
    )


def _to_sympy(tree, x):
    if tree == "x":
        return x
    if isinstance(tree, int):
        return CONSTANTS[tree]
    if len(tree) == 2:
        return UNARY[tree[0]][0](_to_sympy(tree[1], x))
    return BINARY[tree[0]][0](_to_sympy(tree[1], x), _to_sympy(tree[2], x))


def _to_ops(tree, x, ops):
    if tree == "x":
        return x
    if isinstance(tree, int):
        return float(CONSTANTS[tree])
    if len(tree) == 2:
        return UNARY[tree[0]][1](_to_ops(tree[1], x, ops), ops)
    return BINARY[tree[0]][1](_to_ops(tree[1], x, ops), _to_ops(tree[2], x, ops), ops)


@functools.cache
def _exact_coeffs(tree, x0: sp.Rational) -> np.ndarray:
    f = sp.lambdify(t, _to_sympy(tree, t), modules="mpmath")
    runs = []
    for dps in (40, 60):
        with mpmath.workdps(dps):
            runs.append(mpmath.taylor(f, mpmath.mpf(x0.p) / x0.q, ORDER))
    assert max(abs(a - b) for a, b in zip(*runs, strict=True)) < 1e-25, "oracle did not converge"
    return np.array([float(c) for c in runs[1]])


def _taylor_coeffs(tree, x0: float, base: str) -> np.ndarray:
    b = get_ops(base)
    ops = TaylorOps(b, ORDER)
    x = ops.variable(b.asarray(np.array([x0])), b.asarray(np.ones(1)))
    y = _to_ops(tree, x, ops)
    c = y.coeffs[:, 0] if hasattr(y, "coeffs") else np.full(1, y)
    out = np.asarray(c.detach() if hasattr(c, "detach") else c, dtype=float)
    return np.concatenate([out, np.zeros(ORDER + 1 - out.size)])


def _check(tree, x0: sp.Rational, base: str) -> None:
    exact = _exact_coeffs(tree, x0)
    got = _taylor_coeffs(tree, float(x0), base)
    bound = 1e-10 * np.maximum(1.0, np.maximum.accumulate(np.abs(exact)))
    err = np.abs(got - exact)
    assert np.all(err <= bound), f"{tree} at x0={x0}: errors {err} exceed {bound}"


@pytest.mark.slow
@settings(max_examples=80)
@given(
    tree=_trees(3), x0=st.sampled_from([sp.Rational(-7, 10), sp.Rational(1, 5), sp.Rational(6, 5)])
)
def test_random_expressions_match_sympy_numpy(tree, x0):
    _check(tree, x0, "numpy")


@pytest.mark.parametrize("name", sorted(UNARY) + sorted(BINARY))
def test_each_elementwise_rule_matches_sympy_to_order_10(name, backend):
    tree = (name, ("sin", "x")) if name in UNARY else (name, ("sin", "x"), ("cos", "x"))
    _check(tree, sp.Rational(3, 10), backend)
