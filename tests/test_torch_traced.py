"""``TracedGraph``: a function traced by make_fx, compiled by Inductor, called without Dynamo.

The rematerialised parts of ``compile=True`` (a Rosenbrock step and its VJP) run through it;
``tests/test_ode_compiled_loop.py`` checks their gradients on a real compile.  Here: what
its own signature check decides (another shape builds another graph, another value of the
same shape does not), the output structure, gradients off, the singular-matrix error the
part compiler falls back on, and the refusal of a function that is not one graph.
"""

from __future__ import annotations

import pytest
import torch
from _numerics import path_rtol

from simdiff.backends.torch import _inductor_options
from simdiff.backends.torch.traced import TracedGraph


def _solve_scaled(a, b, opts):
    """``(inv(a) @ b * scale, tag, ())`` with ``opts = {"scale": float, "tag": str}``."""
    return torch.linalg.inv(a) @ b * opts["scale"], opts["tag"], ()


@pytest.mark.slow
def test_one_graph_per_signature_with_the_functions_outputs() -> None:
    f = TracedGraph(_solve_scaled, _inductor_options(pointwise_cat=True))
    a = torch.tensor([[2.0, 1.0], [0.5, 3.0]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([1.0, -1.0], dtype=torch.float64)
    x, tag, empty = f(a, b, {"scale": 2.0, "tag": "t"})
    # an inverse and a product on a 2x2 system: a few roundings of a cond(a) ~ 2 problem
    torch.testing.assert_close(
        x, 2.0 * torch.linalg.solve(a.detach(), b), rtol=path_rtol(8, condition=4.0), atol=0
    )
    assert (tag, empty) == ("t", ()) and not x.requires_grad  # run with gradients off
    assert f.graphs == 1
    f(2.0 * a.detach(), b, {"scale": 2.0, "tag": "t"})  # other values, same signature
    assert f.graphs == 1
    y, _, _ = f(a.detach(), b, {"scale": 3.0, "tag": "t"})  # a Python value: its own graph
    torch.testing.assert_close(y, 1.5 * x, rtol=path_rtol(8), atol=0)
    assert f.graphs == 2
    with pytest.raises(torch.linalg.LinAlgError):  # what _PartCompiler.run falls back on
        f(torch.zeros(2, 2, dtype=torch.float64), b, {"scale": 2.0, "tag": "t"})


def test_a_function_that_is_not_one_graph_fails_in_its_trace() -> None:
    def branchy(x):
        return x * 2.0 if float(x.sum()) > 0.0 else -x

    f = TracedGraph(branchy, _inductor_options(pointwise_cat=False))
    with pytest.raises(Exception, match="data-dependent|Could not guard"):
        f(torch.ones(3, dtype=torch.float64))
    assert f.graphs == 0
