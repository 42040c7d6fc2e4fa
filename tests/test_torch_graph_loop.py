"""``TorchOps.while_loop`` inside a compiled part: torch's ``while_loop`` higher-order op.

Inside one of the context's compiled parts (``ops.compile_part``, Dynamo
tracing) the loop is one graph; its gradient is taken by plain autograd
outside the compiled region.  torch 2.13 gets the gradient with respect to a
tensor the body closes over silently wrong unless the carry already requires
grad at loop entry: every floating carry leaf is tied to a tracked zero
(``_ANCHOR``).  The loop here has a data-dependent trip count.
"""

from __future__ import annotations

import pytest
import torch
from _numerics import path_rtol

from simdiff.backends import get_backend
from simdiff.backends.torch import compile as torch_compile


def _loop(a, b, ops):
    """``y' = (b0 y0 - y0 y1, -b1 y1 + y0 y1)`` by Euler steps of growing length up to t = 0.5."""

    def running(c):
        return c[0] < 0.5 - 1e-12

    def body(c):
        t, h, y = c
        dy = ops.stack([b[0] * y[0] - y[0] * y[1], -b[1] * y[1] + y[0] * y[1]])
        return t + h, h * 1.1, y + h * dy

    carry = (ops.asarray(0.0), ops.asarray(0.01), ops.stack([a, a]))
    return ops.sum(ops.while_loop(running, body, carry, 1000)[2])


def _reference(a, b):
    """The same loop in Python (no higher-order op)."""
    y, t, h = torch.stack([a, a]), 0.0, 0.01
    while t < 0.5 - 1e-12:
        y = y + h * torch.stack([b[0] * y[0] - y[0] * y[1], -b[1] * y[1] + y[0] * y[1]])
        t, h = t + h, h * 1.1
    return y.sum()


def _compiled_gradient():
    ops = get_backend("torch").ops_compiling_parts()
    a = torch.tensor(1.0, dtype=torch.float64)  # the carry's start does not depend on b
    b = torch.tensor([1.5, 0.3], dtype=torch.float64, requires_grad=True)
    # ``a`` enters as a 1-element vector: a 0-d float64 input makes torch 2.13 trace twice
    # (tests/test_torch_compile_scalars.py)
    compiled = torch.compile(
        lambda a, b: _loop(a.reshape(()), b, ops), fullgraph=True, dynamic=False
    )
    (g,) = torch.autograd.grad(compiled(a.reshape(1), b), b)
    (want,) = torch.autograd.grad(_reference(a, b), b)
    return g, want


@pytest.mark.slow
def test_compiled_graph_loop_gradient_wrt_a_closed_over_tensor(aot_eager) -> None:
    g, want = _compiled_gradient()
    torch.testing.assert_close(g, want, rtol=1e-13, atol=0)


@pytest.mark.slow
def test_without_the_anchor_the_gradient_is_wrong(monkeypatch, aot_eager) -> None:
    """Why the anchor exists: with an untracked zero in its place the gradient is wrong (torch 2.13)."""
    monkeypatch.setattr(torch_compile, "_ANCHOR", torch.zeros((1,), dtype=torch.float64))
    torch._dynamo.reset()
    g, want = _compiled_gradient()
    assert not torch.allclose(g, want, rtol=1e-6, atol=0)


def test_outside_a_compiled_part_the_loop_is_python() -> None:
    """No compiled part: the Python loop (eager), the same numbers as the reference."""
    ops = get_backend("torch").ops_compiling_parts()
    a = torch.tensor(1.0, dtype=torch.float64)
    b = torch.tensor([1.5, 0.3], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(_loop(a, b, ops), b)
    (want,) = torch.autograd.grad(_reference(a, b), b)
    # ~19 Euler steps of ~8 operations, the higher-order op's loop against Python's
    torch.testing.assert_close(g, want, rtol=path_rtol(19 * 8), atol=0)
    assert ops.concrete(a) is not None
