"""``Derivatives(..., compile=True | "auto")`` on torch, FixedStep and Dopri5: the step loop is one graph.

For value, gradient and VJP (transforms at the top level) the driver's
traced loop -- method, controller, saving -- runs as one compiled part
(``simdiff.ode._driver._compiled_loop``); inside it ``ops.while_loop`` is
torch's ``while_loop`` higher-order op, whose gradient by plain autograd is
right only with every carry leaf tied to the backend's anchor.  Second-order
derivatives (HVP, Hessian) never take this path: torch.func over the op fails
and its double backward is 0 (eager) or refused (compiled).  The tests with a
real compile are marked slow (tiny problems: 2 states, 12 steps).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import simdiff
from simdiff.backends import get_backend
from simdiff.backends import torch as torch_backend
from simdiff.backends.torch import TorchBackend
from simdiff.ode import Dopri5, FixedStep, ODEProblem


def _lv(t, y, p, ops):
    return ops.stack([p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]])


def _problem(observable=True):
    """y0 does not depend on the parameters (wrt="params"): the case the anchor is for."""
    return ODEProblem(
        _lv, [1.0, 0.5], (0.0, 1.2), [1.1, 0.4, 0.9, 0.3], save_at=[0.3, 0.6, 1.2],
        observable=(lambda ys, ops: ops.sum(ys**2)) if observable else None,
        solver=FixedStep(n_steps=12),
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


def test_the_loop_is_the_compiled_part_for_top_level_derivatives(stand_in) -> None:
    """One whole graph per callable; the traced loop's numbers are the eager loop's."""
    p = _problem()
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    eager = simdiff.Derivatives(p, backend="torch")
    np.testing.assert_allclose(d.grad(), eager.grad(), rtol=1e-14, atol=0)
    np.testing.assert_allclose(d.value(), eager.value(), rtol=1e-14, atol=0)
    assert stand_in.calls == [True, True]
    for info in d.cache_info():
        assert info["path"] == "compiled"
        assert info["compiles"] == "the rk4 step loop (method, controller, saving), one graph"


def test_second_order_derivatives_never_take_the_compiled_loop(stand_in) -> None:
    """Hessians and HVPs compile the whole callable; under jacrev/vmap the part runs eagerly."""
    p = _problem()
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    H, hv = d.hessian(), d.hvp(np.ones(p.n))
    for info in d.cache_info():
        assert info["compiles"] == "the whole callable"
    want = simdiff.Derivatives(p, backend="jax")
    np.testing.assert_allclose(H, want.hessian(), rtol=1e-12, atol=0)
    np.testing.assert_allclose(hv, want.hvp(np.ones(p.n)), rtol=1e-12, atol=0)
    assert np.abs(H).max() > 0.1  # not the silent zero of a double backward through the op
    T = get_backend("torch")
    ops = T.ops_compiling_parts()
    x = torch.tensor(p.x0, dtype=torch.float64)
    part = ops.compile_part
    H2 = torch.func.jacrev(T.grad(lambda y: p.fn(y, ops)))(x)
    assert part.compiled_calls == 0 and part.eager_calls > 0
    np.testing.assert_allclose(H2.numpy(), want.hessian(), rtol=1e-12, atol=0)


def _compiled_vs_eager_and_jax():
    p = _problem()
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    g = d.grad()
    assert d.cache_info()[0]["path"] == "compiled"
    return g, simdiff.Derivatives(p, backend="torch").grad(), simdiff.Derivatives(p, "jax").grad()


@pytest.mark.slow
def test_compiled_loop_gradient_matches_eager_and_jax() -> None:
    """For real (torch.compile, the while_loop op).  Fails if the anchor is removed: y0 is
    a constant, so the gradient flows only through tensors the loop body closes over."""
    g, eager, jax = _compiled_vs_eager_and_jax()
    np.testing.assert_allclose(g, eager, rtol=1e-12, atol=0)
    np.testing.assert_allclose(g, jax, rtol=1e-12, atol=0)


@pytest.mark.slow
def test_without_the_anchor_the_compiled_loop_gradient_is_wrong(monkeypatch) -> None:
    """The test above fails without the anchor (torch 2.13): an untracked zero in its place."""
    monkeypatch.setattr(torch_backend, "_ANCHOR", torch.zeros((), dtype=torch.float64))
    g, eager, _ = _compiled_vs_eager_and_jax()
    assert not np.allclose(g, eager, rtol=1e-6, atol=0)


@pytest.mark.slow
def test_compiled_loop_vjp_and_value_match_eager_and_jax() -> None:
    p = _problem(observable=False)
    u = np.linspace(-1.0, 1.0, 6)
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    eager, jax = simdiff.Derivatives(p, backend="torch"), simdiff.Derivatives(p, "jax")
    np.testing.assert_allclose(d.vjp(u), eager.vjp(u), rtol=1e-12, atol=0)
    np.testing.assert_allclose(d.vjp(u), jax.vjp(u), rtol=1e-12, atol=0)
    np.testing.assert_allclose(d.value(), eager.value(), rtol=1e-12, atol=0)
    assert all(i["path"] == "compiled" for i in d.cache_info())


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
