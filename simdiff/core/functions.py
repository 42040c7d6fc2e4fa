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
import re
import string
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

__all__ = ["FACE", "face_doc", "namespace", "transform"]

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


# --------------------------------------------------------------------------- the face
# The functions of ``simdiff.jax`` and ``simdiff.torch`` are written once, here; their
# docstrings are templates filled with each framework's words (``$name`` placeholders,
# :class:`string.Template`) and its array constructor (``A[...]`` in an example).

#: The names of a function face, in the order of its reference page.
FACE = ("grad", "value_and_grad", "hessian", "hvp", "jacobian", "derivative", "taylor",
        "laplacian")  # fmt: skip

#: Each framework's words in the face's docstrings.
_WORDS: dict[str, dict[str, str]] = {
    "jax": {
        "fw": "jax",
        "np": "jnp",
        "imp": "import jax, jax.numpy as jnp, simdiff.jax",
        "written": "jax.numpy",
        "vmap": "jax.vmap",
        "hvp_method": "forward over reverse",
        "grad_out": "Array([ 3., 12.], dtype=float64)",
        "vmap_line": "jax.vmap(simdiff.jax.grad(f))(jnp.ones((4, 2))).shape",
        "vmap_out": "(4, 2)",
    },
    "torch": {
        "fw": "torch",
        "np": "torch",
        "imp": "import torch, simdiff.torch",
        "written": "torch",
        "vmap": "torch.func.vmap",
        "hvp_method": "reverse over reverse",
        "grad_out": "tensor([ 3., 12.], dtype=torch.float64)",
        "vmap_line": "torch.func.vmap(simdiff.torch.grad(f))(x.expand(4, 2)).shape",
        "vmap_out": "torch.Size([4, 2])",
    },
}

_ARRAY = {"jax": "jnp.array([{}])", "torch": "torch.tensor([{}], dtype=torch.float64)"}

_DOCS = {
    "grad": """``x -> grad f(x)``, shape ``(n,)``, of a scalar function.

    Parameters
    ----------
    fn : callable or Problem
        ``f(x)`` written with $written (scalar result), or a scalar simdiff.Problem.

    Returns
    -------
    callable
        ``g(x)`` for ``x`` of shape ``(n,)``; raises :class:`~simdiff.errors.ShapeError`
        for a vector-valued ``fn`` or an ``x`` that is not 1-D (map over points with
        ``$vmap``).

    Examples
    --------
    >>> $imp
    >>> f = lambda x: $np.sum(x ** 3)
    >>> x = A[1.0, 2.0]
    >>> simdiff.$fw.grad(f)(x)
    $grad_out
    >>> $vmap_line
    $vmap_out
    """,
    "value_and_grad": """``x -> (f(x), grad f(x))`` in one reverse pass, of a scalar function.

    Examples
    --------
    >>> $imp
    >>> x = A[1.0, 2.0]
    >>> value, g = simdiff.$fw.value_and_grad(lambda x: $np.sum(x ** 3))(x)
    >>> float(value), g.tolist()
    (9.0, [3.0, 12.0])
    """,
    "hessian": """``x -> H(x)``, shape ``(out..., n, n)`` (``(n, n)`` for a scalar function).

    Parameters
    ----------
    fn : callable or Problem
    method : {"auto", "fwd-rev", "rev-rev", "fwd-fwd"}
        ``"auto"``: simdiff's rule for this backend (:func:`simdiff.auto_hessian_method`),
        the method :func:`simdiff.hessian` runs.  A structured Hessian
        (``"structured"``) is assembled on the host and is only in the problem face.

    Examples
    --------
    >>> $imp
    >>> x = A[1.0, 2.0]
    >>> simdiff.$fw.hessian(lambda x: x[0] ** 2 * x[1])(x).tolist()
    [[4.0, 2.0], [2.0, 0.0]]
    """,
    "hvp": """``(v, x) -> H(x) v``, shape ``(n,)``, of a scalar function, without forming ``H``.

    Direction first, point last (as :func:`simdiff.hvp`); the backend's
    measured method (``Backend.hvp_method``: $hvp_method).

    Examples
    --------
    >>> $imp
    >>> v = A[1.0, 0.0]
    >>> x = A[1.0, 2.0]
    >>> simdiff.$fw.hvp(lambda x: x[0] ** 2 * x[1])(v, x).tolist()
    [4.0, 2.0]
    """,
    "jacobian": """``x -> J(x)``, shape ``(out..., n)``; ``mode`` ``"fwd"``, ``"rev"`` or ``"auto"``
    (forward when ``n <= m``).

    Examples
    --------
    >>> $imp
    >>> x = A[0.0, 2.0]
    >>> simdiff.$fw.jacobian(lambda x: $np.stack([x[0] * x[1], $np.sin(x[0])]))(x).tolist()
    [[2.0, 0.0], [1.0, 0.0]]
    """,
    "derivative": "``(v, x) -> d^k/dt^k f(x + t v)`` at ``t = 0``, shape ``out``: "
    """a directional derivative.

    ``method``: ``"taylor"`` (one Taylor pass, cost polynomial in the order;
    needs a :class:`simdiff.Problem` written with ``ops``), ``"nested"``
    (nested ``jvp``), ``"auto"``: ``"taylor"`` where it can run, else ``"nested"``.

    Examples
    --------
    >>> $imp
    >>> v, x = A[1.0], A[0.0]
    >>> float(simdiff.$fw.derivative(lambda x: $np.sum($np.exp(2.0 * x)), 3)(v, x))
    8.0
    """,
    "taylor": "``(v, x) -> c``, shape ``(order + 1, out...)``: "
    """Taylor coefficients of ``t -> f(x + t v)``.

    ``c_k = f^(k) / k!`` along ``v``, from one pass of simdiff's Taylor
    context; ``fn`` must be a :class:`simdiff.Problem` written with ``ops``.

    Examples
    --------
    >>> $imp
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.exp(x)), x0=np.zeros(1))
    >>> v, x = A[1.0], A[0.0]
    >>> simdiff.$fw.taylor(p, 3)(v, x).tolist()
    [1.0, 1.0, 0.5, 0.16666666666666666]
    """,
    "laplacian": """``x -> tr H(x)``, shape ``()``, of a scalar function.

    ``method``: ``"collapsed"`` (one collapsed Taylor pass, the forward
    Laplacian; needs a :class:`simdiff.Problem` written with ``ops``),
    ``"taylor"``, ``"nested"`` (``n`` forward-over-reverse products), or
    ``"auto"``: ``"collapsed"`` where it can run, else ``"nested"``.

    Examples
    --------
    >>> $imp
    >>> x = A[1.0, 2.0]
    >>> float(simdiff.$fw.laplacian(lambda x: $np.sum(x ** 3))(x))
    18.0
    """,
}


