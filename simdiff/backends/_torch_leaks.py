"""The torch leak guard: while simdiff evaluates a derivative, no value with a derivative leaves it.

JAX's tracer raises as soon as a problem turns a traced value into a Python
number.  Torch does not: under plain ``torch.autograd`` (simdiff's gradients
and VJPs outside ``torch.func`` transforms) ``x.item()``, ``x.tolist()`` and
``int(x)`` on a tensor that requires grad return a number silently and
``float(x)`` only warns, so a problem that does it at some points only (behind
a branch on a value) gets a wrong derivative there.  Inside
:class:`LeakGuard` those four methods raise ``RuntimeError`` (turned into
:class:`~simdiff.errors.LeakError` naming the problem, see
``TorchBackend.leak_cause``) when called on a tensor that requires grad, on
the thread that entered the guard; on every other tensor, and on every other
thread, they do what torch does.  ``x.numpy()`` on such a tensor already
raises in torch.

Cost: the four methods are replaced on ``torch.Tensor`` once, at the first
guard, by wrappers that do what torch does unless a guard is active on this
thread (about 0.3 us more per call of them, anywhere in the process); under
``torch.compile`` tracing they are torch's own (``torch.compiler.is_compiling``).
Entering and leaving a guard changes a thread-local counter only: no type is
modified per call (that would cost every later attribute lookup on tensors
a cache miss), and the problem's ops run untouched (no mode, no dispatch
hook).  Measured: ``python -m validation.benchmarks.bench_leak_guard``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["GUARDED", "LeakGuard", "guard_message"]

#: The methods the guard watches, and what the error says the problem did.
GUARDED = {
    "item": "x.item() or x.tolist() on an array",
    "tolist": "x.item() or x.tolist() on an array",
    "__float__": "float(x[i]) or int(...) on an array",
    "__int__": "float(x[i]) or int(...) on an array",
}

_PREFIX = "simdiff leak guard: "
_lock = threading.Lock()
_active = threading.local()
_installed = False


def guard_message(exc: BaseException) -> str | None:
    """What the problem did, if ``exc`` was raised by the guard; else None."""
    text = str(exc)
    if not text.startswith(_PREFIX):
        return None
    name = text[len(_PREFIX) :].split("(", 1)[0].removeprefix("Tensor.")
    return GUARDED.get(name)


def _watching(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: torch.Tensor, *args: Any) -> Any:
        if torch.compiler.is_compiling():  # Dynamo traces torch's own method
            return original(self, *args)
        if getattr(_active, "depth", 0) > 0 and self.requires_grad:
            raise RuntimeError(
                f"{_PREFIX}Tensor.{name}() on a tensor that requires grad: the value leaves "
                "the derivative's graph"
            )
        return original(self, *args)

    method.__name__ = name
    return method


_METHODS = {name: _watching(name, getattr(torch.Tensor, name)) for name in GUARDED}


class LeakGuard:
    """Context manager: the watched methods raise on tensors that require grad (this thread).

    Nested and concurrent guards are independent (a per-thread depth).

    Examples
    --------
    >>> import torch
    >>> x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    >>> with LeakGuard():
    ...     x[0].item()
    Traceback (most recent call last):
    ...
    RuntimeError: simdiff leak guard: Tensor.item() on a tensor that requires grad: ...
    >>> with LeakGuard():
    ...     x[0].detach().item()
    1.0
    """

    __slots__ = ()

    def __enter__(self) -> LeakGuard:
        global _installed
        if not _installed:
            with _lock:
                if not _installed:
                    for name, method in _METHODS.items():
                        setattr(torch.Tensor, name, method)
                    _installed = True
        _active.depth = getattr(_active, "depth", 0) + 1
        return self

    def __exit__(self, *exc: object) -> None:
        _active.depth -= 1
