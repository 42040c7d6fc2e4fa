"""The torch transforms: ``torch.func``, by plain ``torch.autograd`` where that applies.

:func:`_grad` and :func:`_vjp` are ``torch.func.grad`` and ``torch.func.vjp``
outside every transform and outside Dynamo's tracing, taken by plain autograd
(the same backward formulas, without torch.func's per-operation dispatch
through its transform level); :func:`jacfwd` is the forward-mode Jacobian a
solver calls inside a problem; :func:`forward_only` is the identity whose
reverse pass raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch._functorch.config
import torch.func

from simdiff.backends.torch.dispatch import dispatch_paused
from simdiff.errors import UnsupportedError

__all__ = [
    "_autograd_applies", "_concrete", "_grad", "_in_transform", "_vjp", "forward_only", "jacfwd",
]  # fmt: skip


def _in_transform() -> bool:
    """Whether a ``torch.func`` transform (grad, jvp, vjp, vmap, jacfwd, ...) is active."""
    return torch._C._functorch.peek_interpreter_stack() is not None


def _autograd_applies(x: Any) -> bool:
    """Whether a gradient at ``x`` may be taken by plain ``torch.autograd``.

    Outside every ``torch.func`` transform and outside Dynamo's tracing
    (torch.compile traces ``torch.func`` transforms; ``torch.autograd.grad``
    is a graph break there), for one floating tensor argument.
    """
    return (
        isinstance(x, torch.Tensor)
        and x.is_floating_point()
        and not _in_transform()
        and not torch.compiler.is_compiling()
    )


def _plain_input(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """The tensor to differentiate at, and whether an outer autograd level tracks ``x``.

    At the top level ``x`` is detached (the derivative is not recorded for
    anyone); inside an outer plain-autograd derivative (the outer level of a
    reverse-over-reverse HVP) ``x`` is used as it is and the derivative is
    built with ``create_graph`` so that the outer level can differentiate it.
    """
    nested = bool(x.requires_grad and torch.is_grad_enabled())
    return (x if nested else x.detach().requires_grad_(True)), nested


def _grad(func: Callable[..., Any], argnums: Any = 0, has_aux: bool = False) -> Callable[..., Any]:
    """``torch.func.grad(func)``, taken by plain ``torch.autograd`` where no transform is active.

    The same numbers (the same backward formulas run), without torch.func's
    per-operation dispatch through its transform level, a cost per ATen
    operation that dominates a long ODE gradient (``python -m
    validation.benchmarks.bench_ode_tape``, docs/performance.md).  Inside a
    transform (``jacrev``, ``jacfwd``, ``vmap``, ``jvp``, ``grad``), under
    torch.compile, and for ``argnums``/``has_aux`` other than the defaults,
    this is ``torch.func.grad``.  A derivative called inside an outer
    plain-autograd derivative is built with ``create_graph`` (nesting works:
    reverse-over-reverse Hessian-vector products).
    """
    functional = torch.func.grad(func, argnums=argnums, has_aux=has_aux)
    if argnums != 0 or has_aux:
        return functional

    def grad(*args: Any, **kwargs: Any) -> Any:
        if len(args) != 1 or kwargs or not _autograd_applies(args[0]):
            return functional(*args, **kwargs)
        x, nested = _plain_input(args[0])
        with torch.enable_grad():
            out = func(x)
            if not (isinstance(out, torch.Tensor) and out.ndim == 0):
                return functional(*args)  # torch.func's own error message
            if not out.requires_grad:  # f does not depend on x
                return torch.zeros_like(args[0])
            with dispatch_paused():  # torch's backward (a compiled one may compile here)
                (g,) = torch.autograd.grad(
                    out, x, create_graph=nested, allow_unused=True, materialize_grads=True
                )
        return g

    grad.__doc__ = func.__doc__
    return grad


def _vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """``torch.func.vjp``, by plain ``torch.autograd`` outside transforms (as :func:`_grad`).

    The pullback may be called more than once (the graph is retained while
    it lives); called inside a transform it falls back to ``torch.func.vjp``
    (recomputing ``func``).
    """
    if has_aux or len(primals) != 1 or not _autograd_applies(primals[0]):
        return torch.func.vjp(func, *primals, has_aux=has_aux)
    x, nested = _plain_input(primals[0])
    with torch.enable_grad():
        out = func(x)
    if not isinstance(out, torch.Tensor):
        return torch.func.vjp(func, *primals)

    def pullback(u: Any) -> tuple[Any]:
        if _in_transform() or torch.compiler.is_compiling():
            return torch.func.vjp(func, *primals)[1](u)  # type: ignore[no-any-return]
        if not out.requires_grad:
            return (torch.zeros_like(primals[0]),)
        # a compiled backward may compile here (with Dynamo's fake tensors: no dispatch watch)
        with torch.enable_grad(), _kept_buffers(), dispatch_paused():
            create = nested or (isinstance(u, torch.Tensor) and u.requires_grad)
            (g,) = torch.autograd.grad(
                out, x, u, retain_graph=True, create_graph=create, allow_unused=True,
                materialize_grads=True,
            )  # fmt: skip
        return (g,)

    return (out if nested else out.detach()), pullback


def _concrete(x: Any) -> Any:
    if not isinstance(x, torch.Tensor):
        return np.asarray(x)
    try:
        if x.ndim == 0:
            return np.asarray(float(x.detach()))
        if _in_transform():
            # inside torch.func.grad / jvp the tensor has no storage for .numpy(); its
            # values are read by tolist (raises under vmap, where there is no one value)
            return np.asarray(x.detach().tolist())
        return x.detach().cpu().numpy()
    except RuntimeError:  # vmap / functional tensors without a value
        return None


#: AOTAutograd's donated buffers (a backward that frees what it saved) refuse a second
#: backward through the graph, and a VJP's pullback keeps the graph for more than one
#: cotangent (:func:`_vjp`: ``retain_graph=True``): compiled parts keep their buffers.
#: Without this the compiled VJP of every vector-valued Dopri5 problem whose output is
#: the trajectory failed ("This backward function was compiled with non-empty donated
#: buffers which requires ... retain_graph=False"; lotka_volterra, ode_linear).
def _kept_buffers() -> Any:
    return torch._functorch.config.patch(donated_buffer=False)


class _ForwardOnly(torch.autograd.Function):
    """``ops.forward_only``: the identity; forward AD passes, backward raises the message."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, message: str) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.message = inputs[1]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        raise UnsupportedError(ctx.message)

    @staticmethod
    def jvp(ctx: Any, x_t: torch.Tensor, _: Any) -> torch.Tensor:
        return x_t


