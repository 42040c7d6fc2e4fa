"""``Derivatives(..., compile=True | "auto")`` on torch, FixedStep and Dopri5: the step loop is one graph.

For value, gradient and VJP (transforms at the top level) the driver's
traced loop -- method, controller, saving -- runs as one compiled part
(``simdiff.ode.solvers.driver._compiled_loop``); inside it ``ops.while_loop`` is
torch's ``while_loop`` higher-order op, whose gradient by plain autograd is
right only with every carry leaf tied to the backend's anchor.  Second-order
derivatives (HVP, Hessian) never take this path: torch.func over the op fails
and its double backward is 0 (eager) or refused (compiled).  The tests with a
real compile are marked slow (tiny problems: 2 states, 12 steps); those about
the op's gradient compile with ``aot_eager`` (the fixture of that name: Dynamo
and AOTAutograd, where the anchor's bug is, without Inductor's C++ build), the
Dopri5 and Rodas3 tests with Inductor.  (The
compiled *step* with the loop on the host, the path before session 6, was
removed: one mechanism.)
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _numerics import path_rtol

import simdiff
from simdiff.backends import get_backend
from simdiff.backends.torch import TorchBackend
from simdiff.backends.torch import compile as torch_compile
from simdiff.backends.torch.traced import TracedGraph
from simdiff.errors import UnsupportedError
from simdiff.ode import (
    Dopri5,
    FixedStep,
    ODEProblem,
    Rodas3,
    Rodas5P,
)


def _lv(t, y, p, ops):
    return ops.stack([p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]])


def _problem(observable=True):
    """y0 does not depend on the parameters (wrt="params"): the case the anchor is for."""
    return ODEProblem(
        _lv, [1.0, 0.5], (0.0, 1.2), [1.1, 0.4, 0.9, 0.3], save_at=[0.3, 0.6, 1.2],
        observable=(lambda ys, ops: ops.sum(ys**2)) if observable else None,
        solver=FixedStep(n_steps=12),
    )  # fmt: skip


@pytest.fixture(scope="module")
def jax_lv() -> simdiff.Derivatives:
    """JAX's derivatives of ``_problem()``, the reference of several tests: each compiled
    once for the module (in the problem's cache)."""
    return simdiff.Derivatives(_problem(), "jax")


@pytest.fixture(scope="module")
def jax_rodas3_grad() -> np.ndarray:
    """JAX's gradient of the Rodas3 problem with the default adjoint: the reference of both
    adjoints (each differentiates the same discrete solution; JAX's adjoints agree to
    rounding, tests/test_ode_loop.py)."""
    return np.asarray(simdiff.Derivatives(_rodas_problem(), "jax").grad())


class StandIn:
    """torch.compile's stand-in: returns the function, counts compiles and their fullgraph."""

    def __init__(self) -> None:
        self.calls: list[bool] = []

    def __call__(self, fn, fullgraph: bool = False, pointwise_cat: bool = False):
        self.calls.append(fullgraph)
        return fn


@pytest.fixture
def stand_in(monkeypatch):
    fake = StandIn()
    monkeypatch.setattr(
        TorchBackend, "compile", lambda self, fn, fullgraph=False, **kw: fake(fn, fullgraph)
    )
    return fake


def test_the_loop_is_the_compiled_part_for_top_level_derivatives(stand_in) -> None:
    """One whole graph per callable; the traced loop's numbers are the eager loop's."""
    p = _problem()
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    eager = simdiff.Derivatives(p, backend="torch")
    # the traced loop sums where eager multiplies matrices: 12 RK4 steps, ~40 operations each
    rtol = path_rtol(12 * 40)
    np.testing.assert_allclose(d.grad(), eager.grad(), rtol=rtol, atol=0)
    np.testing.assert_allclose(d.value(), eager.value(), rtol=rtol, atol=0)
    # what ran, in the message: on a 12-process run the stand-in once saw no compile
    assert stand_in.calls == [True, True], d.cache_info()
    for info in d.cache_info():
        assert info["path"] == "compiled"
        assert info["compiles"] == "the rk4 step loop (method, controller, saving), one graph"


def test_second_order_derivatives_never_take_the_compiled_loop(stand_in, jax_lv) -> None:
    """Hessians and HVPs compile the whole callable; under jacrev/vmap the part runs eagerly."""
    p = _problem()
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    H, hv = d.hessian(), d.hvp(np.ones(p.n))
    for info in d.cache_info():
        assert info["compiles"] == "the whole callable"
    want = jax_lv.hessian()  # JAX's HVP equals its Hessian's product (test_ode_derivatives.py)
    np.testing.assert_allclose(H, want, rtol=1e-12, atol=0)
    np.testing.assert_allclose(hv, want @ np.ones(p.n), rtol=1e-12, atol=1e-12 * np.abs(want).max())
    assert np.abs(H).max() > 0.1  # not the silent zero of a double backward through the op
    T = get_backend("torch")
    ops = T.ops_compiling_parts()
    x = torch.tensor(p.x0, dtype=torch.float64)
    part = ops.compile_part
    T.grad(lambda y: p.fn(y, ops))(x)  # at the top level: the compiled part
    n = part.compiled_calls
    assert n > 0 and part.eager_calls == 0
    H2 = torch.func.jacrev(T.grad(lambda y: p.fn(y, ops)))(x)
    torch.func.vmap(lambda y: p.fn(y, ops))(torch.stack([x, 1.01 * x]))
    assert part.compiled_calls == n and part.eager_calls > 0
    np.testing.assert_allclose(H2.numpy(), want, rtol=1e-12, atol=0)


def _rodas_problem(solver=None, adjoint=None, observable=True):
    return ODEProblem(
        _lv, [1.0, 0.5], (0.0, 1.2), [1.1, 0.4, 0.9, 0.3], save_at=[0.3, 0.6, 1.2],
        observable=(lambda ys, ops: ops.sum(ys**2)) if observable else None,
        solver=solver or Rodas3(rtol=1e-6, atol=1e-8, h0=0.01), adjoint=adjoint,
    )  # fmt: skip


def test_rosenbrock_compiles_its_step_with_the_loop_on_the_host(stand_in) -> None:
    """Rodas3's loop does not compile in torch 2.13: its step is the part, called per step."""
    p = _rodas_problem()
    assert p.compiles_parts == (
        "the rodas3 step (Jacobian, factorisation, stages), one graph, and its VJP by "
        "recomputation, another; the loop on the host"
    )
    assert _rodas_problem(adjoint="direct").compiles_parts == (
        "the rodas3 step (Jacobian, factorisation, stages), one graph; the loop on the host"
    )
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    g = d.grad()
    assert d.cache_info()[0]["compiles"] == p.compiles_parts
    # the step and its VJP, each compiled once for every step
    assert stand_in.calls == [True, True]
    info = p.solve_info(backend="torch")  # the same steps as JAX (test_ode_loop.py), eagerly
    steps = int(info["n_accepted"] + info["n_rejected"])
    # the same arithmetic as the eager loop: the step's ~200 roundings, times the steps
    rtol = path_rtol(200 * steps)
    np.testing.assert_allclose(g, simdiff.Derivatives(p, backend="torch").grad(), rtol=rtol, atol=0)
    np.testing.assert_allclose(d.value(), simdiff.Derivatives(p, "torch").value(), rtol=rtol)


def test_the_compiled_step_is_called_once_per_attempted_step(stand_in) -> None:
    p = _rodas_problem()
    T = get_backend("torch")
    ops = T.ops_compiling_parts()
    x = torch.tensor(p.x0, dtype=torch.float64)
    T.grad(lambda y: p.fn(y, ops))(x)
    info = p.solve_info(backend="torch")
    assert ops.compile_part.compiled_calls == int(info["n_accepted"] + info["n_rejected"])
    assert ops.compile_part.eager_calls == 0
    torch.func.vmap(lambda y: p.fn(y, ops))(torch.stack([x, 1.01 * x]))  # under vmap: eager
    assert ops.compile_part.eager_calls > 0


def _saved_tensors_of_a_gradient(fn, x) -> tuple[int, torch.Tensor]:
    """``(tensors the forward saved for the backward, gradient)`` of a scalar ``fn`` at ``x``."""
    count = 0

    def pack(t):
        nonlocal count
        count += 1
        return t

    x = x.detach().requires_grad_(True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(x)
    (g,) = torch.autograd.grad(out, x)
    return count, g


@pytest.mark.parametrize("adjoint", ["checkpoint", "direct"])
def test_checkpoint_adjoint_recomputes_each_compiled_step_in_its_backward(
    stand_in, adjoint
) -> None:
    """CheckpointAdjoint (the default): a step's tape node saves the step's inputs (t, y, h,
    p) and its backward is one VJP call that recomputes the step; DirectAdjoint keeps the
    step's intermediates.  Both give eager torch's gradient."""
    p = _rodas_problem(Rodas5P(rtol=1e-6, atol=1e-8, h0=0.01), adjoint=adjoint)
    T = get_backend("torch")
    ops = T.ops_compiling_parts()
    x = torch.tensor(p.x0, dtype=torch.float64)
    saved, g = _saved_tensors_of_a_gradient(lambda y: p.fn(y, ops), x)
    want = _saved_tensors_of_a_gradient(lambda y: p.fn(y, T.ops()), x)[1]
    info = p.solve_info(backend="torch")
    attempted, accepted = int(info["n_accepted"] + info["n_rejected"]), int(info["n_accepted"])
    part = ops.compile_part
    assert part.compiled_calls == attempted and part.eager_calls == 0
    # a Rodas5P step is ~300 roundings; the same arithmetic on both paths here (no compiler)
    torch.testing.assert_close(g, want, rtol=path_rtol(300 * attempted), atol=0)
    if adjoint == "checkpoint":
        assert part.backward_calls == accepted
        # 4 inputs a step, plus what the saving and the observable keep (a few dozen)
        assert saved <= 4 * accepted + 64
    else:
        assert part.backward_calls == 0
        assert saved > 100 * accepted  # the Jacobian's, the inverse's, the eight stages'


def test_a_rematerialised_step_can_be_pulled_back_twice_and_differentiated_again(
    stand_in,
) -> None:
    """The trajectory VJP's pullback keeps the saved inputs (retain_graph); a backward with
    create_graph (reverse over reverse) differentiates the recomputed step."""
    p = _rodas_problem(Rodas5P(rtol=1e-6, atol=1e-8, h0=0.01), observable=False)
    T = get_backend("torch")
    ops, plain = T.ops_compiling_parts(), T.ops()
    x = torch.tensor(p.x0, dtype=torch.float64)
    u = torch.linspace(-1.0, 1.0, 6, dtype=torch.float64)
    _, pullback = T.vjp(lambda q: p.fn(q, ops), x)
    first, second = pullback(u), pullback(u)
    want = T.vjp(lambda q: p.fn(q, plain), x)[1](u)
    info = p.solve_info(backend="torch")
    rtol = path_rtol(300 * int(info["n_accepted"] + info["n_rejected"]))
    torch.testing.assert_close(first, want, rtol=rtol, atol=0)
    torch.testing.assert_close(second, first, rtol=rtol, atol=0)
    assert ops.compile_part.backward_calls == 2 * int(info["n_accepted"])
    v = torch.tensor([1.0, -0.5, 0.25, 2.0], dtype=torch.float64)

    def hvp(context):
        xr = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(p.fn(xr, context).sum(), xr, create_graph=True)
        return torch.autograd.grad(g @ v, xr)[0]

    h, h_want = hvp(ops), hvp(plain)
    assert float(h.abs().max()) > 1e-3  # not the silent zero of an undifferentiable backward
    torch.testing.assert_close(h, h_want, rtol=rtol, atol=0)


def test_auto_compiles_the_loop_once_the_announced_calls_pay(stand_in) -> None:
    d = simdiff.Derivatives(_problem(), backend="torch", compile="auto").expect_calls(10**6)
    for _ in range(3):  # two eager calls measure the eager time, the third compiles
        d.grad()
    assert stand_in.calls == [True]
    info = d.cache_info()[0]
    assert info["compiles"] == "the rk4 step loop (method, controller, saving), one graph"
    assert "compile_s" in info


def test_tableau_products_are_broadcast_sums_where_the_context_compiles_parts(
    monkeypatch,
) -> None:
    """Inductor makes each ``matmul`` an external ``mm`` call: where parts compile, sums instead."""
    from simdiff.ode.solvers.rk import weighted

    T = get_backend("torch")
    plain, parts = T.ops(), T.ops_compiling_parts()
    w = plain.asarray([0.1, 0.2, 0.3])
    ks = plain.asarray(np.arange(6.0).reshape(3, 2))
    want = weighted(w, ks, plain)

    def no_matmul(*args):
        raise AssertionError("weighted used matmul in a context that compiles parts")

    monkeypatch.setattr(parts, "matmul", no_matmul)
    # a broadcast sum of 3 products against a matmul: 3 roundings a path
    torch.testing.assert_close(weighted(w, ks, parts), want, rtol=path_rtol(3), atol=0)
    monkeypatch.setattr(plain, "matmul", no_matmul)
    with pytest.raises(AssertionError, match="used matmul"):
        weighted(w, ks, plain)  # eager torch keeps its one matmul


def _compiled_and_eager():
    p = _problem()
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    g = d.grad()
    assert d.cache_info()[0]["path"] == "compiled"
    return g, simdiff.Derivatives(p, backend="torch").grad()


@pytest.mark.slow
def test_compiled_loop_gradient_matches_eager_and_jax(aot_eager, jax_lv) -> None:
    """For real (torch.compile, the while_loop op; AOTAutograd without Inductor, where
    the anchor's bug is).  Fails if the anchor is removed: y0 is a constant, so the
    gradient flows only through tensors the loop body closes over."""
    g, eager = _compiled_and_eager()
    np.testing.assert_allclose(g, eager, rtol=1e-12, atol=0)
    np.testing.assert_allclose(g, jax_lv.grad(), rtol=1e-12, atol=0)


@pytest.mark.slow
def test_without_the_anchor_the_compiled_loop_gradient_is_wrong(monkeypatch, aot_eager) -> None:
    """The test above fails without the anchor (torch 2.13): an untracked zero in its place."""
    monkeypatch.setattr(torch_compile, "_ANCHOR", torch.zeros((1,), dtype=torch.float64))
    g, eager = _compiled_and_eager()
    assert not np.allclose(g, eager, rtol=1e-6, atol=0)


@pytest.mark.slow
def test_dopri5_compiled_loop_gradient_matches_eager_and_jax() -> None:
    """The adaptive loop (controller, rejected steps, FSAL state) as one graph."""
    p = ODEProblem(
        _lv, [1.0, 0.5], (0.0, 1.2), [1.1, 0.4, 0.9, 0.3], save_at=[0.3, 0.6, 1.2],
        observable=lambda ys, ops: ops.sum(ys**2), solver=Dopri5(rtol=1e-6, atol=1e-9),
    )  # fmt: skip
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    g = d.grad()
    info = d.cache_info()[0]
    assert info["path"] == "compiled"
    assert info["compiles"] == "the dopri5 step loop (method, controller, saving), one graph"
    np.testing.assert_allclose(g, simdiff.Derivatives(p, "torch").grad(), rtol=1e-12, atol=0)
    np.testing.assert_allclose(g, simdiff.Derivatives(p, "jax").grad(), rtol=1e-12, atol=0)
    # steady calls, at the point and at others, run the graph built: no trace again (the
    # leak guard, active around the call, once failed Dynamo's guards: a trace every call)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for q in (p.x0, [1.0, 0.4, 0.9, 0.3], [1.2, 0.5, 0.8, 0.35]):
        d.grad(np.asarray(q, dtype=float))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs


@pytest.fixture(params=["checkpoint", "direct"])
def rosenbrock_adjoint(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each adjoint; DirectAdjoint's with ``aot_eager`` (its one graph is Dynamo's and
    AOTAutograd's; Inductor's code for the same step is CheckpointAdjoint's test)."""
    if request.param == "direct":
        request.getfixturevalue("aot_eager")
    return request.param


@pytest.mark.slow
def test_rosenbrock_compiled_step_gradient_matches_eager_and_jax(
    rosenbrock_adjoint, jax_rodas3_grad
) -> None:
    """For real: Rodas3's step (jacfwd, inverse, four stages) compiled; with
    CheckpointAdjoint two traced graphs called without Dynamo (the forward, and the VJP that
    recomputes it), with DirectAdjoint one Dynamo/AOTAutograd graph, forward and backward.
    Later calls at other points reuse them (the first step's state is tied to the parameters
    like every later one's).  Rodas3 and not Rodas5P: the same mechanism (the step of any
    Rosenbrock method is one part) for three quarters of Inductor's build time."""
    adjoint = rosenbrock_adjoint
    p = _rodas_problem(adjoint=adjoint)
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    traced = TracedGraph.built
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    g = d.grad()
    assert d.cache_info()[0]["path"] == "compiled"
    info = p.solve_info(backend="torch")  # the same steps as JAX (test_ode_loop.py), eagerly
    steps = int(info["n_accepted"] + info["n_rejected"])
    # Inductor reorders the step's sums: ~200 roundings a step on each path
    rtol = path_rtol(200 * steps)
    np.testing.assert_allclose(g, simdiff.Derivatives(p, "torch").grad(), rtol=rtol, atol=0)
    np.testing.assert_allclose(g, jax_rodas3_grad, rtol=rtol, atol=0)
    for q in ([1.0, 0.4, 0.9, 0.3], [1.2, 0.5, 0.8, 0.35]):
        d.grad(np.asarray(q, dtype=float))
    remat = adjoint == "checkpoint"
    assert TracedGraph.built == traced + (2 if remat else 0)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == before + (0 if remat else 1)


@pytest.mark.slow
def test_a_loop_that_is_not_one_graph_is_refused_with_torchs_reason() -> None:
    def rhs(t, y, p, ops):  # a Python branch on a value: no single graph
        return -p[0] * y if float(y[0]) > 0.0 else p[0] * y

    p = ODEProblem(rhs, [1.0], (0.0, 1.0), [2.0], save_at=[1.0],
                   observable=lambda ys, ops: ops.sum(ys), solver=FixedStep(n_steps=4))  # fmt: skip
    with pytest.raises(UnsupportedError, match="torch.compile failed on grad"):
        simdiff.Derivatives(p, backend="torch", compile=True, probe=False).grad()


@pytest.mark.slow
def test_compiled_loop_vjp_and_value_match_and_the_vjp_can_be_pulled_back_twice(
    aot_eager, monkeypatch
) -> None:
    """Trajectory VJP and value against eager torch and JAX, on one compile of each.

    The pullback keeps its graph (retain_graph): the compiled loop keeps its saved buffers
    (AOTAutograd's donated buffers refused this: every trajectory VJP failed to compile)."""
    p = _problem(observable=False)
    u = np.linspace(-1.0, 1.0, 6)
    T = get_backend("torch")
    contexts = []  # the contexts Derivatives compiles its parts in: the VJP's, the value's
    real = T.ops_compiling_parts
    monkeypatch.setattr(
        T, "ops_compiling_parts", lambda *a: contexts.append(real(*a)) or contexts[-1]
    )
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    eager, jax = simdiff.Derivatives(p, backend="torch"), simdiff.Derivatives(p, "jax")
    np.testing.assert_allclose(d.vjp(u), eager.vjp(u), rtol=1e-12, atol=0)
    np.testing.assert_allclose(d.vjp(u), jax.vjp(u), rtol=1e-12, atol=0)
    np.testing.assert_allclose(d.vjp(2 * u), 2 * eager.vjp(u), rtol=1e-12, atol=0)
    np.testing.assert_allclose(d.value(), eager.value(), rtol=1e-12, atol=0)
    assert all(i["path"] == "compiled" for i in d.cache_info())
    # the VJP's own compiled loop (no second trace), its pullback called twice
    ops = contexts[0]
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    calls = ops.compile_part.compiled_calls
    _, pullback = T.vjp(lambda q: p.fn(q, ops), torch.tensor(p.x0, dtype=torch.float64))
    first, second = pullback(torch.tensor(u)), pullback(torch.tensor(u))
    assert ops.compile_part.compiled_calls == calls + 1 and ops.compile_part.eager_calls == 0
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    np.testing.assert_allclose(first[0].numpy(), eager.vjp(u), rtol=1e-12, atol=0)
