"""The function face on JAX: ``simdiff.jax.hessian(fn)`` returns a function, like ``jax.hessian``.

Each transform takes ``fn``, a function ``f(x)`` of a flat ``jax.Array`` of
shape ``(n,)`` written with ``jax.numpy``, or a :class:`simdiff.Problem`, and
returns a plain function of JAX arrays built by the same builders as
:class:`simdiff.Derivatives`: simdiff's Hessian-method rule (forward over
reverse for scalar functions, forward over forward for vector ones with
``n <= m``), the Taylor and collapsed-Taylor passes for problems written
with ``ops``, nested AD otherwise.  No numpy boundary, no host checks, no
jit and no batching inside: compose with ``jax.jit``, ``jax.vmap`` and
``jax.grad`` (docs/composability.md).  Shapes and dtypes are checked when the
function is called (under ``jax.jit``: when it is traced).

Directions come first and the point last, as in :func:`simdiff.hvp`:
``simdiff.jax.hvp(f)(v, x)``.

This module is ``simdiff.jax``; it imports the framework only through
:func:`simdiff.get_backend`, and simdiff's backends import it with absolute
imports (``import jax``), so the name does not shadow it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simdiff.backends import get_backend
from simdiff.core import functions as _functions

get_backend("jax")  # imports jax through simdiff.backends.jax (x64 on), or says how to install it

__all__ = ["derivative", "grad", "hessian", "hvp", "jacobian", "laplacian", "taylor",
           "value_and_grad"]  # fmt: skip

_B = "jax"


def grad(fn: Any) -> Callable[[Any], Any]:
    """``x -> grad f(x)``, shape ``(n,)``, of a scalar function.

    Parameters
    ----------
    fn : callable or Problem
        ``f(x)`` written with jax.numpy (scalar result), or a scalar simdiff.Problem.

    Returns
    -------
    callable
        ``g(x)`` for ``x`` of shape ``(n,)``; raises :class:`~simdiff.errors.ShapeError`
        for a vector-valued ``fn`` or an ``x`` that is not 1-D (map over points with
        ``jax.vmap``).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, simdiff.jax
    >>> f = lambda x: jnp.sum(x ** 3)
    >>> x = jnp.array([1.0, 2.0])
    >>> simdiff.jax.grad(f)(x)
    Array([ 3., 12.], dtype=float64)
    >>> jax.vmap(simdiff.jax.grad(f))(jnp.ones((4, 2))).shape
    (4, 2)
    """
    return _functions.transform("grad", fn, _B)


def value_and_grad(fn: Any) -> Callable[[Any], tuple[Any, Any]]:
    """``x -> (f(x), grad f(x))`` in one reverse pass, of a scalar function.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, simdiff.jax
    >>> x = jnp.array([1.0, 2.0])
    >>> value, g = simdiff.jax.value_and_grad(lambda x: jnp.sum(x ** 3))(x)
    >>> float(value), g.tolist()
    (9.0, [3.0, 12.0])
    """
    return _functions.transform("value_and_grad", fn, _B)


def hessian(fn: Any, *, method: str = "auto") -> Callable[[Any], Any]:
    """``x -> H(x)``, shape ``(out..., n, n)`` (``(n, n)`` for a scalar function).

    Parameters
    ----------
    fn : callable or Problem
    method : {"auto", "fwd-rev", "rev-rev", "fwd-fwd"}
        ``"auto"``: simdiff's rule for this backend (:func:`simdiff.auto_hessian_method`),
        the method :func:`simdiff.hessian` runs.  A structured Hessian
        (``"structured"``) is assembled on the host and is only in the problem face.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, simdiff.jax
    >>> x = jnp.array([1.0, 2.0])
    >>> simdiff.jax.hessian(lambda x: x[0] ** 2 * x[1])(x).tolist()
    [[4.0, 2.0], [2.0, 0.0]]
    """
    return _functions.transform("hessian", fn, _B, method=method)


def hvp(fn: Any) -> Callable[[Any, Any], Any]:
    """``(v, x) -> H(x) v``, shape ``(n,)``, of a scalar function, without forming ``H``.

    Direction first, point last (as :func:`simdiff.hvp`); the backend's
    measured method (``Backend.hvp_method``: forward over reverse).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, simdiff.jax
    >>> v = jnp.array([1.0, 0.0])
    >>> x = jnp.array([1.0, 2.0])
    >>> simdiff.jax.hvp(lambda x: x[0] ** 2 * x[1])(v, x).tolist()
    [4.0, 2.0]
    """
    return _functions.transform("hvp", fn, _B)


def jacobian(fn: Any, *, mode: str = "auto") -> Callable[[Any], Any]:
    """``x -> J(x)``, shape ``(out..., n)``; ``mode`` ``"fwd"``, ``"rev"`` or ``"auto"``
    (forward when ``n <= m``).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, simdiff.jax
    >>> x = jnp.array([0.0, 2.0])
    >>> simdiff.jax.jacobian(lambda x: jnp.stack([x[0] * x[1], jnp.sin(x[0])]))(x).tolist()
    [[2.0, 0.0], [1.0, 0.0]]
    """
    return _functions.transform("jacobian", fn, _B, mode=mode)


def derivative(fn: Any, order: int, *, method: str = "auto") -> Callable[[Any, Any], Any]:
    """``(v, x) -> d^k/dt^k f(x + t v)`` at ``t = 0``, shape ``out``: a directional derivative.

    ``method``: ``"taylor"`` (one Taylor pass, cost polynomial in the order;
    needs a :class:`simdiff.Problem` written with ``ops``), ``"nested"``
    (nested ``jvp``), ``"auto"``: ``"taylor"`` where it can run, else ``"nested"``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, simdiff.jax
    >>> v, x = jnp.array([1.0]), jnp.array([0.0])
    >>> float(simdiff.jax.derivative(lambda x: jnp.sum(jnp.exp(2.0 * x)), 3)(v, x))
    8.0
    """
    return _functions.transform("derivative", fn, _B, order=order, method=method)


def taylor(fn: Any, order: int) -> Callable[[Any, Any], Any]:
    """``(v, x) -> c``, shape ``(order + 1, out...)``: Taylor coefficients of ``t -> f(x + t v)``.

    ``c_k = f^(k) / k!`` along ``v``, from one pass of simdiff's Taylor
    context; ``fn`` must be a :class:`simdiff.Problem` written with ``ops``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, simdiff.jax
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.exp(x)), x0=np.zeros(1))
    >>> v, x = jnp.array([1.0]), jnp.array([0.0])
    >>> simdiff.jax.taylor(p, 3)(v, x).tolist()
    [1.0, 1.0, 0.5, 0.16666666666666666]
    """
    return _functions.transform("taylor", fn, _B, order=order)


def laplacian(fn: Any, *, method: str = "auto") -> Callable[[Any], Any]:
    """``x -> tr H(x)``, shape ``()``, of a scalar function.

    ``method``: ``"collapsed"`` (one collapsed Taylor pass, the forward
    Laplacian; needs a :class:`simdiff.Problem` written with ``ops``),
    ``"taylor"``, ``"nested"`` (``n`` forward-over-reverse products), or
    ``"auto"``: ``"collapsed"`` where it can run, else ``"nested"``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, simdiff.jax
    >>> x = jnp.array([1.0, 2.0])
    >>> float(simdiff.jax.laplacian(lambda x: jnp.sum(x ** 3))(x))
    18.0
    """
    return _functions.transform("laplacian", fn, _B, method=method)
