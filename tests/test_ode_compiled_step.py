"""``Derivatives(..., compile=True | "auto")`` on torch ODE problems: the compiled step.

A solver with ``step_compiles`` and not ``loop_compiles`` (here a Dopri5
subclass: Dopri5 itself compiles its whole loop since session 6,
tests/test_ode_compiled_loop.py) runs each step as one compiled graph
(``ops.compile_part``) for value, gradient and VJP (transforms at the top
level), the controller on the host; elsewhere (Hessians, HVPs, under vmap)
the step runs eagerly.  Some tests compile for real; the others use a
stand-in compiler.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import simdiff
from simdiff.backends import get_backend
from simdiff.backends.torch import TorchBackend
from simdiff.errors import UnsupportedError
from simdiff.ode import Dopri5, FixedStep, ODEProblem, Rodas3


def _oscillator(t, y, p, ops):
    return ops.stack([y[1], -p[0] * y[0] - p[1] * y[1]])


class StepDopri5(Dopri5):
    """Dopri5 with its step compiled and the loop on the host (its path before session 6;
    Dopri5 now compiles its whole loop: tests/test_ode_compiled_loop.py)."""

    loop_compiles = False


def _problem(solver=None):
    return ODEProblem(
        _oscillator, [1.0, 0.0], (0.0, 2.0), [4.0, 0.3], save_at=np.linspace(0.5, 2.0, 4),
        observable=lambda ys, ops: ops.sum(ys[:, 0] ** 2) + ys[-1, 1],
        solver=solver or StepDopri5(rtol=1e-8, atol=1e-10, max_steps=500),
    )  # fmt: skip


class StandIn:
    """torch.compile's stand-in: returns the function, counts compiles and their fullgraph."""

    def __init__(self) -> None:
        self.calls: list[bool] = []

    def __call__(self, fn, fullgraph: bool = False):
        self.calls.append(fullgraph)
        return fn


@pytest.fixture
def stand_in(monkeypatch):
    fake = StandIn()
    monkeypatch.setattr(
        TorchBackend, "compile", lambda self, fn, fullgraph=False: fake(fn, fullgraph)
    )
    return fake


def test_the_step_is_the_compiled_part_for_top_level_derivatives(stand_in) -> None:
    p = _problem()
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    g, v = d.grad(), d.value()
    want = simdiff.Derivatives(p, backend="torch")
    # the same numbers to rounding: the compiled step sums its tableau products, eager uses matmul
    np.testing.assert_allclose(g, want.grad(), rtol=1e-13, atol=0)
    np.testing.assert_allclose(v, want.value(), rtol=1e-13, atol=0)
    # one compile per callable, of one whole graph (the step)
    assert stand_in.calls == [True, True]
    for info in d.cache_info():
        assert info["path"] == "compiled"
        assert info["compiles"] == "the dopri5 step (stages and error estimate), one graph"


def test_every_step_of_a_gradient_runs_the_same_graph(monkeypatch) -> None:
    """Dynamo specialises a graph on which inputs require grad: the first step
    (``y0`` a constant) gets the tracking pattern of the later ones, not a graph of its own."""
    patterns: set[tuple[bool, ...]] = set()

    def recording(self, fn, fullgraph=False):
        def run(*args):
            leaves = torch.utils._pytree.tree_leaves(args)
            patterns.add(tuple(x.requires_grad for x in leaves if isinstance(x, torch.Tensor)))
            return fn(*args)

        return run

    monkeypatch.setattr(TorchBackend, "compile", recording)
    d = simdiff.Derivatives(_problem(), backend="torch", compile=True)
    g = d.grad()
    assert len(patterns) == 1
    (pattern,) = patterns
    assert pattern[:2] == (False, True)  # t untracked, y tracked (also on the first step)
    eager = simdiff.Derivatives(_problem(), backend="torch").grad()
    np.testing.assert_allclose(g, eager, rtol=1e-13, atol=0)  # sums for matmul: rounding
    patterns.clear()
    d.value()
    assert patterns and not any(any(p) for p in patterns)


def test_hessians_and_rosenbrock_compile_the_whole_callable(stand_in) -> None:
    """FixedStep compiles its whole loop instead (tests/test_ode_compiled_loop.py)."""
    d = simdiff.Derivatives(_problem(), backend="torch", compile=True)
    d.hessian()
    assert d.cache_info()[0]["compiles"] == "the whole callable"
    assert stand_in.calls == [False]
    other = simdiff.Derivatives(
        _problem(Rodas3(rtol=1e-6, atol=1e-8)), backend="torch", compile=True
    )
    other.grad()
    assert other.cache_info()[0]["compiles"] == "the whole callable"
    fixed = simdiff.Derivatives(_problem(FixedStep(n_steps=40)), backend="torch", compile=True)
    fixed.grad()
    assert fixed.cache_info()[0]["compiles"].startswith("the rk4 step loop")


