"""The ops namespace: every op in every context, against numpy."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import simdiff
from simdiff.backends import CONSTANTS, OP_NAMES, get_backend, get_ops

A = [0.3, 0.5, 0.7]
B = [1.2, 0.4, 2.0]
M = [[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]]


def _abm(ops):
    return ops.asarray(A), ops.asarray(B), ops.asarray(M)


def _case(fn):
    return lambda ops: fn(ops, *_abm(ops))


# One case per op in OP_NAMES; test_every_op_has_a_case fails when one is missing.
CASES = {
    "abs": _case(lambda o, a, b, m: o.abs(a - 0.5)),
    "negative": _case(lambda o, a, b, m: o.negative(a)),
    "floor": _case(lambda o, a, b, m: o.floor(3.0 * b - 4.1)),
    "round": _case(lambda o, a, b, m: o.round(3.0 * b - 4.1)),
    "sign": _case(lambda o, a, b, m: o.sign(a - 0.5)),
    "sqrt": _case(lambda o, a, b, m: o.sqrt(b)),
    "square": _case(lambda o, a, b, m: o.square(a)),
    "exp": _case(lambda o, a, b, m: o.exp(a)),
    "expm1": _case(lambda o, a, b, m: o.expm1(a)),
    "log": _case(lambda o, a, b, m: o.log(b)),
    "log1p": _case(lambda o, a, b, m: o.log1p(a)),
    "sin": _case(lambda o, a, b, m: o.sin(b)),
    "cos": _case(lambda o, a, b, m: o.cos(b)),
    "tan": _case(lambda o, a, b, m: o.tan(a)),
    "asin": _case(lambda o, a, b, m: o.asin(a)),
    "acos": _case(lambda o, a, b, m: o.acos(a)),
    "atan": _case(lambda o, a, b, m: o.atan(b)),
    "sinh": _case(lambda o, a, b, m: o.sinh(b)),
    "cosh": _case(lambda o, a, b, m: o.cosh(b)),
    "tanh": _case(lambda o, a, b, m: o.tanh(b)),
    "asinh": _case(lambda o, a, b, m: o.asinh(b)),
    "acosh": _case(lambda o, a, b, m: o.acosh(b + 1.0)),
    "atanh": _case(lambda o, a, b, m: o.atanh(a)),
    "isfinite": _case(lambda o, a, b, m: o.isfinite(o.where(a > 0.4, a, o.inf))),
    "add": _case(lambda o, a, b, m: o.add(a, b)),
    "subtract": _case(lambda o, a, b, m: o.subtract(a, b)),
    "multiply": _case(lambda o, a, b, m: o.multiply(a, b)),
    "divide": _case(lambda o, a, b, m: o.divide(a, b)),
    "pow": _case(lambda o, a, b, m: o.pow(b, a)),
    "atan2": _case(lambda o, a, b, m: o.atan2(a, b - 1.0)),
    "maximum": _case(lambda o, a, b, m: o.maximum(a, b - 0.5)),
    "minimum": _case(lambda o, a, b, m: o.minimum(a, b - 0.5)),
    "sum": _case(lambda o, a, b, m: (o.sum(m, axis=0), o.sum(m), o.sum(m, axis=(0, 1)))),
    "prod": _case(lambda o, a, b, m: (o.prod(b), o.prod(m, axis=1, keepdims=True))),
    "mean": _case(lambda o, a, b, m: (o.mean(m, axis=1, keepdims=True), o.mean(a))),
    "max": _case(lambda o, a, b, m: (o.max(m, axis=1), o.max(m))),
    "min": _case(lambda o, a, b, m: (o.min(m, axis=0), o.min(m))),
    "cumsum": _case(lambda o, a, b, m: o.cumsum(m, axis=1)),
    "reshape": _case(lambda o, a, b, m: o.reshape(m, (9,))),
    "stack": _case(lambda o, a, b, m: o.stack([a, b], axis=1)),
    "concat": _case(lambda o, a, b, m: o.concat([a, b])),
    "roll": _case(lambda o, a, b, m: (o.roll(a, 1), o.roll(m, -1, axis=1))),
    "permute_dims": _case(lambda o, a, b, m: o.permute_dims(m, (1, 0))),
    "expand_dims": _case(lambda o, a, b, m: o.expand_dims(a, 0)),
    "squeeze": _case(lambda o, a, b, m: o.squeeze(o.expand_dims(a, 1), 1)),
    "broadcast_to": _case(lambda o, a, b, m: o.broadcast_to(a, (2, 3))),
    "flip": _case(lambda o, a, b, m: (o.flip(a), o.flip(m, axis=1))),
    "take": _case(lambda o, a, b, m: (o.take(a, [2, 0]), o.take(m, [1, 1], axis=1))),
    "where": _case(lambda o, a, b, m: o.where(a > 0.4, a, b)),
    "safe_where": _case(lambda o, a, b, m: o.safe_where(a > 0.4, a - 0.5, o.sqrt, o.exp)),
    "clip": _case(lambda o, a, b, m: (o.clip(b, 0.5, 1.5), o.clip(b, 0.5), o.clip(b, max=1.0))),
    "matmul": _case(lambda o, a, b, m: (o.matmul(m, a), m @ m)),
    "vecdot": _case(lambda o, a, b, m: o.vecdot(a, b)),
    "einsum": _case(lambda o, a, b, m: o.einsum("ij,j->i", m, a)),
    "linalg.solve": _case(lambda o, a, b, m: o.linalg.solve(m, a)),
    "fft.rfft": _case(lambda o, a, b, m: o.fft.rfft(m, axis=0)),
    "fft.irfft": _case(lambda o, a, b, m: o.fft.irfft(o.fft.rfft(b), n=3)),
    "fft.fft": _case(lambda o, a, b, m: o.fft.fft(a)),
    "fft.ifft": _case(lambda o, a, b, m: o.fft.ifft(o.fft.fft(m, axis=1), axis=1)),
    "asarray": lambda o: (o.asarray([1.0, 2.0]), o.asarray([1, 2])),
    "zeros": lambda o: o.zeros((2, 3)),
    "ones": lambda o: o.ones(3),
    "full": lambda o: o.full((2,), 1.5),
    "zeros_like": _case(lambda o, a, b, m: o.zeros_like(m)),
    "ones_like": _case(lambda o, a, b, m: o.ones_like(a)),
    "full_like": _case(lambda o, a, b, m: o.full_like(a, 2.0)),
    "arange": lambda o: (o.arange(4), o.arange(0.0, 1.0, 0.25), o.arange(1, 7, 2)),
    "linspace": lambda o: (o.linspace(0.0, 1.0, 5), o.linspace(0.0, 1.0, 4, endpoint=False)),
    "eye": lambda o: (o.eye(3), o.eye(2, 3, k=1)),
    "fft.rfftfreq": lambda o: o.fft.rfftfreq(8, 0.1),
    "fft.fftfreq": lambda o: o.fft.fftfreq(8),
    "scan": _case(lambda o, a, b, m: o.scan(lambda c, x: (c + x, c * x), o.asarray(1.0), a)),
    "while_loop": _case(
        lambda o, a, b, m: o.while_loop(lambda c: o.sum(c) < 20.0, lambda c: 2.0 * c + a, b, 50)
    ),
    "cond": _case(
        lambda o, a, b, m: (
            o.cond(o.sum(a) > 0.0, lambda x: o.sin(x), lambda x: -x, b),
            o.cond(o.sum(a) < 0.0, lambda x: o.sin(x), lambda x: -x, b),
        )
    ),
    "checkpoint": _case(lambda o, a, b, m: o.checkpoint(lambda x: o.sin(x) * x)(a)),
    "stop_gradient": _case(lambda o, a, b, m: o.stop_gradient(a)),
}


def _leaves(out):
    if isinstance(out, tuple):
        return [leaf for item in out for leaf in _leaves(item)]
    return [out]


def _np(x, context):
    return get_backend(context).to_numpy(x)


def test_every_op_has_a_case():
    assert sorted(CASES) == sorted(OP_NAMES)


@pytest.mark.parametrize("context", ["numpy", "jax", "torch"])
def test_every_op_exists(context):
    ops = get_ops(context)
    for dotted in OP_NAMES + CONSTANTS:
        obj = ops
        for part in dotted.split("."):
            obj = getattr(obj, part)
        assert obj is not None, dotted


@pytest.mark.parametrize("context", ["jax", "torch"])
@pytest.mark.parametrize("op", OP_NAMES)
def test_op_matches_numpy(context, op):
    want = _leaves(CASES[op](get_ops("numpy")))
    got = _leaves(CASES[op](get_ops(context)))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g = _np(g, context)
        assert g.shape == w.shape, (op, g.shape, w.shape)
        if w.dtype.kind == "f":
            assert g.dtype == np.float64, (op, g.dtype)
        elif w.dtype.kind == "c":
            assert g.dtype == np.complex128, (op, g.dtype)
        else:
            assert g.dtype.kind == w.dtype.kind, (op, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-15, err_msg=op)


@pytest.mark.parametrize("context", ["numpy", "jax", "torch"])
def test_float32_on_request(context):
    ops = get_ops(context, dtype="float32")
    assert _np(ops.asarray([1.0]), context).dtype == np.float32
    assert _np(ops.zeros(2), context).dtype == np.float32


@pytest.mark.parametrize("context", ["numpy", "jax", "torch"])
def test_missing_op_names_op_and_context(context):
    with pytest.raises(simdiff.UnsupportedError, match=rf"ops.hypot .* {context!r} context"):
        get_ops(context).hypot  # noqa: B018  (the access itself must raise)


def test_unknown_backend_lists_valid_ones():
    with pytest.raises(ValueError, match=r"unknown backend 'jaxx'; expected one of \['jax'"):
        get_backend("jaxx")


def test_taylor_is_a_context_not_a_backend():
    with pytest.raises(simdiff.UnsupportedError, match="evaluation context"):
        get_backend("taylor")


def test_import_is_lazy():
    code = "import sys, simdiff; print('jax' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_scan_needs_xs_or_length():
    with pytest.raises(ValueError, match="needs xs or length"):
        get_ops("numpy").scan(lambda c, x: (c, None), 0.0)


@pytest.mark.parametrize("context", ["numpy", "torch"])
def test_scan_length_and_pytree_carry(context):
    ops = get_ops(context)
    carry, ys = ops.scan(
        lambda c, _: ({"a": c["a"] + 1.0, "b": (c["b"][0] * 2.0,)}, None),
        {"a": ops.asarray(0.0), "b": (ops.asarray(1.0),)},
        length=3,
    )
    assert float(carry["a"]) == 3.0 and float(carry["b"][0]) == 8.0 and ys is None


def test_checkpoint_composes_with_derivatives(backend):
    def f(x, ops):
        step = ops.checkpoint(lambda y: ops.sin(y) * y)
        return ops.sum(step(step(x)))

    p = simdiff.Problem(f, x0=np.array([0.3, 0.9]))
    y = np.sin(p.x0) * p.x0
    dy = np.cos(p.x0) * p.x0 + np.sin(p.x0)
    want = (np.cos(y) * y + np.sin(y)) * dy
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), want, rtol=1e-13)


def test_stop_gradient_stops(backend):
    p = simdiff.Problem(lambda x, ops: ops.sum(x * ops.stop_gradient(x)), x0=np.array([2.0, 3.0]))
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), [2.0, 3.0])


def test_linalg_solve_second_order_forward_mode(backend: str) -> None:
    # torch.linalg.solve's JVP of a JVP is wrong in torch 2.13 (up to 30% on this system);
    # the torch context solves by lu_factor + lu_solve. Reference: a central difference of
    # the first directional derivative, computed by the same backend.
    p0, v = np.array([0.1, -0.2]), np.array([0.3, -0.7])

    def fn(x, ops):
        a = ops.stack(
            [ops.stack([2.0 + ops.exp(x[0]), x[1]]), ops.stack([x[0] * x[1], 3.0 + x[1] ** 2])]
        )
        return ops.linalg.solve(a, ops.asarray(np.array([1.0, 2.0])))

    p = simdiff.Problem(fn, x0=p0)
    d2 = simdiff.derivative(p, 2, v, backend=backend, method="nested")
    h = 1e-5
    d1 = [
        simdiff.derivative(p, 1, v, p0 + s * h * v, backend=backend, method="nested")
        for s in (1.0, -1.0)
    ]
    np.testing.assert_allclose(d2, (d1[0] - d1[1]) / (2 * h), rtol=1e-8)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_singular_linear_system_gives_non_finite_solutions_without_raising(backend) -> None:
    """``ops.linalg.solve`` and ``ops.lu_solve(ops.lu_factor(...))`` of a singular matrix:
    non-finite on both frameworks (a Rosenbrock step then rejects the step); a regular one
    solved to rounding of a cond ~ 2 system."""
    ops = get_backend(backend).ops("float64")
    singular = ops.asarray(np.array([[1.0, 2.0], [2.0, 4.0]]))
    regular = ops.asarray(np.array([[2.0, 1.0], [0.5, 3.0]]))
    b = ops.asarray(np.array([1.0, -1.0]))
    for solve in (ops.linalg.solve, lambda a, b: ops.lu_solve(ops.lu_factor(a), b)):
        assert not np.isfinite(np.asarray(solve(singular, b))).all()
        np.testing.assert_allclose(
            np.asarray(solve(regular, b)),
            np.linalg.solve(np.asarray(regular), [1.0, -1.0]),
            rtol=1e-14,
        )


def test_torch_solves_trace_without_an_error_check() -> None:
    """The graph of torch's solves holds no ``_linalg_check_errors``: an effect to Inductor,
    which then never takes the graph from its FX graph cache (a compiled Rosenbrock step was
    rebuilt in every process) and whose C++ wrapper loses the error's type."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    ops = get_backend("torch").ops("float64")
    a = torch.tensor([[2.0, 1.0], [0.5, 3.0]], dtype=torch.float64)
    b = torch.tensor([1.0, -1.0], dtype=torch.float64)
    for solve in (ops.linalg.solve, lambda a, b: ops.lu_solve(ops.lu_factor(a), b)):
        graph = make_fx(solve, tracing_mode="fake")(a, b).graph
        targets = {str(n.target) for n in graph.nodes if n.op == "call_function"}
        assert not any("check_errors" in t for t in targets), targets
        # the plain torch.linalg.inv does put one there: the check above can fail
    plain = make_fx(lambda a, b: torch.linalg.inv(a) @ b, tracing_mode="fake")(a, b).graph
    assert any("check_errors" in str(n.target) for n in plain.nodes)


