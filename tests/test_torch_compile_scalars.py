"""0-d float64 inputs of a torch-compiled callable are traced once, as 1-element vectors.

torch 2.13 gives the fake tensor of a 0-d float64 CPU input a symbolic float for
its ``item()``; a graph that never uses that float as a Python number still has
it specialised, and Dynamo traces the whole function a second time
(``TensorifyScalarRestartAnalysis``).  ``TorchBackend.compile`` hands such
inputs to the graph as 1-element vectors (``_scalars_lifted``) and makes them
0-d again inside it.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo.exc
from _numerics import path_rtol

from simdiff.backends import get_backend


@pytest.fixture
def restarts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of Dynamo's restarts for a specialised float, counted as they are raised.

    Dynamo remembers the names of the floats it specialised (``TensorifyState``) across
    compiles, and a later compile that meets a remembered name specialises it without a
    restart: forgotten here, so that the count does not depend on earlier tests.
    """
    from torch._dynamo.symbolic_convert import TensorifyState

    TensorifyState.clear()
    count = [0]
    real = torch._dynamo.exc.TensorifyScalarRestartAnalysis.__init__

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        count[0] += 1
        real(self, *args, **kwargs)

    monkeypatch.setattr(torch._dynamo.exc.TensorifyScalarRestartAnalysis, "__init__", counted)
    return count


def _f(x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    return (torch.sin(x) * h).sum()


def test_a_scalar_input_is_traced_once(restarts, aot_eager) -> None:
    compiled = get_backend("torch").compile(_f, fullgraph=True)
    x = torch.tensor([0.3, 1.2], dtype=torch.float64, requires_grad=True)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    value = compiled(x, torch.tensor(0.5, dtype=torch.float64))
    assert value.shape == ()
    (dx,) = torch.autograd.grad(value, x)
    # cos and a product on each path
    torch.testing.assert_close(dx, 0.5 * torch.cos(x.detach()), rtol=path_rtol(2), atol=0)
    for h in (0.25, -2.0):  # other step sizes: the same graph
        h = torch.tensor(h, dtype=torch.float64)
        # sin, product and a sum of two terms of one sign on each path
        torch.testing.assert_close(compiled(x, h), _f(x, h), rtol=path_rtol(3), atol=0)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs + 1
    assert restarts[0] == 0


def test_a_scalar_that_requires_grad_stays_0_d(restarts, aot_eager) -> None:
    """Its gradient flows; it is not lifted (its vector would be a non-leaf input)."""
    compiled = get_backend("torch").compile(_f, fullgraph=True)
    x = torch.tensor([0.3, 1.2], dtype=torch.float64)
    h = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    (dh,) = torch.autograd.grad(compiled(x, h), h)
    assert dh.shape == ()
    # sin(0.3) + sin(1.2): sin and a sum of two positive terms on each path
    torch.testing.assert_close(dh, torch.sin(x).sum(), rtol=path_rtol(2), atol=0)


def test_torch_compile_itself_traces_a_scalar_input_twice(restarts, aot_eager) -> None:
    """Why the inputs are lifted: the same function through ``torch.compile`` restarts once
    (if a torch release stops restarting, this fails and the lifting can go)."""

    def f(x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:  # its own code object, untraced
        return (torch.sin(x) * h).sum()

    compiled = torch.compile(f, fullgraph=True, dynamic=False)
    compiled(torch.tensor([0.3, 1.2], dtype=torch.float64), torch.tensor(0.5, dtype=torch.float64))
    assert restarts[0] == 1
