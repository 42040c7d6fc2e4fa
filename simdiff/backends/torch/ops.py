"""The torch ``ops`` namespace: Array-API names and numpy-style keywords over tensors.

Notes
-----
``ops.checkpoint`` uses ``torch.utils.checkpoint`` where it composes; inside
``torch.func`` transforms it does not (torch raises "torch.func transforms
don't yet support saved tensor hooks"), so there it is the identity and memory
is not bounded by rematerialisation.  This is stated in docs/backends.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.utils.checkpoint

from simdiff.backends._base import BINARY, UNARY, Namespace
from simdiff.backends._ops_base import LoopOps
from simdiff.backends.torch.compile import _graph_while_loop
from simdiff.backends.torch.leaves import _adjacent_views, _split_leaves, _split_rows
from simdiff.backends.torch.linalg import lu_factor, lu_solve, solve
from simdiff.backends.torch.transforms import _concrete, _in_transform, forward_only, jacfwd
from simdiff.errors import InputTypeError

__all__ = ["TorchOps", "torch_dtype"]

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


def _accepting_scalars(fn: Callable[..., Any], ops: TorchOps, arity: int = 0) -> Callable[..., Any]:
    """``fn`` that also takes Python/numpy scalars and numpy arrays, as numpy and JAX do.

    Tensor calls go straight to ``fn`` after one ``isinstance`` (``arity`` 1
    and 2 avoid packing the arguments; the ``try`` is free in Python 3.11):
    one Python call more per op (docs/errors.md).  Only a call without
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
    # A full reduction is already 0-d: reshape only for keepdims (each op is a dispatch
    # through torch.func's levels, so none is added that the result does not need).
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

    forward_only = staticmethod(forward_only)
    lu_factor = staticmethod(lu_factor)
    lu_solve = staticmethod(lu_solve)
    jacfwd = staticmethod(jacfwd)

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
