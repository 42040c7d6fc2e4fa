"""Collapsed Taylor mode: every op's rule, on every base, against separate Taylor passes.

Reference: ``sum_d w_d K! c_{K,d}`` from ``D`` ordinary Taylor passes, one per
direction (the ordinary rules are checked against nested AD in
test_taylor_ops.py).  Each case pushes a collapsed array through one op (the
cases of test_taylor_ops.py); the weights are signed, so a rule that dropped or
double-counted a per-direction term could not agree by accident.  Tolerance
``1e-10`` relative to the size of the value (float64 chains of a few dozen ops).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_taylor_ops import CASES, CASES_ALL, NESTED_REFERENCE, X0

import simdiff
from simdiff.backends import OP_NAMES, get_backend
from simdiff.backends.numpy import NumpyOps
from simdiff.backends.taylor import taylor_function
from simdiff.backends.taylor.collapsed import CollapsedOps, CollapsedSeries, collapsed_function
from simdiff.errors import UnsupportedError

RNG = np.random.default_rng(17)
V = RNG.normal(size=(4, 3))
W = np.array([0.7, -1.3, 0.4, 2.0])


def _reference(name: str, order: int) -> np.ndarray:
    g = taylor_function(simdiff.Problem(CASES_ALL[name], x0=X0), NumpyOps(), order)
    return sum(W[d] * g(X0, V[d])[order] for d in range(len(W))) * math.factorial(order)


def _close(got, ref, name):
    scale = np.maximum(1.0, np.abs(ref))
    np.testing.assert_allclose(got / scale, ref / scale, rtol=0, atol=1e-10, err_msg=name)


@pytest.fixture(autouse=True)
def _fresh_rng(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test draws from a generator of its own: what it draws does not depend on which
    of this module's tests ran before it in the process (xdist's work stealing splits a
    module between workers, so that order changes from run to run)."""
    monkeypatch.setitem(globals(), "RNG", np.random.default_rng(1017))


def test_every_op_has_a_collapsed_rule():
    assert not sorted(set(OP_NAMES) - set(CASES))
    ops = CollapsedOps(NumpyOps(), 2, 3)
    for name in OP_NAMES:
        obj = ops
        for part in name.split("."):
            obj = getattr(obj, part)
        assert callable(obj), name


def test_op_without_a_collapsed_rule_is_named():
    ops = CollapsedOps(NumpyOps(), 2, 3)
    with pytest.raises(UnsupportedError, match=r"ops\.erf .*'collapsed taylor' context"):
        _ = ops.erf


@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.parametrize("name", sorted(CASES_ALL))
def test_collapsed_rule_numpy(name, order):
    p = simdiff.Problem(CASES_ALL[name], x0=X0)
    got = collapsed_function(p, NumpyOps(), order)(X0, V, W)
    _close(got, _reference(name, order), name)


def _jax_vmapped(p, order):
    import jax

    be = get_backend("jax")
    g = jax.jit(jax.vmap(collapsed_function(p, be.ops(), order), in_axes=(0, None, None)))
    return lambda x, v, w: np.asarray(g(be.from_numpy(x, np.float64), v, w))


def _torch_vmapped(p, order):
    import torch

    be = get_backend("torch")
    g = torch.func.vmap(collapsed_function(p, be.ops(), order), in_dims=(0, None, None))
    return lambda x, v, w: g(*(torch.as_tensor(a) for a in (x, v, w))).numpy()


NAMES = sorted(CASES_ALL)


def _all_cases(x, ops):
    """Every case in one function (one compilation per base): outputs raveled and joined."""
    return ops.concat([ops.reshape(CASES_ALL[name](x, ops), (-1,)) for name in NAMES])


def _slices():
    out, start = {}, 0
    for name in NAMES:
        size = int(np.size(CASES_ALL[name](X0, NumpyOps())))
        out[name] = slice(start, start + size)
        start += size
    return out


@pytest.mark.parametrize("base", ["jax", "torch"])
def test_collapsed_rules_batched(base):
    """Every case under jax.jit + jax.vmap and torch.func.vmap over two points (order 2)."""
    p = simdiff.Problem(_all_cases, x0=X0)
    g = (_jax_vmapped if base == "jax" else _torch_vmapped)(p, 2)
    xs = np.stack([X0, X0 + 0.01])
    got = g(xs, V, W)
    ref = np.stack([collapsed_function(p, NumpyOps(), 2)(x, V, W) for x in xs])
    for name, sl in _slices().items():  # the numpy collapsed rules are checked above
        _close(got[:, sl], ref[:, sl], name)