def test_a_vmapped_torch_while_loop_stops_when_no_lane_runs() -> None:
    """Under ``torch.func.vmap`` the eager loop runs while some lane's predicate holds
    (as ``jax.vmap`` of ``lax.while_loop``), not to ``max_steps``; each lane as alone."""
    import torch

    ops = get_backend("torch").ops()
    calls = []

    def body(c):
        calls.append(1)
        return 2.0 * c + 1.0

    def run(x):
        return ops.while_loop(lambda c: c < 100.0, body, x, 1000)

    x = torch.tensor([1.0, 40.0, 500.0], dtype=torch.float64)
    got = torch.func.vmap(run)(x)
    want = [run(xi) for xi in x]  # 1 -> 127 in 6 steps, 40 -> 163 in 2, 500 untouched
    assert len(calls) == 6 + (6 + 2 + 0)  # the batched loop, then each lane alone
    # exact either way: integers below 2**53, doubled and incremented
    torch.testing.assert_close(got, torch.stack(want), rtol=0, atol=0)
    # and through a derivative of the batched loop (6 bodies again, not max_steps):
    # d(out)/dx = 2**steps per lane
    calls.clear()
    g = torch.func.vmap(torch.func.grad(run))(x)
    assert len(calls) == 6
    torch.testing.assert_close(g, torch.tensor([64.0, 4.0, 1.0], dtype=torch.float64))


