"""The torch leak guard: while simdiff evaluates a derivative, no value with a derivative leaves it.

JAX's tracer raises as soon as a problem turns a traced value into a Python
number or a constant.  Torch does not: under plain ``torch.autograd``
(simdiff's gradients and VJPs outside ``torch.func`` transforms)
``x.item()``, ``x.tolist()`` and ``int(x)`` on a tensor that requires grad
return a number silently and ``float(x)`` only warns; ``x.detach()``,
``x.data`` and ``torch.tensor(x)`` return a tensor cut from the graph, so
the derivative misses what flows through it (a zero or partial gradient).
A problem that does any of these at some points only (behind a branch on a
value) gets a wrong derivative there.

Inside :class:`LeakGuard`, on the thread that entered it, these raise
``RuntimeError`` (turned into :class:`~simdiff.errors.LeakError` naming the
problem, the operation and the fix, see ``TorchBackend.leak_cause``) when
applied to a tensor that requires grad:

- ``x.item()``, ``x.tolist()``, ``float(x)``, ``int(x)``: anywhere but in torch's
  tensor formatting (``print(x)`` reads the values into a string);
- ``x.detach()``, ``torch.detach(x)``, ``x.detach_()``, ``x.data`` (and so
  ``x.detach().numpy()``), ``torch.tensor(x)`` and ``x.new_tensor(y)`` with
  ``x``/``y`` a tensor, or a list or tuple holding one, and entering
  ``torch.no_grad()``, ``torch.inference_mode()`` or
  ``torch.set_grad_enabled(False)`` (as a block or as a decorator), and calling
  ``torch._C._set_grad_enabled(False)``: when called
  from the problem's code, not from torch's or simdiff's own modules
  (``ops.stop_gradient`` is ``x.detach()`` on purpose;
  ``torch.utils.checkpoint`` detaches what it saves) nor from the problem's
  ``trusted_packages``.  The caller's module is read from its frame
  (``sys._getframe``), only when the tensor requires grad and a guard is
  active; for torch's grad-mode decorator, the decorated function's module.

On every other tensor, and on every other thread, they do what torch does.
``x.numpy()`` on such a tensor already raises in torch.  Gradients switched
off by any reference and still off when the problem's function returns raise
there (:func:`watching_grad_mode`, which every derivative's call of the
problem goes through, ``Backend.problem_call``).

References the wrappers cannot reach (a ``torch.tensor``, ``Tensor.item`` or
``Tensor.detach`` bound before the first guard, ``from torch import tensor``;
the C type's own methods, ``torch._C.TensorBase.detach(x)``, ``.detach_``,
``.item``, ``.__float__``, ``.numpy(force=True)``; the type is immutable) are
seen at dispatch: while a guard is active, a spare dispatch key (``_KEY``) is
in this thread's dispatch keys, and ``aten::detach``, ``aten::detach_`` and
``aten::_local_scalar_dense`` (what ``item``, ``float`` and ``int`` reach)
meet a Python kernel there that judges the calling frame as the wrappers do;
every other operation passes the key as a fallthrough.  The watch is off
inside a ``torch.compile``'d callable and simdiff's backward passes
(:func:`dispatch_paused`: Dynamo's fake tensors cannot pass a Python kernel),
so under ``compile=True`` a branch first taken after the first call, run
eagerly at a graph break, is watched by the wrappers only.  What neither
reaches: the C type's ``data`` descriptor (no dispatched operation), C
extensions, ``x.tolist()`` by the C type's method, and a bound
``torch._C._set_grad_enabled`` switched back on before the problem returns
(grad mode is a thread-local flag torch changes without dispatch).  The
strict guard (``LeakGuard(strict=True)``, ``Derivatives(probe="strict")``, a
``TorchFunctionMode`` through which every torch operation passes) sees the
``data`` descriptor and ``tolist`` too, and the restored switch: an operation of
the problem's code on a tensor that requires grad while gradients are off, when
they were on as ``fn`` was called (:func:`watching_grad_mode` records that), is a
cut whatever switched them off.

Cost: the methods are replaced on ``torch.Tensor`` (and ``torch.tensor`` in
the ``torch`` module) once, at the first guard, by wrappers that do what
torch does unless a guard is active on this thread (one check of a
thread-local counter more per call of them, anywhere in the process); under
``torch.compile`` tracing they are torch's own
(``torch.compiler.is_compiling``).  Entering and leaving a guard changes a
thread-local counter only: no type is modified per call (that would cost
every later attribute lookup on tensors a cache miss), and the problem's
ops run untouched (no mode; the dispatch key is a fallthrough for all but the
three watched operations, each a Python call more under a guard).  The grad-mode check costs two
reads of torch's grad mode and a thread-local flag (for the strict mode) per call of the
problem's function,
and ``torch._C._set_grad_enabled`` a Python call more per switch (one per
``torch.enable_grad()`` block).  Measured by
``python -m validation.benchmarks.bench_leak_guard`` (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

from simdiff.backends.torch.dispatch import (
    _KEY,
    _dispatch_watch,
    _watch_on,
    dispatch_paused,
    install_dispatch,
)
from simdiff.backends.torch.leak_state import (
    _ANYWHERE,
    _NONE,
    _PREFIX,
    GUARDED,
    _active,
    _exempt,
    _leak,
    guard_message,
)
from simdiff.errors import LeakError

__all__ = [
    "GUARDED",
    "LeakGuard",
    "dispatch_paused",
    "guard_message",
    "paused",
    "watching_grad_mode",
]

_lock = threading.Lock()

_installed = False


def _from_problem() -> bool:
    """Whether the caller of the watched operation (two frames up) is the problem's code."""
    return not _exempt(sys._getframe(2).f_globals.get("__name__", ""))


