"""The function face: transforms that return functions (``simdiff.jax``, ``simdiff.torch``).

``transform(kind, fn, backend)`` returns a plain function of framework
arrays built by the same builders as :class:`simdiff.Derivatives`
(:func:`simdiff.core.builders.build`: simdiff's Hessian-method rule, the Taylor and
collapsed-Taylor passes, the Laplacian).  Unlike the problem face it has no
numpy boundary: no conversion, no finite checks, no cache of compiled
callables, no batching; the framework's own transforms (``jax.jit``,
``jax.vmap``, ``jax.grad``, ``torch.func.vmap``, ``torch.func.grad``) compose
with it.  What can be checked from shapes and dtypes alone is checked when the
function is called (under ``jax.jit``: when it is traced).

``fn`` is a :class:`simdiff.Problem` (its ``fn(x, ops)`` runs in the backend's
context, and in the Taylor context for the Taylor methods) or a callable
``f(x)`` written with the framework itself (as :meth:`Problem.from_jax` /
:meth:`Problem.from_torch` wrap; the Taylor methods cannot run it, so
``method="auto"`` picks nested AD).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends import Backend, get_backend
from simdiff.core import arrays as A
from simdiff.core.builders import HESSIAN_METHODS, JACOBIAN_MODES, build, check_order, choice
from simdiff.core.problem import Problem
from simdiff.errors import (
    DTypeError,
    InputError,
    InputTypeError,
    OptionError,
    ShapeError,
    UnsupportedError,
)

__all__ = ["transform"]

#: Derivatives defined for scalar functions only.
_SCALAR_ONLY = {"grad", "value_and_grad", "hvp", "laplacian"}


class _Function:
    """What the builders read of a problem, for a bare function ``f(x)`` at one input shape."""

    runs_taylor = False

    def __init__(self, f: Callable[[Any], Any], n: int, output_shape: tuple[int, ...]) -> None:
        self.fn = lambda x, ops: f(x)
        self.n = n
        self.output_shape = output_shape
        self.name = str(getattr(f, "__name__", "fn"))

    @property
    def is_scalar(self) -> bool:
        return self.output_shape == ()

    def supports(self, context: str) -> bool:
        return context != "taylor"


def _uses_taylor(target: Any, method: str, taylor: str, fallback: str, what: str) -> str:
    """``method`` with ``"auto"`` resolved against what ``target`` can run."""
    can = target.supports("taylor") if isinstance(target, Problem) else False
    if method == "auto":
        return taylor if can else fallback
    if method != fallback and not can:
        raise UnsupportedError(
            f"{what}(method={method!r}) runs the function in simdiff's Taylor context, which "
            "needs a simdiff.Problem written with ops (fn(x, ops)); a plain function of "
            f"framework arrays runs method={fallback!r} (or 'auto')"
        )
    return method


class _Transform:
    """The function a transform returns: checks shapes, builds once per shape, calls."""

    def __init__(self, kind: str, target: Any, T: Backend, params: dict[str, Any], what: str):
        self.kind, self.target, self.T, self.params, self.what = kind, target, T, params, what
        self._built: dict[tuple, Callable[..., Any]] = {}
        self.__name__ = f"{what}({getattr(target, 'name', getattr(target, '__name__', 'fn'))})"
        self.__doc__ = f"``simdiff.{T.name}.{what}`` of {self.__name__[len(what) + 1 : -1]}."

    def __repr__(self) -> str:
        return f"<simdiff.{self.T.name} function {self.__name__}>"

    def _array(self, a: Any, name: str) -> Any:
        T = self.T
        if not T.is_native(a):
            src = A.backend_of(a)
            if src.is_native(a) and src.differentiable:  # another framework's array
                raise InputTypeError(
                    f"simdiff.{T.name}.{self.what}: {name} must be a {T.name} array (or numpy); "
                    f"got a {src.name} array: use simdiff.{src.name}.{self.what}"
                )
            a = np.asarray(a)
            if a.dtype.kind in "iub":
                raise DTypeError(
                    f"simdiff.{T.name}.{self.what}: {name} must be a real floating-point array; "
                    f"got dtype {a.dtype}"
                )
            a = T.from_numpy(a, np.float64 if a.dtype.kind != "f" else a.dtype)
        if A._numpy_kind(T.dtype_name(a)) != "f":
            raise DTypeError(
                f"simdiff.{T.name}.{self.what}: {name} must be a real floating-point array; got "
                f"dtype {T.dtype_name(a)}"
            )
        return a

    def __call__(self, *args: Any) -> Any:
        spec = self.target.param_spec if isinstance(self.target, Problem) else None
        if spec is None:
            return self._call(*args)
        # structured parameters: trees in (flattened in their framework, traced or not),
        # the result in the structure (a Labelled Hessian is a JAX pytree)
        names = ["v"] * (len(args) - 1) + ["x"]
        flat = [
            spec.flatten(a, w) if spec.is_input(a) else a for a, w in zip(args, names, strict=True)
        ]
        return spec.unflatten_tree(self._call(*flat), self.kind)

    def _call(self, *args: Any) -> Any:
        *directions, x = args
        x = self._array(x, "x")
        shape = tuple(int(s) for s in x.shape)
        n_expected = self.target.n if isinstance(self.target, Problem) else None
        if len(shape) != 1 or (n_expected is not None and shape != (n_expected,)):
            want = f"({n_expected},)" if n_expected is not None else "(n,)"
            raise ShapeError(
                f"simdiff.{self.T.name}.{self.what}: x must have shape {want}, a flat vector; got "
                f"{shape} (map over a batch of points with {self.T.name}'s vmap)"
            )
        n = shape[0]
        extras = []
        for v in directions:
            v = self._array(v, "v")
            if tuple(int(s) for s in v.shape) != (n,):
                raise ShapeError(
                    f"simdiff.{self.T.name}.{self.what}: the direction must have shape ({n},) "
                    f"like x; got {tuple(v.shape)}"
                )
            extras.append(v)
        device = self.T.device_of(x)
        key = (shape, self.T.dtype_name(x), str(device))
        g = self._built.get(key)
        if g is None:
            g = self._built[key] = self._make(x, n, device)
        return g(x, *extras)

    def _make(self, x: Any, n: int, device: Any) -> Callable[..., Any]:
        T, kind, params = self.T, self.kind, dict(self.params)
        target = self.target
        if not isinstance(target, Problem):
            target = _Function(target, n, T.eval_shape(target, x))
        out = target.output_shape
        if kind in _SCALAR_ONLY and out != ():
            raise ShapeError(
                f"simdiff.{T.name}.{self.what} needs a scalar function; {target.name!r} returns "
                f"shape {out} (use jacobian)"
            )
        if len(out) > 1:
            raise ShapeError(
                f"simdiff.{T.name}.{self.what}: {target.name!r} must return a scalar or a 1-D "
                f"array; got shape {out}"
            )
        m = math.prod(out)
        if kind == "hessian" and params["method"] == "auto":
            params["method"] = T.hessian_method(n, m)
        if kind == "jacobian" and params["mode"] == "auto":
            params["mode"] = "fwd" if n <= m else "rev"
        ops = T.ops(np.dtype(T.dtype_name(x)).type, device)
        with T.building():  # constants made now are values, not tracers of this call
            if kind == "laplacian":
                return _laplacian(params["method"], target, ops, T, n)
            return build(kind, params, target, ops, T)


def _laplacian(method: str, target: Any, ops: Any, T: Backend, n: int) -> Callable[[Any], Any]:
    """``tr H(x)``: the collapsed Taylor pass or ``n`` forward-over-reverse products."""
    nested = method == "nested"
    kind = "derivative_sum_nested" if nested else "derivative_sum"
    params = {"order": 2, "method": method, "grouped": False, "unit": True}
    g = build(kind, params, target, ops, T)
    return lambda x: g(x, ops.eye(n), ops.ones((n,)))  # made per call: no tracer kept


def transform(kind: str, fn: Any, backend: str, **options: Any) -> Callable[..., Any]:
    """The function of ``kind`` (``"grad"``, ``"hessian"``, ...) of ``fn`` on ``backend``.

    Options: ``method`` (hessian, derivative, laplacian), ``mode`` (jacobian),
    ``order`` (derivative, taylor).
    """
    T = get_backend(backend)
    what = kind
    if isinstance(fn, Problem):
        fn.require(T.name)
        fn.output_shape  # noqa: B018  (evaluated now, eagerly: not inside the caller's trace)
    elif not callable(fn):
        raise InputTypeError(
            f"simdiff.{T.name}.{what} needs a function f(x) or a simdiff.Problem; got "
            f"{type(fn).__name__}"
        )
    params: dict[str, Any] = {}
    if kind == "hessian":
        method = options["method"]
        if method == "structured":
            raise OptionError(
                "method='structured' assembles the Hessian on the host; the function face "
                f"has no host step: use simdiff.hessian(problem, x) or one of {HESSIAN_METHODS}"
            )
        if method not in HESSIAN_METHODS:
            raise InputError(f"unknown Hessian method {method!r}; expected one of "
                             f"{list(HESSIAN_METHODS)}")  # fmt: skip
        params = {"method": method}
    elif kind == "hvp":
        params = {"method": T.hvp_method}
    elif kind == "jacobian":
        if options["mode"] not in JACOBIAN_MODES:
            raise InputError(f"unknown Jacobian mode {options['mode']!r}; expected one of "
                             f"{list(JACOBIAN_MODES)}")  # fmt: skip
        params = {"mode": options["mode"]}
    elif kind == "derivative":
        order = check_order(options["order"])
        method = choice(options["method"], ("auto", "taylor", "nested"), "derivative method")
        method = _uses_taylor(fn, method, "taylor", "nested", what)
        kind = "taylor_derivative" if method == "taylor" else "derivative"
        params = {"order": order}
    elif kind == "taylor":
        if not (isinstance(fn, Problem) and fn.supports("taylor")):
            raise UnsupportedError(
                "taylor coefficients run the function in simdiff's Taylor context, which needs "
                "a simdiff.Problem written with ops (fn(x, ops)); for a plain function use "
                "derivative(fn, k) (nested AD) and c_k = derivative / k!"
            )
        params = {"order": check_order(options["order"])}
    elif kind == "laplacian":
        method = choice(options["method"], ("auto", "collapsed", "taylor", "nested"), "method")
        params = {"method": _uses_taylor(fn, method, "collapsed", "nested", what)}
    return _Transform(kind, fn, T, params, what)

