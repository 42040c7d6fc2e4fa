"""Top-level torch gradients by plain torch.autograd: the same numbers as torch.func, nesting intact.

``TorchBackend.grad`` / ``vjp`` take a derivative by ``torch.autograd.grad``
when no ``torch.func`` transform is active and Dynamo is not tracing; inside
a transform they are ``torch.func.grad`` / ``vjp``.  These tests hold the two
paths to the same numbers on every catalogue entry and check that the
derivatives built from them still nest (Hessians, HVPs, vmap, a user's
autograd graph, torch.compile).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _numerics import path_rtol, torch_graph_length
from _shared import shared_problem

import problems
import simdiff
from simdiff.backends import get_backend
from simdiff.backends.torch import _autograd_applies
from simdiff.errors import UnsupportedError
from simdiff.ode import ForwardAdjoint, ODEProblem

T = get_backend("torch")
OPS = T.ops()
TORCH_ENTRIES = [n for n in problems.names() if shared_problem(n).supports("torch")]
SLOW = {"burgers_colehopf", "robertson", "hires", "lv4_mean_prey", "lv4_observations"}


def _function(name: str):
    p = shared_problem(name)
    return (lambda y: p.fn(y, OPS)), torch.tensor(p.x0, dtype=torch.float64)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def _backward_rtol(f, x: torch.Tensor) -> float:
    """Two backward passes over the same graph, in another order: ``path_rtol`` of its length."""
    out = f(x.detach().requires_grad_())
    return path_rtol(torch_graph_length(out))


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in TORCH_ENTRIES]
)
def test_top_level_gradient_equals_torch_func(name: str) -> None:
    """Gradients (scalar entries) and VJPs (vector entries) agree with torch.func.

    To ``path_rtol`` of the backward graph's length (relative to the largest entry).
    """
    f, x = _function(name)
    out = f(x.detach().requires_grad_())  # its graph's length gives the tolerance
    rtol = path_rtol(torch_graph_length(out))
    if out.ndim == 0:
        got, want = T.grad(f)(x), torch.func.grad(f)(x)
    else:
        u = torch.linspace(1.0, 2.0, out.numel(), dtype=torch.float64).reshape(out.shape)
        got, want = T.vjp(f, x)[1](u)[0], torch.func.vjp(f, x)[1](u)[0]
    assert not got.requires_grad
    assert _rel(got, want) <= rtol


def test_the_plain_path_is_taken_only_outside_transforms() -> None:
    x = torch.ones(3, dtype=torch.float64)
    seen: list[bool] = []

    def f(y):
        seen.append(_autograd_applies(y))
        return torch.sum(torch.sin(y))

    T.grad(f)(x)
    torch.func.vmap(T.grad(f))(torch.ones(2, 3, dtype=torch.float64))
    torch.func.jacfwd(T.grad(f))(x)
    # the first call runs f on a plain tensor: were it inside a transform, f would see one
    assert seen[0] is True and seen[1:] == [False, False]
    assert not _autograd_applies(torch.ones(2, dtype=torch.int64))


@pytest.mark.parametrize("name", ["ishigami", "lj13", "lotka_volterra_fit", "ode_linear_energy"])
def test_derivatives_nest_as_with_torch_func(name: str) -> None:
    """Hessian, reverse-over-reverse HVP and a vmapped gradient built from the backend's grad."""
    f, x = _function(name)
    v = torch.linspace(1.0, -0.5, x.numel(), dtype=torch.float64)
    H = torch.func.jacrev(torch.func.jacrev(f))(x)
    assert _rel(torch.func.jacrev(T.grad(f))(x), H) <= 1e-13
    assert _rel(torch.func.jacfwd(T.grad(f))(x), H) <= 1e-12
    hvp = T.grad(lambda y: torch.sum(T.grad(f)(y) * v))(x)  # both levels by plain autograd
    want = torch.func.grad(lambda y: torch.sum(torch.func.grad(f)(y) * v))(x)
    assert not hvp.requires_grad
    assert _rel(hvp, want) <= 1e-14
    assert _rel(hvp, H @ v) <= 1e-12
    xs = torch.stack([x, 1.01 * x])
    batched = torch.func.vmap(T.grad(f))(xs)
    assert _rel(batched[1], torch.func.grad(f)(xs[1])) <= _backward_rtol(f, xs[1])


