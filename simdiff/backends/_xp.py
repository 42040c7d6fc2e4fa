"""Ops for array libraries that follow the Array API names (numpy, jax.numpy)."""

from __future__ import annotations

from typing import Any

from simdiff.backends._base import BINARY, REDUCTIONS, UNARY, Namespace
from simdiff.backends._ops_base import OpsBase

_DIRECT = (
    *UNARY, *BINARY, *REDUCTIONS,
    "reshape", "stack", "concat", "roll", "permute_dims", "expand_dims", "squeeze",
    "broadcast_to", "flip", "where", "matmul", "vecdot", "einsum",
)  # fmt: skip


class XPOps(OpsBase):
    """Ops over a namespace ``xp`` that already uses Array-API names."""

    def __init__(self, xp: Any, dtype: Any) -> None:
        self.xp = xp
        self.dtype = xp.dtype(dtype)
        for name in _DIRECT:
            if not hasattr(type(self), name):  # a subclass's own rule (e.g. JaxOps.abs) wins
                self.__dict__[name] = getattr(xp, name)
        self.linalg = Namespace(solve=xp.linalg.solve)
        real = self.dtype
        cplx = xp.dtype(xp.complex128 if self.dtype == xp.dtype(xp.float64) else xp.complex64)
        self._complex = cplx
        self.fft = Namespace(
            rfft=xp.fft.rfft,
            irfft=xp.fft.irfft,
            fft=xp.fft.fft,
            ifft=xp.fft.ifft,
            rfftfreq=lambda n, d=1.0: xp.asarray(xp.fft.rfftfreq(n, d), dtype=real),
            fftfreq=lambda n, d=1.0: xp.asarray(xp.fft.fftfreq(n, d), dtype=real),
        )

    def take(self, x: Any, indices: Any, axis: int | None = None) -> Any:
        """Elements of ``x`` at integer ``indices`` (a list or an integer array) along ``axis``."""
        return self.xp.take(x, self.xp.asarray(indices), axis=axis)

    def clip(self, x: Any, min: Any = None, max: Any = None) -> Any:
        """Limit ``x`` to ``[min, max]``; either bound may be omitted (None)."""
        return self.xp.clip(x, min, max)

    # --- creation: floating results get the context's dtype -----------------
    def asarray(self, x: Any, dtype: Any = None) -> Any:
        """Array from ``x``; floats get the context dtype, integers and bools keep theirs."""
        if dtype is not None:
            return self.xp.asarray(x, dtype=dtype)
        a = self.xp.asarray(x)
        kind = a.dtype.kind
        if kind == "f":
            return a.astype(self.dtype) if a.dtype != self.dtype else a
        if kind == "c":
            return a.astype(self._complex)
        return a

    def zeros(self, shape: Any, dtype: Any = None) -> Any:
        return self.xp.zeros(shape, dtype=dtype or self.dtype)

    def ones(self, shape: Any, dtype: Any = None) -> Any:
        return self.xp.ones(shape, dtype=dtype or self.dtype)

    def full(self, shape: Any, fill_value: Any, dtype: Any = None) -> Any:
        return self.xp.full(shape, fill_value, dtype=dtype or self.dtype)

    def zeros_like(self, x: Any) -> Any:
        return self.xp.zeros_like(x)

    def ones_like(self, x: Any) -> Any:
        return self.xp.ones_like(x)

    def full_like(self, x: Any, fill_value: Any) -> Any:
        return self.xp.full_like(x, fill_value)

    def arange(self, start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Any:
        """``arange``; float arguments give the context dtype, integers give integers."""
        if dtype is None and any(isinstance(v, float) for v in (start, stop, step)):
            dtype = self.dtype
        if stop is None:
            return self.xp.arange(start, dtype=dtype)
        return self.xp.arange(start, stop, step, dtype=dtype)

    def linspace(self, start: Any, stop: Any, num: int, endpoint: bool = True) -> Any:
        return self.xp.linspace(start, stop, num, endpoint=endpoint, dtype=self.dtype)

    def eye(self, n: int, m: int | None = None, k: int = 0) -> Any:
        return self.xp.eye(n, m, k=k, dtype=self.dtype)
