"""What backends and contexts say about themselves, and the typed ``Ops`` protocol.

Code above ``simdiff/backends/`` asks these instead of comparing names
(tests/test_backend_boundary.py enforces that); here each capability is
checked on every backend, on both sides of what it reports.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from _numerics import path_rtol

import simdiff
from simdiff.backends import (
    CAPABILITIES,
    CONSTANTS,
    OP_NAMES,
    Ops,
    backend_of,
    get_backend,
    get_ops,
    set_threads,
    thread_info,
)
from simdiff.backends.taylor import TaylorOps
from simdiff.errors import UnsupportedError

ROOT = Path(__file__).resolve().parents[1]


def _protocol_members() -> set[str]:
    names = set(Ops.__annotations__) | {
        k for k, v in vars(Ops).items() if callable(v) or isinstance(v, property)
    }
    return {n for n in names if not n.startswith("_")}


def test_ops_protocol_is_typed_over_every_op_name() -> None:
    top = {name.split(".")[0] for name in OP_NAMES}
    assert _protocol_members() == top | set(CONSTANTS) | set(CAPABILITIES)
    sub = {"linalg": Ops.linalg.fget, "fft": Ops.fft.fget}  # type: ignore[attr-defined]
    for space, getter in sub.items():
        proto = getter.__annotations__["return"]
        proto = vars(simdiff.backends._base)[proto] if isinstance(proto, str) else proto
        dotted = {n.split(".")[1] for n in OP_NAMES if n.startswith(space + ".")}
        assert {k for k in vars(proto) if not k.startswith("_")} == dotted


@pytest.fixture(params=["numpy", "jax", "torch", "taylor-jax", "taylor-torch"])
def ops(request):
    name = request.param
    if name.startswith("taylor-"):
        return TaylorOps(get_ops(name.split("-")[1]), order=2)
    return get_ops(name)


def test_every_context_has_every_protocol_member(ops) -> None:
    missing = [m for m in sorted(_protocol_members()) if not hasattr(ops, m)]
    assert not missing, f"{ops!r} lacks {missing}"


def test_eager_is_what_control_flow_may_assume(ops) -> None:
    traced = ops.name == "jax" or (ops.name == "taylor" and ops.base.name == "jax")
    assert ops.eager is (not traced)


def test_ops_concrete_reads_values_and_refuses_tracers(ops) -> None:
    x = ops.asarray([1.0, 2.0])
    if ops.name == "taylor":
        x = ops.variable(x, ops.base.asarray([1.0, 0.0]))  # concrete reads the primal
    np.testing.assert_array_equal(ops.concrete(x), [1.0, 2.0])
    if not ops.eager or ops.name == "torch":
        base = ops.base if ops.name == "taylor" else ops
        be = get_backend(base.name)
        seen = []
        be.vmap(lambda y: seen.append(base.concrete(y)) or y)(base.ones((2, 3)))
        assert seen == [None]


@pytest.mark.parametrize("name", ["numpy", "jax", "torch"])
def test_jacfwd_inside_a_solver(name) -> None:
    ops = get_ops(name)
    z = ops.asarray([1.0, 3.0])

    def g(y):
        return ops.stack([y[0] ** 2 * y[1], ops.sin(y[1])])

    got = get_backend(name).to_numpy(ops.jacfwd(g)(z))
    exact = np.array([[6.0, 1.0], [0.0, np.cos(3.0)]])
    # a framework that does not differentiate (numpy) takes central differences
    tol = 1e-14 if get_backend(name).differentiable else 1e-8
    np.testing.assert_allclose(got, exact, rtol=0, atol=tol)


@pytest.mark.parametrize("name", ["numpy", "jax", "torch"])
def test_jacfwd_passes_constants_through(name) -> None:
    # ops.jacfwd(fn)(z, *consts): d fn / dz only; a constant may be a tensor (torch passes it
    # into the jvp with a zero tangent) or anything else (passed as it is)
    ops = get_ops(name)
    z, c = ops.asarray([1.0, 3.0]), ops.asarray([2.0, -1.0])

    def g(y, k, scale):
        return ops.stack([k[0] * y[0] ** 2 * y[1], scale * k[1] * ops.sin(y[1])])

    got = get_backend(name).to_numpy(ops.jacfwd(g)(z, c, 0.5))
    exact = np.array([[12.0, 2.0], [0.0, -0.5 * np.cos(3.0)]])
    tol = 1e-14 if get_backend(name).differentiable else 1e-8
    np.testing.assert_allclose(got, exact, rtol=0, atol=tol)


def test_torch_jacfwd_constants_carry_outer_gradients() -> None:
    # the constant's outer reverse-mode derivative survives the inner forward transform:
    # d/dk sum(J) for J = d/dy (k y^2) = 2 k y, so the gradient is sum(2 y) = 8
    import torch

    ops = get_ops("torch")
    k = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    J = ops.jacfwd(lambda y, kk: kk * y**2)(torch.tensor([1.0, 3.0], dtype=torch.float64), k)
    (g,) = torch.autograd.grad(J.sum(), k)
    assert float(g) == pytest.approx(8.0, rel=1e-14)
    hvp = torch.func.grad(lambda kk: ops.jacfwd(lambda y, c: c**2 * y**2)(
        torch.tensor([1.0, 3.0], dtype=torch.float64), kk).sum())(k.detach())  # fmt: skip
    assert float(hvp) == pytest.approx(2 * 3.0 * 8.0, rel=1e-14)


def test_jacfwd_refused_where_the_context_has_none() -> None:
    with pytest.raises(UnsupportedError, match="ops.jacfwd is not available in the 'taylor'"):
        TaylorOps(get_ops("numpy"), 2).jacfwd(lambda y: y)


@pytest.mark.parametrize("name", ["jax", "torch"])
def test_forward_only_passes_forward_mode_and_refuses_reverse(name) -> None:
    T, ops = get_backend(name), get_ops(name)

    def f(x):
        return ops.sum(ops.forward_only(x**3, "no reverse here") * x)

    x = T.from_numpy(np.array([1.0, 2.0]), np.float64)
    v = T.from_numpy(np.array([1.0, -1.0]), np.float64)
    _, tangent = T.jvp(f, (x,), (v,))
    assert float(T.to_numpy(tangent)) == pytest.approx(4 * 1.0 - 4 * 8.0)
    hess = T.jacfwd(T.jacfwd(f))(x)  # nested forward mode: 12 x^2 on the diagonal
    np.testing.assert_allclose(T.to_numpy(hess), np.diag([12.0, 48.0]))
    with pytest.raises(UnsupportedError, match="no reverse here"):
        T.grad(f)(x)
    assert get_ops("numpy").forward_only(1.5, "unused") == 1.5


def test_gated_derivative_is_exactly_zero_where_an_overflowed_evaluation_is_discarded() -> None:
    """``sinh(x h)`` overflows at ``h = 1e4``; a ``where`` discards it.  Without the gate the
    reverse pass multiplies the zero cotangent by ``cosh(x h) = inf``: NaN."""
    T, ops = get_backend("jax"), get_ops("jax")

    def f(x, h):
        y = ops.sinh(x * h)
        return y, ops.isfinite(y)

    def kept(fn, h):
        def g(x):
            y, ok = fn(x, h)
            return ops.where(ok, y, 0.0)

        return g

    gated = ops.gated(f, lambda out: out[1])
    x = T.from_numpy(np.array(1.0), np.float64)
    assert np.isnan(float(T.grad(kept(f, 1e4))(x)))
    assert float(T.grad(kept(gated, 1e4))(x)) == 0.0
    assert float(T.jvp(kept(gated, 1e4), (x,), (x,))[1]) == 0.0
    # where the evaluation is kept, the derivatives are fn's: cosh(x h) h, sinh(x h) h^2
    # (XLA's cosh and numpy's, one rounding each, and the product by h)
    assert float(T.grad(kept(gated, 2.0))(x)) == pytest.approx(2.0 * np.cosh(2.0),
                                                               rel=path_rtol(2))  # fmt: skip
    hess = T.jacfwd(T.grad(kept(gated, 2.0)))(x)
    assert float(hess) == pytest.approx(4.0 * np.sinh(2.0), rel=1e-14)


@pytest.mark.parametrize("name", ["numpy", "torch"])
def test_gated_is_the_function_itself_elsewhere(name) -> None:
    def f(x):
        return x

    assert get_ops(name).gated(f, lambda out: out) is f


def test_backend_of_is_the_one_array_kind_detector() -> None:
    import jax.numpy as jnp
    import torch

    assert backend_of(np.zeros(2)).name == "numpy"
    assert backend_of([1.0]).name == "numpy" and backend_of(3.0).name == "numpy"
    assert backend_of(jnp.zeros(2)).name == "jax"
    assert backend_of(torch.zeros(2)).name == "torch"


@pytest.mark.parametrize("name", ["numpy", "jax", "torch"])
def test_array_facts(name) -> None:
    be = get_backend(name)
    x = be.from_numpy(np.arange(3.0), np.float32)
    assert be.is_native(x) and be.dtype_name(x) == "float32"
    np.testing.assert_array_equal(be.concrete(x), [0.0, 1.0, 2.0])
    assert (be.device_of(x) is None) is (name != "torch")


@pytest.mark.parametrize("name", ["jax", "torch"])
def test_concrete_is_none_for_symbolic_values(name) -> None:
    be = get_backend(name)
    seen = []

    def f(y):
        seen.append(be.concrete(y))
        return y * 2

    be.vmap(f)(be.from_numpy(np.ones((2, 3)), np.float64))
    assert seen == [None]


@pytest.mark.parametrize("name", ["numpy", "jax", "torch"])
def test_jit_reports_each_compilation(name) -> None:
    be = get_backend(name)
    count = []
    fn = be.jit(lambda y: y + 1, on_compile=lambda: count.append(1))
    for shape in [(2,), (2,), (3,)]:
        be.block_until_ready(fn(be.from_numpy(np.zeros(shape), np.float64)))
    # JAX traces once per shape; the eager backends "compile" once, when built
    assert len(count) == (2 if name == "jax" else 1)


@pytest.mark.parametrize("step_loop", [False, True])
def test_jax_jit_compiles_a_step_loop_with_its_options(monkeypatch, step_loop) -> None:
    import jax

    import simdiff.backends.jax as bj

    asked = []
    real = jax.jit

    def spy(fn, **kwargs):
        asked.append(kwargs.get("compiler_options"))
        return real(fn, **kwargs)

    monkeypatch.setattr(bj.jax, "jit", spy)
    be = get_backend("jax")
    for on_compile in (None, lambda: None):
        fn = be.jit(lambda y: y + 1, on_compile=on_compile, step_loop=step_loop)
        assert float(fn(be.from_numpy(np.ones(1), np.float64))[0]) == 2.0
    assert asked == [bj.STEP_LOOP_OPTIONS if step_loop else None] * 2


def test_a_step_loop_jit_nests_in_a_callers_jit() -> None:
    """JAX takes compiler options on a top-level jit only: inside a caller's trace the step
    loop's jit is a plain nested one (an ODE's derivative inside ``jax.jit``, and simdiff's
    own jit of a tree call around it, once raised ValueError)."""
    import jax

    from simdiff.ode import ODEProblem

    be = get_backend("jax")
    fn = be.jit(lambda y: y * 2.0 + 1.0, step_loop=True)
    x = be.from_numpy(np.array([1.0, 2.0]), np.float64)
    # two compilations (other XLA options) of one multiply-add: a rounding each
    np.testing.assert_allclose(np.asarray(jax.jit(fn)(x)), np.asarray(fn(x)), rtol=path_rtol(1),
                               atol=0)  # fmt: skip
    ode = ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
                     observable=lambda ys, ops: ys[-1, 0], rtol=1e-10, atol=1e-12)  # fmt: skip
    p = be.from_numpy(np.array([2.0]), np.float64)
    top = simdiff.grad(ode, p, backend="jax")
    inside = jax.jit(lambda q: simdiff.grad(ode, q, backend="jax"))(p)
    np.testing.assert_allclose(np.asarray(inside), -np.exp(-2.0), rtol=1e-8)  # d e^-p / dp
    np.testing.assert_allclose(np.asarray(inside), np.asarray(top), rtol=1e-13)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_derivatives_ask_for_step_loop_options_only_for_an_ode(monkeypatch, backend) -> None:
    from simdiff.ode import ODEProblem

    be = get_backend(backend)
    asked = []
    real = type(be).jit

    def spy(self, fn, on_compile=None, *, step_loop=False):
        asked.append(step_loop)
        return real(self, fn, on_compile, step_loop=step_loop)

    monkeypatch.setattr(type(be), "jit", spy)
    ode = ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
                     observable=lambda ys, ops: ys[-1, 0], rtol=1e-8, atol=1e-10)  # fmt: skip
    plain = simdiff.Problem(lambda x, ops: ops.sum(x**2), np.ones(2))
    for problem, expected in ((ode, True), (plain, False)):
        asked.clear()
        g = simdiff.Derivatives(problem, backend=backend).grad(problem.x0)
        assert np.all(np.isfinite(g))
        assert asked and set(asked) == {expected}
    assert ode.step_loop and not plain.step_loop


def test_compile_capability() -> None:
    assert get_backend("torch").optional_compiler
    for name in ("jax", "numpy"):
        be = get_backend(name)
        assert not be.optional_compiler
        with pytest.raises(UnsupportedError, match=f"backend '{name}' has no compiler"):
            be.compile(lambda y: y)
    with pytest.raises(ValueError, match="the 'jax' backend always compiles"):
        simdiff.Derivatives(simdiff.Problem(lambda x, ops: x[0], np.ones(1)), "jax", compile=True)


def test_threads() -> None:
    info = thread_info()
    assert info["affinity"] >= 1 and info["xla"] in (1, info["affinity"])
    assert get_backend("torch").threads()["torch"] >= 1
    n = info["torch"] or get_backend("torch").threads()["torch"]
    assert set_threads(n)["torch"] == n
    with pytest.raises(ValueError, match="threads must be >= 1; got 0"):
        set_threads(0)
    with pytest.raises(UnsupportedError, match="cannot change its thread count"):
        get_backend("jax").set_threads(1)


def test_runs_tells_own_context_from_taylor_over_it() -> None:
    jax_be = get_backend("jax")
    assert jax_be.runs(get_ops("jax"))
    assert not jax_be.runs(get_ops("torch"))
    assert not jax_be.runs(TaylorOps(get_ops("jax"), 1))


def test_readme_test_command_type_checks() -> None:
    text = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)
    test_cmd = next(c for c in commands if "pytest" in c)
    assert ".venv/bin/mypy" in test_cmd
    assert test_cmd in (ROOT / ".ci" / "run").read_text().splitlines()
