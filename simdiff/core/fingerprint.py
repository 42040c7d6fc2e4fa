"""A problem's fingerprint: a hash of what defines it, never of what it looks like.

Stored results are matched to a problem by its fingerprint, never by its name
(every lambda is called ``'<lambda>'``), and the derivative cache of a problem
is valid only while its fingerprint stays the same, so a resumed sweep, a
resumed run or a cached compiled derivative never belongs to another function.

What is hashed
--------------
* A Python function: its code (bytecode, constants and names, recursively
  through nested code objects), its default and keyword-default values, the
  values of its closure cells and the module globals its code names (data is
  hashed by value; functions, classes and instances recursively).
* A function or class of an installed library (numpy, jax, torch, the
  standard library, simdiff itself): its module, qualified name and the
  library's version; a library function's closure and defaults are hashed.
* Data: ``None``, bools, numbers, strings, bytes, numpy arrays (dtype, shape
  and bytes), concrete jax and torch arrays, and tuples, lists, dicts and sets
  of them.
* An object whose class has ``__fingerprint__(self)``: what that returns.
  A :class:`~simdiff.Problem` returns what defines it (``fn``, ``x0``,
  backends, exact references, check options, and a simulator's settings); a
  derivative cache returns nothing (what was built is not a definition).
* Any other instance: its class and its attributes (``__dict__`` and
  ``__slots__``).
* Anything else (an object without inspectable state: a lock, a generator, a
  C extension object, a tracer) is *opaque*: the fingerprint is ``None``, and
  ``None`` means "unknown": results are not resumed and compiled derivatives
  are not reused.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import struct
import sys
import sysconfig
import types
from pathlib import Path
from typing import Any

import numpy as np

from simdiff.backends import backend_of
from simdiff.core import watch as watched
from simdiff.errors import InputTypeError
from simdiff.errors import _Opaque as Opaque

__all__ = ["Identity", "Opaque", "Versioned", "fingerprint", "why_opaque"]


_DATA = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), range, slice)
_LIBRARY_ROOTS = [
    Path(p).resolve()
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (p := sysconfig.get_paths().get(key))
]
#: Packages hashed by name and version, also when installed from a source tree.
_LIBRARY_PACKAGES = {"simdiff", "numpy", "scipy", "jax", "jaxlib", "torch", "builtins"}


class Versioned:
    """A class whose attributes are watched as one counter.

    Every attribute set or deleted (``__class__`` too) bumps
    ``_definition_version``; the recheck of a fingerprint on each derivative
    call (:class:`Identity`) compares that one number instead of every
    attribute of an object that says what defines it (``__fingerprint__``).
    A write into ``vars(obj)`` directly goes unseen.
    """

    _definition_version: int = 0

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        object.__setattr__(self, "_definition_version", self._definition_version + 1)

    def __delattr__(self, name: str) -> None:
        object.__delattr__(self, name)
        object.__setattr__(self, "_definition_version", self._definition_version + 1)


@functools.cache
def _library_version(module: str) -> str | None:
    """``"pkg==version"`` when ``module`` belongs to an installed library, else None."""
    top = module.partition(".")[0]
    if top in sys.builtin_module_names or top in _LIBRARY_PACKAGES:
        pass
    else:
        mod = sys.modules.get(top)
        path = getattr(mod, "__file__", None)
        if mod is None:
            return None
        if path is not None:
            resolved = Path(path).resolve()
            if not any(resolved.is_relative_to(root) for root in _LIBRARY_ROOTS):
                return None
    try:
        return f"{top}=={importlib.metadata.version(top)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{top}=={getattr(sys.modules.get(top), '__version__', sys.version)}"


@functools.lru_cache(maxsize=4096)
def _code_digest(code: types.CodeType) -> tuple[bytes, frozenset[str]]:
    """The digest of a code object and the global names it (and its nested code) uses."""
    h = hashlib.sha256()
    names = set(code.co_names)
    h.update(code.co_code)
    h.update(repr((code.co_argcount, code.co_kwonlyargcount, code.co_flags)).encode())
    h.update(repr(code.co_names).encode())
    h.update(repr(code.co_varnames).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            sub, sub_names = _code_digest(const)
            h.update(sub)
            names |= sub_names
        else:
            h.update(repr((type(const).__name__, const)).encode())
    return h.digest(), frozenset(names)


class _Hasher:
    """One traversal: the stack breaks cycles (a method's globals name its own class)."""

    def __init__(self, watch: watched.Watch | None = None) -> None:
        self.h = hashlib.sha256()
        self.stack: list[int] = []
        self.watch = watch

    def keep(self, kind: str, read: Any, obj: Any) -> None:
        if self.watch is not None:
            self.watch.keep(kind, read, obj)

    def put(self, *parts: Any) -> None:
        for p in parts:
            self.h.update(p if isinstance(p, bytes) else str(p).encode())
            self.h.update(b"\x00")

    def visit(self, obj: Any) -> None:
        if isinstance(obj, _DATA):
            if isinstance(obj, float):  # repr(-0.0) != repr(0.0); nan == nan here
                self.put("float", struct.pack("<d", obj))
            else:
                self.put(type(obj).__name__, repr(obj))
            return
        if isinstance(obj, (np.ndarray, np.generic)):
            a = np.ascontiguousarray(obj)
            if a.dtype.hasobject:
                self.put("objarray", a.shape)
                for v in a.ravel():
                    self.visit(v)
                return
            self.put("array", a.dtype.str, a.shape, watched.bytes_digest(a))
            if isinstance(obj, np.ndarray) and obj.flags.writeable:
                self.keep("value", watched.ARRAY_LAYOUT, obj)
                self.keep("value", watched.ARRAY_BYTES, obj)
            return
        if isinstance(obj, types.ModuleType):
            self.put("module", obj.__name__, _library_version(obj.__name__) or "")
            return
        key = id(obj)
        if key in self.stack:
            self.put("cycle", self.stack.index(key))
            return
        self.stack.append(key)
        try:
            self._visit_object(obj)
        finally:
            self.stack.pop()

    def _visit_object(self, obj: Any) -> None:
        if isinstance(obj, list):
            self.keep("items", watched.ALL, obj)
        if isinstance(obj, (tuple, list)):
            self.put(type(obj).__name__, len(obj))
            for v in obj:
                self.visit(v)
            return
        if isinstance(obj, (dict, types.MappingProxyType)):  # a proxy shows a dict's changes
            self._dict(obj, watch=True)
            return
        if isinstance(obj, set):
            self.keep("value", frozenset, obj)
        if isinstance(obj, (set, frozenset)):
            self.put("set", *sorted(_sub_digest(v) for v in obj))
            return
        if isinstance(obj, types.FunctionType):
            self._function(obj)
            return
        if isinstance(obj, types.MethodType):
            self.put("method")
            self.visit(obj.__func__)
            self.visit(obj.__self__)
            return
        if isinstance(obj, functools.partial):
            self.put("partial")
            self.visit(obj.func)
            self.visit(obj.args)
            self.visit(obj.keywords)
            return
        if isinstance(obj, (staticmethod, classmethod)):
            self.put(type(obj).__name__)
            self.visit(obj.__func__)
            return
        if isinstance(obj, property):
            self.put("property")
            for f in (obj.fget, obj.fset, obj.fdel):
                self.visit(f)
            return
        if isinstance(obj, type):
            self._class(obj)
            return
        if _is_builtin(obj):
            name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
            module = getattr(obj, "__module__", None) or type(obj).__module__
            if name is None:
                raise Opaque(f"a {type(obj).__name__} without a name")
            self.put("builtin", module, name, _library_version(module) or "")
            return
        concrete = _concrete_array(obj)
        if concrete is not None:
            values, backend = concrete
            self.visit(values)
            if backend.mutation_count(obj) is not None:  # arrays that change in place
                self.keep("value", watched.mutation_reader(backend), obj)
            return
        try:
            wrapped = getattr(obj, "__wrapped__", None)
        except Exception:  # an object whose __getattr__ refuses unknown names
            wrapped = None
        if wrapped is not None and not isinstance(obj, type):  # jax.jit, functools.wraps
            self.put("wrapper", type(obj).__module__, type(obj).__qualname__)
            self.visit(wrapped)
            return
        definition = getattr(type(obj), "__fingerprint__", None)
        if definition is not None:  # the object says what defines it (a Problem, a cache)
            self.put("defined", type(obj).__module__, type(obj).__qualname__)
            # a view of another object (a problem less what no derivative reads): a reference
            # to that object from within (fn's closure naming its problem) is a cycle, so the
            # view's definition is hashed, and watched, once; the object's counter is the view's
            of = obj.__fingerprint_of__ if hasattr(type(obj), "__fingerprint_of__") else None
            owner = obj if of is None else of
            if isinstance(owner, Versioned):
                # bumped by the object's __setattr__ (a Problem): one number to compare
                self.keep("value", watched.DEFINITION_VERSION, owner)
            elif hasattr(obj, "__dict__"):
                self.keep("items", watched.ENTRIES, obj.__dict__)
            defined = definition(obj)
            if of is not None:
                self.stack.append(id(of))
            try:
                # held here only (a dict built by the call; getrefcount's own argument is
                # the other reference): nothing can change it later, so it is not watched
                if type(defined) is dict and sys.getrefcount(defined) <= 2:
                    self.stack.append(id(defined))
                    try:
                        self._dict(defined, watch=False)
                    finally:
                        self.stack.pop()
                else:
                    self.visit(defined)
            finally:
                if of is not None:
                    self.stack.pop()
            return
        self._instance(obj)

    def _dict(self, obj: Any, watch: bool) -> None:
        """A dict's items; watched unless ``watch`` is false: a temporary no one else holds
        (a copy made here, a definition built by ``__fingerprint__``), which cannot change
        (what it holds is visited, and watched, all the same)."""
        if watch:
            self.keep("items", watched.ENTRIES, obj)
        self.put("dict", len(obj))
        for k, v in sorted(obj.items(), key=lambda kv: _sub_digest(kv[0])):
            self.visit(k)
            self.visit(v)

    def _function(self, fn: types.FunctionType) -> None:
        self.keep("items", watched.FUNCTION_STATE, fn)
        module = fn.__module__ or ""
        # code typed at a prompt, exec'd or in a doctest has a "<...>" file name, whatever
        # module name its namespace carries: it is hashed, never taken for a library's
        library = None if fn.__code__.co_filename.startswith("<") else _library_version(module)
        if library is not None:
            self.put("libfunction", module, fn.__qualname__, library)
        else:
            code, names = _code_digest(fn.__code__)
            self.put("function", fn.__qualname__, code)
            globs = fn.__globals__
            for name in sorted(names):
                self.keep("object", watched.global_reader(name), globs)
                if name in globs:
                    self.put("global", name)
                    self.visit(globs[name])
        self.visit(fn.__defaults__)
        self.visit(fn.__kwdefaults__)
        for cell in fn.__closure__ or ():
            self.keep("object", watched.CELL, cell)
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell (a name assigned later)
                self.put("empty cell")
                continue
            self.visit(value)

    def _class(self, cls: type) -> None:
        library = _library_version(cls.__module__)
        self.put("class", cls.__module__, cls.__qualname__, library or "")
        if library is not None:
            return
        self.keep("items", watched.ENTRIES, cls.__dict__)
        for base in cls.__mro__[1:]:
            self.visit(base)
        for name, value in sorted(vars(cls).items()):
            if name in ("__dict__", "__weakref__", "__module__", "__doc__", "__slotnames__"):
                continue
            if isinstance(value, (types.FunctionType, staticmethod, classmethod, property)) or (
                isinstance(value, (*_DATA, np.ndarray, tuple, list, dict, frozenset))
            ):
                self.put("attr", name)
                self.visit(value)

    def _instance(self, obj: Any) -> None:
        cls = type(obj)
        state = getattr(obj, "__dict__", None)
        slots = [s for c in cls.__mro__ for s in getattr(c, "__slots__", ())]
        if state is None and not slots:
            raise Opaque(f"an object of type {cls.__module__}.{cls.__qualname__}")
        # a frozen dataclass's own instances refuse every attribute set (__class__ too):
        # their state cannot change (what it holds is visited, and watched, all the same)
        frozen = "__dataclass_params__" in cls.__dict__ and cls.__dataclass_params__.frozen
        # a Versioned instance's attribute sets (its class's too) bump one counter
        versioned = not frozen and isinstance(obj, Versioned)
        self.put("instance")
        if versioned:
            self.keep("value", watched.DEFINITION_VERSION, obj)
        elif not frozen:
            self.keep("object", watched.CLASS, obj)
        self.visit(cls)
        if state is not None:
            if not frozen and not versioned:
                self.keep("items", watched.ENTRIES, state)
            copy = dict(state)  # a copy: the state itself is watched (or its counter)
            if versioned:
                copy.pop("_definition_version", None)  # not what defines it
            self.stack.append(id(state))
            try:
                self._dict(copy, watch=False)
            finally:
                self.stack.pop()
        if slots and not frozen and not versioned:
            self.keep("items", watched.slots_reader(tuple(slots)), obj)
        for s in slots:
            if s in ("__dict__", "__weakref__"):
                continue
            self.put("slot", s)
            self.visit(getattr(obj, s, "<unset>"))


def _is_builtin(obj: Any) -> bool:
    if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType, np.ufunc)):
        return True
    return isinstance(
        obj, (types.WrapperDescriptorType, types.MethodDescriptorType, types.MethodWrapperType)
    )


