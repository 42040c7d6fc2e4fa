"""The taylor context end to end: catalogue vs nested AD, loops, batching, errors, TaylorArray.

Tolerances: Taylor and nested forward mode compute the same derivative by
different float64 operation sequences; on these problems (derivatives up to
~1e4, a few hundred operations) their difference is below 1e-12 relative to
the largest derivative, so ``rtol=1e-9`` of that scale leaves room for
accumulation without hiding a wrong coefficient (those are off by O(1)).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from _numerics import path_rtol
from _shared import shared_problem

import problems
import simdiff
from simdiff.backends.numpy import NumpyOps
from simdiff.backends.taylor import TaylorArray, TaylorOps
from simdiff.errors import ArgumentOrderError, NonFiniteError, ShapeError, UnsupportedError
from simdiff.ode.solvers.rk import rk_integrate


def _close(a, b, rtol=1e-9):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(1.0, float(np.max(np.abs(b))))
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


# --------------------------------------------------------------------------- catalogue


# Rodas3 and Rodas5P build df/dy by forward-mode AD, which they refuse inside the taylor
# context (simdiff.ode's documented choice): these entries must raise, naming the context.
TAYLOR_REFUSED = {"robertson": "Rodas3", "van_der_pol_stiff": "Rodas3", "hires": "Rodas5P"}


@pytest.mark.parametrize("name", sorted(TAYLOR_REFUSED))
def test_catalogue_refusals_name_the_taylor_context(name, backend):
    p = shared_problem(name)
    with pytest.raises(UnsupportedError, match=rf"{TAYLOR_REFUSED[name]} .*'taylor' context"):
        simdiff.taylor(p, 2, np.ones(p.n), backend=backend)


def _catalogue_params() -> list:
    """Every entry Taylor runs on, with the highest order checked against nested AD.

    Simulators (ODE, PDE, large clusters) are ``slow`` and checked at order 2
    only: nested AD of order 4 through their loops takes minutes on torch
    (measured: 14 minutes for the set), which CI cannot afford, and the order-2
    coefficient is propagated from the order-1 one (an order-1 error shows at
    order 2).  Orders 3-4 through loops are covered by the pendulum test below.
    """
    heavy = {"ode", "pde", "large", "rk4-model"}
    out = []
    for name in sorted(set(problems.names()) - set(TAYLOR_REFUSED)):
        tags = set(shared_problem(name).meta.get("tags", ()))
        if tags & heavy:
            out.append(pytest.param(name, 2, marks=pytest.mark.slow))
        else:
            out.append(pytest.param(name, 4))
    return out


@pytest.mark.parametrize(("name", "max_order"), _catalogue_params())
def test_catalogue_taylor_matches_nested(name, max_order, backend, rng):
    p = shared_problem(name)
    if backend not in p.backends:
        pytest.fail(f"{name} does not run on {backend}; list it explicitly if that is intended")
    v = rng.standard_normal(p.n)
    for order in range(1 if max_order > 2 else 2, max_order + 1):
        t = simdiff.derivative(p, order, v, backend=backend, method="taylor")
        n = simdiff.derivative(p, order, v, backend=backend, method="nested")
        _close(t, n)


def test_seed_closed_form_and_backends_agree():
    p = shared_problem("seed")
    x, v = np.array([0.9]), np.array([1.0])
    coeffs = {b: simdiff.taylor(p, 4, v, x, backend=b) for b in ("numpy", "jax", "torch")}
    exact = [p.exact["derivative"](x, k, v) / math.factorial(k) for k in range(5)]
    for b, c in coeffs.items():
        assert c.shape == (5,), b
        _close(c, exact, rtol=1e-13)
    _close(coeffs["jax"], coeffs["torch"], rtol=1e-14)


def test_batched_points_match_single_points(backend, rng):
    p = shared_problem("seed8")
    xs, v = rng.uniform(-1, 1, (5, 8)), rng.standard_normal(8)
    batched = simdiff.derivative(p, 6, v, xs, backend=backend)
    single = [simdiff.derivative(p, 6, v, x, backend=backend) for x in xs]
    assert batched.shape == (5,)
    _close(batched, single, rtol=1e-12)
    coeffs = simdiff.taylor(p, 3, np.tile(v, (5, 1)), xs, backend=backend)
    assert coeffs.shape == (5, 4)


def test_vector_output_shape(backend):
    p = shared_problem("spherical")
    c = simdiff.taylor(p, 5, np.array([0.1, 0.2, 0.3]), backend=backend)
    assert c.shape == (6, 3)
    _close(c[1], simdiff.jvp(p, np.array([0.1, 0.2, 0.3]), backend=backend))


def test_results_follow_input_array_type():
    p = shared_problem("seed")
    out_t = simdiff.taylor(
        p,
        3,
        torch.tensor([1.0], dtype=torch.float64),
        torch.tensor([0.5], dtype=torch.float64),
        backend="torch",
    )
    out_j = simdiff.taylor(p, 3, jnp.array([1.0]), jnp.array([0.5]), backend="jax")
    assert isinstance(out_t, torch.Tensor) and isinstance(out_j, jax.Array)
    _close(out_t.numpy(), np.asarray(out_j), rtol=1e-14)


# --------------------------------------------------------------------------- loops


def _pendulum(x, ops):
    """Final angle of a damped pendulum th'' = -(g/l) sin th - c th', 12 RK4 steps to t = 1."""

    def rhs(t, y, p, ops):
        return ops.stack([y[1], -p[0] * ops.sin(y[0]) - p[1] * y[1]])

    y_final, ys = rk_integrate(rhs, x[:2], 0.0, 1.0, 12, x[2:], ops)
    return ops.stack([y_final[0], ops.sum(ys[:, 1] ** 2)])


