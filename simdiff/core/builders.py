"""What each derivative kind computes: the builders, the kinds' options and their checks.

Each builder returns a function of ``(x, *extras)`` for one point, written with
the transforms every differentiating backend shares (jax and torch.func
signatures); :class:`~simdiff.Derivatives` compiles, batches and caches it, the
function face (:mod:`simdiff.core.functions`) returns it as it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends import Ops
from simdiff.backends.taylor import taylor_function
from simdiff.core.operator_builders import OPERATOR_KINDS, build_operator
from simdiff.core.problem import Problem, bad_output
from simdiff.errors import ArgumentOrderError, InputError, InputTypeError, UnsupportedError

__all__ = [
    "DERIVATIVE_METHODS",
    "HESSIAN_METHODS",
    "HVP_HESSIAN_MAX_N",
    "JACOBIAN_MODES",
    "MAX_ORDER",
    "auto_hessian_method",
    "build",
    "check_order",
    "check_taylor_order",
    "choice",
]

HESSIAN_METHODS = ("auto", "fwd-rev", "rev-rev", "fwd-fwd")
JACOBIAN_MODES = ("auto", "fwd", "rev")
DERIVATIVE_METHODS = ("taylor", "nested")


def check_order(order: Any, what: str = "order") -> int:
    """``order`` as an int in ``0..MAX_ORDER``; else :class:`~simdiff.errors.InputError`."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise InputError(f"{what} must be a non-negative integer; got {order!r}")
    if order > MAX_ORDER:
        raise InputError(
            f"{what} must be at most {MAX_ORDER} (the derivative is a Taylor coefficient times "
            f"{what}!, and {MAX_ORDER + 1}! overflows float64); got {order}"
        )
    return int(order)


#: The highest derivative order: 170! is the largest factorial float64 holds.
MAX_ORDER = 170


def check_taylor_order(order: Any) -> int:
    """``order`` of :func:`taylor`, refusing the retired ``(problem, x, direction, order)`` call.

    An array (or list, tensor) in the ``order`` slot is a call in the old
    argument order; it is refused rather than read as an order.
    """
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)):
        if hasattr(order, "shape") or isinstance(order, (list, tuple)) or order is None:
            raise ArgumentOrderError(
                "taylor takes (order, direction, x=None), the order of simdiff.derivative, "
                f"e.g. simdiff.taylor(problem, 3, direction, x); got {type(order).__name__} "
                "for order (an x where the order goes: the call is in the retired order "
                "(problem, x, direction, order))"
            )
    return check_order(order)


def choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    """``value`` if it is one of ``allowed``; else :class:`~simdiff.errors.InputError`."""
    if value not in allowed:
        raise InputError(f"unknown {what} {value!r}; expected one of {list(allowed)}")
    return value


# --------------------------------------------------------------------------- builders
# Each builder returns a function of (x, *extras) for one point, written with the
# transforms every differentiating backend shares (jax and torch.func signatures).


def nested_derivative(f: Callable[[Any], Any], T: Any, order: int) -> Callable[[Any, Any], Any]:
    def g0(x: Any, v: Any) -> Any:
        return f(x)

    g = g0
    for _ in range(order):
        g = (lambda h: lambda x, v: T.jvp(lambda y: h(y, v), (x,), (v,))[1])(g)
    return g


def derivative_tensor(f: Callable[[Any], Any], T: Any, order: int) -> Callable[[Any], Any]:
    if order == 0:
        return f
    g = T.jacrev(f)
    for _ in range(order - 1):
        g = T.jacfwd(g)
    return g


def value_and_grad(f: Callable[[Any], Any], T: Any) -> Callable[[Any], Any]:
    def vg(x: Any) -> Any:
        y, pullback = T.vjp(f, x)
        return y, pullback(y * 0 + 1)[0]

    return vg


#: Largest ``n`` for which a reverse-over-reverse Hessian of a scalar problem is built
#: from ``n`` reverse-over-reverse HVPs instead of ``jacrev(jacrev f)`` (see
#: :func:`hessian_by_hvps`).
HVP_HESSIAN_MAX_N = 1