def _concrete_array(obj: Any) -> tuple[np.ndarray, Any] | None:
    """``(values, backend)`` of a framework's native array, None for anything else.

    A tracer, or a tensor of a transform, has no values now: opaque.
    """
    if isinstance(obj, (np.ndarray, np.generic)):
        return None
    backend = backend_of(obj)
    if not backend.is_native(obj):
        return None
    try:
        values = backend.concrete(obj)
    except Exception as exc:  # a functorch-wrapped or fake tensor refusing conversion
        raise Opaque(f"a {type(obj).__name__} without concrete values ({exc})") from exc
    if values is None:
        raise Opaque(f"a {type(obj).__name__} without concrete values (a tracer)")
    return np.asarray(values), backend


def _sub_digest(obj: Any) -> bytes:
    h = _Hasher()
    h.visit(obj)
    return h.h.digest()


def _digest(obj: Any) -> str:
    h = _Hasher()
    h.visit(obj)
    return h.h.hexdigest()


def why_opaque(obj: Any) -> str | None:
    """What makes ``obj`` impossible to fingerprint, or None when it can be.

    Examples
    --------
    >>> import threading
    >>> from simdiff.core.fingerprint import why_opaque
    >>> why_opaque({"a": 1.0}) is None
    True
    >>> why_opaque(threading.Lock())
    'an object of type _thread.lock'
    """
    try:
        _digest(obj)
    except Opaque as exc:
        return str(exc)
    return None


