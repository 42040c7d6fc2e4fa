"""Input validation and array conversion for the derivative API.

Results follow the input's array type: numpy in, numpy out; a ``jax.Array``
or ``torch.Tensor`` in, the same type out (without a copy when the input's
framework is the computing backend).  An array's framework is found by
:func:`simdiff.backends.backend_of`, the one place that tells them apart.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from simdiff.backends import Backend, backend_of
from simdiff.errors import DTypeError, InputError, NonFiniteError, PrecisionWarning

__all__ = [
    "backend_of",
    "check_finite_array",
    "check_input_dtype",
    "convert_out",
    "host_values",
    "resolve_dtype",
    "to_backend",
]

_FLOATS = {"float64": np.float64, "float32": np.float32}
_LOW = ("float32", "float16", "bfloat16")


def resolve_dtype(dtype: Any) -> type:
    """float64 (default) or float32; anything else raises :class:`DTypeError`."""
    if dtype is None:
        return np.float64
    key = str(dtype).replace("torch.", "")
    try:
        key = np.dtype(key).name
    except TypeError:
        pass
    if key not in _FLOATS:
        raise DTypeError(f"dtype must be 'float64' or 'float32'; got {dtype!r}")
    return _FLOATS[key]


def _numpy_kind(name: str) -> str:
    """numpy's dtype kind letter for a dtype name (``"bfloat16"`` counts as a float)."""
    if name == "bfloat16":
        return "f"
    try:
        return np.dtype(name).kind
    except TypeError:
        return "O"


def check_input_dtype(x: Any, src: Backend, what: str) -> None:
    """Reject complex, boolean and non-numeric arrays (integers are accepted and cast)."""
    if _numpy_kind(src.dtype_name(x)) not in "fiu":
        raise DTypeError(f"{what} must be a real floating-point array; got dtype {x.dtype}")


def warn_low_precision(x: Any, src: Backend, dtype: type, what: str) -> None:
    """Warn when float32 data enter a float64 computation: the result is float64 in form only."""
    name = src.dtype_name(x)
    if name in _LOW and np.dtype(dtype) == np.float64:
        warnings.warn(
            f"{what} is {name} but simdiff computes in float64: the result carries {name} "
            f"input precision{src.precision_hint}; pass dtype='float32' to compute in float32",
            PrecisionWarning,
            stacklevel=5,
        )


def host_values(x: Any, src: Backend) -> Any:
    """``x`` (a native array of ``src``) as numpy, or ``None`` when it has no value now.

    An array inside a framework transform (``src.is_traced(x)``: a JAX tracer,
    a tensor under ``torch.func.vmap``) has no host value; under
    ``torch.func.grad`` it has one (read by ``src.concrete``).
    """
    if src.is_traced(x):
        return src.concrete(x)
    return src.to_numpy(x)


def check_finite_array(x: Any, src: Backend, what: str) -> None:
    """Raise ``ValueError`` naming the first non-finite entry of ``x``.

    Skipped where ``x`` has no value now (:func:`host_values`: a tracer).
    """
    a = host_values(x, src)
    if a is None:
        return
    finite = np.isfinite(a)
    if not finite.all():
        idx = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise InputError(f"{what} must be finite; {what}[{', '.join(map(str, idx))}] = {a[idx]}")


def check_finite_result(y: Any, backend: Backend, what: str) -> None:
    """Raise :class:`NonFiniteError` if a derivative came out NaN or infinite.

    Skipped where ``y`` has no value now (:func:`host_values`: a tracer).
    """
    a = host_values(y, backend) if backend.is_native(y) else np.asarray(y)
    if a is None:
        return
    finite = np.isfinite(a)
    if not finite.all():
        idx = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise NonFiniteError(
            f"{what} is not finite: entry {idx} = {a[idx]} ({int((~finite).sum())} of {a.size} "
            "entries non-finite); the function or its derivative is singular at this point"
        )


def to_backend(x: Any, src: Backend, backend: Backend, dtype: type, device: Any = None) -> Any:
    """Convert ``x`` (a native array of ``src``) to ``backend``'s array type in ``dtype``.

    No copy where none is needed: an array already of ``backend`` is only cast.
    """
    return backend.from_numpy(x if src is backend else src.to_numpy(x), dtype, device)


def convert_out(y: Any, src: Backend, backend: Backend) -> Any:
    """Convert a ``backend`` result to the caller's array type (that of ``src``)."""
    if src is backend:
        return y
    a = backend.to_numpy(y)
    return src.from_numpy(a, a.dtype)