PENDULUM_X0 = np.array([1.2, 0.1, 9.81, 0.3])


@pytest.mark.slow
def test_scan_simulator_taylor_matches_nested(backend, rng):
    p = simdiff.Problem(_pendulum, x0=PENDULUM_X0, name="pendulum")
    v = rng.standard_normal(4)
    coeffs = simdiff.taylor(p, 4, v, backend=backend)
    for k in range(1, 5):
        nested = simdiff.derivative(p, k, v, backend=backend, method="nested")
        _close(coeffs[k] * math.factorial(k), nested)


def test_scan_simulator_numpy_taylor_matches_backends():
    p = simdiff.Problem(_pendulum, x0=PENDULUM_X0, name="pendulum")
    v = np.array([0.3, -0.2, 0.5, 0.1])
    ref = simdiff.taylor(p, 6, v, backend="numpy")
    for b in ("jax", "torch"):
        _close(simdiff.taylor(p, 6, v, backend=b), ref, rtol=1e-12)


def test_scan_carry_turning_from_constant_into_series(backend):
    # the carry starts as a plain constant and becomes a series in the first step
    def fn(x, ops):
        def step(c, _):
            return c * x[0] + 1.0, None

        c, _ = ops.scan(step, ops.asarray(0.0), length=3)  # c = 1 + x + x^2
        return c

    p = simdiff.Problem(fn, x0=np.array([2.0]))
    _close(simdiff.taylor(p, 3, np.ones(1), backend=backend), [7.0, 5.0, 1.0, 0.0])


# --------------------------------------------------------------------------- special points


def test_integer_powers_exact_at_zero(backend):
    p = simdiff.Problem(lambda x, ops: x[0] ** 3 + ops.square(x[0]) * 2.0, x0=np.zeros(1))
    c = simdiff.taylor(p, 5, np.ones(1), backend=backend)
    _close(c, [0.0, 0.0, 2.0, 1.0, 0.0, 0.0], rtol=1e-15)


def test_singular_derivative_is_reported(backend):
    p = simdiff.Problem(lambda x, ops: ops.sqrt(x[0]), x0=np.zeros(1))
    with pytest.raises(NonFiniteError):
        simdiff.taylor(p, 2, np.ones(1), backend=backend)


def test_order_zero_is_the_value(backend):
    p = shared_problem("rosenbrock4")
    c = simdiff.taylor(p, 0, np.ones(4), backend=backend)
    assert c.shape == (1,)
    # Rosenbrock in 4 variables, about 12 operations, against numpy's closed form
    _close(c[0], p.exact["value"](p.x0), rtol=path_rtol(12))


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("order", [-1, 2.5, True, "3"])
def test_bad_order_raises(order, backend):
    p = shared_problem("seed")
    with pytest.raises(ValueError, match="order must be a non-negative integer"):
        simdiff.taylor(p, order, np.ones(1), backend=backend)
    with pytest.raises(ValueError, match="order must be a non-negative integer"):
        simdiff.derivative(p, order, np.ones(1), backend=backend)


