"""Python scalars, numpy scalars and 0-d arrays are operands of every op, in every context.

Each case below is a call that numpy and JAX accept with a scalar (or host
numpy array) in some position; it must run in every context (numpy, jax,
torch, and the Taylor context over each) and give numpy's value in the
context's float dtype.  ``test_every_op_has_a_case`` fails when an op of
``OP_NAMES`` has no case.
"""

from __future__ import annotations

import numpy as np
import pytest

from simdiff.backends import OP_NAMES, get_backend, get_ops
from simdiff.backends._base import BINARY, UNARY
from simdiff.backends.taylor import TaylorArray, TaylorOps

CONTEXTS = ["numpy", "jax", "torch", "taylor/numpy", "taylor/jax", "taylor/torch"]
KINDS = ["float", "numpy.float64", "numpy 0-d", "native 0-d"]
DOMAIN = {"acosh": 1.5}  # scalar value per op where 0.5 is outside the domain


def _context(name):
    if name.startswith("taylor/"):
        return TaylorOps(get_ops(name.split("/")[1]), order=2)
    return get_ops(name)


def _x(ops):
    """A length-2 operand: a TaylorArray (the series x + t v) in the Taylor context."""
    if isinstance(ops, TaylorOps):
        b = ops.base
        return ops.variable(b.asarray([0.3, 0.7]), b.asarray([1.0, -1.0]))
    return ops.asarray([0.3, 0.7])


def _scalar(ops, kind, value=0.5):
    if kind == "float":
        return float(value)
    if kind == "numpy.float64":
        return np.float64(value)
    if kind == "numpy 0-d":
        return np.asarray(value)
    base = ops.base if isinstance(ops, TaylorOps) else ops
    return base.asarray(value)


def _unary(name):
    return lambda o, x, s: getattr(o, name)(s)


def _binary(name):
    return lambda o, x, s: (getattr(o, name)(x, s), getattr(o, name)(s, x), getattr(o, name)(s, s))


H = np.asarray([0.25, 0.5])  # a host (numpy) operand where an op has no 0-d form

CASES = {
    **{name: _unary(name) for name in UNARY},
    **{name: _binary(name) for name in BINARY},
    "sum": lambda o, x, s: o.sum(s),
    "prod": lambda o, x, s: o.prod(s),
    "mean": lambda o, x, s: o.mean(s),
    "max": lambda o, x, s: o.max(s),
    "min": lambda o, x, s: o.min(s),
    "cumsum": lambda o, x, s: o.cumsum(H),
    "reshape": lambda o, x, s: o.reshape(s, (1,)),
    "stack": lambda o, x, s: (o.stack([x[0], s]), o.stack([s, x[1]]), o.stack([s, s])),
    "concat": lambda o, x, s: (o.concat([x, H]), o.concat([H, x])),
    "roll": lambda o, x, s: o.roll(H, 1),
    "permute_dims": lambda o, x, s: o.permute_dims(H[None], (1, 0)),
    "expand_dims": lambda o, x, s: o.expand_dims(s, 0),
    "squeeze": lambda o, x, s: o.squeeze(H[None], 0),
    "broadcast_to": lambda o, x, s: o.broadcast_to(s, (2,)),
    "flip": lambda o, x, s: o.flip(H),
    "take": lambda o, x, s: o.take(H, [1, 0]),
    "where": lambda o, x, s: (
        o.where(x > 0.5, x, s),
        o.where(x > 0.5, s, x),
        o.where(x > 0.5, s, 2.0),
    ),
    "clip": lambda o, x, s: (o.clip(s, 0.0, 0.25), o.clip(x, s, 1.0), o.clip(x, 0.0, s)),
    "matmul": lambda o, x, s: (o.matmul(x, H), o.matmul(H, x)),
    "vecdot": lambda o, x, s: (o.vecdot(x, H), o.vecdot(H, x)),
    "einsum": lambda o, x, s: o.einsum("i,->i", x, s),
    "linalg.solve": lambda o, x, s: o.linalg.solve(np.diag(H), x),
    "fft.rfft": lambda o, x, s: o.fft.rfft(H),
    "fft.irfft": lambda o, x, s: o.fft.irfft(np.fft.rfft(H), n=2),
    "fft.fft": lambda o, x, s: o.fft.fft(H),
    "fft.ifft": lambda o, x, s: o.fft.ifft(H),
    "asarray": lambda o, x, s: o.asarray(s),
    "zeros": lambda o, x, s: o.zeros(()),
    "ones": lambda o, x, s: o.ones(()),
    "full": lambda o, x, s: o.full((2,), s),
    "zeros_like": lambda o, x, s: o.zeros_like(s),
    "ones_like": lambda o, x, s: o.ones_like(s),
    "full_like": lambda o, x, s: o.full_like(x, s),
    "arange": lambda o, x, s: o.arange(0.0, 2.0, 0.5),
    "linspace": lambda o, x, s: o.linspace(0.0, 1.0, 3),
    "eye": lambda o, x, s: o.eye(2),
    "fft.rfftfreq": lambda o, x, s: o.fft.rfftfreq(4, 0.5),
    "fft.fftfreq": lambda o, x, s: o.fft.fftfreq(4, 0.5),
    "scan": lambda o, x, s: o.scan(lambda c, _: (c * 2.0, c), s, length=3),
    "while_loop": lambda o, x, s: o.while_loop(lambda c: c < 10.0, lambda c: c * 2.0 + 1.0, s, 8),
    "cond": lambda o, x, s: (
        o.cond(s > 0.0, lambda y: y * 2.0, lambda y: y - 1.0, s),
        o.cond(x[0] > 0.5, lambda y: o.sin(y), lambda y: o.cos(y), x),
    ),
    "checkpoint": lambda o, x, s: o.checkpoint(lambda y: o.sin(y) * y)(s),
    "stop_gradient": lambda o, x, s: o.stop_gradient(s),
    "safe_where": lambda o, x, s: (
        o.safe_where(x > 0.5, x, o.sqrt, s),
        o.safe_where(s > 0.0, s, o.log, 0.0),
    ),
}


