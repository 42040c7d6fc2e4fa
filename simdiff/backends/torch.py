"""The PyTorch context: ``torch.func`` transforms, optionally ``torch.compile``.

Notes
-----
``ops.checkpoint`` uses ``torch.utils.checkpoint`` where it composes; inside
``torch.func`` transforms it does not (torch raises "torch.func transforms
don't yet support saved tensor hooks"), so there it is the identity and memory
is not bounded by rematerialisation.  This is stated in docs/backends.md.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch._functorch.config
import torch.func
import torch.utils.checkpoint

from simdiff.backends._base import BINARY, UNARY, Backend, LoopOps, Namespace
from simdiff.backends._torch_leaks import (
    LeakGuard,
    dispatch_paused,
    guard_message,
    paused,
    watching_grad_mode,
)
from simdiff.backends._torch_traced import TracedGraph
from simdiff.backends._tree import tree_flatten, tree_unflatten
from simdiff.errors import InputTypeError, UnsupportedError

__all__ = ["TorchBackend", "TorchOps"]

_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    np.dtype("float64"): torch.float64,
    np.dtype("float32"): torch.float32,
}
_SAME = (
    "abs", "negative", "sign", "sqrt", "square", "exp", "expm1", "log", "log1p",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "isfinite", "add", "subtract", "multiply", "divide", "pow", "atan2",
    "maximum", "minimum", "broadcast_to", "matmul", "einsum", "floor", "round",
)  # fmt: skip


def torch_dtype(dtype: Any) -> torch.dtype:
    """Map a numpy/str/torch dtype to a torch floating dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    key = np.dtype(dtype) if not isinstance(dtype, str) else dtype
    try:
        return _DTYPES[key]
    except KeyError:
        raise InputTypeError(f"expected a float32 or float64 dtype, got {dtype!r}") from None


def _axis(axis: Any) -> Any:
    return tuple(axis) if isinstance(axis, list) else axis


_BINARY = (*BINARY, "matmul")
# Operands torch functions reject where numpy and JAX accept them.
_HOST = (int, float, np.generic, np.ndarray)
# Ops whose value is floating even for integer input (numpy: np.exp(2) is float64).
_FLOAT_VALUED = frozenset(
    "sqrt exp expm1 log log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh "
    "divide atan2".split()
)


def solve(a: Any, b: Any) -> Any:
    """``torch.linalg.solve(a, b)`` as ``torch.linalg.inv(a) @ b``.

    ``torch.linalg.solve``'s second-order forward-mode derivative (a JVP of a
    JVP) is wrong in torch 2.13: on a 2x2 system it differs from JAX's and
    from a central difference of the first JVP by up to 30%
    (``tests/test_backends.py``); the nested directional derivatives of a
    Rosenbrock solve (Rodas3 on robertson) were 3% off.  ``linalg.inv``'s
    derivatives are written in terms of the inverse itself (``-A^-1 dA A^-1``
    forward, ``-A^-T G A^-T`` in reverse), so they nest correctly, and its
    reverse pass is two matrix products.  (``lu_factor`` + ``lu_solve`` nest
    correctly too, but their reverse pass unpacks the factors with
    ``triu``/``tril``, which start an intra-op parallel region even for an
    8x8 matrix: a mean 35 ms a call on two cores shared with other jobs
    against 1 us on one thread, ``docs/results/probe_torch_rosenbrock.txt``;
    it was the main cost of a torch Rodas5P gradient.)  The forward error is
    of the order of ``cond(a) * eps``, as for an LU solve.  ``b`` of shape
    ``a.shape[:-1]`` is a vector, as in ``torch.linalg.solve``.

    A singular ``a`` gives NaN, as JAX's solve gives a non-finite result, and
    does not raise: the inverse is ``torch.linalg.inv_ex``'s, whose ``info``
    selects NaN in place of the inverse of a matrix it could not invert.  A
    graph of it then holds no error check, which is an effect to
    Inductor: such a graph is never taken from Inductor's FX graph cache, and
    its C++ wrapper reports the error as a bare ``RuntimeError``.  simdiff's
    finite check names the entry a NaN reaches; a Rosenbrock step rejects the
    step (:func:`simdiff.ode.rosenbrock._factor`).
    """
    vec = b.ndim == a.ndim - 1
    inv, info = torch.linalg.inv_ex(a)
    inv = torch.where((info == 0)[..., None, None], inv, math.nan)
    x = torch.matmul(inv, b.unsqueeze(-1) if vec else b)
    return x.squeeze(-1) if vec else x


def _accepting_scalars(fn: Callable[..., Any], ops: TorchOps, arity: int = 0) -> Callable[..., Any]:
    """``fn`` that also takes Python/numpy scalars and numpy arrays, as numpy and JAX do.

    Tensor calls go straight to ``fn`` after one ``isinstance`` (``arity`` 1
    and 2 avoid packing the arguments; the ``try`` is free in Python 3.11):
    about 0.1 us per call, measured in docs/errors.md.  Only a call without
    a tensor at either end, or a ``TypeError`` with a host operand, converts
    the operands (:meth:`TorchOps._tensors`).
    """
    tensor, floating = torch.Tensor, fn.__name__ in _FLOAT_VALUED

    def convert(args: tuple[Any, ...]) -> Any:
        return fn(*ops._tensors(args, floating))

    if arity == 1:

        def op(x: Any) -> Any:
            if isinstance(x, tensor):
                return fn(x)
            return convert((x,))

    elif arity == 2:

        def op(x1: Any, x2: Any) -> Any:  # type: ignore[misc]
            if isinstance(x1, tensor) or isinstance(x2, tensor):
                try:
                    return fn(x1, x2)
                except TypeError:
                    if not (isinstance(x1, _HOST) or isinstance(x2, _HOST)):
                        raise
            # no tensor operand (torch would compute in its default float32), or torch refused one
            return convert((x1, x2))

    else:

        def op(*args: Any) -> Any:  # type: ignore[misc]
            if isinstance(args[0], tensor) or isinstance(args[-1], tensor):
                try:
                    return fn(*args)
                except TypeError:
                    if not any(isinstance(a, _HOST) for a in args):
                        raise
            return convert(args)

    op.__name__ = op.__qualname__ = fn.__name__
    op.__doc__ = f"``torch.{fn.__name__}``; Python and numpy scalars are accepted as operands."
    return op


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
    per-operation dispatch through its transform level: a long ODE gradient
    (146 Dopri5 steps, ~224k ATen operations) took 0.64x to 0.76x of the
    torch.func time (``python -m validation.benchmarks.bench_ode_tape``).  Inside a
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


@functools.lru_cache(maxsize=256)
def _split_plan(
    bounds: tuple[tuple[int, int], ...], shapes: tuple[tuple[int, ...], ...]
) -> tuple[str, Any, Any]:
    """How :func:`_split_leaves` splits leaves of ``shapes`` (made once per structure):
    ``("scalars", None, None)``, ``("rows", trailing shape, rows per leaf)`` or ``("split",
    sizes, None)``."""
    if all(s == () for s in shapes):
        return "scalars", None, None
    trail = tuple(shapes[0][1:])
    if all(len(s) >= 2 and tuple(s[1:]) == trail for s in shapes):
        return "rows", trail, [s[0] for s in shapes]
    return "split", [b - a for a, b in bounds], None


