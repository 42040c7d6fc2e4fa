"""Backends: the contexts a problem runs in.

``get_backend(name)`` imports a backend's framework only when it is first
asked for, so ``import simdiff`` imports neither torch nor jax.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import numpy as np

from simdiff.backends._backend import Backend
from simdiff.backends._base import CAPABILITIES, CONSTANTS, OP_NAMES, Array, Ops
from simdiff.backends._caches import cold_compiler_caches, compiler_caches
from simdiff.backends._ops_base import OpsBase
from simdiff.backends._threads import SINGLE_THREAD_XLA_FLAGS, thread_info
from simdiff.errors import BackendUnavailable, InputError, UnsupportedError

__all__ = [
    "AD_BACKENDS",
    "BACKENDS",
    "CAPABILITIES",
    "CONSTANTS",
    "OP_NAMES",
    "Array",
    "Backend",
    "Ops",
    "OpsBase",
    "backend_of",
    "cold_compiler_caches",
    "compiler_caches",
    "get_backend",
    "get_ops",
    "set_threads",
    "thread_info",
    "to_host",
]

#: Differentiating backends and the evaluation-only numpy context.
BACKENDS = ("jax", "torch", "numpy")
#: The backends that differentiate.
AD_BACKENDS = ("jax", "torch")
#: Array types by the top-level module that defines them (what :func:`backend_of` reads).
_MODULES = {"jax": "jax", "jaxlib": "jax", "torch": "torch"}

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


def backend_of(x: Any) -> Backend:
    """The backend whose native array ``x`` is; numpy for numpy arrays, lists and scalars.

    The one way simdiff tells array kinds apart.  It reads the type's module,
    so it never imports a framework that ``x`` could not come from.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.backends import backend_of
    >>> backend_of(np.zeros(2)).name, backend_of([1.0, 2.0]).name
    ('numpy', 'numpy')
    """
    name = _MODULES.get(type(x).__module__.partition(".")[0], "numpy")
    return get_backend(name)


def to_host(x: Any) -> np.ndarray:
    """``x`` on the host as a float64 numpy array, read by the backend it belongs to.

    Any device, and tensors that require grad (the backend's ``to_numpy``).

    Examples
    --------
    >>> from simdiff.backends import to_host
    >>> to_host([1, 2]).dtype
    dtype('float64')
    """
    return np.asarray(backend_of(x).to_numpy(x), dtype=np.float64)


def set_threads(n: int) -> dict[str, Any]:
    """Use ``n`` threads in both frameworks, as far as each allows; returns :func:`thread_info`.

    torch: ``torch.set_num_threads(n)`` (imports torch).  XLA: with ``n == 1``
    and jax not yet imported, ``XLA_FLAGS`` gets single-threaded Eigen
    (:data:`SINGLE_THREAD_XLA_FLAGS`); once jax is imported its pool is fixed
    and uses every core in the process affinity, which :func:`thread_info`
    records.

    Examples
    --------
    >>> from simdiff.backends import set_threads
    >>> set_threads(0)
    Traceback (most recent call last):
    ...
    simdiff.errors.InputError: threads must be >= 1; got 0
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"threads must be >= 1; got {n!r}")
    if n == 1 and "jax" not in sys.modules:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = (flags + " " + SINGLE_THREAD_XLA_FLAGS).strip()
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    get_backend("torch").set_threads(n)
    return thread_info()