#: torch's tensor formatting (``print(x)``, ``repr``, f-strings): it reads the values into
#: a string, which carries nothing back into the computation
_PRINTING = "torch._tensor_str"


def _not_printing() -> bool:
    """Whether the caller of the watched operation (two frames up) is not torch's printing."""
    return sys._getframe(2).f_globals.get("__name__") != _PRINTING


#: torch's grad-mode decorators: ``@torch.no_grad()`` wraps the function in a closure of
#: this module that enters the mode (``func`` is the decorated function), via ``clone``
#: of ``torch.autograd.grad_mode`` for ``set_grad_enabled``.
_DECORATOR = "torch.utils._contextlib"
_GRAD_MODE = "torch.autograd.grad_mode"


def _mode_from_problem() -> bool:
    """Whether the problem's code switches a grad mode: called from its own frame, or by
    torch's decorator around one of its functions (whose module decides, not torch's)."""
    frame: Any = sys._getframe(2)
    for _ in range(3):  # past set_grad_enabled's clone() to the decorator's closure
        module = frame.f_globals.get("__name__", "")
        if module != _GRAD_MODE or frame.f_back is None:
            break
        frame = frame.f_back
    if module == _DECORATOR:
        func = frame.f_locals.get("func")
        return not _exempt(getattr(func, "__module__", None))
    return not _exempt(module)


def _guarding() -> bool:
    """A guard is active on this thread and Dynamo is not tracing (checked first: Dynamo
    traces no thread-local read)."""
    return not torch.compiler.is_compiling() and _active.depth > 0


_include = torch._C._dispatch_tls_set_dispatch_key_included