def face_doc(name: str, backend: str) -> str:
    """The docstring of ``simdiff.<backend>.<name>``: the template in the framework's words."""
    text = string.Template(_DOCS[name]).substitute(_WORDS[backend])
    return re.sub(r"A\[([^\]]*)\]", lambda m: _ARRAY[backend].format(m.group(1)), text)


def namespace(backend: str) -> dict[str, Callable[..., Any]]:
    """The functions of the face ``simdiff.<backend>`` (``"jax"`` or ``"torch"``), by name.

    Each is a plain function of ``fn`` (and its options) returning :func:`transform`'s
    function, with its docstring in the framework's words (:func:`face_doc`) and
    ``__module__`` ``simdiff.<backend>``.
    """
    get_backend(backend)  # imports the framework (jax with x64 on), or says how to install it
    b = backend

    def grad(fn: Any) -> Callable[[Any], Any]:
        return transform("grad", fn, b)

    def value_and_grad(fn: Any) -> Callable[[Any], tuple[Any, Any]]:
        return transform("value_and_grad", fn, b)

    def hessian(fn: Any, *, method: str = "auto") -> Callable[[Any], Any]:
        return transform("hessian", fn, b, method=method)

    def hvp(fn: Any) -> Callable[[Any, Any], Any]:
        return transform("hvp", fn, b)

    def jacobian(fn: Any, *, mode: str = "auto") -> Callable[[Any], Any]:
        return transform("jacobian", fn, b, mode=mode)

    def derivative(fn: Any, order: int, *, method: str = "auto") -> Callable[[Any, Any], Any]:
        return transform("derivative", fn, b, order=order, method=method)

    def taylor(fn: Any, order: int) -> Callable[[Any, Any], Any]:
        return transform("taylor", fn, b, order=order)

    def laplacian(fn: Any, *, method: str = "auto") -> Callable[[Any], Any]:
        return transform("laplacian", fn, b, method=method)

    made = {f.__name__: f for f in (grad, value_and_grad, hessian, hvp, jacobian, derivative,
                                    taylor, laplacian)}  # fmt: skip
    for name, f in made.items():
        f.__doc__ = face_doc(name, backend)
        f.__module__ = f"simdiff.{backend}"
        f.__qualname__ = name
    return made
