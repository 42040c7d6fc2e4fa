"""Input validation and array-kind conversion for the derivative API.

Results follow the input's array type: numpy in, numpy out; a ``jax.Array``
or ``torch.Tensor`` in, the same type out (without a copy when the input's
framework is the computing backend).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

from .backends import Backend, get_backend
from .errors import DTypeError, InputError, NonFiniteError, PrecisionWarning

__all__ = ["array_kind", "check_finite_array", "convert_out", "resolve_dtype", "to_backend"]

_FLOATS = {"float64": np.float64, "float32": np.float32}


def array_kind(x: Any) -> str:
    """``"jax"``, ``"torch"`` or ``"numpy"`` (lists and scalars count as numpy)."""
    module = type(x).__module__
    if module.startswith(("jax", "jaxlib")):
        return "jax"
    if module.startswith("torch"):
        return "torch"
    return "numpy"


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


def _as_numpy_view(x: Any, kind: str) -> np.ndarray:
    if kind == "torch":
        return x.detach().cpu().numpy()
    return np.asarray(x)


def check_input_dtype(x: Any, kind: str, what: str) -> None:
    """Reject complex, boolean and non-numeric arrays (integers are accepted and cast)."""
    if kind == "torch":
        ok = not (x.is_complex() or x.dtype == sys.modules["torch"].bool)
        name = str(x.dtype)
    else:
        dt = np.asarray(x).dtype if kind == "numpy" else np.dtype(x.dtype)
        ok, name = dt.kind in "fiu", str(dt)
    if not ok:
        raise DTypeError(f"{what} must be a real floating-point array; got dtype {name}")


def warn_low_precision(x: Any, kind: str, dtype: type, what: str) -> None:
    """Warn when float32 data enter a float64 computation: the result is float64 in form only."""
    name = str(x.dtype).replace("torch.", "") if kind != "numpy" else np.asarray(x).dtype.name
    if name in ("float32", "float16", "bfloat16") and np.dtype(dtype) == np.float64:
        hint = (
            " (JAX makes float32 arrays until x64 is on: import simdiff.backends.jax, or call "
            "jax.config.update('jax_enable_x64', True), before creating them)"
            if kind == "jax"
            else ""
        )
        warnings.warn(
            f"{what} is {name} but simdiff computes in float64: the result carries {name} "
            f"input precision{hint}; pass dtype='float32' to compute in float32",
            PrecisionWarning,
            stacklevel=5,
        )


def check_finite_array(x: Any, kind: str, what: str) -> None:
    """Raise ``ValueError`` naming the first non-finite entry of ``x``."""
    a = _as_numpy_view(x, kind)
    finite = np.isfinite(a)
    if not finite.all():
        idx = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise InputError(f"{what} must be finite; {what}[{', '.join(map(str, idx))}] = {a[idx]}")


def check_finite_result(y: Any, backend: Backend, what: str) -> None:
    """Raise :class:`NonFiniteError` if a derivative came out NaN or infinite."""
    a = backend.to_numpy(y) if backend.is_native(y) else np.asarray(y)
    finite = np.isfinite(a)
    if not finite.all():
        idx = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise NonFiniteError(
            f"{what} is not finite: entry {idx} = {a[idx]} ({int((~finite).sum())} of {a.size} "
            "entries non-finite); the function or its derivative is singular at this point"
        )


def to_backend(x: Any, kind: str, backend: Backend, dtype: type, device: Any = None) -> Any:
    """Convert ``x`` to ``backend``'s array type in ``dtype`` (no copy where none is needed)."""
    if kind == backend.name:
        return backend.from_numpy(x, dtype, device) if kind != "jax" else x.astype(dtype)
    return backend.from_numpy(_as_numpy_view(x, kind), dtype, device)


def convert_out(y: Any, kind: str, backend: Backend) -> Any:
    """Convert a backend result to the caller's array kind."""
    if kind == backend.name:
        return y
    a = backend.to_numpy(y)
    if kind == "numpy":
        return a
    return get_backend(kind).from_numpy(a, a.dtype)