@functools.lru_cache(maxsize=256)
def _join_plan(shapes: tuple[torch.Size, ...], k: int) -> str:
    """How :meth:`TorchBackend.join` joins leaves of ``shapes`` with ``k`` leading axes (made
    once per tuple of shapes): ``"stack"`` (every leaf a scalar of the leading axes),
    ``"rows"`` (unbatched leaves of one trailing shape: one ``cat`` along the first axis and
    a view) or ``"cat"`` (the leaves as vectors, concatenated)."""
    if all(len(s) == k for s in shapes):
        return "stack"
    if not k:
        trail = shapes[0][1:]
        if trail and all(len(s) >= 2 and s[1:] == trail for s in shapes):
            return "rows"
    return "cat"


def _split_leaves(
    flat: torch.Tensor, bounds: Any, shapes: Any, mark: bool = False
) -> list[torch.Tensor]:
    """The leaves of ``flat`` (``(*lead, n)``), each ``(*lead, *shape)``, as views in one or
    two recorded operations instead of a slice (and a reshape) per leaf: one ``unbind`` for
    scalar leaves; one reshape and one ``split`` along the first axis for leaves of one
    trailing shape (``{"A": (26, 3), "B": (12, 3)}``); else one ``split`` and a reshape per
    leaf that is not a vector.  Under eager autograd every operation is a node of the
    backward pass (a slice's backward fills a zero vector of length ``n``), so fewer is
    cheaper; ``torch.func`` transforms batch each alike.

    ``mark`` (inside a problem's function): leaves of one trailing shape split from one
    point are marked with the reshaped point they were split from (:data:`_ROWS`), so that
    :meth:`TorchOps.concat` of all of them in order returns that tensor, the same values,
    with no operation at all (what a function of per-species positions does first)."""
    kind, a, b = _split_plan(tuple(bounds), tuple(shapes))
    if kind == "scalars":
        return list(torch.unbind(flat, -1))
    lead = flat.shape[:-1]  # a torch.Size: a tuple
    if kind == "rows":
        whole = flat.reshape(*lead, -1, *a)
        leaves = list(torch.split_with_sizes(whole, b, dim=len(lead)))
        # one point (no leading axes) outside Dynamo (no tensor attributes there): marked
        if mark and not lead and not torch.compiler.is_compiling():
            k = len(leaves)
            for i, leaf in enumerate(leaves):
                setattr(leaf, _ROWS, (whole, i, k))
        return leaves
    chunks = torch.split_with_sizes(flat, a, dim=-1)
    return [c if len(s) == 1 else c.squeeze(-1) if s == () else c.reshape(*lead, *s)
            for c, s in zip(chunks, shapes, strict=True)]  # fmt: skip


#: The attribute :func:`_split_leaves` sets on leaves of one trailing shape:
#: ``(whole, i, k)``, the reshaped point they were split from, the leaf's position and the
#: number of leaves (no reference back to the leaves: no cycle keeps a graph alive).
_ROWS = "_simdiff_rows"


def _split_rows(arrays: list[Any]) -> torch.Tensor | None:
    """The point the leaves ``arrays`` were split from (:func:`_split_leaves`) where they
    are all of its leaves, in order: what their concatenation along the first axis
    equals; else None."""
    tag = getattr(arrays[0], _ROWS, None)
    if tag is None or tag[2] != len(arrays):
        return None
    whole = tag[0]
    for i, a in enumerate(arrays):
        t = getattr(a, _ROWS, None)
        if t is None or t[0] is not whole or t[1] != i:
            return None
    return whole  # type: ignore[no-any-return]


def _adjacent_views(arrays: list[Any]) -> torch.Tensor | None:
    """What ``torch.cat(arrays)`` (along the first axis) equals, as one view of the arrays'
    common base, where each is a contiguous view of that (contiguous) tensor of the same
    trailing shape and they lie one after another in its memory; else None.

    The leaves a structured problem's function receives are such views of the flat point
    (:func:`_split_leaves`); a function that concatenates them again (per-species
    positions into one ``(N, 3)`` array) then gets the point itself, reshaped: no copy,
    and under eager autograd one view node instead of a concatenation and a split in the
    backward pass.  The values are those of the concatenation; like any view it shares
    the point's memory (the ``ops`` functions never write in place).  Not inside
    ``torch.func`` transforms or ``torch.compile`` tracing (their tensors are wrappers):
    ``torch.cat`` there.
    """
    if torch.compiler.is_compiling():  # first: Dynamo cannot trace the functorch query
        return None
    first = arrays[0]
    base = first._base if type(first) is torch.Tensor else None
    if base is None or first.dim() == 0 or torch._C._functorch.is_functorch_wrapped_tensor(first):
        return None
    trail = first.shape[1:]
    start = end = first.storage_offset()
    rows = 0
    for a in arrays:
        if (
            type(a) is not torch.Tensor
            or a._base is not base
            or a.shape[1:] != trail
            or a.storage_offset() != end
            or not a.is_contiguous()
        ):
            return None
        end += a.numel()
        rows += a.shape[0]
    if not base.is_contiguous():
        return None
    offset = base.storage_offset()
    if start == offset and end - start == base.numel():
        return base.view(rows, *trail)  # the whole base: the usual case
    return base.view(-1)[start - offset : end - offset].view(rows, *trail)


