"""The function face on PyTorch: ``simdiff.torch.hessian(fn)`` returns a function, like
``torch.func.hessian``.

Each transform takes ``fn``, a function ``f(x)`` of a flat ``torch.Tensor`` of
shape ``(n,)`` written with torch, or a :class:`simdiff.Problem`, and returns a
plain function of tensors built by the same builders as
:class:`simdiff.Derivatives` on torch: ``torch.func`` transforms (plain
``torch.autograd`` for a gradient outside every transform), simdiff's
Hessian-method rule (reverse over reverse, measured fastest on torch.func),
the Taylor and collapsed-Taylor passes for problems written with ``ops``,
nested AD otherwise.  No numpy boundary, no host checks, no batching inside:
compose with ``torch.func.vmap``, ``torch.func.grad``, ``jacrev`` and
``jacfwd`` (docs/composability.md lists where torch does not allow it).

Directions come first and the point last, as in :func:`simdiff.hvp`:
``simdiff.torch.hvp(f)(v, x)``.

This module is ``simdiff.torch``; it imports the framework only through
:func:`simdiff.get_backend`, and simdiff's backends import it with absolute
imports (``import torch``), so the name does not shadow it.
"""

from simdiff.core.functions import namespace

__all__ = ["derivative", "grad", "hessian", "hvp", "jacobian", "laplacian", "taylor",
           "value_and_grad"]  # fmt: skip

_FACE = namespace("torch")  # imports torch through simdiff.backends, or says how to install it

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
