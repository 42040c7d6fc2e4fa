"""The derivative API: ``grad``, ``hessian``, ``hvp``, ``jvp``, ``vjp``, ``jacobian``,
``derivative``, ``derivative_tensor``, ``taylor`` and the cached ``Derivatives``.

Every function takes a :class:`~simdiff.Problem`, a point ``x`` (``None`` means
``problem.x0``; a leading batch axis maps over points with vmap) and a
``backend``.  Results follow the input's array type.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _arrays as A
from ._problem import Problem
from ._structure import StructuredHessian, memory_budget
from ._tree import tree_map
from .backends import get_backend
from .backends.taylor import taylor_function
from .errors import MemoryBudgetError, ShapeError, UnsupportedError

__all__ = [
    "HESSIAN_METHODS",
    "JACOBIAN_MODES",
    "Derivatives",
    "derivative",
    "derivative_tensor",
    "grad",
    "hessian",
    "hvp",
    "jacobian",
    "jvp",
    "taylor",
    "value_and_grad",
    "vjp",
]

HESSIAN_METHODS = ("auto", "fwd-rev", "rev-rev", "fwd-fwd")
JACOBIAN_MODES = ("auto", "fwd", "rev")
DERIVATIVE_METHODS = ("taylor", "nested")
_SCALAR_ONLY = {"grad", "value_and_grad", "hvp"}
_NO_AD_KINDS = {"value", "taylor", "taylor_derivative"}  # what the numpy context can do


def _check_order(order: Any, what: str = "order") -> int:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ValueError(f"{what} must be a non-negative integer; got {order!r}")
    return int(order)


def _choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; expected one of {list(allowed)}")
    return value


# --------------------------------------------------------------------------- builders
# Each builder returns a function of (x, *extras) for one point, written with the
# transforms every differentiating backend shares (jax and torch.func signatures).


def _nested_derivative(f: Callable[[Any], Any], T: Any, order: int) -> Callable[[Any, Any], Any]:
    def g0(x: Any, v: Any) -> Any:
        return f(x)

    g = g0
    for _ in range(order):
        g = (lambda h: lambda x, v: T.jvp(lambda y: h(y, v), (x,), (v,))[1])(g)
    return g


def _derivative_tensor(f: Callable[[Any], Any], T: Any, order: int) -> Callable[[Any], Any]:
    if order == 0:
        return f
    g = T.jacrev(f)
    for _ in range(order - 1):
        g = T.jacfwd(g)
    return g


def _value_and_grad(f: Callable[[Any], Any], T: Any) -> Callable[[Any], Any]:
    def vg(x: Any) -> Any:
        y, pullback = T.vjp(f, x)
        return y, pullback(y * 0 + 1)[0]

    return vg


def _build(kind: str, params: dict[str, Any], problem: Problem, ops: Any, T: Any) -> Callable:
    def f(x: Any) -> Any:
        return problem.fn(x, ops)

    if kind == "value":
        return f
    if kind == "grad":
        return T.grad(f)
    if kind == "value_and_grad":
        return _value_and_grad(f, T)
    if kind == "hessian":
        outer, inner = {
            "fwd-rev": ("jacfwd", "jacrev"),
            "rev-rev": ("jacrev", "jacrev"),
            "fwd-fwd": ("jacfwd", "jacfwd"),
        }[params["method"]]
        return getattr(T, outer)(getattr(T, inner)(f))
    if kind == "hvp":
        return lambda x, v: T.jvp(T.grad(f), (x,), (v,))[1]
    if kind == "jvp":
        return lambda x, v: T.jvp(f, (x,), (v,))[1]
    if kind == "vjp":
        return lambda x, u: T.vjp(f, x)[1](u)[0]
    if kind == "jacobian":
        return getattr(T, "jacfwd" if params["mode"] == "fwd" else "jacrev")(f)
    if kind == "derivative":
        return _nested_derivative(f, T, params["order"])
    if kind == "derivative_tensor":
        return _derivative_tensor(f, T, params["order"])
    if kind == "taylor":
        return taylor_function(problem, ops, params["order"])
    if kind == "taylor_derivative":  # k! c_k, sliced inside the compiled function
        g, k = taylor_function(problem, ops, params["order"]), params["order"]
        scale = float(math.factorial(k))
        return lambda x, v: g(x, v)[k] * scale
    raise AssertionError(kind)


# --------------------------------------------------------------------------- Derivatives


class Derivatives:
    """Compiled, cached derivative callables of one problem on one backend.

    Each derivative is built (and on JAX jit-compiled) once per input shape,
    dtype and batching pattern, and reused afterwards.  ``compilations``
    counts the builds: on JAX it is the number of jit traces (so a retrace is
    visible), on torch the number of transform chains built (and compiled,
    with ``compile=True``).

    Parameters
    ----------
    problem : Problem
    backend : {"jax", "torch"}
    dtype : {"float64", "float32"}, optional
        Computation dtype (default float64); inputs are cast to it.
    compile : bool
        torch only: wrap each callable in ``torch.compile``.  A compilation
        failure raises :class:`~simdiff.errors.UnsupportedError` with torch's
        reason; it is never silently replaced by eager execution.
    check_finite : bool
        Reject non-finite inputs (``ValueError`` naming the first bad index)
        and non-finite results (:class:`~simdiff.errors.NonFiniteError`).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 3), x0=np.ones(2))
    >>> d = simdiff.Derivatives(p, backend="jax")
    >>> d.hessian(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    >>> _ = d.hessian(np.array([3.0, 4.0]))
    >>> d.compilations
    1
    """

    def __init__(
        self,
        problem: Problem,
        backend: str = "jax",
        *,
        dtype: Any = None,
        compile: bool = False,
        check_finite: bool = True,
    ) -> None:
        if not isinstance(problem, Problem):
            raise TypeError(f"expected a simdiff.Problem; got {type(problem).__name__}")
        self.backend = get_backend(backend)
        problem.require(self.backend.name)
        if compile and self.backend.name != "torch":
            raise ValueError(
                "compile=True means torch.compile and needs backend='torch' "
                "(JAX always jit-compiles)"
            )
        self.problem = problem
        self.dtype = A.resolve_dtype(dtype)
        self.compile = bool(compile)
        self.check_finite = bool(check_finite)
        self._fns: dict[tuple, Callable] = {}
        self._info: dict[tuple, dict[str, Any]] = {}
        self._traces = 0

    # ------------------------------------------------------------------ public
    @property
    def compilations(self) -> int:
        """Number of compilations so far (JAX: jit traces; torch: callables built)."""
        return self._traces if self.backend.name == "jax" else len(self._fns)

    def cache_info(self) -> list[dict[str, Any]]:
        """One record per built callable: kind, parameters, shapes, first-call seconds, calls."""
        return [dict(v) for v in self._info.values()]

    def value(self, x: Any = None) -> Any:
        """``f(x)``: shape ``out`` (``()`` or ``(m,)``), with a leading batch axis if batched."""
        return self._call("value", {}, x, [])

    def grad(self, x: Any = None) -> Any:
        """Gradient of a scalar problem, shape ``(n,)``."""
        return self._call("grad", {}, x, [])

    def value_and_grad(self, x: Any = None) -> tuple[Any, Any]:
        """``(f(x), grad f(x))`` in one reverse pass."""
        return self._call("value_and_grad", {}, x, [])

    def hessian(self, x: Any = None, *, method: str = "auto") -> Any:
        """Hessian, shape ``(out..., n, n)``; ``method`` is fwd-rev, rev-rev, fwd-fwd or structured.

        ``"auto"`` is ``"structured"`` when the problem's ``fn`` assembles its
        Hessian from structure (:class:`~simdiff._structure.StructuredHessian`,
        e.g. a sum of terms from :mod:`simdiff.pes`), else ``"fwd-rev"``.  A
        dense AD Hessian whose intermediates would exceed the memory budget
        is computed in chunks of Hessian-vector products, or refused with
        :class:`~simdiff.errors.MemoryBudgetError` if even one would not fit.
        """
        method = _choice(method, (*HESSIAN_METHODS, "structured"), "Hessian method")
        fn = self.problem.fn
        structured = isinstance(fn, StructuredHessian)
        if method == "structured" or (method == "auto" and structured):
            if not structured:
                raise UnsupportedError(
                    f"method='structured' needs a problem whose fn assembles its Hessian from "
                    f"structure (e.g. simdiff.pes.term_energy); {self.problem.name!r} has none"
                )
            return self._structured_hessian(x)
        method = "fwd-rev" if method == "auto" else method
        chunk = self._dense_chunk() if structured else None
        if chunk is not None:
            return self._chunked_hessian(x, chunk)
        return self._call("hessian", {"method": method}, x, [])

    def hvp(self, v: Any, x: Any = None) -> Any:
        """Hessian-vector product ``H(x) v`` (forward over reverse), shape ``(n,)``.

        Arguments in the order of :func:`simdiff.hvp`: direction first, ``x`` last.
        """
        return self._call("hvp", {}, x, [("v", v, (self.problem.n,))])

    def jvp(self, v: Any, x: Any = None) -> Any:
        """Jacobian-vector product ``J(x) v``, shape ``out``."""
        return self._call("jvp", {}, x, [("v", v, (self.problem.n,))])

    def vjp(self, u: Any, x: Any = None) -> Any:
        """Vector-Jacobian product ``u^T J(x)``, shape ``(n,)``; ``u`` has shape ``out``."""
        return self._call("vjp", {}, x, [("u", u, self.problem.output_shape)])

    def jacobian(self, x: Any = None, *, mode: str = "auto") -> Any:
        """Jacobian, shape ``(out..., n)``; ``mode="auto"`` is fwd when ``n <= m``."""
        mode = _choice(mode, JACOBIAN_MODES, "Jacobian mode")
        if mode == "auto":
            m = math.prod(self.problem.output_shape)
            mode = "fwd" if self.problem.n <= m else "rev"
        return self._call("jacobian", {"mode": mode}, x, [])

    def derivative(
        self, order: int, direction: Any, x: Any = None, *, method: str = "taylor"
    ) -> Any:
        """``order``-th directional derivative of ``t -> f(x + t v)`` at 0, shape ``out``."""
        order = _check_order(order)
        method = _choice(method, DERIVATIVE_METHODS, "derivative method")
        extras = [("direction", direction, (self.problem.n,))]
        if method == "nested":
            return self._call("derivative", {"order": order}, x, extras)
        return self._call("taylor_derivative", {"order": order}, x, extras)

    def taylor(self, x: Any, direction: Any, order: int) -> Any:
        """Taylor coefficients ``c_0..c_K`` of ``t -> f(x + t v)``, shape ``(K+1, out...)``."""
        order = _check_order(order)
        return self._call(
            "taylor", {"order": order}, x, [("direction", direction, (self.problem.n,))]
        )

    def derivative_tensor(self, x: Any = None, *, order: int) -> Any:
        """Full ``order``-th derivative tensor, shape ``(out..., n, ..., n)`` (``order`` n's)."""
        return self._call("derivative_tensor", {"order": _check_order(order)}, x, [])

    # ------------------------------------------------------------------ structure
    def _structured_hessian(self, x: Any) -> Any:
        x = self.problem.x0 if x is None else x
        kind, a, _, _ = self._prepare(x, "x", (self.problem.n,), self.check_finite)
        xs = np.asarray(A.to_backend(a, kind, get_backend("numpy"), np.float64))
        h = self.problem.fn.structured_hessian(xs, self.backend.name, np.dtype(self.dtype).name)
        if self.check_finite:
            A.check_finite_result(h, get_backend("numpy"), "simdiff.hessian (structured)")
        return A.convert_out(h.astype(self.dtype, copy=False), kind, get_backend("numpy"))

    def _dense_chunk(self) -> int | None:
        """Tangents per batch for a dense Hessian within the memory budget (None: all at once)."""
        n = self.problem.n
        need = int(self.problem.fn.dense_hessian_bytes(n))
        budget = memory_budget()
        if need <= budget:
            return None
        chunk = int(n * budget // need)
        if chunk < 1:
            raise MemoryBudgetError(
                f"the dense AD Hessian of {self.problem.name!r} (n = {n}) would need about "
                f"{need / 2**30:.1f} GiB of intermediates ({need / n / 2**20:.1f} MiB per "
                f"Hessian-vector product) and {budget / 2**30:.1f} GiB are available; use "
                "method='structured' (assembled from the terms, the default) or "
                "simdiff.hvp (matrix-free)"
            )
        return chunk

    def _chunked_hessian(self, x: Any, chunk: int) -> Any:
        """The dense Hessian as ``H e_i`` for batches of ``chunk`` unit vectors (H symmetric)."""
        n = self.problem.n
        x = self.problem.x0 if x is None else x
        kind, a, batched, _ = self._prepare(x, "x", (n,), self.check_finite)
        if batched:
            raise ShapeError(
                f"a batch of points needs the Hessians at once, beyond the memory budget for "
                f"{self.problem.name!r}: pass one point of shape ({n},) at a time"
            )
        numpy = get_backend("numpy")
        xs = np.asarray(A.to_backend(a, kind, numpy, np.float64))
        rows = []
        for s in range(0, n, chunk):
            e = np.zeros((chunk, n), dtype=self.dtype)  # a fixed chunk shape: one compilation
            m = min(chunk, n - s)
            e[np.arange(m), s + np.arange(m)] = 1.0
            rows.append(np.asarray(self.hvp(e, xs))[:m])
        return A.convert_out(np.concatenate(rows, axis=0), kind, numpy)

    # ------------------------------------------------------------------ machinery
    def _prepare(self, a: Any, what: str, point_shape: tuple[int, ...], check: bool):
        kind = A.array_kind(a)
        if kind == "numpy":
            a = np.asarray(a)
        A.check_input_dtype(a, kind, what)
        ndim = len(point_shape)
        shape = tuple(int(s) for s in a.shape)
        if a.ndim not in (ndim, ndim + 1) or (ndim and shape[a.ndim - ndim :] != point_shape):
            want = f"{point_shape} or {('batch', *point_shape)}".replace("'batch'", "batch")
            raise ShapeError(
                f"{what} for problem {self.problem.name!r} must have shape {want}; got {shape}"
            )
        A.warn_low_precision(a, kind, self.dtype, what)
        if check:
            A.check_finite_array(a, kind, what)
        device = a.device if kind == "torch" and self.backend.name == "torch" else None
        return kind, a, a.ndim == ndim + 1, device

    def _call(self, kind: str, params: dict[str, Any], x: Any, extras: list) -> Any:
        problem = self.problem
        if not self.backend.differentiable and kind not in _NO_AD_KINDS:
            raise UnsupportedError(
                f"simdiff.{kind} is not available in the {self.backend.name!r} context: it "
                "evaluates (values and Taylor coefficients) but does not differentiate; "
                "use backend='jax' or backend='torch'"
            )
        if kind in _SCALAR_ONLY and not problem.is_scalar:
            raise ShapeError(
                f"simdiff.{kind} needs a scalar-valued problem; {problem.name!r} returns shape "
                f"{problem.output_shape} (use jacobian, jvp or vjp)"
            )
        check = self.check_finite
        x = problem.x0 if x is None else x
        xkind, x, xb, device = self._prepare(x, "x", (problem.n,), check)
        prepared = [self._prepare(e, name, shape, check) for name, e, shape in extras]
        batches = {int(x.shape[0])} if xb else set()
        batches |= {int(a.shape[0]) for _, a, b, _ in prepared if b}
        if len(batches) > 1:
            raise ShapeError(
                f"batch sizes of x and {[e[0] for e in extras]} differ: {sorted(batches)}"
            )
        axes = (0 if xb else None, *(0 if b else None for _, _, b, _ in prepared))
        native = [A.to_backend(x, xkind, self.backend, self.dtype, device)]
        native += [A.to_backend(a, k, self.backend, self.dtype, device) for k, a, _, _ in prepared]
        key = (
            kind,
            tuple(sorted(params.items())),
            axes,
            tuple(tuple(a.shape) for a in native),
            np.dtype(self.dtype).name,
            str(device),
        )
        fn = self._fns.get(key)
        if fn is None:
            fn = self._fns[key] = self._make(kind, params, axes, device)
            self._info[key] = {
                "kind": kind,
                **params,
                "shape": tuple(x.shape),
                "batched": any(a is not None for a in axes),
                "calls": 0,
            }
            start = time.perf_counter()
            out = self.backend.block_until_ready(fn(*native))  # honest first-call time
            self._info[key]["first_call_s"] = time.perf_counter() - start
        else:
            out = fn(*native)
        self._info[key]["calls"] += 1
        if check:
            tree_map(lambda y: A.check_finite_result(y, self.backend, f"simdiff.{kind}"), out)
        return tree_map(lambda y: A.convert_out(y, xkind, self.backend), out)

    def _make(self, kind: str, params: dict[str, Any], axes: tuple, device: Any) -> Callable:
        T = self.backend
        core = _build(kind, params, self.problem, T.ops(self.dtype, device), T)
        if any(a is not None for a in axes):
            core = T.vmap(core, in_axes=axes)
        if T.name == "jax":
            inner = core

            def counted(*args: Any) -> Any:
                self._traces += 1  # runs only while JAX traces, i.e. once per compilation
                return inner(*args)

            return T.jit(counted)
        if self.compile:
            return _reporting_compile(T.compile(core), kind)
        return core


def _reporting_compile(fn: Callable, kind: str) -> Callable:
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # torch.compile failures come in many types
            raise UnsupportedError(
                f"torch.compile failed on {kind}: {type(exc).__name__}: {str(exc)[:500]}"
            ) from exc

    return call


# --------------------------------------------------------------------------- functions


def cached_derivatives(
    problem: Problem, backend: str, *, dtype: Any = None, check_finite: bool = True
) -> Derivatives:
    """The problem's shared :class:`Derivatives` for these settings (built on first use).

    Kept on the problem, so every function of the API and every analysis built
    on it (sensitivity, optimisation) compile each derivative once.
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"expected a simdiff.Problem; got {type(problem).__name__}")
    key = ("derivatives", backend, str(dtype), bool(check_finite))
    d = problem._cache.get(key)
    if d is None:
        d = problem._cache[key] = Derivatives(
            problem, backend, dtype=dtype, check_finite=check_finite
        )
    return d


def grad(problem: Problem, x: Any = None, *, backend: str = "jax", dtype: Any = None) -> Any:
    """Gradient of a scalar problem.

    Parameters
    ----------
    problem : Problem
        Scalar-valued.
    x : array_like, shape (n,) or (batch, n), optional
        Point(s); default ``problem.x0``.
    backend : {"jax", "torch"}
    dtype : {"float64", "float32"}, optional

    Returns
    -------
    array, shape (n,) or (batch, n)
        Same array type as ``x``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2), x0=np.array([1.0, 2.0]))
    >>> simdiff.grad(p)
    array([2., 4.])
    >>> simdiff.grad(p, np.ones((3, 2)), backend="torch").shape
    (3, 2)
    """
    return cached_derivatives(problem, backend, dtype=dtype).grad(x)


def value_and_grad(problem: Problem, x: Any = None, *, backend: str = "jax", dtype: Any = None):
    """``(f(x), grad f(x))`` of a scalar problem in one reverse pass.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2), x0=np.array([1.0, 2.0]))
    >>> simdiff.value_and_grad(p)
    (array(5.), array([2., 4.]))
    """
    return cached_derivatives(problem, backend, dtype=dtype).value_and_grad(x)


def hessian(
    problem: Problem,
    x: Any = None,
    *,
    backend: str = "jax",
    method: str = "auto",
    dtype: Any = None,
) -> Any:
    """Hessian, shape ``(out..., n, n)`` (``(n, n)`` for a scalar problem).

    ``method``: ``"fwd-rev"`` (forward over reverse), ``"rev-rev"`` or
    ``"fwd-fwd"``, all the same matrix to rounding; ``"structured"`` assembles
    it from the problem's structure (a sum of terms, :func:`simdiff.pes.term_energy`,
    :func:`simdiff.pes.cluster_problem`).  ``"auto"`` is ``"structured"`` where
    the problem has structure, else ``"fwd-rev"``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1], x0=np.array([1.0, 2.0]))
    >>> simdiff.hessian(p)
    array([[4., 2.],
           [2., 0.]])
    """
    return cached_derivatives(problem, backend, dtype=dtype).hessian(x, method=method)


def hvp(problem: Problem, v: Any, x: Any = None, *, backend: str = "jax", dtype: Any = None):
    """Hessian-vector product ``H(x) v`` of a scalar problem without forming ``H``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1], x0=np.array([1.0, 2.0]))
    >>> simdiff.hvp(p, np.array([1.0, 0.0]))
    array([4., 2.])
    """
    return cached_derivatives(problem, backend, dtype=dtype).hvp(v, x)


def jvp(problem: Problem, v: Any, x: Any = None, *, backend: str = "jax", dtype: Any = None):
    """Jacobian-vector product ``J(x) v`` (forward mode), shape ``out``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1], ops.sin(x[0])]),
    ...                     x0=np.array([0.0, 2.0]))
    >>> simdiff.jvp(p, np.array([1.0, 0.0]))
    array([2., 1.])
    """
    return cached_derivatives(problem, backend, dtype=dtype).jvp(v, x)


def vjp(problem: Problem, u: Any, x: Any = None, *, backend: str = "jax", dtype: Any = None):
    """Vector-Jacobian product ``u^T J(x)`` (reverse mode), shape ``(n,)``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1], ops.sin(x[0])]),
    ...                     x0=np.array([0.0, 2.0]))
    >>> simdiff.vjp(p, np.array([1.0, 1.0]))
    array([3., 0.])
    """
    return cached_derivatives(problem, backend, dtype=dtype).vjp(u, x)


def jacobian(
    problem: Problem, x: Any = None, *, backend: str = "jax", mode: str = "auto", dtype: Any = None
) -> Any:
    """Jacobian, shape ``(out..., n)``; ``mode`` is ``"fwd"``, ``"rev"`` or ``"auto"``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1], ops.sin(x[0])]),
    ...                     x0=np.array([0.0, 2.0]))
    >>> simdiff.jacobian(p)
    array([[2., 0.],
           [1., 0.]])
    """
    return cached_derivatives(problem, backend, dtype=dtype).jacobian(x, mode=mode)


def derivative(
    problem: Problem,
    order: int,
    direction: Any,
    x: Any = None,
    *,
    backend: str = "jax",
    method: str = "taylor",
    dtype: Any = None,
) -> Any:
    """The ``order``-th directional derivative ``d^k/dt^k f(x + t v) |_{t=0}``.

    ``method="taylor"`` propagates a truncated Taylor series in one pass (cost
    polynomial in the order); ``"nested"`` nests ``jvp`` (cost exponential in
    the order on eager backends).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.exp(2.0 * x)), x0=np.zeros(1))
    >>> float(simdiff.derivative(p, 3, np.ones(1), method="nested"))
    8.0
    """
    return cached_derivatives(problem, backend, dtype=dtype).derivative(
        order, direction, x, method=method
    )


def taylor(
    problem: Problem, x: Any, direction: Any, order: int, *, backend: str = "jax", dtype: Any = None
) -> Any:
    """Taylor coefficients ``c_0..c_K`` of ``t -> f(x + t v)``, shape ``(K+1, out...)``.

    ``c_k = f^{(k)} / k!`` along ``direction``; a batch axis comes first.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.exp(x)), x0=np.zeros(1))
    >>> simdiff.taylor(p, np.zeros(1), np.ones(1), 3)
    array([1.        , 1.        , 0.5       , 0.16666667])
    """
    return cached_derivatives(problem, backend, dtype=dtype).taylor(x, direction, order)


def derivative_tensor(
    problem: Problem, order: int, x: Any = None, *, backend: str = "jax", dtype: Any = None
) -> Any:
    """Full ``order``-th derivative tensor by nested forward mode, shape ``(out..., n, ..., n)``.

    Cost grows like ``n**order``: meant for small ``n``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1], x0=np.array([1.0, 2.0]))
    >>> simdiff.derivative_tensor(p, 3)[0]
    array([[0., 2.],
           [2., 0.]])
    """
    return cached_derivatives(problem, backend, dtype=dtype).derivative_tensor(x, order=order)
