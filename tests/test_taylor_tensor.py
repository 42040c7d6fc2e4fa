"""Derivative tensors by Taylor interpolation vs nested AD and closed forms.

Tolerance: the interpolation solves a Vandermonde-type system whose condition
number is below 600 for the sizes tested (n <= 8, d <= 4); with Taylor
coefficients accurate to ~1e-15 relative, entries carry at most ~1e-12
relative error, so ``1e-10`` of the tensor's largest entry is safe and a
wrong weight (an O(1) error) cannot pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _shared import shared_problem

import simdiff
from simdiff.core.taylor_tensor import _multi_indices, interpolation_weights


def _close(a, b, rtol=1e-10):
    scale = max(1.0, float(np.max(np.abs(b))))
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=rtol * scale)


@pytest.mark.parametrize("name", ["rosenbrock4", "spherical", "seed8"])
@pytest.mark.parametrize("order", [0, 1, 2, 3, 4])
def test_matches_nested_derivative_tensor(name, order, backend):
    p = shared_problem(name)
    x = p.x0 + 0.1
    got = simdiff.derivative_tensor(p, order, x, method="taylor", backend=backend)
    ref = simdiff.derivative_tensor(p, order, x, method="nested", backend=backend)
    assert got.shape == np.shape(ref)
    _close(got, ref)


def test_seed_tensor_closed_form():
    p = shared_problem("seed8")
    for order in range(5):
        _close(
            simdiff.derivative_tensor(p, order, method="taylor", backend="numpy"),
            p.exact["derivative_tensor"](p.x0, order),
        )


@pytest.mark.parametrize(("n", "d"), [(1, 3), (2, 2), (3, 4), (5, 3)])
def test_weights_invert_the_monomial_map(n, d):
    dirs, w = interpolation_weights(n, d)
    assert dirs.shape == (math.comb(n + d - 1, d), n)
    assert np.all(dirs.sum(axis=1) == d)
    assert len(_multi_indices(n, d)) == len({tuple(r) for r in dirs.tolist()})
    vander = np.prod(dirs[:, None, :].astype(float) ** dirs[None, :, :], axis=-1)
    np.testing.assert_allclose(w @ vander, np.eye(len(dirs)), atol=1e-12)


@pytest.mark.parametrize("method", ["taylor", "nested"])
def test_bad_order_raises(method):
    with pytest.raises(ValueError, match="order must be a non-negative integer"):
        simdiff.derivative_tensor(shared_problem("seed"), -1, method=method)


def test_bad_method_names_the_choices():
    with pytest.raises(ValueError, match=r"unknown derivative-tensor method 'fwd'.*'nested'"):
        simdiff.derivative_tensor(shared_problem("seed"), 2, method="fwd")


@pytest.mark.parametrize("method", ["taylor", "nested"])
def test_batched_points_and_array_type_follow_input(method):
    import torch

    p = shared_problem("rosenbrock4")
    xs = np.stack([p.x0, p.x0 + 0.2])
    got = simdiff.derivative_tensor(p, 3, torch.as_tensor(xs), method=method, backend="jax")
    assert isinstance(got, torch.Tensor) and got.shape == (2, 4, 4, 4)
    for i in range(2):
        _close(got[i].numpy(), simdiff.derivative_tensor(p, 3, xs[i], method="nested"))


def test_derivatives_method_matches_function():
    p = shared_problem("spherical")
    d = simdiff.Derivatives(p, backend="torch")
    _close(d.derivative_tensor(2, method="taylor"), simdiff.hessian(p, backend="torch"))
