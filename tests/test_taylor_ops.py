"""Every op of the ``ops`` namespace has a Taylor rule, checked against nested AD.

Each case is a small problem ``fn(x, ops)`` that pushes a Taylor array
through the op (mixing plain operands where the op takes several).  Its
Taylor coefficients, scaled by ``k!``, must equal the nested-``jvp``
directional derivatives of orders 0..3 computed by torch.func on the same
function (an independent code path: no Taylor rule is involved).  Tolerance:
``1e-10`` relative to the size of the derivative; both computations are
float64 chains of a few dozen operations whose rounding error is ~1e-14.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import simdiff
from simdiff.backends import OP_NAMES
from simdiff.backends.numpy import NumpyOps
from simdiff.backends.taylor import TaylorOps
from simdiff.errors import UnsupportedError

X0 = np.array([0.3, -0.2, 0.5])
V = np.array([0.7, -0.4, 0.9])
ORDER = 3


def _outer(x, ops):
    return x[:, None] * ops.cos(x)[None, :]


def _mat(x, ops):
    return _outer(x, ops) + 3.0 * ops.eye(3)


def _scan(x, ops):
    def step(c, xi):
        c = c * ops.cos(xi) + xi**2
        return c, c * xi

    c, ys = ops.scan(step, x[0], x)
    return ops.sum(ys) + c


# torch 2.13's forward-over-forward rule of linalg.solve loses half of the second
# derivative (nested jvp of t -> solve(A0 + t A1, b) gives half the finite-difference
# value); JAX's nested jvp is right, so it is the reference there.
NESTED_REFERENCE = {"linalg.solve": "jax", "solve-plain-rhs": "jax"}

CASES = {
    # unary
    "abs": lambda x, ops: ops.abs(x) * x,
    "negative": lambda x, ops: ops.negative(ops.sin(x)),
    "sign": lambda x, ops: ops.sign(x) * ops.exp(x),
    "floor": lambda x, ops: ops.floor(3.0 * x) * ops.exp(x),
    "round": lambda x, ops: ops.round(3.0 * x) * ops.exp(x),
    "sqrt": lambda x, ops: ops.sqrt(x * x + 1.0),
    "square": lambda x, ops: ops.square(ops.sin(x)),
    "exp": lambda x, ops: ops.exp(x),
    "expm1": lambda x, ops: ops.expm1(x),
    "log": lambda x, ops: ops.log(x * x + 0.5),
    "log1p": lambda x, ops: ops.log1p(x),
    "sin": lambda x, ops: ops.sin(x),
    "cos": lambda x, ops: ops.cos(x),
    "tan": lambda x, ops: ops.tan(x),
    "asin": lambda x, ops: ops.asin(x),
    "acos": lambda x, ops: ops.acos(x),
    "atan": lambda x, ops: ops.atan(2.0 * x),
    "sinh": lambda x, ops: ops.sinh(x),
    "cosh": lambda x, ops: ops.cosh(x),
    "tanh": lambda x, ops: ops.tanh(x),
    "asinh": lambda x, ops: ops.asinh(x),
    "acosh": lambda x, ops: ops.acosh(x * x + 1.5),
    "atanh": lambda x, ops: ops.atanh(x),
    "isfinite": lambda x, ops: ops.where(ops.isfinite(x), x**2, 0.0),
    # binary
    "add": lambda x, ops: ops.add(x, ops.sin(x)) + ops.add(1.0, x),
    "subtract": lambda x, ops: (
        ops.subtract(x, ops.sin(x)) - ops.subtract(1.0, x) + ops.subtract(x, 2.0)
    ),
    "multiply": lambda x, ops: ops.multiply(x, ops.sin(x)),
    "divide": lambda x, ops: ops.divide(ops.sin(x), 2.0 + x) + ops.divide(1.0, 2.0 + x),
    "pow": lambda x, ops: ops.pow(x * x + 1.0, x) + ops.pow(x + 2.0, 1.7) + ops.pow(2.0, x),
    "atan2": lambda x, ops: ops.atan2(x, x * x + 1.0),
    "maximum": lambda x, ops: ops.maximum(x, 0.1 * x * x) + ops.maximum(x, ops.zeros(3)),
    "minimum": lambda x, ops: ops.minimum(x, 0.1 * x * x) + ops.minimum(ops.zeros(3), x),
    # reductions
    "sum": lambda x, ops: ops.sum(x**3),
    "prod": lambda x, ops: ops.prod(x + 2.0) + ops.sum(ops.prod(_outer(x, ops), axis=0)),
    "mean": lambda x, ops: ops.mean(ops.sin(x)),
    "max": lambda x, ops: ops.max(ops.sin(x)) + ops.sum(ops.max(_outer(x, ops), axis=1)),
    "min": lambda x, ops: ops.min(ops.sin(x)),
    "cumsum": lambda x, ops: ops.cumsum(x**2),
    # shape
    "reshape": lambda x, ops: ops.reshape(_outer(x, ops), (9,)),
    "stack": lambda x, ops: ops.reshape(ops.stack([x, x**2, ops.ones(3)], axis=1), (-1,)),
    "concat": lambda x, ops: ops.concat([x, ops.sin(x), ops.zeros(2)]),
    "roll": lambda x, ops: ops.roll(x**2, 1) * x,
    "permute_dims": lambda x, ops: ops.reshape(ops.permute_dims(_outer(x, ops), (1, 0)), (9,)),
    "expand_dims": lambda x, ops: ops.reshape(ops.expand_dims(x, 0) * x[:, None], (9,)),
    "squeeze": lambda x, ops: ops.squeeze(x[None, :] ** 2, 0),
    "broadcast_to": lambda x, ops: ops.reshape(ops.broadcast_to(x**2, (2, 3)), (6,)),
    "flip": lambda x, ops: ops.flip(x) * x,
    "take": lambda x, ops: ops.take(x**2, ops.asarray(np.array([2, 0])), axis=0),
    "where": lambda x, ops: ops.where(x > 0, ops.sin(x), ops.cos(x)),
    "safe_where": lambda x, ops: ops.safe_where(x > 0, x, ops.sqrt, lambda y: ops.exp(y) * y),
    "clip": lambda x, ops: ops.clip(x, -0.1, 0.4) * x,
    # linear
    "matmul": lambda x, ops: ops.matmul(_mat(x, ops), x) + ops.matmul(x, ops.eye(3)),
    "vecdot": lambda x, ops: ops.vecdot(x, ops.sin(x)),
    "einsum": lambda x, ops: (
        ops.einsum("ij,j->i", _mat(x, ops), x) + ops.einsum("ii", _mat(x, ops))
    ),
    "linalg.solve": lambda x, ops: ops.linalg.solve(_mat(x, ops), x),
    "fft.rfft": lambda x, ops: ops.sum(ops.fft.rfft(x**2).real ** 2 + ops.fft.rfft(x).imag ** 2),
    "fft.irfft": lambda x, ops: ops.fft.irfft(ops.fft.rfft(x**3), n=3),
    "fft.fft": lambda x, ops: ops.sum(ops.fft.fft(x**2).real * ops.fft.fft(x).imag),
    "fft.ifft": lambda x, ops: ops.fft.ifft(ops.fft.fft(ops.sin(x))).real,
    # creation: plain constants mixing with Taylor arrays
    "asarray": lambda x, ops: x * ops.asarray([1.0, 2.0, 3.0]),
    "zeros": lambda x, ops: x**2 + ops.zeros(3),
    "ones": lambda x, ops: x**2 * ops.ones(3),
    "full": lambda x, ops: x**2 * ops.full(3, 2.0),
    "zeros_like": lambda x, ops: ops.zeros_like(x) + x**2,
    "ones_like": lambda x, ops: ops.ones_like(x) * ops.sin(x),
    "full_like": lambda x, ops: ops.full_like(x, 3.0) * ops.sin(x),
    "arange": lambda x, ops: x * ops.arange(1.0, 4.0),
    "linspace": lambda x, ops: x**2 * ops.linspace(0.0, 1.0, 3),
    "eye": lambda x, ops: ops.eye(3) @ (x**3),
    "fft.rfftfreq": lambda x, ops: ops.sum(ops.fft.rfftfreq(4) * x**2),
    "fft.fftfreq": lambda x, ops: ops.sum(ops.fft.fftfreq(3) * x**2),
    # control
    "scan": _scan,
    "while_loop": lambda x, ops: ops.while_loop(
        lambda c: c[1] < 3.0, lambda c: (ops.sin(c[0]) + x, c[1] + 1.0), (x, 0.0), 10
    )[0],
    "cond": lambda x, ops: ops.cond(x[0] > 0.0, lambda y: y * ops.exp(y), lambda y: -y, x),
    "checkpoint": lambda x, ops: ops.checkpoint(lambda y: ops.sin(y) * y)(x),
    "stop_gradient": lambda x, ops: x**2 + ops.stop_gradient(x) * x,
}

# Further argument patterns of the rules (axis=None, keepdims, tuples, several
# Taylor operands in einsum, Taylor matrices in solve with a plain right-hand side).
VARIANTS = {
    "prod-keepdims": lambda x, ops: ops.reshape(
        ops.prod(_outer(x, ops), axis=1, keepdims=True), (3,)
    ),
    "prod-tuple": lambda x, ops: ops.prod(_outer(x, ops) + 1.0, axis=(0, 1)),
    "max-keepdims": lambda x, ops: ops.reshape(
        ops.max(_outer(x, ops), axis=0, keepdims=True), (3,)
    ),
    "mean-axis": lambda x, ops: ops.mean(_outer(x, ops), axis=-1),
    "cumsum-none": lambda x, ops: ops.cumsum(_outer(x, ops)),
    "roll-none": lambda x, ops: ops.reshape(ops.roll(_outer(x, ops), 2), (9,)),
    "roll-axis": lambda x, ops: ops.reshape(ops.roll(_outer(x, ops), 1, axis=1), (9,)),
    "take-none": lambda x, ops: ops.take(_outer(x, ops), ops.asarray(np.array([0, 4, 8]))),
    "squeeze-tuple": lambda x, ops: ops.squeeze(x[None, :, None] ** 2, (0, 2)),
    "flip-none": lambda x, ops: ops.reshape(ops.flip(_outer(x, ops)), (9,)),
    "einsum-3": lambda x, ops: ops.einsum("i,ij,j->", x, _mat(x, ops), ops.sin(x)),
    "einsum-implicit": lambda x, ops: ops.einsum("ij,jk", _mat(x, ops), _outer(x, ops))[0],
    "solve-plain-rhs": lambda x, ops: ops.linalg.solve(_mat(x, ops), ops.ones(3)),
    "solve-plain-matrix": lambda x, ops: ops.linalg.solve(
        3.0 * ops.eye(3), ops.stack([x, x**2], 1)
    )[:, 1],
    "matmul-vec-vec": lambda x, ops: ops.matmul(x, ops.sin(x)),
    "matmul-batched": lambda x, ops: ops.reshape(
        ops.matmul(ops.stack([_mat(x, ops), _outer(x, ops)]), x), (6,)
    ),
    "stack-neg-axis": lambda x, ops: ops.reshape(ops.stack([x, ops.sin(x)], axis=-1), (6,)),
    "getitem": lambda x, ops: _outer(x, ops)[1:, ::2][:, 0] + x[ops.asarray(np.array([2, 0]))],
    "scan-plain-xs": lambda x, ops: ops.scan(lambda c, a: (c * a + x, c), x, ops.arange(1.0, 4.0))[
        0
    ],
    "rpow-rdiv": lambda x, ops: 2.0**x + 1.0 / (x + 2.0) - (3.0 - x) + 2.0 * x,
}
CASES_ALL = {**CASES, **VARIANTS}


def test_every_op_has_a_taylor_case_and_rule():
    missing = sorted(set(OP_NAMES) - set(CASES))
    assert not missing, f"ops without a Taylor test: {missing}"
    ops = TaylorOps(NumpyOps(), 2)
    for name in OP_NAMES:
        obj = ops
        for part in name.split("."):
            obj = getattr(obj, part)  # raises UnsupportedError if the rule is missing
        assert callable(obj), name
    for const in ("pi", "e", "inf", "dtype"):
        assert getattr(ops, const) == getattr(NumpyOps(), const)
    assert ops.name == "taylor"


def test_missing_rule_names_op_and_context():
    ops = TaylorOps(NumpyOps(), 2)
    with pytest.raises(UnsupportedError, match=r"ops\.erf .*'taylor' context"):
        _ = ops.erf


@functools.cache
def _reference(name: str) -> np.ndarray:
    """c_k = f^(k)/k! from nested torch.func jvp (no Taylor rule involved), k = 0..ORDER."""
    p = simdiff.Problem(CASES_ALL[name], x0=X0, name=name)
    be = NESTED_REFERENCE.get(name, "torch")
    d = [simdiff.derivative(p, k, V, backend=be, method="nested") for k in range(ORDER + 1)]
    return np.stack([np.asarray(dk) / math.factorial(k) for k, dk in enumerate(d)])


@pytest.mark.parametrize("name", sorted(CASES_ALL))
@pytest.mark.parametrize("base", ["numpy", "jax", "torch"])
def test_op_rule_matches_nested_ad(name, base):
    fn = CASES_ALL[name]
    coeffs = simdiff.taylor(simdiff.Problem(fn, x0=X0, name=name), ORDER, V, X0, backend=base)
    ref = _reference(name)
    scale = np.maximum(1.0, np.abs(ref))
    np.testing.assert_allclose(coeffs / scale, ref / scale, rtol=0, atol=1e-10, err_msg=name)
