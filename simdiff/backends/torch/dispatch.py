"""The leak guard's dispatch-level watch: a Python kernel on a spare dispatch key.

While a :class:`~simdiff.backends.torch.leaks.LeakGuard` is active on a thread,
the watched aten operations (a value read, a detach) reached by any reference
meet a kernel here that raises where the problem's code reached them on a
tensor that requires grad; every other operation passes the key as a
fallthrough.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch

from simdiff.backends.torch.leak_state import _OWN_PACKAGES, _active, _exempt, _leak

__all__ = ["dispatch_paused", "install_dispatch"]

_included = torch._C._dispatch_tls_is_dispatch_key_included


#: The spare dispatch key of the dispatch-level watch: the autocast key of Graphcore's IPU,
#: which no CPU or CUDA build of torch gives a kernel.  While a guard is active it is in this
#: thread's dispatch keys (``torch._C._dispatch_tls_set_dispatch_key_included``); every
#: operation passes it as a fallthrough, at no cost, but the watched ones below, which meet
#: a Python kernel there (above autograd: the tensors still say whether they require grad).
_KEY = torch._C.DispatchKey.AutocastIPU  # type: ignore[attr-defined]  # in the C enum, not its stub
#: aten operations watched at dispatch, whatever reference reached them (``GUARDED``'s keys):
#: ``Tensor.item``, ``float(x)`` and ``int(x)`` reach ``_local_scalar_dense``;
#: ``torch.tensor(x)`` and ``y.new_tensor(x)`` of a tensor reach ``detach``
_DISPATCHED = ("detach", "detach_", "_local_scalar_dense")
_libraries: list[Any] = []  # the registrations last as long as these objects
_dispatching = False


def _dispatch_kernel(name: str) -> Callable[..., Any]:
    """The kernel of ``aten::name`` on :data:`_KEY`: raises where the problem's code reached
    the operation on a tensor that requires grad under a guard, else hands it on below.

    The caller is the Python frame that called torch's C function (frame 1; C++ code of
    torch between them has no frame): the problem's own code for a reference to torch's
    function bound before the wrappers (``item = torch._C.TensorBase.item``); the guard's
    wrapper, which has judged the call already, for ``x.item()`` and the rest; torch's or
    simdiff's own code otherwise.  ``_local_scalar_dense`` (a value read) raises in a trusted
    package too, as ``x.item()`` does."""
    op = getattr(torch.ops.aten, name).default
    where = f"aten::{name}"
    anywhere = name == "_local_scalar_dense"
    key = _KEY

    def kernel(keyset: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        if _active.depth > 0 and x.requires_grad and not torch.compiler.is_compiling():
            module = sys._getframe(1).f_globals.get("__name__", "")
            top = module.partition(".")[0] if isinstance(module, str) else ""
            if not (top in _OWN_PACKAGES if anywhere else _exempt(module)):
                raise _leak(where)
        return op.redispatch(keyset.remove(key), x, *args, **kwargs)

    return kernel


def _install_dispatch() -> bool:
    """Register the watched operations' kernels on :data:`_KEY` and a fallthrough for all
    others; False (no dispatch-level watch, the wrappers only) where the key is taken."""
    key = _KEY.name
    if any(torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", key)
           for op in ("mm", "add.Tensor", *_DISPATCHED)):  # fmt: skip
        return False  # an IPU build's autocast kernels: not spare
    fallback = torch.library.Library("_", "IMPL")
    try:
        fallback.fallback(torch.library.fallthrough_kernel, key)
    except RuntimeError:  # a fallback is there: spare only if it is a fallthrough
        if f"{key}: fallthrough" not in torch._C._dispatch_dump_table("aten::mm"):
            return False
    kernels = torch.library.Library("aten", "IMPL")
    for name in _DISPATCHED:
        kernels.impl(name, _dispatch_kernel(name), key, with_keyset=True)
    _libraries.extend((fallback, kernels))
    return True


def _dispatch_watch(on: bool) -> None:
    """:data:`_KEY` in (or out of) this thread's dispatch keys: an autocast key is excluded
    unless its autocast is on, so it is taken out of the excluded set too."""
    if _dispatching:
        torch._C._dispatch_tls_set_dispatch_key_excluded(_KEY, not on)
        torch._C._dispatch_tls_set_dispatch_key_included(_KEY, on)


def _watch_on() -> bool:
    """Whether the dispatch-level watch is on in this thread now (the pauses restore what
    they found: one nested in another leaves it off)."""
    return _dispatching and _included(_KEY)


def install_dispatch() -> None:
    """Install the dispatch-level watch once, where its key is spare (:func:`_install_dispatch`)."""
    global _dispatching
    _dispatching = _dispatching or _install_dispatch()


@contextlib.contextmanager
def dispatch_paused() -> Iterator[None]:
    """No dispatch-level watch on this thread for the duration (the wrappers stay): for a
    call of a ``torch.compile``'d callable, and for simdiff's backward passes
    (``torch.autograd.grad``), where torch compiles a compiled graph's backward lazily.

    Dynamo traces with fake tensors, and a Python kernel handed one of them would give it a
    plain ``Tensor`` object before Dynamo's own (``Creating a new Tensor subclass
    FakeTensor``); a compiled graph runs no Python, so the watch would see nothing there.
    The Python between graph breaks stays watched by the wrappers.
    """
    on = _watch_on()
    if on:
        _dispatch_watch(False)
    try:
        yield
    finally:
        if on:
            _dispatch_watch(True)