def fingerprint(problem: Any) -> str | None:
    """A hash of what defines ``problem``, or None when part of it cannot be inspected.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    str or None
        64 hex digits (SHA-256) over ``problem.__fingerprint__()``: the function's
        code, defaults, closure values and the module globals it names
        (recursively), ``x0``, the backends, the exact references and check
        options, and for simulators every setting that changes results
        (solver, tolerances, ``max_steps``, grid, cutoff, ...).  ``None`` when
        something in it is opaque (:func:`why_opaque` says what): a problem
        with an unknown identity is never resumed from stored results and its
        compiled derivatives are not reused.

    Notes
    -----
    Nothing is evaluated: the fingerprint costs a traversal of the
    definition (code digests are memoised; arrays are hashed by their bytes).
    Two problems with equal fingerprints run the same code on the same data;
    a constant changed in a closure, a default or a module global changes the
    fingerprint.  Functions of installed libraries are identified by name and
    library version.  The name and ``meta`` are not used.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.store import fingerprint
    >>> def make(c):
    ...     return simdiff.Problem(lambda x, ops: ops.sum(c * x**2), x0=np.ones(2))
    >>> a, b, c = make(1.0), make(1.0), make(2.0)
    >>> fingerprint(a) == fingerprint(b), fingerprint(a) == fingerprint(c)
    (True, False)
    """
    if not callable(getattr(type(problem), "__fingerprint__", None)):
        raise InputTypeError(f"fingerprint needs a simdiff.Problem; got {type(problem).__name__}")
    try:
        return _digest(problem)
    except Opaque:
        return None
    except RecursionError:  # a definition nested beyond Python's recursion limit
        return None