@pytest.mark.parametrize("old_x", [np.array([0.5]), [0.5], None], ids=["array", "list", "None"])
def test_retired_argument_order_raises_naming_the_new_one(old_x, backend):
    """``taylor(problem, x, direction, order)`` (the retired order) never computes."""
    p = shared_problem("seed")
    d = simdiff.Derivatives(p, backend=backend)
    for call in (
        lambda: simdiff.taylor(p, old_x, np.ones(1), 3, backend=backend),
        lambda: d.taylor(old_x, np.ones(1), 3),
    ):
        with pytest.raises(ArgumentOrderError, match=r"taylor takes \(order, direction, x=None\)"):
            call()
    assert issubclass(ArgumentOrderError, simdiff.SimdiffError)


def test_bad_direction_shape_raises(backend):
    p = shared_problem("seed8")
    with pytest.raises(ShapeError, match=r"direction .* must have shape \(8,\) .*got \(3,\)"):
        simdiff.taylor(p, 2, np.ones(3), backend=backend)
    with pytest.raises(ShapeError, match=r"direction .*got \(2, 3\)"):
        simdiff.derivative(p, 2, np.ones((2, 3)), backend=backend)


def test_taylor_ops_rejects_bad_order():
    with pytest.raises(ValueError, match="Taylor order must be a non-negative integer; got -2"):
        TaylorOps(NumpyOps(), -2)


def test_taylor_condition_and_index_are_rejected():
    ops = TaylorOps(NumpyOps(), 2)
    t = ops.variable(np.ones(3), np.ones(3))
    with pytest.raises(TypeError, match="condition must be a boolean array"):
        ops.where(t, t, t)
    with pytest.raises(TypeError, match="cannot be used as an index"):
        t[t]


# --------------------------------------------------------------------------- TaylorArray


def test_taylor_array_behaves_like_an_array():
    ops = TaylorOps(NumpyOps(), 3)
    x = ops.variable(np.array([1.0, -2.0, 3.0]), np.ones(3))
    assert x.shape == (3,) and x.ndim == 1 and len(x) == 3 and x.size == 3
    np.testing.assert_array_equal(x > 0, [True, False, True])
    np.testing.assert_array_equal(x == np.array([1.0, 0.0, 3.0]), [True, False, True])
    m = x[:, None] * x[None, :]
    assert m.shape == (3, 3) and m.T.shape == (3, 3) and m[1:, ::2].shape == (2, 2)
    assert isinstance(np.float64(2.0) * x, TaylorArray)
    assert isinstance(np.ones(3) + x, TaylorArray)
    np.testing.assert_allclose((2.0 / x).coeffs[:, 0], [2.0, -2.0, 2.0, -2.0])
    np.testing.assert_allclose((-x).coeffs[1], -np.ones(3))
    assert [xi.shape for xi in x] == [(), (), ()]


@pytest.mark.parametrize("base", ["jax", "torch"])
def test_native_arrays_defer_to_taylor_arrays(base):
    ops = TaylorOps(simdiff.backends.get_ops(base), 2)
    x = ops.variable(ops.asarray(np.ones(2)), ops.asarray(np.ones(2)))
    c = ops.asarray(np.array([2.0, 3.0]))
    for y in (c * x, c + x, c - x, c / x, c @ x):
        assert isinstance(y, TaylorArray)
    np.testing.assert_allclose(np.asarray((c / x).coeffs), [[2.0, 3.0], [-2.0, -3.0], [2.0, 3.0]])


def test_taylor_array_is_a_jax_pytree():
    ops = TaylorOps(simdiff.backends.get_ops("jax"), 2)
    x = ops.variable(jnp.ones(2), jnp.ones(2))
    leaves, treedef = jax.tree_util.tree_flatten({"a": x})
    assert len(leaves) == 1 and leaves[0].shape == (3, 2)
    back = jax.tree_util.tree_unflatten(treedef, leaves)["a"]
    assert isinstance(back, TaylorArray) and back.ops is ops
    out = jax.jit(lambda t: ops.sin(t))(x)
    assert isinstance(out, TaylorArray)
