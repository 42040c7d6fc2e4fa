"""The derivative API against closed forms, across backends, methods and batching."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from _numerics import path_rtol
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import problems
import simdiff

SCALAR = ["seed", "seed8", "rosenbrock4", "rosenbrock32"]
RTOL = 1e-12


@pytest.fixture(scope="module")
def cat():
    return {name: problems.get(name) for name in problems.names(tag="closed-form")}


@pytest.mark.parametrize("name", SCALAR)
def test_grad_matches_closed_form(cat, name, backend):
    p = cat[name]
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), p.exact["grad"](p.x0), rtol=RTOL)


@pytest.mark.parametrize("method", simdiff.core.builders.HESSIAN_METHODS)
@pytest.mark.parametrize("name", SCALAR)
def test_hessian_matches_closed_form(cat, name, backend, method):
    p = cat[name]
    h = simdiff.hessian(p, backend=backend, method=method)
    ref = p.exact["hessian"](p.x0)
    np.testing.assert_allclose(h, ref, rtol=RTOL, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_array_equal(h.shape, (p.n, p.n))
    np.testing.assert_allclose(h, h.T, rtol=1e-14, atol=1e-14 * np.abs(h).max())


@pytest.mark.parametrize("mode", simdiff.core.builders.JACOBIAN_MODES)
def test_jacobian_matches_closed_form(cat, backend, mode):
    p = cat["spherical"]
    np.testing.assert_allclose(
        simdiff.jacobian(p, backend=backend, mode=mode), p.exact["jacobian"](p.x0), rtol=RTOL
    )


def test_value_and_grad(cat, backend):
    p = cat["rosenbrock4"]
    v, g = simdiff.value_and_grad(p, backend=backend)
    np.testing.assert_allclose(v, p.exact["value"](p.x0), rtol=RTOL)
    np.testing.assert_allclose(g, p.exact["grad"](p.x0), rtol=RTOL)


def test_products_agree_with_matrices(cat, backend, rng):
    p, q = cat["rosenbrock4"], cat["spherical"]
    v = rng.standard_normal(p.n)
    np.testing.assert_allclose(
        simdiff.hvp(p, v, backend=backend), p.exact["hessian"](p.x0) @ v, rtol=RTOL
    )
    J = q.exact["jacobian"](q.x0)
    w, u = rng.standard_normal(q.n), rng.standard_normal(3)
    np.testing.assert_allclose(simdiff.jvp(q, w, backend=backend), J @ w, rtol=RTOL)
    np.testing.assert_allclose(simdiff.vjp(q, u, backend=backend), u @ J, rtol=RTOL)


@pytest.mark.parametrize("order", [0, 1, 2, 3, 4])
def test_nested_derivative_matches_closed_form(cat, backend, order, rng):
    p = cat["seed8"]
    v = rng.standard_normal(p.n)
    got = simdiff.derivative(p, order, v, backend=backend, method="nested")
    np.testing.assert_allclose(got, p.exact["derivative"](p.x0, order, v), rtol=1e-11)


@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_derivative_tensor_matches_closed_form(cat, backend, order):
    p = problems.basic.seed(3)
    t = simdiff.derivative_tensor(p, order, backend=backend)
    assert t.shape == (3,) * order
    np.testing.assert_allclose(t, p.exact["derivative_tensor"](p.x0, order), atol=1e-13)


def test_derivative_tensor_of_vector_problem(cat, backend):
    q = cat["spherical"]
    t = simdiff.derivative_tensor(q, 1, backend=backend)
    np.testing.assert_allclose(t, q.exact["jacobian"](q.x0), rtol=RTOL)
    assert simdiff.derivative_tensor(q, 2, backend=backend).shape == (3, 3, 3)


def test_vector_hessian_shape_is_out_in_in(cat, backend):
    q = cat["spherical"]
    h = simdiff.hessian(q, backend=backend)
    assert h.shape == (3, 3, 3)
    # H_ij and H_ji come from different AD passes (about 16 roundings each here)
    np.testing.assert_allclose(h, np.swapaxes(h, 1, 2), atol=path_rtol(16) * np.abs(h).max())


@pytest.mark.parametrize("name", ["rosenbrock4", "spherical"])
def test_jax_and_torch_agree(cat, name, rng):
    p = cat[name]
    x = p.x0 + 0.1 * rng.standard_normal(p.n)
    for fn in (simdiff.jacobian, simdiff.hessian, simdiff.derivative_tensor):
        args = (p, 3) if fn is simdiff.derivative_tensor else (p,)
        a = fn(*args, x=x, backend="jax")
        b = fn(*args, x=x, backend="torch")
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(a).max())


def test_batched_equals_per_point(cat, backend, rng):
    p, q = cat["rosenbrock4"], cat["spherical"]
    X = p.x0 + 0.2 * rng.standard_normal((5, p.n))
    V = rng.standard_normal((5, p.n))
    H = simdiff.hessian(p, X, backend=backend)
    assert H.shape == (5, p.n, p.n)
    for i in range(5):
        np.testing.assert_allclose(H[i], simdiff.hessian(p, X[i], backend=backend), rtol=1e-14)
        np.testing.assert_allclose(
            simdiff.hvp(p, V, X, backend=backend)[i], H[i] @ V[i], rtol=1e-12
        )
    # one direction shared by all points, and many directions at one point
    np.testing.assert_allclose(simdiff.hvp(p, V[0], X, backend=backend), H @ V[0], rtol=1e-12)
    np.testing.assert_allclose(simdiff.hvp(p, V, X[0], backend=backend), V @ H[0].T, rtol=1e-12)
    Y = q.x0 + 0.1 * rng.standard_normal((4, 3))
    J = simdiff.jacobian(q, Y, backend=backend)
    for i in range(4):
        np.testing.assert_allclose(J[i], q.exact["jacobian"](Y[i]), rtol=RTOL)


def test_seed_batched_at_many_points(cat, backend, rng):
    p = cat["seed"]
    X = rng.uniform(-2, 2, (1000, 1))
    d3 = simdiff.derivative(p, 3, np.ones(1), X, backend=backend, method="nested")
    assert d3.shape == (1000,)
    np.testing.assert_allclose(d3, problems.basic._g(X[:, 0], 3), rtol=1e-11, atol=1e-11)


def test_derivatives_compiles_once_per_shape(cat, backend, rng):
    p = cat["rosenbrock4"]
    d = simdiff.Derivatives(p, backend=backend)
    for _ in range(3):
        d.hessian(rng.standard_normal(p.n))
    assert d.compilations == 1
    d.hessian(rng.standard_normal((2, p.n)))
    assert d.compilations == 2
    d.hessian(rng.standard_normal((2, p.n)))
    assert d.compilations == 2
    info = d.cache_info()
    assert [i["calls"] for i in info] == [3, 2]
    assert all(i["first_call_s"] > 0 for i in info)


def test_results_follow_input_type(cat, backend):
    p = cat["rosenbrock4"]
    ref = p.exact["grad"](p.x0)
    for x, kind in (
        (p.x0, np.ndarray),
        (jnp.asarray(p.x0), type(jnp.zeros(1))),
        (torch.from_numpy(p.x0.copy()), torch.Tensor),
    ):
        g = simdiff.grad(p, x, backend=backend)
        assert isinstance(g, kind)
        np.testing.assert_allclose(np.asarray(g), ref, rtol=RTOL)


def test_native_input_is_not_copied_by_the_same_backend(cat):
    p = cat["rosenbrock4"]
    t = torch.from_numpy(p.x0.copy())
    d = simdiff.Derivatives(p, backend="torch")
    assert d.value(t).dtype == torch.float64
    assert simdiff.core.arrays.to_backend(t, d.backend, d.backend, np.float64) is t


def test_float64_by_default_float32_on_request(cat, backend):
    p = cat["rosenbrock4"]
    assert simdiff.grad(p, backend=backend).dtype == np.float64
    with pytest.warns(
        simdiff.PrecisionWarning, match="x is float32 but simdiff computes in float64"
    ):
        assert simdiff.grad(p, p.x0.astype(np.float32), backend=backend).dtype == np.float64
    g32 = simdiff.grad(p, backend=backend, dtype="float32")
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, p.exact["grad"](p.x0), rtol=1e-5)


def test_integer_input_is_cast(cat, backend):
    p = cat["rosenbrock4"]
    np.testing.assert_allclose(simdiff.grad(p, [1, 1, 1, 1], backend=backend), np.zeros(4), atol=0)


def test_from_jax_and_from_torch():
    pj = simdiff.Problem.from_jax(lambda x: jnp.sum(jnp.sin(x) * x), np.array([0.5, 1.0]))
    pt = simdiff.Problem.from_torch(lambda x: torch.sum(torch.sin(x) * x), np.array([0.5, 1.0]))
    want = np.cos(pj.x0) * pj.x0 + np.sin(pj.x0)
    np.testing.assert_allclose(simdiff.grad(pj), want, rtol=RTOL)
    np.testing.assert_allclose(simdiff.grad(pt, backend="torch"), want, rtol=RTOL)
    with pytest.raises(simdiff.UnsupportedError, match=r"runs on \['jax'\] only; backend 'torch'"):
        simdiff.grad(pj, backend="torch")
    with pytest.raises(simdiff.UnsupportedError, match=r"runs on \['torch'\] only"):
        simdiff.hessian(pt, backend="jax")


def test_numpy_context_evaluates_but_does_not_differentiate(cat):
    p = cat["rosenbrock4"]
    d = simdiff.Derivatives(p, backend="numpy")
    np.testing.assert_allclose(d.value(), p.exact["value"](p.x0), rtol=RTOL)
    with pytest.raises(simdiff.UnsupportedError, match="'numpy' context.*does not differentiate"):
        d.grad()


# The catalogue problems come from the module's ``cat``: the first example compiles, the
# others evaluate the same compiled derivatives at new points (what the examples vary).
@given(x=arrays(np.float64, 4, elements=st.floats(-3, 3)))
def test_hypothesis_points_rosenbrock(cat, x):
    p = cat["rosenbrock4"]
    ref = p.exact["hessian"](x)
    for backend in ("jax", "torch"):
        np.testing.assert_allclose(
            simdiff.hessian(p, x, backend=backend), ref, rtol=1e-12, atol=1e-10
        )
        np.testing.assert_allclose(
            simdiff.grad(p, x, backend=backend), p.exact["grad"](x), rtol=1e-12, atol=1e-10
        )


@given(x=st.floats(-4, 4), v=st.floats(-2, 2))
def test_hypothesis_seed_orders(cat, x, v):
    p = cat["seed"]
    for k in range(1, 5):
        want = problems.basic._g(np.array([x]), k)[0] * v**k
        got = simdiff.derivative(p, k, np.array([v]), np.array([x]), method="nested")
        assert math.isclose(float(got), want, rel_tol=1e-10, abs_tol=1e-10 * (1 + abs(v)) ** k)


@pytest.mark.slow
def test_torch_compile_matches_eager(cat, aot_eager):
    # simdiff's compile=True path and its count; Inductor's code against eager to 1e-12 is
    # test_compile_policy's test_compiled_derivatives_match_eager_to_1e12
    p = cat["rosenbrock4"]
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    np.testing.assert_allclose(d.grad(), p.exact["grad"](p.x0), rtol=RTOL)
    d.grad(p.x0 + 1.0)
    assert d.compilations == 1


def test_torch_compile_failure_is_reported_not_hidden(cat, monkeypatch):
    p = cat["rosenbrock4"]
    d = simdiff.Derivatives(p, backend="torch", compile=True)

    def broken(fn):
        def call(*args):
            raise RuntimeError("Dynamo does not support this transform")

        return call

    monkeypatch.setattr(d.backend, "compile", broken)
    with pytest.raises(
        simdiff.UnsupportedError,
        match="torch.compile failed on hessian: RuntimeError: Dynamo does not support",
    ):
        d.hessian()


def test_problem_pickles_without_compiled_cache(cat):
    import pickle

    p = problems.get("rosenbrock4")
    simdiff.grad(p)
    assert len(p.cache) > 0
    q = pickle.loads(pickle.dumps(p))
    assert len(q.cache) == 0 and q.name == p.name
    np.testing.assert_allclose(simdiff.grad(q), simdiff.grad(p), rtol=0)


def test_functions_and_methods_share_argument_order():
    """``simdiff.hvp(p, v, x)`` and ``Derivatives.hvp(v, x)``: same order, positionally."""
    p = simdiff.Problem(lambda x, ops: ops.sum(x**3) + x[0] * x[1], x0=np.array([1.0, 2.0]))
    d = simdiff.Derivatives(p, backend="jax")
    x = np.array([0.5, -1.5])
    v = np.array([2.0, 3.0])
    np.testing.assert_array_equal(simdiff.hvp(p, v, x), d.hvp(v, x))
    np.testing.assert_array_equal(simdiff.jvp(p, v, x), d.jvp(v, x))
    np.testing.assert_array_equal(simdiff.vjp(p, np.array(1.0), x), d.vjp(np.array(1.0), x))
    np.testing.assert_array_equal(simdiff.derivative(p, 3, v, x), d.derivative(3, v, x))
    # the swapped call differs: H(x) v is not H(v) x here
    assert not np.allclose(d.hvp(v, x), d.hvp(x, v))
    np.testing.assert_allclose(d.hvp(v, x), np.array([6 * 0.5 * 2 + 3, 2 + 6 * -1.5 * 3]))
    # x defaults to x0 in both forms
    np.testing.assert_array_equal(d.hvp(v), simdiff.hvp(p, v))