class TorchOps(LoopOps):
    """``ops`` over torch tensors with Array-API names and numpy-style keywords."""

    name = "torch"

    def __init__(self, dtype: Any = torch.float64, device: Any = None) -> None:
        self.dtype = torch_dtype(dtype)
        self.device = torch.device("cpu") if device is None else torch.device(device)
        for name in _SAME:
            arity = 1 if name in UNARY else 2 if name in _BINARY else 0
            self.__dict__[name] = _accepting_scalars(getattr(torch, name), self, arity)
        self.linalg = Namespace(solve=_accepting_scalars(solve, self, 2))
        cplx = torch.complex128 if self.dtype == torch.float64 else torch.complex64
        self._complex = cplx

        def freq(fn: Callable[..., Any]) -> Callable[..., Any]:
            return lambda n, d=1.0: fn(n, d, dtype=self.dtype, device=self.device)

        self.fft = Namespace(
            rfft=lambda x, n=None, axis=-1, norm=None: torch.fft.rfft(
                self._tensor(x), n=n, dim=axis, norm=norm
            ),
            irfft=lambda x, n=None, axis=-1, norm=None: torch.fft.irfft(
                self._tensor(x), n=n, dim=axis, norm=norm
            ),
            fft=lambda x, n=None, axis=-1, norm=None: torch.fft.fft(
                self._tensor(x), n=n, dim=axis, norm=norm
            ),
            ifft=lambda x, n=None, axis=-1, norm=None: torch.fft.ifft(
                self._tensor(x), n=n, dim=axis, norm=norm
            ),
            rfftfreq=freq(torch.fft.rfftfreq),
            fftfreq=freq(torch.fft.fftfreq),
        )

    # --- scalar operands -----------------------------------------------------------
    def _tensors(self, args: Any, floating: bool = False) -> list[Any]:
        """Host operands (Python/numpy scalars, numpy arrays) as tensors, the way numpy types them.

        A host operand takes the dtype and device of the first floating
        tensor operand (a Python float next to a float32 tensor stays
        float32, as in JAX); without one, floats get the context dtype and
        integers stay integers unless ``floating`` (the op's value is
        floating, e.g. ``exp(2)``).
        """
        like = next(
            (a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None
        )
        dtype = self.dtype if like is None else like.dtype
        device = self.device if like is None else like.device
        out = []
        for a in args:
            if isinstance(a, _HOST):
                # Python scalars are typed without numpy: Dynamo cannot trace
                # np.asarray(1.0).dtype.kind, and the graph break made every problem
                # with a scalar operand (ops.where(c, x, 1.0)) run eagerly when compiled.
                if isinstance(a, bool):
                    kind = "b"
                elif isinstance(a, int):
                    kind = "i"
                elif isinstance(a, float):
                    kind = "f"
                else:
                    a = np.asarray(a)
                    kind = a.dtype.kind
                to_float = kind == "f" or (kind in "iub" and (like is not None or floating))
                a = torch.as_tensor(a, dtype=dtype if to_float else None, device=device)
            out.append(a)
        return out

    def _tensor(self, x: Any) -> Any:
        """``x`` as a tensor: tensors pass through; host scalars and arrays are converted."""
        return x if isinstance(x, torch.Tensor) else self._tensors((x,))[0]

    # --- reductions (numpy keywords) ------------------------------------------
    # A full reduction is already 0-d: reshape only for keepdims (each op costs
    # microseconds under torch.func, so none is added that the result does not need).
    def sum(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        x = self._tensor(x)
        if axis is None:
            return torch.sum(x).reshape((1,) * x.ndim) if keepdims else torch.sum(x)
        return torch.sum(x, dim=_axis(axis), keepdim=keepdims)

    def prod(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        x = self._tensor(x)
        if axis is None:
            return torch.prod(x).reshape((1,) * x.ndim) if keepdims else torch.prod(x)
        if isinstance(axis, (tuple, list)):
            for a in sorted((a % x.ndim for a in axis), reverse=True):
                x = torch.prod(x, dim=a, keepdim=keepdims)
            return x
        return torch.prod(x, dim=axis, keepdim=keepdims)

    def mean(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        x = self._tensor(x)
        if axis is None:
            return torch.mean(x).reshape((1,) * x.ndim) if keepdims else torch.mean(x)
        return torch.mean(x, dim=_axis(axis), keepdim=keepdims)

    def max(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        x = self._tensor(x)
        return torch.amax(x, dim=() if axis is None else _axis(axis), keepdim=keepdims)

    def min(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        x = self._tensor(x)
        return torch.amin(x, dim=() if axis is None else _axis(axis), keepdim=keepdims)

    def cumsum(self, x: Any, axis: int | None = None) -> Any:
        x = self._tensor(x)
        if axis is None:
            return torch.cumsum(x.reshape(-1), dim=0)
        return torch.cumsum(x, dim=axis)

    # --- shape ------------------------------------------------------------------
    def split_leaves(self, flat: Any, bounds: Any, shapes: Any) -> list[Any]:
        """One ``unbind`` or ``split`` (views; :func:`_split_leaves`), not one slice per leaf."""
        if not isinstance(flat, torch.Tensor):
            return super().split_leaves(flat, bounds, shapes)
        return _split_leaves(flat, bounds, shapes, mark=True)

    def reshape(self, x: Any, shape: Any) -> Any:
        x = self._tensor(x)
        return torch.reshape(x, (shape,) if isinstance(shape, int) else tuple(shape))

    def stack(self, arrays: Any, axis: int = 0) -> Any:
        arrays = list(arrays)
        try:
            return torch.stack(arrays, dim=axis)
        except TypeError:
            return torch.stack(self._tensors(arrays), dim=axis)

    def concat(self, arrays: Any, axis: int = 0) -> Any:
        """``torch.cat``; where ``arrays`` are views lying one after another in one tensor's
        memory along ``axis`` 0 (the leaves of a structured point put back together by the
        function), that tensor's block as one view instead (:func:`_adjacent_views`)."""
        arrays = list(arrays)
        if axis == 0 and len(arrays) > 1:
            whole = _split_rows(arrays)
            if whole is None:
                whole = _adjacent_views(arrays)
            if whole is not None:
                return whole
        try:
            return torch.cat(arrays, dim=axis)
        except TypeError:
            return torch.cat(self._tensors(arrays), dim=axis)

    def roll(self, x: Any, shift: Any, axis: Any = None) -> Any:
        x = self._tensor(x)
        if axis is None:
            return torch.roll(x, shifts=shift)
        return torch.roll(x, shifts=shift, dims=axis)

    def permute_dims(self, x: Any, axes: Any) -> Any:
        x = self._tensor(x)
        return torch.permute(x, tuple(axes))

    def expand_dims(self, x: Any, axis: int) -> Any:
        x = self._tensor(x)
        return torch.unsqueeze(x, axis)

    def squeeze(self, x: Any, axis: Any) -> Any:
        x = self._tensor(x)
        return torch.squeeze(x, dim=axis)

    def flip(self, x: Any, axis: Any = None) -> Any:
        x = self._tensor(x)
        dims = (
            tuple(range(x.ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
        )
        return torch.flip(x, dims=dims)

    def take(self, x: Any, indices: Any, axis: int | None = None) -> Any:
        """``np.take`` by advanced indexing (``x[..., idx, ...]``), not ``index_select``.

        torch.compile of a reverse-over-reverse Hessian through
        ``index_select`` returned zeros (and forward over reverse crashed the
        process) in torch 2.13; advanced indexing compiles to the right
        Hessian (``tests/test_compile_policy.py``).
        """
        x = self._tensor(x)
        idx = torch.as_tensor(indices, device=x.device)
        if axis is None:
            return x.reshape(-1)[idx]
        return x[(slice(None),) * (axis % x.ndim) + (idx,)]

    def where(self, condition: Any, x1: Any, x2: Any) -> Any:
        if not (isinstance(x1, torch.Tensor) and isinstance(x2, torch.Tensor)):
            x1, x2 = self._tensors((x1, x2))
        return torch.where(self._tensor(condition), x1, x2)

    def clip(self, x: Any, min: Any = None, max: Any = None) -> Any:
        x = self._tensor(x)
        try:
            return torch.clamp(x, min=min, max=max)
        except TypeError:  # torch takes two numbers or two tensors as bounds, not a mix
            lo, hi = (None if b is None else self._tensors((x, b))[1] for b in (min, max))
            return torch.clamp(x, min=lo, max=hi)

    def vecdot(self, x1: Any, x2: Any, axis: int = -1) -> Any:
        return torch.sum(self.multiply(x1, x2), dim=axis)

    # --- creation -----------------------------------------------------------------
    def asarray(self, x: Any, dtype: Any = None) -> Any:
        """Tensor from ``x``; floats get the context dtype, integers and bools keep theirs."""
        if dtype is not None:
            return torch.as_tensor(x, dtype=torch_dtype(dtype), device=self.device)
        if isinstance(x, torch.Tensor):
            t = x
        elif isinstance(x, np.ndarray):
            # no x.flags here: Dynamo cannot trace ndarray.flags (a graph break that made
            # every problem with a numpy constant run eagerly under torch.compile)
            t = torch.from_numpy(x).to(self.device)
        else:
            t = torch.as_tensor(np.asarray(x), device=self.device)
        if t.is_floating_point() and t.dtype != self.dtype:
            return t.to(self.dtype)
        if t.is_complex() and t.dtype != self._complex:
            return t.to(self._complex)
        return t

    def zeros(self, shape: Any, dtype: Any = None) -> Any:
        return torch.zeros(shape, dtype=dtype or self.dtype, device=self.device)

    def ones(self, shape: Any, dtype: Any = None) -> Any:
        return torch.ones(shape, dtype=dtype or self.dtype, device=self.device)

    def full(self, shape: Any, fill_value: Any, dtype: Any = None) -> Any:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if isinstance(fill_value, (torch.Tensor, np.ndarray)):  # torch.full takes numbers only
            fill = self._tensor(fill_value).to(dtype or self.dtype)
            return torch.broadcast_to(fill, shape).clone()
        return torch.full(shape, fill_value, dtype=dtype or self.dtype, device=self.device)

    def zeros_like(self, x: Any) -> Any:
        x = self._tensor(x)
        return torch.zeros_like(x)

    def ones_like(self, x: Any) -> Any:
        x = self._tensor(x)
        return torch.ones_like(x)

    def full_like(self, x: Any, fill_value: Any) -> Any:
        x = self._tensor(x)
        if isinstance(fill_value, (torch.Tensor, np.ndarray)):
            return torch.broadcast_to(self._tensor(fill_value).to(x.dtype), x.shape).clone()
        return torch.full_like(x, fill_value)

    def arange(self, start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Any:
        """``arange``; float arguments give the context dtype, integers give int64."""
        if dtype is None and any(isinstance(v, float) for v in (start, stop, step)):
            dtype = self.dtype
        if stop is None:
            start, stop = 0, start
        return torch.arange(start, stop, step, dtype=dtype, device=self.device)

    def linspace(self, start: Any, stop: Any, num: int, endpoint: bool = True) -> Any:
        if endpoint:
            return torch.linspace(start, stop, num, dtype=self.dtype, device=self.device)
        return torch.linspace(start, stop, num + 1, dtype=self.dtype, device=self.device)[:-1]

    def eye(self, n: int, m: int | None = None, k: int = 0) -> Any:
        m = n if m is None else m
        if k == 0:
            return torch.eye(n, m, dtype=self.dtype, device=self.device)
        return torch.diag(
            torch.ones(
                max(0, min(n, m - k) if k > 0 else min(n + k, m)),
                dtype=self.dtype,
                device=self.device,
            ),
            k,
        )[:n, :m]

    # --- control --------------------------------------------------------------------
    def checkpoint(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``torch.utils.checkpoint`` (non-reentrant) where it composes; else the identity.

        torch.func's transforms reject saved-tensor hooks, so under
        ``torch.func.grad`` and friends the function runs without
        rematerialisation.
        """

        def wrapped(*args: Any) -> Any:
            args = tuple(self._tensor(a) if isinstance(a, _HOST) else a for a in args)
            if _in_transform():
                return fn(*args)
            return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)

        return wrapped

    @staticmethod
    def stop_gradient(x: Any) -> Any:
        """``x.detach()`` (host scalars have no gradient: returned as they are)."""
        return x.detach() if isinstance(x, torch.Tensor) else x

    @staticmethod
    def forward_only(x: Any, message: str) -> Any:
        """``x``; forward AD passes, a backward pass raises ``UnsupportedError(message)``."""
        if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
            return x
        return _ForwardOnly.apply(x, message)

    @staticmethod
    def lu_factor(a: Any) -> Any:
        """``torch.linalg.lu_factor_ex``'s factors: a singular ``a`` (a zero pivot) gives
        non-finite solutions, as on JAX, and does not raise (a graph of it holds no error
        check; see :func:`solve`).

        Its derivatives nest correctly to second order (unlike
        ``torch.linalg.solve``'s, see :func:`solve`); the reverse pass unpacks
        the factors with ``triu``/``tril``, an intra-op parallel region that
        costs tens of milliseconds a call on a loaded machine, so it pays
        only for large matrices (``docs/ode.md``).
        """
        lu, pivots, _ = torch.linalg.lu_factor_ex(a)
        return lu, pivots

    @staticmethod
    def lu_solve(lu: Any, b: Any) -> Any:
        """``torch.linalg.lu_solve``; a vector ``b`` of shape ``(n,)`` is allowed."""
        vec = b.ndim == 1
        x = torch.linalg.lu_solve(lu[0], lu[1], b.unsqueeze(-1) if vec else b)
        return x.squeeze(-1) if vec else x

    @staticmethod
    def jacfwd(fn: Callable[..., Any]) -> Callable[..., Any]:
        """Forward-mode Jacobian ``d fn(z, *consts) / dz``, usable inside a solver.

        ``torch.func.vmap`` of ``torch.func.jvp`` over the unit tangents (what
        ``torch.func.jacfwd`` does), with the tensors in ``consts`` entering
        the ``jvp`` as primals with zero tangents.  A tensor closed over
        instead is a plain tensor inside the transform, and an operation
        mixing it with a dual, batched one takes torch's decomposition path
        (Python reference implementations): 26 ms against 4.7 ms for the
        Jacobian of the 8-species HIRES right-hand side with its 12 rate
        constants closed over and passed, respectively
        (``docs/results/probe_torch_rosenbrock.txt``).
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

    def concrete(self, x: Any) -> Any:
        """``x`` as numpy, or ``None`` when it has no value now.

        ``None`` under ``torch.func.vmap`` (a batched tensor) and inside one of
        the context's compiled parts (Dynamo traces fake tensors: a value read
        would be a graph break), where loops then run as :meth:`while_loop`.
        """
        if self._in_compiled_part():
            return None
        return _concrete(x)

    def _holds_anywhere(self, pred: Any) -> bool:
        """Whether ``pred``, batched under ``torch.func.vmap``, holds in any lane: read
        below every ``torch.func`` wrapper (a loop's condition is a ``stop_gradient``
        decision: reading it cuts nothing).  True (every lane may run) while Dynamo
        traces, where a value read would be a graph break."""
        if torch.compiler.is_compiling() or not isinstance(pred, torch.Tensor):
            return True
        functorch = torch._C._functorch
        while functorch.is_functorch_wrapped_tensor(pred):
            pred = functorch.get_unwrapped(pred)
        try:
            return bool(pred.any())
        except RuntimeError:  # no value below the wrappers either (a functional tensor)
            return True

    def _in_compiled_part(self) -> bool:
        """Whether Dynamo is tracing one of this context's compiled parts (``ops.compile_part``)."""
        return self.compile_part is not None and torch.compiler.is_compiling()

    def while_loop(
        self,
        cond: Callable[[Any], Any],
        body: Callable[[Any], Any],
        carry: Any,
        max_steps: int,
    ) -> Any:
        """``carry = body(carry)`` while ``cond(carry)``, at most ``max_steps`` times.

        A Python loop (:meth:`LoopOps.while_loop`), except inside one of the
        context's compiled parts (``ops.compile_part``, Dynamo tracing), where
        it is torch's ``while_loop`` higher-order op: the whole loop is one
        graph, differentiated by plain autograd outside the compiled part
        (:func:`_graph_while_loop`).
        """
        if self._in_compiled_part():
            return _graph_while_loop(cond, body, carry, int(max_steps))
        return super().while_loop(cond, body, carry, max_steps)


#: A tracked zero made outside every compiled region (Dynamo refuses to create a leaf
#: that requires grad inside one): :func:`_graph_while_loop` adds ``0 * _ANCHOR`` to each
#: floating carry leaf.
_ANCHOR = torch.zeros((1,), dtype=torch.float64, requires_grad=True)


def _scalars_lifted(args: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """``args`` with each 0-d float64 CPU tensor as a 1-element vector, and their positions.

    Dynamo's fake tensor of a 0-d float64 CPU input carries a symbolic float
    for its ``item()``; when the graph does not turn that float into tensor
    arithmetic, torch 2.13 specialises it and traces the whole function again
    ("Restarting analysis due to ... _tensorify_python_scalars"): the
    compiled dopri5 loop, whose step size is such an input, spent 4.3-6.1 s of
    its 24 s compile in the discarded first trace.  A 1-element vector has no
    such float; :func:`_scalars_restored` makes it 0-d again inside the graph
    (a view, no copy).  Not a tensor that requires grad: its vector would be a
    view outside the graph, a non-leaf input whose ``.grad`` Dynamo reads
    (torch warns).
    """
    scalars = tuple(
        i for i, a in enumerate(args)
        if isinstance(a, torch.Tensor) and a.dim() == 0 and a.dtype == torch.float64
        and a.device.type == "cpu" and not a.requires_grad
    )  # fmt: skip
    if not scalars:
        return args, scalars
    return tuple(a.reshape(1) if i in scalars else a for i, a in enumerate(args)), scalars


def _scalars_restored(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called with the arguments :func:`_scalars_lifted` made vectors back at 0-d."""

    @functools.wraps(fn)
    def restored(*args: Any, _simdiff_scalars: tuple[int, ...] = (), **kwargs: Any) -> Any:
        args = tuple(a.reshape(()) if i in _simdiff_scalars else a for i, a in enumerate(args))
        return fn(*args, **kwargs)

    return restored


def _graph_while_loop(
    cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any, max_steps: int
) -> Any:
    """``ops.while_loop`` as ``torch._higher_order_ops.while_loop``, inside a compiled part.

    A counter bounds the loop at ``max_steps``.  Every floating carry leaf
    enters the loop as ``leaf + 0 * _ANCHOR``, always: in torch 2.13 the
    gradient of the loop's output with respect to a tensor the body closes
    over (an ODE's parameters) is silently wrong -- the backward does not
    flow into it -- unless the carry leaf through which it flows already
    requires grad at loop entry (cf. pytorch#184528); a carry leaf computed
    from another tracked tensor was measured not to be enough, a leaf tied to
    a tracked leaf created outside the compiled region is
    (``tests/test_ode_compiled_loop.py`` fails without it).  The op supports
    only first-order reverse mode by plain autograd outside the compiled
    region: under ``torch.func`` transforms it fails ("Expected FakeTensor"),
    and double backward is refused (compiled) or silently 0 (eager), so only
    the top-level contexts of ``Backend.ops_compiling_parts`` reach it.
    """
    from torch._higher_order_ops import while_loop as graph_while
    from torch.utils import _pytree

    leaves, spec = _pytree.tree_flatten(carry)

    def entering(x: Any) -> Any:
        x = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
        if x.is_floating_point():
            return x + 0.0 * _ANCHOR.to(x.dtype).reshape(())
        return x

    def running(i: Any, *xs: Any) -> Any:
        return (i < max_steps) & cond(_pytree.tree_unflatten(list(xs), spec))

    def step(i: Any, *xs: Any) -> tuple[Any, ...]:
        out = _pytree.tree_leaves(body(_pytree.tree_unflatten(list(xs), spec)))
        return (i + 1, *out)

    start = (torch.zeros((), dtype=torch.int64), *(entering(x) for x in leaves))
    out = graph_while(running, step, start)
    return _pytree.tree_unflatten(list(out[1:]), spec)


def _numpy_guards_dropped(entries: Any) -> list[bool]:
    """Dynamo guard filter: keep every guard except the tensor guards of numpy arrays.

    Dynamo turns a numpy array read inside the compiled frame into a graph
    input (``___from_numpy(...)``); its ``TENSOR_MATCH`` guard records the
    dispatch keys of torch.func's transform level and fails as soon as it is
    checked, so ``fullgraph=True`` compiles failed with an ``AssertionError``
    on every problem with a numpy constant or index array.  Shapes stay
    static (one callable per shape); the array itself is passed on each call.
    """
    return [not (e.guard_type == "TENSOR_MATCH" and "___from_numpy(" in e.name) for e in entries]


#: Elements per thread below which Inductor's C++ kernels run serially: ATen's eager
#: grain size (``at::internal::GRAIN_SIZE``) instead of Inductor's default 512.  With 512,
#: the 703-pair loops of LJ-38 ran under ``#pragma omp parallel``, and each graph paid an
#: OpenMP fork/join per kernel: compiled LJ-38 gradient 6 to 37 ms against 1.3 ms eager on
#: the 2-core machine under load; with this grain 0.4x JAX (docs/performance.md).
INDUCTOR_MIN_CHUNK = 32768


def _inductor_options(pointwise_cat: bool) -> dict[str, Any]:
    """Inductor's settings for simdiff's graphs (``TorchBackend.compile``)."""
    return {
        "cpp.min_chunk_size": INDUCTOR_MIN_CHUNK,
        **({"force_pointwise_cat": True} if pointwise_cat else {}),
    }


# torch's messages when a problem leaves the traced computation, and what it did
_LEAK_ERRORS = (
    ("Can't call numpy() on Tensor that requires grad", "a round trip through numpy (x.numpy())"),
    ("doesn't have storage", "a round trip through numpy (np.asarray(x), np.*)"),
    ("calling .item() on a Tensor", "x.item() or float(x[i]) on an array"),
    ("data-dependent control flow", "a Python `if`/`while` on an array value"),
)

#: torch.func's refusals of a construct inside the problem: (fragment of torch's message,
#: what simdiff says)
_REFUSALS = (
    (
        "it must override the setup_context staticmethod",
        "the problem calls a torch.autograd.Function written in the old style (forward(ctx, "
        "...)), which torch.func transforms (Hessians, HVPs, JVPs, batched calls) refuse; it "
        "needs a setup_context staticmethod (torch's 'Extending torch.func with "
        "autograd.Function'), or use a derivative torch computes with plain autograd (grad, vjp)",
    ),
)


#: AOTAutograd's donated buffers (a backward that frees what it saved) refuse a second
#: backward through the graph, and a VJP's pullback keeps the graph for more than one
#: cotangent (:func:`_vjp`: ``retain_graph=True``): compiled parts keep their buffers.
#: Without this the compiled VJP of every vector-valued Dopri5 problem whose output is
#: the trajectory failed ("This backward function was compiled with non-empty donated
#: buffers which requires ... retain_graph=False"; lotka_volterra, ode_linear).
def _kept_buffers() -> Any:
    return torch._functorch.config.patch(donated_buffer=False)


_NON_LEAF_GRAD = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"


class _PartCompiler:
    """``ops.compile_part`` on torch: small pure functions compiled once each, run where it applies.

    ``compile_part(key, make, remat=False)`` returns a callable that runs
    ``make()`` compiled (``torch.compile``, one whole graph:
    ``fullgraph=True``) when no ``torch.func`` transform is active and Dynamo
    is not tracing, and eagerly otherwise (under ``vmap``, ``jacrev``,
    ``jvp``: the compiled graph would see the transform's wrapped tensors).
    A function that cannot be compiled as one graph raises torch's error on
    its first compiled call.  A call whose compiled code raises torch's
    linear-algebra error runs again eagerly, where the function's own ``try``
    sees it: a part that calls ``torch.linalg`` itself on a singular matrix.
    simdiff's own solves (``ops.linalg.solve``, ``ops.lu_factor``) do not
    raise there; they give non-finite results, as on JAX.

    With ``remat=True`` the part is rematerialised in reverse mode
    (:class:`_RematPart`): its forward is an inference graph that saves
    nothing but the part's inputs, and its backward a second compiled graph,
    the VJP of the part recomputed from them.  Without it the part is one
    AOTAutograd graph whose forward saves its intermediates for its backward.

    ``compiled_calls`` and ``eager_calls`` count the calls of parts that ran
    compiled and eagerly, ``backward_calls`` the backward calls of
    rematerialised parts.
    """

    def __init__(self, compile: Callable[..., Callable[..., Any]]) -> None:
        self._compile = compile
        self._parts: dict[Any, Callable[..., Any]] = {}
        self.compiled_calls = 0
        self.eager_calls = 0
        self.backward_calls = 0

    def __call__(
        self, key: Any, make: Callable[[], Callable[..., Any]], remat: bool = False
    ) -> Callable[..., Any]:
        part = self._parts.get((key, remat))
        if part is None:
            pure = make()
            part = self._parts[key, remat] = _RematPart(self, pure) if remat else self._part(pure)
        return part

    def _part(self, pure: Callable[..., Any]) -> Callable[..., Any]:
        compiled = self._compile(pure, fullgraph=True)

        def part(*args: Any) -> Any:
            if torch.compiler.is_compiling() or _in_transform():
                self.eager_calls += 1
                return pure(*args)
            return self.run(compiled, pure, args)

        return part

    def run(
        self, compiled: Callable[..., Any], pure: Callable[..., Any], args: Any,
        backward: bool = False, dynamo: bool = True,
    ) -> Any:  # fmt: skip
        """``compiled(*args)``, or ``pure(*args)`` where compiled code raised a LinAlgError.

        ``backward``: a rematerialised part's backward (counted in ``backward_calls``).
        ``dynamo=False``: ``compiled`` is a :class:`TracedGraph` (a rematerialised
        part's graphs), called as it is: no Dynamo guards to run, and no AOTAutograd
        backward whose buffers need keeping (:func:`_kept_buffers`).  Its C++
        wrapper reports a singular matrix as a bare ``RuntimeError`` (the
        ``LinAlgError`` of the kernel it calls is lost in the C++ call), so there
        any ``RuntimeError`` runs the call again eagerly: the eager code raises
        what is a real error, and handles a singular matrix as its own ``try`` does.
        """
        if backward:
            self.backward_calls += 1
        else:
            self.compiled_calls += 1
        try:
            if not dynamo:
                return compiled(*args)
            with warnings.catch_warnings(), _kept_buffers(), paused():
                # Dynamo reads .grad of the non-leaf inputs (the state, the FSAL stage)
                # while it builds its guards; the warning is about that read, not ours
                warnings.filterwarnings("ignore", _NON_LEAF_GRAD, UserWarning)
                # and the leak guard is paused (:func:`paused`): its Tensor.item() raised in
                # Dynamo's guard evaluation, a failed guard, so a trace on every call
                return compiled(*args)
        except torch.linalg.LinAlgError:
            pass
        except RuntimeError:
            if dynamo:
                raise
        # torch's linear-algebra error (a part calling torch.linalg on a singular matrix;
        # simdiff's own solves give NaN instead): the part's eager code handles or raises it
        if not backward:
            self.compiled_calls -= 1
            self.eager_calls += 1
        return pure(*args)


class _RematPart:
    """A compiled part differentiated by recomputation: two graphs, few buffers.

    Called at the top level with inputs that require a gradient, the part is
    one :class:`_Remat` node of the autograd tape.  Its forward runs the part
    compiled without autograd (an inference graph: no intermediate is kept,
    so Inductor's wrapper allocates the outputs and a few temporaries only),
    and the node saves the part's inputs.  Its backward runs a second
    compiled function: ``torch.func.vjp`` of the part at the saved inputs,
    applied to the output cotangents -- the forward recomputed next to its
    transpose, in one graph.  The arithmetic of both is the part's own, so
    the derivative is the one plain autograd of the part gives, to rounding.

    Cost: the forward once more per backward, against the saved
    intermediates of an AOTAutograd graph (for a Rosenbrock step of HIRES,
    about 120 buffers allocated and reinterpreted per step by Inductor's
    Python wrapper, which dominated that step's time).

    Both graphs are compiled with pointwise concatenations and without
    Dynamo (``TorchBackend.compile``, ``pointwise_cat``, ``dynamo=False``:
    traced once per input signature and called directly): a part is built
    once per key with a fixed closure.

    Where the inputs need no gradient, or grad mode is off, the forward graph
    alone runs; inside a ``torch.func`` transform or Dynamo's tracing, the
    plain function.  A backward asked for with ``create_graph`` (a derivative
    of the derivative) runs the VJP eagerly, so it is differentiable.
    """

    def __init__(self, parts: _PartCompiler, pure: Callable[..., Any]) -> None:
        self.parts = parts
        self.pure = pure
        self.forward = parts._compile(pure, fullgraph=True, pointwise_cat=True, dynamo=False)
        # (structure, wrt, compiled VJP, eager VJP): compared by ==, one entry in practice
        self._vjps: list[tuple[Any, tuple[int, ...], Callable[..., Any], Callable[..., Any]]] = []
        self.out_def: Any = None

    def __call__(self, *args: Any) -> Any:
        if torch.compiler.is_compiling() or _in_transform():
            self.parts.eager_calls += 1
            return self.pure(*args)
        leaves, treedef = tree_flatten(args)
        tracked = torch.is_grad_enabled() and any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in leaves
        )
        if not tracked:
            with torch.no_grad():
                return self.parts.run(self.forward, self.pure, args, dynamo=False)
        where = tuple(i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor))
        static = [None if isinstance(x, torch.Tensor) else x for x in leaves]
        outs = _Remat.apply(self, (static, treedef, where), *(leaves[i] for i in where))
        return tree_unflatten(self.out_def, list(outs))

    def run_forward(self, leaves: list[Any], treedef: Any) -> tuple[Any, ...]:
        args = tree_unflatten(treedef, leaves)
        out = self.parts.run(self.forward, self.pure, args, dynamo=False)
        flat, self.out_def = tree_flatten(out)
        return tuple(flat)

    def vjp(self, leaves: list[Any], treedef: Any, wrt: tuple[int, ...], cts: Any) -> Any:
        """The cotangents of ``leaves[wrt]`` for the output cotangents ``cts`` (a tuple)."""
        fns = next((f[2:] for f in self._vjps if f[1] == wrt and f[0] == treedef), None)
        if fns is None:
            pure = self.pure

            def pullback(*xs: Any) -> Any:
                inputs, cotangents = list(xs[: len(leaves)]), xs[len(leaves) :]

                def f(*diff: Any) -> Any:
                    full = list(inputs)
                    for i, d in zip(wrt, diff, strict=True):
                        full[i] = d
                    return tuple(tree_flatten(pure(*tree_unflatten(treedef, full)))[0])

                return torch.func.vjp(f, *(inputs[i] for i in wrt))[1](cotangents)

            compiled = self.parts._compile(
                pullback, fullgraph=True, pointwise_cat=True, dynamo=False
            )
            fns = (compiled, pullback)
            self._vjps.append((treedef, wrt, *fns))
        compiled, eager = fns
        if torch.is_grad_enabled():  # create_graph: a derivative of this backward
            self.parts.backward_calls += 1
            return eager(*leaves, *cts)
        return self.parts.run(compiled, eager, (*leaves, *cts), backward=True, dynamo=False)


def _filled(spec: Any, tensors: Any) -> list[Any]:
    """The leaves of a :class:`_Remat` call: its static leaves with ``tensors`` put back."""
    static, _, where = spec
    leaves = list(static)
    for i, x in zip(where, tensors, strict=True):
        leaves[i] = x
    return leaves


class _Remat(torch.autograd.Function):
    """The autograd node of a :class:`_RematPart` call: saves its inputs, recomputes in backward."""

    @staticmethod
    def forward(ctx: Any, part: _RematPart, spec: Any, *tensors: Any) -> Any:
        ctx.part, ctx.spec = part, spec
        ctx.save_for_backward(*tensors)
        return part.run_forward(_filled(spec, tensors), spec[1])

    @staticmethod
    def backward(ctx: Any, *cts: Any) -> Any:
        _, treedef, where = ctx.spec
        leaves = _filled(ctx.spec, ctx.saved_tensors)
        need = ctx.needs_input_grad[2:]
        wrt = tuple(i for i, n in zip(where, need, strict=True) if n)
        grads = iter(ctx.part.vjp(leaves, treedef, wrt, cts))
        return (None, None, *(next(grads) if n else None for n in need))


def _forward_levels(kind: str, params: dict[str, Any], scalar: bool = True) -> int:
    """Forward-mode (``jvp``/``jacfwd``) levels nested in the callable ``Derivatives`` builds.

    Examples
    --------
    >>> _forward_levels("hessian", {"method": "fwd-fwd"})
    2
    >>> _forward_levels("derivative", {"order": 3})
    3
    """
    order = int(params.get("order", 0))
    if kind == "hessian":
        return {"fwd-fwd": 2, "fwd-rev": 1}.get(params.get("method", ""), 0)
    if kind == "derivative_sum_nested" and order == 2 and scalar:
        return 1  # forward over reverse (simdiff.core.operator_builders._nested_order_k)
    if kind in ("derivative", "derivative_sum_nested"):
        return order
    if kind == "derivative_tensor":
        return max(order - 1, 0)
    if kind == "biharmonic_nested":
        return 2
    if kind == "jvp" or (kind == "hvp" and params.get("method") != "rev-rev"):
        return 1
    if kind == "jacobian" and params.get("mode") == "fwd":
        return 1
    return 0


class TorchBackend(Backend):
    name = "torch"
    ops_class = TorchOps
    optional_compiler = True
    #: torch.func's double backward beats jvp-of-grad 2.5x to 28x eager (ishigami,
    #: rosenbrock32, lj38; ``validation/benchmarks/bench_torch.py``, docs/performance.md).
    hvp_method = "rev-rev"
    prefers_batched_calls = False
    #: ``torch.func.grad`` / ``vjp``; at the top level (no transform active, not
    #: compiling) by plain ``torch.autograd``: same numbers, 0.64-0.76x the time on
    #: long eager computations (:func:`_grad`, docs/performance.md).
    grad = staticmethod(_grad)
    jvp = staticmethod(torch.func.jvp)
    vjp = staticmethod(_vjp)
    jacfwd = staticmethod(torch.func.jacfwd)
    jacrev = staticmethod(torch.func.jacrev)

    def ops(self, dtype: Any = None, device: Any = None) -> TorchOps:
        return TorchOps(torch.float64 if dtype is None else dtype, device)

    def ops_compiling_parts(self, dtype: Any = None, device: Any = None) -> TorchOps:
        """A context whose eager loops compile their step (:class:`_PartCompiler`)."""
        ops = self.ops(dtype, device)
        ops.compile_part = _PartCompiler(self.compile)
        return ops

    def vmap(self, fn: Callable[..., Any], in_axes: Any = 0) -> Callable[..., Any]:
        return torch.func.vmap(fn, in_dims=in_axes)

    def compile(
        self,
        fn: Callable[..., Any],
        fullgraph: bool = False,
        pointwise_cat: bool = False,
        dynamo: bool = True,
    ) -> Callable[..., Any]:
        """``torch.compile`` for static shapes (simdiff builds one callable per shape).

        ``fullgraph=True`` makes a graph break an error instead of a silent
        eager fallback; the compile policy's ``"auto"`` uses it.

        ``pointwise_cat=True``: Inductor lowers every concatenation (an
        ``ops.stack`` of a right-hand side's components) as pointwise code
        fused into its consumers (``force_pointwise_cat``), where on CPU it
        otherwise writes the inputs in place into a buffer, each through an
        aliasing view that its Python wrapper builds on every call (about 4
        us each: 75 a call in a Rosenbrock step of HIRES, whose eight
        components are stacked for each of its 17 right-hand sides).  For
        small parts (:class:`_RematPart`); torch keeps it off on CPU because
        masked loads do not vectorise, which matters for long arrays.

        ``dynamo=False``: no Dynamo on any call (``_torch_traced.TracedGraph``):
        ``fn`` is traced by ``make_fx`` on fake tensors and compiled by Inductor
        once per input signature (the tensors' shapes, strides, dtypes and
        devices, the other arguments' values), runs with gradients off (an
        inference graph), and each call checks the signature by a dictionary
        look-up and calls Inductor's code directly: no frame hook, no guards,
        no Dynamo wrapper.  What ``fn`` reads besides its tensor arguments is
        baked into the graph, as in ``jax.jit``.  For a part built once per key
        whose closure is fixed and which is called thousands of times (a
        solver's step and its VJP, :class:`_RematPart`): a Rodas5P step of
        HIRES took 0.36x of its time through Dynamo (275 against 764 us, its
        VJP 380 against 656 us, at load 9), and compiled in 22 s against 53 s.
        ``fullgraph`` is implied (a function that is not one graph fails in
        its trace).  Its wrapper is C++ (Inductor's ``cpp_wrapper``): the
        graph's buffers are allocated and its kernels called without Python,
        which took a Rodas5P step's gradient on Robertson to 0.84x (90 against
        107 ms, 125 steps, load 5; ``validation/benchmarks/bench_ode.py``) for
        about a third more compile time.  Such a wrapper reports an error of
        an ATen kernel it calls (a singular matrix among them) as a bare
        ``RuntimeError``; :meth:`_PartCompiler.run` runs the call again eagerly.

        Dynamo keeps its graphs on the code object of the frame it compiles
        (here torch.func's wrapper, shared by every simdiff callable) and,
        after ``torch._dynamo.config.recompile_limit`` (8) graphs on one code
        object, silently runs it eagerly: the ninth compiled derivative in a
        process ran eager behind the compiled wrapper.  ``isolate_recompiles``
        keeps each simdiff callable's graphs apart and ``recompile_limit`` (per
        call of ``torch.compile``) lifts the limit for it; torch's global
        settings are untouched.

        A numpy array a problem reads (a constant, an index array such as
        :class:`simdiff.pes.TermEnergy`'s pairs) becomes a graph input whose
        tensor guard Dynamo records inside torch.func's transform and then
        fails on the same frame ("Guard failed on the same frame it was
        created": torch 2.13, every such problem under ``torch.func.grad``);
        :func:`_numpy_guards_dropped` drops those guards (the array is still
        read on every call, so a changed value is seen).

        The compiled callable runs with the leak guard's dispatch-level watch
        off (:func:`~simdiff.backends._torch_leaks.dispatch_paused`: Dynamo's
        fake tensors cannot pass a Python kernel); its wrappers stay.
        """
        if not dynamo:
            return TracedGraph(fn, {**_inductor_options(pointwise_cat), "cpp_wrapper": True})
        compiled = torch.compile(  # type: ignore[call-overload]  # torch 2.13 keywords, not in stubs
            _scalars_restored(fn),
            fullgraph=fullgraph,
            dynamic=False,
            isolate_recompiles=True,
            recompile_limit=1024,
            options={"guard_filter_fn": _numpy_guards_dropped, **_inductor_options(pointwise_cat)},
        )

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if torch.compiler.is_compiling():  # inside another trace: Dynamo inlines it
                return fn(*args, **kwargs)
            args, scalars = _scalars_lifted(args)
            with dispatch_paused():
                return compiled(*args, _simdiff_scalars=scalars, **kwargs)

        return call

    def warm_up(self) -> None:
        t = torch.tensor([0.5], dtype=torch.float64)
        torch.func.grad(lambda y: torch.sin(y).sum())(t)

    leak_warnings = ("Converting a tensor with requires_grad=True to a scalar",)

    def leak_guard(self, trusted: frozenset[str] = frozenset(), strict: bool = False) -> LeakGuard:
        """``x.item()``, ``x.tolist()``, ``float(x)``, ``int(x)`` raise on a tensor that
        requires grad while it is entered, and the problem's own graph cuts (not those of
        ``trusted`` packages) too (:mod:`simdiff.backends._torch_leaks`)."""
        return LeakGuard(trusted, strict)

    def problem_call(self, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        return watching_grad_mode(fn)

    def refusal_cause(self, exc: BaseException) -> str | None:
        if isinstance(exc, RuntimeError):
            for fragment, cause in _REFUSALS:
                if fragment in str(exc):
                    return cause
        return None

    def leak_cause(self, exc: BaseException) -> str | None:
        guarded = guard_message(exc)
        if guarded is not None:
            return guarded
        if isinstance(exc, UserWarning) and str(exc).startswith(self.leak_warnings):
            return "float(x[i]) or int(...) on an array"
        if isinstance(exc, RuntimeError):
            for fragment, cause in _LEAK_ERRORS:
                if fragment in str(exc):
                    return cause
        return None

    @staticmethod
    def hessian_method(n: int, m: int, compiled: bool = False) -> str:
        """Reverse over reverse, whatever the shape, eager or compiled (measured rule).

        Eager (``python -m validation.benchmarks.bench_torch_hessian``): torch.func's double
        backward beat forward over reverse by 1.4x to 20x and forward over
        forward by 2.8x to 90x on every catalogue entry measured, scalar and
        vector-valued.  Compiled (``--compiled``, docs/performance.md): reverse
        over reverse is the only method that compiled on every entry: forward
        over reverse failed in Inductor on every energy that gathers atoms
        (LJ-7/13/38) and took 0.73x (sobol_g) to 1.06x of reverse over
        reverse's time elsewhere, a gain that no property of the problem
        predicts before compiling; forward over forward is refused at one
        point (:meth:`compile_refusal`), so the compiled path has no second
        method.
        """
        return "rev-rev"

    @staticmethod
    def compile_refusal(
        kind: str, params: dict[str, Any], scalar: bool, batched: bool = False
    ) -> str | None:
        """Refuse torch.compile where it crashes: two nested forward levels at one point.

        In torch 2.13 (CPU) the compiled code of a ``jvp`` nested in a
        ``jvp`` can end the process with a segmentation fault on its first
        call, which no ``try`` catches (Inductor's code: the same graphs run
        under ``backend="aot_eager"``).  One subprocess per construction
        (``python -m validation.benchmarks.probe_compile_crash``, output in
        docs/results/probe_compile_crash.txt; plain ``torch.compile`` of
        ``torch.func`` code, no simdiff) found:

        * at one point, two or more nested forward levels (``jacfwd(jacfwd
          f)``, ``jvp`` of ``jvp``, ``jacfwd(jacfwd(jacrev f))``, and the
          same vmapped over directions, as the nested derivative sums and the
          biharmonic build them) crashed on scalar *and* vector-valued
          functions (Ishigami, the seed function at order 3, a two-output
          function at order 3), while other functions of the same
          construction compiled or raised a catchable error: which function
          crashes is not predictable from the construction, so each such
          construction at one point is refused;
        * with the point batched (``vmap`` over points, ``batched``: claim
          C5's batched third derivative) no construction crashed: nested
          orders 2 to 4 compiled and ``vmap(jacfwd(jacfwd f))`` raised a
          catchable Dynamo error, which ``compile=True`` reports and
          ``"auto"`` turns into eager;
        * one forward level (``jacfwd(jacrev f)``, HVPs, JVPs) compiled.

        So the rule is on the construction and on whether the point is
        batched, not on the output shape (``scalar`` only counts the levels of
        the order-2 derivative sum, forward over reverse for a scalar).  A
        one-time subprocess probe per construction was the alternative; it
        cannot run the user's own function (closures do not cross processes)
        and a stand-in function does not predict it (above), so it would be
        no more exact than this rule and cost a compile per construction.
        """
        levels = _forward_levels(kind, params, scalar)
        if levels < 2 or batched:
            return None
        return (
            f"torch.compile of {kind} {params} at one point ({levels} nested forward-mode "
            "levels) can crash the process in torch 2.13 (segmentation fault in the generated "
            "code; docs/performance.md); not compiled. Batched points compile."
        )

    def join(self, parts: Any, lead: tuple[int, ...]) -> Any:
        """``torch.stack`` of scalar leaves; ``torch.cat`` of the leaves of one trailing shape
        along their first axis and a view (unbatched: two operations, whatever the number
        of leaves); else ``torch.cat`` of the leaves as vectors (:func:`_join_plan`, kept
        per tuple of shapes)."""
        parts = list(parts)
        k = len(lead)
        how = _join_plan(tuple([p.shape for p in parts]), k)
        if how == "stack":
            return torch.stack(parts, dim=-1)
        if how == "rows":
            return torch.cat(parts).view(-1)
        return torch.cat([p if p.dim() == k + 1 else p.reshape(*lead, -1) for p in parts], dim=-1)

    def split(self, flat: Any, bounds: Any, shapes: Any) -> list[Any]:
        """The leaves of ``flat`` (``(*lead, n)``) in as few operations as
        :func:`_split_leaves` takes."""
        return _split_leaves(flat, bounds, shapes)

    def is_native(self, x: Any) -> bool:
        return isinstance(x, torch.Tensor)

    def concrete_leaves(self, parts: Any, shapes: Any, dtype: Any) -> bool:
        """As :meth:`Backend.concrete_leaves`: plain tensors (not wrapped by a ``torch.func``
        transform, not under torch.compile's tracing) of ``dtype`` and their shapes."""
        want = torch_dtype(dtype)
        if torch.compiler.is_compiling():
            return False
        wrapped = torch._C._functorch.is_functorch_wrapped_tensor
        for p, shape in zip(parts, shapes, strict=True):
            if type(p) is not torch.Tensor or p.dtype is not want or p.shape != shape or wrapped(p):
                return False
        return True

    def from_numpy(self, a: Any, dtype: Any, device: Any = None) -> Any:
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            a = a.copy()  # torch refuses read-only buffers (e.g. numpy views of jax arrays)
        t = torch.as_tensor(a, device=device)
        return t.to(torch_dtype(dtype)) if t.dtype != torch_dtype(dtype) else t

    def to_numpy(self, x: Any) -> Any:
        # force: detach, copy to the host, and materialise lazy conjugate/negative views
        # (ifft of a real tensor) and the ZeroTensors torch.func returns for zero derivatives
        return x.numpy(force=True)

    def dtype_name(self, x: Any) -> str:
        return str(x.dtype).removeprefix("torch.")

    def device_of(self, x: Any) -> Any:
        return x.device

    def concrete(self, x: Any) -> Any:
        return _concrete(x)

    def is_traced(self, x: Any) -> bool:
        """Whether ``x`` is wrapped by a ``torch.func`` transform or traced by torch.compile.

        Such a tensor has no storage to read (``x.numpy()`` fails); under
        ``torch.func.grad``/``jvp`` its values still come by ``concrete``,
        under ``torch.func.vmap`` (and torch.compile's tracing) they do not.
        """
        return isinstance(x, torch.Tensor) and (
            torch._C._functorch.is_functorch_wrapped_tensor(x) or torch.compiler.is_compiling()
        )

    def mutation_count(self, x: Any) -> Any:
        """torch's version counter of ``x`` (bumped by every in-place operation)."""
        return x._version

    def threads(self) -> dict[str, Any]:
        """torch's intra-op and inter-op thread counts."""
        return {"torch": torch.get_num_threads(), "torch_interop": torch.get_num_interop_threads()}

    def intra_op_threads(self) -> int | None:
        """``torch.get_num_threads()``: torch changes it at run time."""
        return torch.get_num_threads()

    def set_threads(self, n: int) -> None:
        """``torch.set_num_threads(n)``."""
        torch.set_num_threads(n)