def test_the_step_runs_eagerly_inside_a_transform(stand_in) -> None:
    """Under jacrev (a Hessian's outer level) and vmap the compiled part is not used."""
    p = _problem()
    T = get_backend("torch")
    ops = T.ops_compiling_parts()
    x = torch.tensor(p.x0, dtype=torch.float64)
    T.grad(lambda y: p.fn(y, ops))(x)
    part = ops.compile_part
    assert part.compiled_calls > 0 and part.eager_calls == 0
    n = part.compiled_calls
    H = torch.func.jacrev(T.grad(lambda y: p.fn(y, ops)))(x)
    torch.func.vmap(lambda y: p.fn(y, ops))(torch.stack([x, 1.01 * x]))
    assert part.compiled_calls == n and part.eager_calls > 0
    want = simdiff.Derivatives(p, backend="torch").hessian()
    np.testing.assert_allclose(H.numpy(), want, rtol=1e-13)


@pytest.mark.slow
def test_compiled_step_derivatives_match_eager_and_jax() -> None:
    """For real: torch.compile of the Dopri5 step, gradient and value against eager and JAX."""
    p = _problem()
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    eager = simdiff.Derivatives(p, backend="torch")
    jax = simdiff.Derivatives(p, backend="jax")
    g = d.grad()
    np.testing.assert_allclose(g, eager.grad(), rtol=1e-13, atol=0)
    np.testing.assert_allclose(g, jax.grad(), rtol=1e-10, atol=0)
    np.testing.assert_allclose(d.value(), eager.value(), rtol=1e-13)
    info = {i["kind"]: i for i in d.cache_info()}
    assert info["grad"]["path"] == "compiled" and info["grad"]["compile_s"] > 0


@pytest.mark.slow
def test_a_step_that_is_not_one_graph_is_refused_with_torchs_reason() -> None:
    def rhs(t, y, p, ops):  # a Python branch on a value: no single graph
        return -p[0] * y if float(y[0]) > 0.0 else p[0] * y

    p = ODEProblem(rhs, [1.0], (0.0, 1.0), [2.0], save_at=[1.0],
                   observable=lambda ys, ops: ops.sum(ys))  # fmt: skip
    with pytest.raises(UnsupportedError, match="torch.compile failed on grad"):
        simdiff.Derivatives(p, backend="torch", compile=True, probe=False).grad()


def test_auto_compiles_the_step_once_the_announced_calls_pay(stand_in) -> None:
    d = simdiff.Derivatives(_problem(), backend="torch", compile="auto").expect_calls(10**6)
    for _ in range(3):  # two eager calls measure the eager time, the third compiles
        d.grad()
    assert stand_in.calls == [True]
    info = d.cache_info()[0]
    assert info["compiles"] == "the dopri5 step (stages and error estimate), one graph"
    assert "compile_s" in info


def test_tableau_products_are_broadcast_sums_where_the_step_compiles(monkeypatch) -> None:
    """Inductor makes each ``matmul`` an external ``mm`` call: where the step compiles, sums instead."""
    from simdiff.ode.rk import weighted

    T = get_backend("torch")
    plain, parts = T.ops(), T.ops_compiling_parts()
    w = plain.asarray([0.1, 0.2, 0.3])
    ks = plain.asarray(np.arange(6.0).reshape(3, 2))
    want = weighted(w, ks, plain)

    def no_matmul(*args):
        raise AssertionError("weighted used matmul in a context that compiles its step")

    monkeypatch.setattr(parts, "matmul", no_matmul)
    torch.testing.assert_close(weighted(w, ks, parts), want, rtol=1e-15, atol=0)
    monkeypatch.setattr(plain, "matmul", no_matmul)
    with pytest.raises(AssertionError, match="used matmul"):
        weighted(w, ks, plain)  # eager torch keeps its one matmul


@pytest.mark.slow
def test_compiled_step_vjp_of_a_trajectory_can_be_pulled_back_twice() -> None:
    """The pullback keeps its graph (retain_graph): the compiled step keeps its saved buffers
    (AOTAutograd's donated buffers refused this: every trajectory VJP failed to compile)."""
    p = ODEProblem(
        _oscillator, [1.0, 0.0], (0.0, 2.0), [4.0, 0.3], save_at=np.linspace(0.5, 2.0, 4),
        solver=StepDopri5(rtol=1e-8, atol=1e-10, max_steps=500),
    )  # fmt: skip
    u = np.linspace(-1.0, 1.0, 8)
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    eager = simdiff.Derivatives(p, backend="torch")
    np.testing.assert_allclose(d.vjp(u), eager.vjp(u), rtol=1e-13, atol=0)
    np.testing.assert_allclose(d.vjp(2 * u), 2 * eager.vjp(u), rtol=1e-13, atol=0)
    assert d.cache_info()[0]["path"] == "compiled"
    T = get_backend("torch")
    ops = T.ops_compiling_parts()
    _, pullback = T.vjp(lambda q: p.fn(q, ops), torch.tensor(p.x0, dtype=torch.float64))
    first, second = pullback(torch.tensor(u)), pullback(torch.tensor(u))
    torch.testing.assert_close(first, second, rtol=0, atol=0)