def _judged(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``original(*args, **kwargs)`` past the dispatch-level watch: a wrapper has judged the
    call (two thread-local switches instead of a Python kernel per dispatched operation)."""
    _include(_KEY, False)
    try:
        return original(*args, **kwargs)
    finally:
        _include(_KEY, True)


def _watching(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    anywhere = name in _ANYWHERE

    def method(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if _guarding():
            if self.requires_grad and (_not_printing() if anywhere else _from_problem()):
                raise _leak(f"Tensor.{name}")
            if _watch_on():
                return _judged(original, self, *args, **kwargs)
        return original(self, *args, **kwargs)

    method.__name__ = name
    return method


def _holds_graph(data: Any) -> bool:
    """Whether ``data`` is a tensor that requires grad, or a list/tuple holding one."""
    if isinstance(data, torch.Tensor):
        return data.requires_grad
    if isinstance(data, (list, tuple)):
        return any(_holds_graph(d) for d in data)
    return False


def _watching_data() -> property:
    descriptor: Any = torch._C.TensorBase.__dict__["data"]  # the getset descriptor

    def get(self: torch.Tensor) -> Any:
        if _guarding() and self.requires_grad and _from_problem():
            raise _leak("Tensor.data")
        return descriptor.__get__(self)

    def set_(self: torch.Tensor, value: Any) -> None:
        descriptor.__set__(self, value)

    return property(get, set_, doc=descriptor.__doc__)


def _watching_new_tensor(original: Callable[..., Any]) -> Callable[..., Any]:
    def new_tensor(self: torch.Tensor, data: Any, *args: Any, **kwargs: Any) -> Any:
        if _guarding():
            if _holds_graph(data) and _from_problem():
                raise _leak("Tensor.new_tensor")
            if _watch_on():
                return _judged(original, self, data, *args, **kwargs)
        return original(self, data, *args, **kwargs)

    return new_tensor


def _watching_tensor(original: Callable[..., Any]) -> Callable[..., Any]:
    def tensor(data: Any, *args: Any, **kwargs: Any) -> Any:
        if _guarding():
            if _holds_graph(data) and _from_problem():
                raise _leak("torch.tensor")
            if _watch_on():
                return _judged(original, data, *args, **kwargs)
        return original(data, *args, **kwargs)

    tensor.__doc__ = original.__doc__
    tensor.__name__ = "tensor"
    return tensor


def _watching_mode(cls: type, method: str, off: Callable[..., bool]) -> Callable[..., Any]:
    """``cls.method`` (a grad-mode context's ``__enter__`` or ``__init__``) raising when the
    problem's code switches gradients off under a guard (``off(self, *args)`` says it does)."""
    original = getattr(cls, method)

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _guarding() and off(self, *args, **kwargs) and _mode_from_problem():
            raise _leak("torch.no_grad")
        return original(self, *args, **kwargs)

    wrapped.__name__ = method
    wrapped.__doc__ = original.__doc__
    return wrapped


def _watching_detach(original: Callable[..., Any]) -> Callable[..., Any]:
    def detach(x: Any, *args: Any, **kwargs: Any) -> Any:
        if _guarding():
            if isinstance(x, torch.Tensor) and x.requires_grad and _from_problem():
                raise _leak("Tensor.detach")
            if _watch_on():
                return _judged(original, x, *args, **kwargs)
        return original(x, *args, **kwargs)

    detach.__name__ = "detach"
    detach.__doc__ = original.__doc__
    return detach


def _switched_by_problem(module: object) -> bool:
    return module is not None and not _exempt(module)


def _watching_switch(original: Callable[..., Any]) -> Callable[..., Any]:
    """``torch._C._set_grad_enabled``, which torch's grad-mode contexts call, raising when
    the problem's code calls it itself to switch gradients off under a guard.  Code with
    no module (globals without ``__name__``: the runtime wrappers torch's AOT autograd
    generates and runs by ``exec``, which switch gradients around a compiled graph) is not
    the problem's."""

    @functools.wraps(original)
    def _set_grad_enabled(*args: Any, **kwargs: Any) -> Any:
        if (
            not (args[0] if args else kwargs.get("enabled", True))
            and _guarding()
            and _switched_by_problem(sys._getframe(1).f_globals.get("__name__"))
        ):
            raise LeakError(
                f"{_PREFIX}torch._C._set_grad_enabled(False) called by the problem: what it "
                "computes is cut from the derivative's graph"
            )
        return original(*args, **kwargs)

    return _set_grad_enabled


def watching_grad_mode(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``fn(x, ops)`` (the problem's function), raising where it returns with gradients
    switched off that were on when it was called, under a guard: the switch by whatever
    reference (``torch._C._set_grad_enabled`` bound before the wrappers were installed)
    left what ``fn`` computed after it out of the graph.  Records, for the strict mode,
    whether gradients were on as ``fn`` began (``_Active.grad_at_call``), and switches
    them back on if ``fn`` raises with them off.  Costs two reads of torch's grad mode and
    two thread-local writes per call of ``fn``."""

    def call(x: Any, ops: Any) -> Any:
        if torch.compiler.is_compiling():  # no guard under Dynamo (``_guarding``); and a
            # thread-local write traced into a compiled frame fails its guards on the next call
            return fn(x, ops)
        on = torch.is_grad_enabled()
        state = _active
        saved, state.grad_at_call = state.grad_at_call, on
        try:
            y = fn(x, ops)
        except BaseException:
            if on and not torch.is_grad_enabled():  # raised with gradients off: back on
                torch._C._set_grad_enabled(True)
            raise
        finally:
            state.grad_at_call = saved
        if on and not torch.is_grad_enabled() and _guarding():
            torch._C._set_grad_enabled(True)  # back as it was, for the caller's code
            raise LeakError(
                f"{_PREFIX}grad_mode(): the problem returned with gradients switched off; "
                "what it computed after the switch is cut from the derivative's graph"
            )
        return y

    return call


def _mode_off(self: Any, mode: Any = True, *args: Any, **kwargs: Any) -> bool:
    return not bool(kwargs.get("mode", mode))


#: grad-mode contexts: (class, method, whether the call switches gradients off)
_MODES = (
    (torch.no_grad, "__enter__", lambda self: True),
    (torch.inference_mode, "__enter__", lambda self: bool(getattr(self, "mode", True))),
    (torch.set_grad_enabled, "__init__", _mode_off),
)

_METHODS: dict[str, Any] = {
    name: _watching(name, getattr(torch.Tensor, name))
    for name in ("item", "tolist", "__float__", "__int__", "detach", "detach_")
}
_METHODS["data"] = _watching_data()
_METHODS["new_tensor"] = _watching_new_tensor(torch.Tensor.new_tensor)
#: ``torch`` module functions replaced (in a dict: the wrapper carries torch's docstring,
#: whose examples are not this module's doctests)
_FUNCTIONS = {"tensor": _watching_tensor(torch.tensor), "detach": _watching_detach(torch.detach)}
#: ``torch._C._set_grad_enabled`` replaced (the grad-mode contexts look it up at each call)
_SWITCH = _watching_switch(torch._C._set_grad_enabled)


class _Strict(torch.overrides.TorchFunctionMode):
    """Every torch call of the problem passes here (``probe="strict"``): the watched
    operations by whatever reference they are called (``torch._C.TensorBase.detach(x)``,
    ``torch.tensor`` or ``Tensor.detach`` bound before the wrappers were installed),
    judged like the wrappers judge them.  Costs a Python call per torch operation."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if name == "__get__":  # x.data: torch passes type(x).data.__get__ (ours, or torch's)
            owner = getattr(func, "__self__", None)
            name = "data" if owner is _DATA_DESCRIPTOR or owner is _METHODS["data"] else ""
        if name in _STRICT and args and _guarding():
            watched = (
                _holds_graph(args[0])
                if name == "tensor"
                else (name == "new_tensor" and len(args) > 1 and _holds_graph(args[1]))
                or (isinstance(args[0], torch.Tensor) and args[0].requires_grad)
            )
            module = _caller_module()
            if watched and (module != _PRINTING if name in _ANYWHERE else not _exempt(module)):
                raise _leak(_STRICT[name])
        if (
            not torch.is_grad_enabled()
            and _active.grad_at_call
            and _guarding()
            and (_holds_graph(args) or (kwargs and _holds_graph(tuple(kwargs.values()))))
            and not _exempt(_caller_module())
        ):  # gradients switched off inside fn, by any reference: this operation is cut
            raise _leak("gradients_off")
        return func(*args, **(kwargs or {}))


def _caller_module() -> object:
    """The module of the Python code that called the torch operation (the mode is entered
    from C: frame 0 is this function, 1 the mode's ``__torch_function__``)."""
    return sys._getframe(2).f_globals.get("__name__", "")


_DATA_DESCRIPTOR: Any = torch._C.TensorBase.__dict__["data"]
#: operations the strict mode watches, and the name its error gives (``GUARDED``'s keys)
_STRICT = {
    "item": "Tensor.item",
    "tolist": "Tensor.tolist",
    "__float__": "Tensor.__float__",
    "__int__": "Tensor.__int__",
    "detach": "Tensor.detach",
    "detach_": "Tensor.detach_",
    "data": "Tensor.data",
    "tensor": "torch.tensor",
    "new_tensor": "Tensor.new_tensor",
}


def _install() -> None:
    install_dispatch()
    for name, method in _METHODS.items():
        setattr(torch.Tensor, name, method)
    for name, function in _FUNCTIONS.items():
        setattr(torch, name, function)
    for cls, method, off in _MODES:
        setattr(cls, method, _watching_mode(cls, method, off))
    torch._C._set_grad_enabled = _SWITCH


class LeakGuard:
    """Context manager: the watched methods raise on tensors that require grad (this thread).

    Nested and concurrent guards are independent (a per-thread depth).  ``trusted``:
    top-level names of third-party packages whose own code may detach or switch
    gradients off while this guard is the innermost one (``Problem.trusted_packages``);
    ``x.item()``, ``float(x)`` and the rest of the anywhere-watched operations stay
    errors in every package.

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
    ...     torch.ones(2, dtype=torch.float64)[0].item()  # no derivative: a number
    1.0
    """

    __slots__ = ("_mode", "_saved", "_trusted")

    def __init__(self, trusted: frozenset[str] = frozenset(), strict: bool = False) -> None:
        self._trusted = trusted
        self._saved: frozenset[str] = _NONE
        self._mode = _Strict() if strict else None

    def __enter__(self) -> LeakGuard:
        global _installed
        if not _installed:
            with _lock:
                if not _installed:
                    _install()
                    _installed = True
        saved = self._saved = _active.trusted
        if saved or self._trusted:  # the innermost guard's trust holds (none: nothing to set)
            _active.trusted = self._trusted
        if _active.depth == 0:
            _dispatch_watch(True)
        _active.depth += 1
        if self._mode is not None:
            self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
        _active.depth -= 1
        if _active.depth == 0:
            _dispatch_watch(False)
        if self._saved or self._trusted:
            _active.trusted = self._saved


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No guard on this thread for the duration: for a compiled graph's call.

    Dynamo's guards read tensor values (``Tensor.item()``) to decide whether a
    compiled graph applies to the inputs; a guard that raises there reads as a
    failed guard, so the graph would be traced again on every call.  What runs
    compiled was checked under the guard eagerly before it was traced
    (``Derivatives`` runs the same callable eagerly first), and a one-graph
    compile cannot hold a Python branch on a value, so pausing hides nothing.
    """
    depth = _active.depth
    _active.depth = 0
    try:
        with dispatch_paused():
            yield
    finally:
        _active.depth = depth
