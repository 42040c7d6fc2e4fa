"""simdiff inside the frameworks' transforms: the problem face with traced inputs, the
function face (simdiff.jax, simdiff.torch), defaults that run, and the boundary's errors.

References are independent of simdiff: the Lennard-Jones energy written by hand in
jax.numpy and torch, differentiated by nested jax / torch.func transforms.  Tolerances:
two code paths through a few hundred roundings amplified by the conditioning of the
third derivatives of r^-12 near contact, tests/_numerics.path_rtol; 1e-12 is the bound
the issue asks for and holds with room (measured about 1e-15).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from _numerics import path_rtol

import simdiff
import simdiff.jax
import simdiff.torch
from simdiff.pes import cluster_problem, lennard_jones

POSITIONS = np.array([[0.0, 0.0, 0.0], [1.1, 0.0, 0.0], [0.0, 1.15, 0.05]])
PAIRS = np.triu_indices(len(POSITIONS), 1)
#: two paths (simdiff's ops LJ, the hand-written one) through ~250 roundings (3 pairs, a third
#: derivative of s^6 - s^3), condition ~10 (the r^-12 wall at r ~ 1): about 2e-12
RTOL = min(1e-12, path_rtol(250, 1.0))


@pytest.fixture(scope="module")
def lj3():
    return cluster_problem(lennard_jones, POSITIONS)


@pytest.fixture(scope="module")
def geometries():
    rng = np.random.default_rng(28)
    return POSITIONS.reshape(-1)[None] + 0.03 * rng.standard_normal((16, POSITIONS.size))


def _lj_jnp(x):
    r = x.reshape(-1, 3)
    d2 = jnp.sum((r[PAIRS[0]] - r[PAIRS[1]]) ** 2, axis=-1)
    s6 = (1.0 / d2) ** 3
    return jnp.sum(4.0 * (s6 * s6 - s6))


def _lj_torch(x):
    r = x.reshape(-1, 3)
    d2 = torch.sum((r[PAIRS[0]] - r[PAIRS[1]]) ** 2, dim=-1)
    s6 = (1.0 / d2) ** 3
    return torch.sum(4.0 * (s6 * s6 - s6))


def _score(H, xp):
    """A training-style scalar of a Hessian: sum of squares plus the trace."""
    return xp.sum(H * H) + xp.trace(H)


def _run(fn, *args):
    """``jax.jit(fn)(*args)`` compiled without XLA's codegen optimisations: these graphs run
    once, and it halves their compile time (about 2.3 s to 1.2 s for the reference step)."""
    compiled = jax.jit(fn).lower(*args).compile({"xla_backend_optimization_level": 0})
    return compiled(*args)


def _close(a, b, rtol=RTOL):
    a, b = np.asarray(a), np.asarray(b)
    err = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
    assert err <= rtol, f"relative error {err:.3g} > {rtol:.3g}"


# --------------------------------------------------------------------------- JAX, problem face


def _jax_reference_step(X):
    per = jax.vmap(lambda x: _score(jax.hessian(_lj_jnp)(x), jnp))
    return _run(jax.grad(lambda X: jnp.sum(per(X))), X)


@pytest.fixture(scope="module")
def jax_reference(geometries):
    """The nested-jax reference step at the 16 geometries: shape (16, 9)."""
    return _jax_reference_step(jnp.asarray(geometries))


def test_jitted_vmapped_pes_hessian_differentiated_again_equals_nested_jax(
    lj3, geometries, jax_reference
):
    X = jnp.asarray(geometries)

    def step(X):  # jitted by _run, with the simdiff call inside
        per = jax.vmap(lambda x: _score(simdiff.hessian(lj3, x), jnp))
        return jnp.sum(per(X))

    g = _run(jax.grad(step), X)
    assert isinstance(g, jax.Array) and g.shape == (16, 9)
    _close(g, jax_reference)
    # the structured Hessian (the default for a cluster) cannot run on tracers: it says so
    info = simdiff.core.derivatives.cached_derivatives(lj3, "jax").cache_info()
    (traced,) = [r for r in info if r["traced_calls"]]
    assert traced["method"] == "fwd-rev" and "structured Hessian" in traced["method_reason"]


def test_function_face_composes_like_jax_hessian(lj3, geometries, jax_reference):
    X = jnp.asarray(geometries)
    per = jax.vmap(lambda x: _score(simdiff.jax.hessian(lj3)(x), jnp))
    _close(_run(jax.grad(lambda X: jnp.sum(per(X))), X), jax_reference)
    plain = _run(jax.vmap(simdiff.jax.hessian(_lj_jnp)), X)  # a jax.numpy function
    _close(plain, _run(jax.vmap(jax.hessian(_lj_jnp)), X))


def test_traced_calls_return_jax_arrays_and_count(geometries):
    p = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x) ** 3), x0=np.ones(3))
    d = simdiff.Derivatives(p, backend="jax")
    f = jax.jit(lambda x: d.grad(x) * 2.0)
    x = jnp.array([0.1, 0.2, 0.3])
    out = f(x)
    f(x + 1.0)  # the same trace: no new call of simdiff
    assert isinstance(out, jax.Array)
    _close(out, 2.0 * 3.0 * np.sin(x) ** 2 * np.cos(x))
    (record,) = d.cache_info()
    assert record["traced_calls"] == 1 and record["calls"] == 1 and d.compilations == 1
    _close(d.grad(x), out / 2.0)  # a concrete call reuses the same jitted callable
    assert d.compilations == 1


def test_vmap_over_directions_with_a_numpy_point():
    p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1] + ops.sum(x**4), x0=np.array([1.0, 2.0]))
    V = jnp.eye(2)
    rows = jax.vmap(lambda v: simdiff.hvp(p, v))(V)  # x = x0 (numpy), v traced
    assert isinstance(rows, jax.Array)
    _close(rows, simdiff.hessian(p))


@pytest.mark.parametrize("method", ["taylor", "nested"])
def test_grad_of_a_taylor_derivative(method):
    p = simdiff.Problem(lambda x, ops: ops.sum(ops.exp(x[0] * x[1])), x0=np.array([0.3, 0.5]))
    v = jnp.array([1.0, -0.5])

    def d3(x):
        return simdiff.derivative(p, 3, v, x, method=method)

    def ref(x):
        g = lambda t: jnp.exp((x[0] + t * v[0]) * (x[1] + t * v[1]))  # noqa: E731
        return jax.grad(jax.grad(jax.grad(g)))(0.0)

    x = jnp.array([0.3, 0.5])
    _close(_run(jax.grad(d3), x), jax.grad(ref)(x), path_rtol(100))


def test_laplacian_under_jit_and_grad():
    p = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x) * x**2), x0=np.ones(2))
    f = lambda x: jnp.sum(jnp.sin(x) * x**2)  # noqa: E731
    x = jnp.array([0.2, -0.4])
    lap = jax.grad(lambda x: simdiff.laplacian(p, x))  # the collapsed Taylor pass, traced
    _close(_run(lap, x), jax.grad(lambda x: jnp.trace(jax.hessian(f)(x)))(x), path_rtol(100))


def test_finite_checks_run_where_values_exist():
    p = simdiff.Problem(lambda x, ops: ops.sum(x**2), x0=np.ones(2))
    bad = np.array([1.0, np.nan])
    with pytest.raises(simdiff.InputError, match=r"x\[1\] = nan"):
        simdiff.grad(p, bad)
    # under jit the values do not exist yet: the check is skipped, NaN passes through
    assert np.isnan(np.asarray(jax.jit(lambda x: simdiff.grad(p, x))(jnp.asarray(bad)))[1])
    # under torch.func.grad they do (the tensor is wrapped but concrete): the check runs
    with pytest.raises(simdiff.InputError, match=r"x\[1\] = nan"):
        torch.func.grad(lambda x: simdiff.grad(p, x).sum())(torch.tensor(bad))


# --------------------------------------------------------------------------- torch


def _torch_reference_step(X):
    per = torch.func.vmap(lambda x: _score(torch.func.hessian(_lj_torch)(x), torch))
    return torch.func.grad(lambda X: per(X).sum())(X)


def test_torch_func_vmap_and_grad_of_the_pes_hessian(lj3, geometries, jax_reference):
    X = torch.tensor(geometries)
    per = torch.func.vmap(lambda x: _score(simdiff.hessian(lj3, x), torch))  # backend: torch
    g = torch.func.grad(lambda X: per(X).sum())(X)
    assert isinstance(g, torch.Tensor) and g.shape == (16, 9)
    _close(g, _torch_reference_step(X))
    _close(g, jax_reference)  # across frameworks
    face = torch.func.vmap(lambda x: _score(simdiff.torch.hessian(lj3)(x), torch))
    _close(torch.func.grad(lambda X: face(X).sum())(X), g)


def test_torch_function_face_of_a_torch_function(geometries):
    X = torch.tensor(geometries[:4])
    _close(torch.func.vmap(simdiff.torch.hessian(_lj_torch))(X),
           torch.func.vmap(torch.func.hessian(_lj_torch))(X))  # fmt: skip
    lap = torch.func.grad(simdiff.torch.laplacian(_lj_torch))(X[0])
    ref = torch.func.grad(lambda x: torch.trace(torch.func.hessian(_lj_torch)(x)))(X[0])
    _close(lap, ref)


@pytest.mark.slow  # Dynamo traces simdiff's host code up to each graph break: about 8 s
@pytest.mark.filterwarnings("ignore:Dynamo:UserWarning")  # its notes on the graph breaks
def test_torch_compile_of_the_problem_face_runs_with_graph_breaks():
    p = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x) ** 2), x0=np.ones(3))
    x = torch.linspace(0.1, 0.9, 3, dtype=torch.float64)
    compiled = torch.compile(lambda x: simdiff.grad(p, x), backend="eager")
    _close(compiled(x), torch.sin(2.0 * x), path_rtol(10))


@pytest.mark.slow  # Dynamo traces torch.func's transforms: 4-8 s on a loaded 2-core machine
def test_torch_compile_of_the_function_face_is_one_graph():
    p = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x) ** 2), x0=np.ones(3))
    x = torch.linspace(0.1, 0.9, 3, dtype=torch.float64)
    compiled = torch.compile(simdiff.torch.hvp(p), fullgraph=True, backend="eager")
    _close(compiled(torch.ones(3, dtype=torch.float64), x), 2.0 * torch.cos(2.0 * x))


# --------------------------------------------------------------------------- defaults


def test_from_torch_defaults_to_torch():
    p = simdiff.Problem.from_torch(lambda x: torch.sum(torch.sin(x)), np.zeros(2))
    assert p.default_backend == "torch"
    assert simdiff.Derivatives(p).backend.name == "torch"
    _close(simdiff.grad(p), np.ones(2))
    _close(simdiff.hessian(p, np.array([0.5, 1.0])), -np.diag(np.sin([0.5, 1.0])))


def test_from_jax_operators_fall_back_to_nested_and_say_why():
    p = simdiff.Problem.from_jax(lambda x: jnp.sum(jnp.sin(x) ** 3), np.array([0.3, 0.7]))
    assert p.default_backend == "jax" and not p.supports("taylor")
    x = np.array([0.3, 0.7])
    H = simdiff.hessian(p, x)
    _close(simdiff.laplacian(p, x), np.trace(H), path_rtol(50))
    v = np.array([1.0, 2.0])
    _close(simdiff.derivative(p, 2, v, x), v @ H @ v, path_rtol(50))
    info = simdiff.core.derivatives.cached_derivatives(p, "jax").cache_info()
    reasons = {r["kind"]: r.get("method_reason", "") for r in info}
    assert "Taylor context" in reasons["derivative_sum_nested"]
    assert "'nested' ran instead of 'collapsed'" in reasons["derivative_sum_nested"]
    assert "'nested' ran instead of 'taylor'" in reasons["derivative"]


def test_default_backend_follows_a_traced_input():
    p = simdiff.Problem(lambda x, ops: ops.sum(x**3), x0=np.ones(2))
    g = torch.func.grad(lambda x: simdiff.grad(p, x).sum())(
        torch.tensor([1.0, 2.0], dtype=torch.float64)
    )
    _close(g, np.array([6.0, 12.0]))


# --------------------------------------------------------------------------- the boundary


def test_explicit_taylor_method_that_cannot_run_names_the_alternative():
    p = simdiff.Problem.from_jax(lambda x: jnp.sum(x**3), np.ones(2))
    with pytest.raises(simdiff.UnsupportedError, match="use method='nested'"):
        simdiff.derivative(p, 2, np.ones(2), method="taylor")
    with pytest.raises(simdiff.UnsupportedError, match="use method='nested'"):
        simdiff.laplacian(p, method="collapsed")
    with pytest.raises(simdiff.UnsupportedError, match=r"simdiff.derivative\(problem, k"):
        simdiff.taylor(p, 2, np.ones(2))


def test_a_traced_value_cannot_cross_frameworks(lj3):
    with pytest.raises(simdiff.InputTypeError, match=r"traced jax array .* use backend='jax'"):
        jax.jit(lambda x: simdiff.grad(lj3, x, backend="torch"))(jnp.ones(9))
    with pytest.raises(simdiff.InputTypeError, match=r"traced torch array .* use backend='torch'"):
        torch.func.grad(lambda x: simdiff.grad(lj3, x, backend="jax").sum())(
            torch.ones(9, dtype=torch.float64)
        )


def test_host_only_methods_refuse_tracers(lj3):
    with pytest.raises(simdiff.UnsupportedError, match="assembled on the host"):
        jax.jit(lambda x: simdiff.hessian(lj3, x, method="structured"))(jnp.asarray(lj3.x0))
    p = simdiff.Problem(lambda x, ops: ops.sum(x**3), x0=np.ones(2))
    with pytest.raises(simdiff.UnsupportedError, match="method='nested'"):
        jax.jit(lambda x: simdiff.derivative_tensor(p, 2, x, method="taylor"))(jnp.ones(2))


def test_function_face_errors():
    f = lambda x: jnp.sum(x**2)  # noqa: E731
    with pytest.raises(simdiff.ShapeError, match=r"shape \(n,\).*jax's vmap"):
        simdiff.jax.hessian(f)(jnp.ones((3, 2)))
    with pytest.raises(simdiff.ShapeError, match="needs a scalar function"):
        simdiff.jax.grad(lambda x: x * 2.0)(jnp.ones(2))
    with pytest.raises(simdiff.InputTypeError, match="use simdiff.torch.grad"):
        simdiff.jax.grad(f)(torch.ones(2))
    with pytest.raises(simdiff.DTypeError, match="floating-point"):
        simdiff.jax.grad(f)(jnp.arange(3))
    with pytest.raises(simdiff.OptionError, match="no host step"):
        simdiff.jax.hessian(f, method="structured")
    with pytest.raises(simdiff.UnsupportedError, match="simdiff.Problem written with ops"):
        simdiff.jax.derivative(f, 2, method="taylor")
    with pytest.raises(simdiff.UnsupportedError, match="simdiff.Problem written with ops"):
        simdiff.torch.taylor(lambda x: torch.sum(x), 2)
    with pytest.raises(simdiff.ShapeError, match=r"direction must have shape \(2,\)"):
        simdiff.jax.hvp(f)(jnp.ones(3), jnp.ones(2))
    with pytest.raises(simdiff.InputTypeError, match="a function f\\(x\\) or a simdiff.Problem"):
        simdiff.torch.grad(3.0)