def test_groups_give_one_sum_per_group():
    p = simdiff.Problem(CASES["tanh"], x0=X0)
    Wg = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, -1.0, 0.0, 0.5]])
    got = collapsed_function(p, NumpyOps(), 3, grouped=True)(X0, V, Wg)
    g = taylor_function(p, NumpyOps(), 3)
    per = np.stack([g(X0, V[d])[3] * 6.0 for d in range(4)])
    _close(got, Wg @ per, "groups")


def test_bad_order():
    with pytest.raises(ValueError, match="order must be an integer >= 1"):
        CollapsedOps(NumpyOps(), 0, 3)


M1 = RNG.normal(size=(5, 3))
M2 = RNG.normal(size=(3, 4))


def _first_layer(x, ops):
    """A plain matrix times the variable itself (both sides), then nonlinear ops."""
    a = ops.tanh(ops.matmul(ops.asarray(M1), x))
    b = ops.sin(ops.matmul(x, ops.asarray(M2)))
    return ops.concat([a * a, ops.exp(b), ops.matmul(ops.asarray(M1), x) * x[0]])


@pytest.mark.parametrize("order", [1, 2, 3])
def test_matrix_times_the_variable(order):
    """The rows of the variable are mapped apart (shared by every point): same values."""
    p = simdiff.Problem(_first_layer, x0=X0)
    g = taylor_function(p, NumpyOps(), order)
    ref = sum(W[d] * g(X0, V[d])[order] for d in range(len(W))) * math.factorial(order)
    _close(collapsed_function(p, NumpyOps(), order)(X0, V, W), ref, "first layer")
    xs = np.stack([X0, X0 - 0.2])
    for make in (_jax_vmapped, _torch_vmapped):
        got = make(p, order)(xs, V, W)
        for i, x in enumerate(xs):
            ref = sum(W[d] * g(x, V[d])[order] for d in range(len(W))) * math.factorial(order)
            _close(got[i], ref, f"first layer, {make.__name__}, point {i}")


def test_unit_weights_skip_the_product():
    """``unit=True`` ignores ``w`` and sums with unit weights."""
    p = simdiff.Problem(CASES["tanh"], x0=X0)
    got = collapsed_function(p, NumpyOps(), 2, unit=True)(X0, V, np.full(4, np.nan))
    _close(got, collapsed_function(p, NumpyOps(), 2)(X0, V, np.ones(4)), "unit")


def _generic(monkeypatch):
    """Route orders 1 and 2 through the expanded form (the rule of orders >= 3)."""
    monkeypatch.setattr(CollapsedSeries, "_fast", lambda self: False)


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("name", sorted(CASES_ALL))
def test_written_rules_match_the_generic_path(name, order, monkeypatch):
    """The hand-written order-1/2 rules against the expanded form, to 1e-12."""
    p = simdiff.Problem(CASES_ALL[name], x0=X0)
    fast = collapsed_function(p, NumpyOps(), order)(X0, V, W)
    _generic(monkeypatch)
    generic = collapsed_function(p, NumpyOps(), order)(X0, V, W)
    scale = np.maximum(1.0, np.abs(generic))
    np.testing.assert_allclose(fast / scale, generic / scale, rtol=0, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("name", sorted(CASES_ALL))
def test_written_rules_match_nested_ad(name):
    """Order 2 against nested AD (torch.func; JAX where torch's rule is wrong), to 1e-12."""
    p = simdiff.Problem(CASES_ALL[name], x0=X0, name=name)
    be = NESTED_REFERENCE.get(name, "torch")
    ref = sum(
        W[d] * np.asarray(simdiff.derivative(p, 2, V[d], backend=be, method="nested"))
        for d in range(len(W))
    )
    got = collapsed_function(p, NumpyOps(), 2)(X0, V, W)
    scale = np.maximum(1.0, np.abs(ref))
    np.testing.assert_allclose(got / scale, ref / scale, rtol=0, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("order", [1, 2])
def test_orders_one_and_two_never_expand(order, monkeypatch):
    """Every op at orders 1 and 2 runs a written rule: the expanded form is never built."""

    def refuse(self, c):
        raise AssertionError("expanded form built")

    monkeypatch.setattr(CollapsedSeries, "expand", refuse)
    for name in NAMES:
        p = simdiff.Problem(CASES_ALL[name], x0=X0)
        collapsed_function(p, NumpyOps(), order)(X0, V, W)
