"""The PyTorch context: ``torch.func`` transforms, optionally ``torch.compile``.

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
import torch.func
import torch.utils.checkpoint

from ._base import Backend, LoopOps, Namespace

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
        raise TypeError(f"expected a float32 or float64 dtype, got {dtype!r}") from None


def _axis(axis: Any) -> Any:
    return tuple(axis) if isinstance(axis, list) else axis


class TorchOps(LoopOps):
    """``ops`` over torch tensors with Array-API names and numpy-style keywords."""

    name = "torch"

    def __init__(self, dtype: Any = torch.float64, device: Any = None) -> None:
        self.dtype = torch_dtype(dtype)
        self.device = torch.device("cpu") if device is None else torch.device(device)
        for name in _SAME:
            self.__dict__[name] = getattr(torch, name)
        self.linalg = Namespace(solve=torch.linalg.solve)
        cplx = torch.complex128 if self.dtype == torch.float64 else torch.complex64
        self._complex = cplx

        def freq(fn: Callable[..., Any]) -> Callable[..., Any]:
            return lambda n, d=1.0: fn(n, d, dtype=self.dtype, device=self.device)

        self.fft = Namespace(
            rfft=lambda x, n=None, axis=-1, norm=None: torch.fft.rfft(x, n=n, dim=axis, norm=norm),
            irfft=lambda x, n=None, axis=-1, norm=None: torch.fft.irfft(
                x, n=n, dim=axis, norm=norm
            ),
            fft=lambda x, n=None, axis=-1, norm=None: torch.fft.fft(x, n=n, dim=axis, norm=norm),
            ifft=lambda x, n=None, axis=-1, norm=None: torch.fft.ifft(x, n=n, dim=axis, norm=norm),
            rfftfreq=freq(torch.fft.rfftfreq),
            fftfreq=freq(torch.fft.fftfreq),
        )

    # --- reductions (numpy keywords) ------------------------------------------
    def sum(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        if axis is None:
            return torch.sum(x).reshape((1,) * x.ndim if keepdims else ())
        return torch.sum(x, dim=_axis(axis), keepdim=keepdims)

    def prod(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        if axis is None:
            return torch.prod(x).reshape((1,) * x.ndim if keepdims else ())
        if isinstance(axis, (tuple, list)):
            for a in sorted((a % x.ndim for a in axis), reverse=True):
                x = torch.prod(x, dim=a, keepdim=keepdims)
            return x
        return torch.prod(x, dim=axis, keepdim=keepdims)

    def mean(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        if axis is None:
            return torch.mean(x).reshape((1,) * x.ndim if keepdims else ())
        return torch.mean(x, dim=_axis(axis), keepdim=keepdims)

    def max(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return torch.amax(x, dim=() if axis is None else _axis(axis), keepdim=keepdims)

    def min(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return torch.amin(x, dim=() if axis is None else _axis(axis), keepdim=keepdims)

    def cumsum(self, x: Any, axis: int | None = None) -> Any:
        if axis is None:
            return torch.cumsum(x.reshape(-1), dim=0)
        return torch.cumsum(x, dim=axis)

    # --- shape ------------------------------------------------------------------
    def reshape(self, x: Any, shape: Any) -> Any:
        return torch.reshape(x, (shape,) if isinstance(shape, int) else tuple(shape))

    def stack(self, arrays: Any, axis: int = 0) -> Any:
        return torch.stack(list(arrays), dim=axis)

    def concat(self, arrays: Any, axis: int = 0) -> Any:
        return torch.cat(list(arrays), dim=axis)

    def roll(self, x: Any, shift: Any, axis: Any = None) -> Any:
        if axis is None:
            return torch.roll(x, shifts=shift)
        return torch.roll(x, shifts=shift, dims=axis)

    def permute_dims(self, x: Any, axes: Any) -> Any:
        return torch.permute(x, tuple(axes))

    def expand_dims(self, x: Any, axis: int) -> Any:
        return torch.unsqueeze(x, axis)

    def squeeze(self, x: Any, axis: Any) -> Any:
        return torch.squeeze(x, dim=axis)

    def flip(self, x: Any, axis: Any = None) -> Any:
        dims = (
            tuple(range(x.ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
        )
        return torch.flip(x, dims=dims)

    def take(self, x: Any, indices: Any, axis: int | None = None) -> Any:
        idx = torch.as_tensor(indices, device=x.device)
        if axis is None:
            return x.reshape(-1)[idx]
        return torch.index_select(x, axis, idx.reshape(-1)).reshape(
            (*x.shape[: axis % x.ndim], *idx.shape, *x.shape[axis % x.ndim + 1 :])
        )

    def where(self, condition: Any, x1: Any, x2: Any) -> Any:
        return torch.where(condition, x1, x2)

    def clip(self, x: Any, min: Any = None, max: Any = None) -> Any:
        return torch.clamp(x, min=min, max=max)

    def vecdot(self, x1: Any, x2: Any, axis: int = -1) -> Any:
        return torch.sum(x1 * x2, dim=axis)

    # --- creation -----------------------------------------------------------------
    def asarray(self, x: Any, dtype: Any = None) -> Any:
        """Tensor from ``x``; floats get the context dtype, integers and bools keep theirs."""
        if dtype is not None:
            return torch.as_tensor(x, dtype=torch_dtype(dtype), device=self.device)
        t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x), device=self.device)
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
        return torch.full(
            (shape,) if isinstance(shape, int) else tuple(shape),
            fill_value,
            dtype=dtype or self.dtype,
            device=self.device,
        )

    def zeros_like(self, x: Any) -> Any:
        return torch.zeros_like(x)

    def ones_like(self, x: Any) -> Any:
        return torch.ones_like(x)

    def full_like(self, x: Any, fill_value: Any) -> Any:
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
    @staticmethod
    def checkpoint(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``torch.utils.checkpoint`` (non-reentrant) where it composes; else the identity.

        torch.func's transforms reject saved-tensor hooks, so under
        ``torch.func.grad`` and friends the function runs without
        rematerialisation.
        """

        def wrapped(*args: Any) -> Any:
            if torch._C._functorch.peek_interpreter_stack() is not None:
                return fn(*args)
            return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)

        return wrapped

    @staticmethod
    def stop_gradient(x: Any) -> Any:
        """``x.detach()``."""
        return x.detach()

    @staticmethod
    def jacfwd(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``torch.func.jacfwd``: forward-mode Jacobian, nests under torch.func transforms."""
        return torch.func.jacfwd(fn)

    @staticmethod
    def concrete(x: Any) -> Any:
        """``x`` as numpy, or ``None`` when it has no value (under ``torch.func.vmap``)."""
        if not isinstance(x, torch.Tensor):
            return np.asarray(x)
        try:
            return np.asarray(float(x.detach())) if x.ndim == 0 else x.detach().cpu().numpy()
        except RuntimeError:  # functional tensors without a value
            return None


class TorchBackend(Backend):
    name = "torch"
    grad = staticmethod(torch.func.grad)
    jvp = staticmethod(torch.func.jvp)
    vjp = staticmethod(torch.func.vjp)
    jacfwd = staticmethod(torch.func.jacfwd)
    jacrev = staticmethod(torch.func.jacrev)

    def ops(self, dtype: Any = None, device: Any = None) -> TorchOps:
        return TorchOps(torch.float64 if dtype is None else dtype, device)

    @staticmethod
    def vmap(fn: Callable[..., Any], in_axes: Any = 0) -> Callable[..., Any]:
        return torch.func.vmap(fn, in_dims=in_axes)

    @staticmethod
    def jit(fn: Callable[..., Any]) -> Callable[..., Any]:
        """Eager torch has no compiler step: identity (``compile=True`` uses torch.compile)."""
        return fn

    @staticmethod
    def compile(fn: Callable[..., Any]) -> Callable[..., Any]:
        return torch.compile(fn, fullgraph=False, dynamic=False)

    def is_native(self, x: Any) -> bool:
        return isinstance(x, torch.Tensor)

    def from_numpy(self, a: Any, dtype: Any, device: Any = None) -> Any:
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            a = a.copy()  # torch refuses read-only buffers (e.g. numpy views of jax arrays)
        t = torch.as_tensor(a, device=device)
        return t.to(torch_dtype(dtype)) if t.dtype != torch_dtype(dtype) else t

    def to_numpy(self, x: Any) -> Any:
        return x.detach().cpu().numpy()