def forward_only(x: Any, message: str) -> Any:
    """``x``; forward AD passes, a backward pass raises ``UnsupportedError(message)``."""
    if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
        return x
    return _ForwardOnly.apply(x, message)


def jacfwd(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Forward-mode Jacobian ``d fn(z, *consts) / dz``, usable inside a solver.

    ``torch.func.vmap`` of ``torch.func.jvp`` over the unit tangents (what
    ``torch.func.jacfwd`` does), with the tensors in ``consts`` entering
    the ``jvp`` as primals with zero tangents.  A tensor closed over
    instead is a plain tensor inside the transform, and an operation
    mixing it with a dual, batched one takes torch's decomposition path
    (Python reference implementations), several times slower than passing
    them (the Jacobian of the HIRES right-hand side with its rate constants;
    ``docs/results/probe_torch_rosenbrock.txt``, docs/performance.md).
    """

    def jac(z: Any, *consts: Any) -> Any:
        idx = [i for i, c in enumerate(consts) if isinstance(c, torch.Tensor)]

        def g(zz: Any, *tensors: Any) -> Any:
            args = list(consts)
            for i, c in zip(idx, tensors, strict=True):
                args[i] = c
            return fn(zz, *args)

        prim = tuple(consts[i] for i in idx)
        zeros = tuple(torch.zeros_like(c) for c in prim)
        eye = torch.eye(int(z.shape[0]), dtype=z.dtype, device=z.device)

        def column(v: Any) -> Any:
            return torch.func.jvp(g, (z, *prim), (v, *zeros))[1]

        return torch.movedim(torch.func.vmap(column)(eye), 0, -1)

    return jac
