"""Backends: the contexts a problem runs in.

``get_backend(name)`` imports a backend's framework only when it is first
asked for, so ``import simdiff`` imports neither torch nor jax.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import BackendUnavailable, InputError, UnsupportedError
from ._base import CONSTANTS, OP_NAMES, Backend, Ops

__all__ = ["BACKENDS", "CONSTANTS", "OP_NAMES", "Backend", "Ops", "get_backend", "get_ops"]

#: Differentiating backends and the evaluation-only numpy context.
BACKENDS = ("jax", "torch", "numpy")

_CLASSES = {"jax": "JaxBackend", "torch": "TorchBackend", "numpy": "NumpyBackend"}
_INSTALL = {
    "jax": "pip install jax",
    "torch": "pip install torch==2.13.0 (CPU); GPU users: see docs/install.md",
    "numpy": "pip install numpy",
}
_cache: dict[str, Backend] = {}


def get_backend(name: str | Backend) -> Backend:
    """Return the backend called ``name`` (``"jax"``, ``"torch"`` or ``"numpy"``).

    Raises
    ------
    ValueError
        ``name`` is not a backend; the message lists the valid ones.
    simdiff.errors.BackendUnavailable
        The framework is not installed; the message says how to install it.
    """
    if isinstance(name, Backend):
        return name
    if name in _cache:
        return _cache[name]
    if name == "taylor":
        raise UnsupportedError(
            "'taylor' is an evaluation context over a backend, not a backend; "
            "use simdiff.taylor(...) or simdiff.derivative(..., method='taylor')"
        )
    if name not in _CLASSES:
        raise InputError(f"unknown backend {name!r}; expected one of {list(BACKENDS)}")
    try:
        module = importlib.import_module(f"simdiff.backends.{name}")
    except ImportError as exc:
        raise BackendUnavailable(
            f"backend {name!r} needs a package that is not installed ({exc}); install it with: "
            f"{_INSTALL[name]}"
        ) from exc
    backend = getattr(module, _CLASSES[name])()
    _cache[name] = backend
    return backend


def get_ops(name: str, dtype: Any = None) -> Ops:
    """The ``ops`` namespace of context ``name`` (float64 unless ``dtype`` is given)."""
    return get_backend(name).ops(dtype)
