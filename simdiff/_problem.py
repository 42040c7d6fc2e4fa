"""``simdiff.Problem``: one function, written once against ``ops``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .backends import BACKENDS, get_backend
from .errors import DTypeError, InputError, InputTypeError, ShapeError, UnsupportedError

__all__ = ["Problem"]


class Problem:
    """A differentiable function of a flat parameter vector, defined once for every backend.

    Parameters
    ----------
    fn : callable
        ``fn(x, ops)`` where ``x`` is a 1-D float array of shape ``(n,)`` of the
        active context and ``ops`` is that context's operations namespace
        (:doc:`ops`).  It returns a scalar (shape ``()``) or a 1-D array of
        shape ``(m,)``, and must be pure: no in-place updates, no state.
    x0 : array_like, shape (n,)
        The default point; ``x=None`` in every derivative function means ``x0``.
    name : str, optional
        Used in messages, reports and the result store (default ``fn.__name__``).
    exact : mapping, optional
        Known derivatives as numpy callables, used by :func:`simdiff.check` and
        the tests.  Keys: ``"value"(x)``, ``"grad"(x)``, ``"hessian"(x)``,
        ``"jacobian"(x)``, ``"derivative"(x, order, direction)``,
        ``"derivative_tensor"(x, order)``.
    backends : tuple of str, optional
        The contexts ``fn`` runs in (default: all of ``("jax", "torch", "numpy")``).
    meta : mapping, optional
        Free-form facts (literature values, citations, tolerances).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> def rosen(x, ops):
    ...     return ops.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
    >>> p = simdiff.Problem(rosen, x0=np.zeros(3), name="rosen3")
    >>> p.n, p.output_shape
    (3, ())
    >>> float(p.evaluate(np.ones(3)))
    0.0
    """

    def __init__(
        self,
        fn: Callable[[Any, Any], Any],
        x0: Any,
        *,
        name: str | None = None,
        exact: Mapping[str, Callable[..., Any]] | None = None,
        backends: tuple[str, ...] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        if not callable(fn):
            raise InputTypeError(f"Problem needs a callable fn(x, ops); got {type(fn).__name__}")
        x0 = np.asarray(x0)
        if x0.dtype.kind not in "fiu":
            raise DTypeError(f"Problem x0 must be a real float array; got dtype {x0.dtype}")
        x0 = x0.astype(np.float64)
        if x0.ndim != 1 or x0.size == 0:
            raise ShapeError(f"Problem x0 must have shape (n,) with n >= 1; got shape {x0.shape}")
        if not np.all(np.isfinite(x0)):
            bad = int(np.flatnonzero(~np.isfinite(x0))[0])
            raise InputError(f"Problem x0 must be finite; x0[{bad}] = {x0[bad]}")
        self.fn = fn
        self.x0 = x0
        self.name = name or getattr(fn, "__name__", "problem")
        self.exact = dict(exact or {})
        unknown = set(backends or ()) - set(BACKENDS)
        if unknown:
            raise InputError(f"unknown backends {sorted(unknown)}; expected a subset of {BACKENDS}")
        self.backends = tuple(backends) if backends else BACKENDS
        self.meta = dict(meta or {})
        self._output_shape: tuple[int, ...] | None = None
        self._cache: dict[Any, Any] = {}

    # ------------------------------------------------------------------ wrappers
    @classmethod
    def from_jax(cls, f: Callable[[Any], Any], x0: Any, **kwargs: Any) -> Problem:
        """Wrap a function written with ``jax.numpy``; it runs on the jax backend only.

        Examples
        --------
        >>> import jax.numpy as jnp, numpy as np, simdiff
        >>> p = simdiff.Problem.from_jax(lambda x: jnp.sum(jnp.sin(x)), np.zeros(2))
        >>> simdiff.grad(p)
        array([1., 1.])
        """
        return cls(_only(f, "jax"), x0, backends=("jax",), **_named(f, kwargs))

    @classmethod
    def from_torch(cls, f: Callable[[Any], Any], x0: Any, **kwargs: Any) -> Problem:
        """Wrap a function written with ``torch``; it runs on the torch backend only.

        Examples
        --------
        >>> import torch, numpy as np, simdiff
        >>> p = simdiff.Problem.from_torch(lambda x: torch.sum(torch.sin(x)), np.zeros(2))
        >>> simdiff.grad(p, backend="torch")
        array([1., 1.])
        """
        return cls(_only(f, "torch"), x0, backends=("torch",), **_named(f, kwargs))

    # ------------------------------------------------------------------ facts
    @property
    def n(self) -> int:
        """Number of inputs."""
        return int(self.x0.shape[0])

    @property
    def output_shape(self) -> tuple[int, ...]:
        """``()`` for scalar problems, ``(m,)`` for vector-valued ones (evaluated once at x0)."""
        if self._output_shape is None:
            y = self.evaluate(self.x0, backend=self.backends[-1])
            shape = tuple(int(s) for s in y.shape)
            if len(shape) > 1:
                raise ShapeError(
                    f"problem {self.name!r} must return a scalar or a 1-D array; got shape {shape}"
                )
            self._output_shape = shape
        return self._output_shape

    @property
    def is_scalar(self) -> bool:
        """Whether the problem returns a scalar."""
        return self.output_shape == ()

    def supports(self, backend: str) -> bool:
        """Whether ``fn`` runs in context ``backend``."""
        return backend in self.backends

    def require(self, backend: str) -> None:
        """Raise :class:`UnsupportedError` if ``fn`` cannot run in ``backend``."""
        if backend not in self.backends:
            raise UnsupportedError(
                f"problem {self.name!r} runs on {list(self.backends)} only; "
                f"backend {backend!r} was asked for"
            )

    def evaluate(self, x: Any = None, *, backend: str = "numpy") -> Any:
        """Evaluate ``fn`` at ``x`` (default ``x0``) in ``backend``; returns a numpy array."""
        self.require(backend)
        be = get_backend(backend)
        x = self.x0 if x is None else np.asarray(x, dtype=np.float64)
        if x.shape != (self.n,):
            raise ShapeError(f"problem {self.name!r} expects x of shape ({self.n},); got {x.shape}")
        y = self.fn(be.from_numpy(x, np.float64), be.ops())
        return be.to_numpy(y) if be.is_native(y) else np.asarray(y, dtype=np.float64)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the cache of compiled callables (jit functions do not pickle)."""
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    def __repr__(self) -> str:
        return f"Problem({self.name!r}, n={self.n}, backends={self.backends})"


def _only(f: Callable[[Any], Any], backend: str) -> Callable[[Any, Any], Any]:
    def fn(x: Any, ops: Any) -> Any:
        if ops.name != backend:
            raise UnsupportedError(
                f"this problem was written in {backend} (Problem.from_{backend}) and cannot run "
                f"in the {ops.name!r} context"
            )
        return f(x)

    fn.__name__ = getattr(f, "__name__", "fn")
    return fn


def _named(f: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    kwargs.setdefault("name", getattr(f, "__name__", "problem"))
    return kwargs