def test_derivatives_api_numbers_unchanged() -> None:
    """simdiff's grad, value_and_grad, vjp, Hessian and HVP on torch, against torch.func."""
    p = shared_problem("lotka_volterra_fit")
    f, x = _function("lotka_volterra_fit")
    d = simdiff.Derivatives(p, backend="torch")
    v = np.linspace(1.0, -0.5, p.n)
    g = torch.func.grad(f)(x).numpy()
    rtol = _backward_rtol(f, x)  # simdiff's path against torch.func's, same graph
    np.testing.assert_allclose(d.grad(), g, rtol=rtol, atol=0)
    val, g2 = d.value_and_grad()
    np.testing.assert_allclose(g2, g, rtol=rtol, atol=0)
    assert val == pytest.approx(float(f(x)), rel=rtol)
    np.testing.assert_allclose(d.vjp(np.array(2.0)), 2.0 * g, rtol=rtol, atol=0)
    H = torch.func.jacrev(torch.func.jacrev(f))(x).numpy()
    np.testing.assert_allclose(d.hessian(), H, rtol=1e-12, atol=0)
    np.testing.assert_allclose(d.hvp(v), H @ v, rtol=1e-12, atol=0)


def test_gradient_of_an_input_in_a_users_graph_stays_differentiable() -> None:
    """As with torch.func.grad: a user's autograd graph through the gradient is kept."""
    z = torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True)

    def f(y):
        return torch.sum(y**3)

    g = T.grad(f)(2.0 * z)
    assert g.requires_grad
    (gz,) = torch.autograd.grad(g.sum(), z)
    # closed form against 4 AD operations (cube, sum, scale, chain)
    torch.testing.assert_close(gz, 2.0 * 6.0 * (2.0 * z.detach()), rtol=path_rtol(4), atol=0)


def test_a_function_that_ignores_its_input_has_a_zero_gradient() -> None:
    x = torch.ones(3, dtype=torch.float64)
    c = torch.tensor(2.0, dtype=torch.float64)
    for f in (lambda y: c * 3.0, lambda y: torch.sum(y[:1]) * 0 + c):
        torch.testing.assert_close(T.grad(f)(x), torch.func.grad(f)(x), rtol=0, atol=0)
    torch.testing.assert_close(T.vjp(lambda y: c * 3.0, x)[1](c)[0], torch.zeros(3).double())


def test_non_scalar_output_raises_torch_funcs_error() -> None:
    x = torch.ones(3, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
        T.grad(lambda y: y * 2.0)(x)


def test_a_pullback_called_again_and_inside_vmap() -> None:
    f, x = _function("spherical")
    out, pullback = T.vjp(f, x)
    us = torch.eye(out.numel(), dtype=torch.float64)
    J = torch.func.jacrev(f)(x)
    tol = {"rtol": _backward_rtol(lambda y: f(y).sum(), x), "atol": 0}
    torch.testing.assert_close(pullback(us[0])[0], J[0], **tol)
    torch.testing.assert_close(pullback(us[1])[0], J[1], **tol)
    torch.testing.assert_close(torch.func.vmap(lambda u: pullback(u)[0])(us), J, **tol)


def test_a_refused_reverse_pass_still_raises_its_message() -> None:
    """ForwardAdjoint's backward raises UnsupportedError under plain autograd too."""
    p = ODEProblem(
        lambda t, y, q, ops: -q[0] * y, [1.0], (0.0, 1.0), [2.0], save_at=[1.0],
        observable=lambda ys, ops: ops.sum(ys), adjoint=ForwardAdjoint(),
    )  # fmt: skip
    with pytest.raises(UnsupportedError, match="forward"):
        T.grad(lambda y: p.fn(y, OPS))(torch.tensor([2.0], dtype=torch.float64))


@pytest.mark.parametrize("name", ["seed", "heat_diffusivity", "ode_rk4_decay"])
def test_one_parameter_rev_rev_hessian_by_one_hvp_is_the_nested_jacobian(name, backend):
    """n = 1: the reverse-over-reverse Hessian is one HVP (simdiff.core.builders.hessian_by_hvps);
    the same numbers as jacrev(jacrev f) on both backends, the method still named rev-rev."""
    p = shared_problem(name)
    assert p.n == 1 and p.is_scalar
    d = simdiff.Derivatives(p, backend)
    be = d.backend
    x = be.from_numpy(p.x0, d.dtype)
    h = np.asarray(be.to_numpy(d.hessian(x, method="rev-rev")))
    ops = be.ops()
    nested = be.jit(be.jacrev(be.jacrev(lambda y: p.fn(y, ops))))(x)  # JAX: compiled, not op by op
    assert h.shape == (1, 1)
    np.testing.assert_allclose(h, np.asarray(be.to_numpy(nested)), rtol=1e-13, atol=0)
    assert d.cache_info()[-1]["method"] == "rev-rev"
