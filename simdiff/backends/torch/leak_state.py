"""The leak guard's shared state: the per-thread guard depth, the watched operations' messages.

What both watches of :mod:`~simdiff.backends.torch.leaks` read: the wrappers
there and the dispatch-level watch of :mod:`~simdiff.backends.torch.dispatch`.
"""

from __future__ import annotations

import threading

__all__ = ["GUARDED", "guard_message"]

_CUT = (
    "the result is cut from the graph, so the derivative misses what flows through it; "
    "use x itself to keep the graph, or ops.stop_gradient(x) where a constant is meant"
)

#: The operations the guard watches, and what the error says the problem did.
GUARDED = {
    "item": "x.item() or x.tolist() on an array",
    "tolist": "x.item() or x.tolist() on an array",
    "__float__": "float(x[i]) or int(...) on an array",
    "__int__": "float(x[i]) or int(...) on an array",
    "detach": f"x.detach() (or x.detach().numpy()) on an array: {_CUT}",
    "detach_": f"x.detach_() on an array: {_CUT}",
    "data": f"x.data on an array: {_CUT}",
    "tensor": (
        "torch.tensor(x) on an array (or on a list holding one): it copies the values into "
        "a new leaf cut from the graph; use x itself, ops.asarray(x) or ops.stack([...])"
    ),
    "new_tensor": (
        "y.new_tensor(x) on an array: it copies the values into a new leaf cut from the "
        "graph; use x itself or ops.asarray(x)"
    ),
    "no_grad": (
        "a torch.no_grad(), torch.inference_mode() or torch.set_grad_enabled(False) block: "
        "what it computes is cut from the graph; use ops.stop_gradient(...) on the values "
        "meant to be constant"
    ),
    "_set_grad_enabled": (
        "torch._C._set_grad_enabled(False): what is computed while gradients are off is cut "
        "from the graph; use ops.stop_gradient(...) on the values meant to be constant"
    ),
    "aten::detach": (
        "x.detach(), torch.tensor(x) or y.new_tensor(x) on an array by a reference to torch's "
        f"own function (bound before simdiff, or the C type's method): {_CUT}"
    ),
    "aten::detach_": f"x.detach_() on an array by a reference to torch's own method: {_CUT}",
    "aten::_local_scalar_dense": (
        "x.item(), float(x) or int(x) on an array by a reference to torch's own method "
        "(bound before simdiff, or the C type's method)"
    ),
    "gradients_off": (
        "an operation on an array while gradients were switched off inside the problem (by "
        "any reference, torch._C._set_grad_enabled bound before simdiff included): what it "
        "computes is cut from the graph; use ops.stop_gradient(...) on the values meant to "
        "be constant"
    ),
    "grad_mode": (
        "gradients switched off and left off when the problem returned (by a reference the "
        "guard does not wrap, such as torch._C._set_grad_enabled bound before simdiff): what "
        "is computed after the switch is cut from the graph; use ops.stop_gradient(...) on "
        "the values meant to be constant"
    ),
}

#: Watched everywhere; the others only when called from outside torch and simdiff.
_ANYWHERE = frozenset(("item", "tolist", "__float__", "__int__"))
#: The packages whose own code may detach on purpose.
_OWN_PACKAGES = frozenset(("torch", "simdiff", "functorch"))

_PREFIX = "simdiff leak guard: "
_NONE: frozenset[str] = frozenset()


class _Active(threading.local):
    """Per thread: how many guards are entered, and the innermost one's trusted packages
    (class defaults, so that a thread that never entered a guard reads them without the
    AttributeError a ``getattr`` default costs)."""

    depth = 0
    trusted = _NONE
    #: whether gradients were on when the innermost call of the problem's fn began
    #: (:func:`watching_grad_mode`): an operation of the problem with them off then is a cut
    grad_at_call = False


_active = _Active()


def guard_message(exc: BaseException) -> str | None:
    """What the problem did, if ``exc`` was raised by the guard; else None."""
    text = str(exc)
    if not text.startswith(_PREFIX):
        return None
    name = text[len(_PREFIX) :].split("(", 1)[0].rpartition(".")[2]
    return GUARDED.get(name)


def _exempt(module: object) -> bool:
    """Whether code of ``module`` detaches on purpose: torch's, simdiff's, functorch's, or a
    package trusted by the guards active on this thread (``LeakGuard(trusted=...)``)."""
    if not isinstance(module, str):
        return False
    top = module.partition(".")[0]
    return top in _OWN_PACKAGES or top in _active.trusted


def _leak(where: str) -> RuntimeError:
    return RuntimeError(
        f"{_PREFIX}{where}() on a tensor that requires grad: the value leaves the "
        "derivative's graph"
    )