class Identity:
    """A fingerprint kept up to date at the cost of a shallow check.

    :meth:`current` traverses the definition once and remembers what in it
    could change in place (closure cells, the module globals the code names,
    defaults, instance attributes, lists, dicts, writable arrays), each with
    what it held.  Later calls compare those (identity; the bytes of
    writable arrays; torch's version counter of tensors) and traverse again
    only when one differs.  The own attributes of a :class:`Versioned` object
    (a :class:`~simdiff.Problem`, a term energy) are compared as one counter
    its ``__setattr__`` bumps (``_definition_version``; a write into
    ``vars(problem)`` directly goes unseen), and the state of a
    frozen dataclass's instance, which refuses every attribute set, not at
    all (what either holds is watched all the same).  The cost is a few
    C-level passes over what is watched (``bench_identity``).  An opaque
    definition is traversed on every call, so that it stays ``None`` for as
    long as it is opaque.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.core.fingerprint import Identity
    >>> c = np.array([1.0])
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(c * x), x0=np.ones(1))
    >>> ident = Identity()
    >>> first = ident.current(p)
    >>> first == ident.current(p)
    True
    >>> c[0] = 2.0
    >>> first == ident.current(p)
    False
    """

    def __init__(self) -> None:
        self.value: str | None = None
        self._watch: watched.Watch | None = None

    @property
    def watch(self) -> watched.Watch | None:
        """What the last traversal watches (None before the first or for an opaque one)."""
        return self._watch

    def current(self, problem: Any) -> str | None:
        """The fingerprint of ``problem`` now (see :func:`fingerprint`)."""
        watch = self._watch
        if watch is not None and watch.unchanged():
            return self.value
        watch = watched.Watch()
        h = _Hasher(watch)
        try:
            h.visit(problem)
        except (Opaque, RecursionError):
            self.value, self._watch = None, None
            return None
        self.value, self._watch = h.h.hexdigest(), watch
        return self.value
