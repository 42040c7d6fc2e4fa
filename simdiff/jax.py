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

from simdiff.core.functions import namespace

__all__ = ["derivative", "grad", "hessian", "hvp", "jacobian", "laplacian", "taylor",
           "value_and_grad"]  # fmt: skip

_FACE = namespace("jax")  # imports jax through simdiff.backends, or says how to install it

grad = _FACE["grad"]
value_and_grad = _FACE["value_and_grad"]
hessian = _FACE["hessian"]
hvp = _FACE["hvp"]
jacobian = _FACE["jacobian"]
derivative = _FACE["derivative"]
taylor = _FACE["taylor"]
laplacian = _FACE["laplacian"]

#: The examples of the functions, for doctest (their code lives in simdiff.core.functions).
__test__ = {name: _FACE[name] for name in __all__}