def test_numpy_stack_is_numpy_stack() -> None:
    # NumpyOps.stack takes numpy.array for a list of parts of one shape: the same array, and
    # numpy.stack's errors for ragged parts, no parts and a generator
    from simdiff.backends.numpy import NumpyOps

    ops, a, y = NumpyOps(), np.ones(()), np.arange(3.0)
    for parts in ([a, 2 * a], [y, y], (y, 2 * y), [1, 2], [1.0, np.float32(2.0)], [[1, 2], [3, 4]]):
        got, want = ops.stack(parts), np.stack(parts)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ops.stack([y, 2 * y], axis=1), np.stack([y, 2 * y], axis=1))
    with pytest.raises(ValueError, match="same shape"):
        ops.stack([a, y])
    with pytest.raises(ValueError, match="at least one array"):
        ops.stack([])
    with pytest.raises(TypeError, match="sequence"):
        ops.stack(p for p in [y])


_WHERE_CASES = [
    ("array, Python float", lambda c, x, i: (c, x, 0.0)),
    ("Python float, array", lambda c, x, i: (c, 0.0, x)),
    ("scalar condition", lambda c, x, i: (True, x, -x)),
    ("float condition", lambda c, x, i: (x, x, 2 * x)),
    ("broadcast", lambda c, x, i: (c[:, None], x, x[:, None])),
    ("two Python floats", lambda c, x, i: (c, 1.0, 2.0)),
    ("two Python ints", lambda c, x, i: (c, 1, 2)),
    ("int array, Python int", lambda c, x, i: (c, i, 0)),
]


@pytest.mark.parametrize("case", _WHERE_CASES, ids=[c[0] for c in _WHERE_CASES])
def test_jax_where_is_jnp_where_without_a_nested_jit(case) -> None:
    """JaxOps.where: jax.numpy's promotion (weak types included), broadcasting and values,
    traced inline: no nested ``jit`` equation, which jnp.where is."""
    import jax
    import jax.numpy as jnp

    ops = get_ops("jax")
    x = jnp.array([0.0, 1.5, -2.0])
    args = case[1](x > 0, x, jnp.arange(3))
    got, want = ops.where(*args), jnp.where(*args)
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
    np.testing.assert_array_equal(got, want)
    eqns = jax.make_jaxpr(lambda *a: ops.where(*a))(*args).eqns
    assert "jit" not in {e.primitive.name for e in eqns}
    with pytest.raises(jax.dtypes.TypePromotionError):  # strict promotion, as jnp.where
        ops.where(x > 0, x.astype(jnp.float32), x)