def hessian_by_hvps(f: Callable[[Any], Any], T: Any, ops: Ops, n: int) -> Callable[[Any], Any]:
    """The ``(n, n)`` Hessian of a scalar ``f`` as ``n`` reverse-over-reverse HVPs.

    For one parameter ``jacrev(jacrev f)`` maps its pullbacks over a basis of
    one vector, and one HVP does the same work without the mapping; for
    ``n > 1`` which is faster depends on the problem, so ``jacrev(jacrev f)``
    stays.  The measurements are in docs/performance.md (``python -m
    validation.benchmarks.bench_torch_hessian_hvps``).
    """
    basis = [ops.eye(n)[i] for i in range(n)]
    hvp = rev_rev_hvp(f, T, ops)

    def hessian(x: Any) -> Any:
        return ops.stack([hvp(x, v) for v in basis])

    return hessian


def rev_rev_hvp(f: Callable[[Any], Any], T: Any, ops: Ops) -> Callable[[Any, Any], Any]:
    """``H(x) v`` of a scalar ``f`` as the gradient of ``<grad f(x), v>`` (reverse over reverse)."""
    return lambda x, v: T.grad(lambda y: ops.sum(T.grad(f)(y) * v))(x)


def build(kind: str, params: dict[str, Any], problem: Problem, ops: Ops, T: Any) -> Callable:
    """The function of one point that computes ``kind`` with ``params`` (not compiled)."""
    if kind in OPERATOR_KINDS:  # laplacian, biharmonic, derivative_sum: operator_builders
        return build_operator(kind, params, problem, ops, T)

    call = T.problem_call(problem.fn)

    def f(x: Any) -> Any:
        y = call(x, ops)
        if isinstance(y, (int, float, np.integer, np.floating)) and not isinstance(y, bool):
            return ops.sum(x * 0.0) + float(y)  # a constant: zero derivatives on every backend
        if y is None or isinstance(y, (bool, str, bytes, complex, np.complexfloating)):
            # every kind, ``value`` included, at every point: not only where output_shape looked
            raise InputTypeError(bad_output(problem.name, y, type(y).__name__))
        return y

    if kind == "value":
        return f
    if kind == "grad":
        return T.grad(f)
    if kind == "value_and_grad":
        return value_and_grad(f, T)
    if kind == "hessian":
        if params["method"] == "rev-rev" and problem.is_scalar and problem.n <= HVP_HESSIAN_MAX_N:
            return hessian_by_hvps(f, T, ops, problem.n)
        outer, inner = {
            "fwd-rev": ("jacfwd", "jacrev"),
            "rev-rev": ("jacrev", "jacrev"),
            "fwd-fwd": ("jacfwd", "jacfwd"),
        }[params["method"]]
        return getattr(T, outer)(getattr(T, inner)(f))
    if kind == "hvp":
        if params["method"] == "rev-rev":
            return rev_rev_hvp(f, T, ops)
        return lambda x, v: T.jvp(T.grad(f), (x,), (v,))[1]
    if kind == "jvp":
        return lambda x, v: T.jvp(f, (x,), (v,))[1]
    if kind == "vjp":
        return lambda x, u: T.vjp(f, x)[1](u)[0]
    if kind == "jacobian":
        return getattr(T, "jacfwd" if params["mode"] == "fwd" else "jacrev")(f)
    if kind == "derivative":
        return nested_derivative(f, T, params["order"])
    if kind == "derivative_tensor":
        return derivative_tensor(f, T, params["order"])
    if kind == "taylor":
        return taylor_function(problem, ops, params["order"])
    if kind == "taylor_derivative":  # k! c_k, sliced inside the compiled function
        g, k = taylor_function(problem, ops, params["order"]), params["order"]
        scale = float(math.factorial(k))
        return lambda x, v: g(x, v)[k] * scale
    raise UnsupportedError(f"unknown derivative kind {kind!r}")


def auto_hessian_method(backend: Any, n: int, m: int, compiled: bool = False) -> str:
    """The Hessian method ``method="auto"`` runs for ``n`` inputs and ``m`` outputs.

    ``compiled`` asks for the method of the compiled path (torch.compile):
    see ``TorchBackend.hessian_method``.

    The backend decides (``Backend.hessian_method``), from measurements kept
    in docs/performance.md (``python -m validation.benchmarks.bench_torch_hessian``): on
    JAX forward over reverse for scalar functions and forward over forward for
    vector-valued ones with ``n <= m``; on torch.func reverse over reverse
    everywhere (its double backward was faster than forward mode through a
    backward pass on every catalogue entry measured).

    Examples
    --------
    >>> from simdiff.backends import get_backend
    >>> auto_hessian_method(get_backend("jax"), 114, 1)
    'fwd-rev'
    >>> auto_hessian_method(get_backend("jax"), 4, 12)
    'fwd-fwd'
    """
    return backend.hessian_method(int(n), int(m), compiled=bool(compiled))