def _leaves(out):
    if isinstance(out, tuple):
        return [leaf for item in out for leaf in _leaves(item)]
    return [out]


def _numpy(a, context):
    if isinstance(a, TaylorArray):
        a = a.primal
    if isinstance(a, (float, int, np.generic, np.ndarray)):
        return np.asarray(a)
    return np.asarray(get_backend(context.split("/")[-1]).to_numpy(a))


def test_every_op_has_a_case():
    assert sorted(CASES) == sorted(OP_NAMES)


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("op", OP_NAMES)
def test_scalar_operands(op, context):
    np_ops, ops = get_ops("numpy"), _context(context)
    value = DOMAIN.get(op, 0.5)
    for kind in KINDS:  # one test per op and context keeps the run short; the message names it
        want = _leaves(CASES[op](np_ops, _x(np_ops), _scalar(np_ops, kind, value)))
        got = _leaves(CASES[op](ops, _x(ops), _scalar(ops, kind, value)))
        assert len(got) == len(want), kind
        for g, w in zip(got, want, strict=True):
            g, w = _numpy(g, context), np.asarray(w)
            assert g.shape == w.shape, (kind, g.shape, w.shape)
            if w.dtype.kind in "fc":
                assert (g.dtype.kind, g.dtype.itemsize) == (w.dtype.kind, w.dtype.itemsize), (
                    kind,
                    g.dtype,
                )
            np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-15, err_msg=kind)


@pytest.mark.parametrize("context", CONTEXTS)
def test_integer_scalars(context):
    """Python ints mix with float arrays and give floats where numpy does (``exp(2)``)."""
    ops = _context(context)
    x = _x(ops)
    np_ops = get_ops("numpy")
    xn = _x(np_ops)
    calls = [
        lambda o, x: o.maximum(x, 0),
        lambda o, x: o.minimum(1, x),
        lambda o, x: o.atan2(x, 1),
        lambda o, x: o.exp(2),
        lambda o, x: o.stack([x[0], 1]),
        lambda o, x: o.pow(x, 2),
        lambda o, x: o.divide(1, 2),
    ]
    for call in calls:
        g, w = _numpy(call(ops, x), context), np.asarray(call(np_ops, xn))
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-14)
