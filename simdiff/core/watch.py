"""The watch of a fingerprint: what could change in place in a definition, and its recheck.

:class:`~simdiff.core.fingerprint.Identity` hashes a problem once and keeps a
:class:`Watch` of what the hash read that could change in place (a dict of
globals, a list, an array's bytes, a tensor's version counter); the watch is
rechecked on every derivative call, and the fingerprint is recomputed only
where something changed.  The readers below are the C-level accessors the
recheck maps over the watched objects.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import operator
import types
from typing import Any

import numpy as np

__all__ = [
    "ALL",
    "ARRAY_BYTES",
    "ARRAY_LAYOUT",
    "CELL",
    "CLASS",
    "DEFINITION_VERSION",
    "ENTRIES",
    "FUNCTION_STATE",
    "MISSING",
    "VALUES",
    "Watch",
    "bytes_digest",
    "global_reader",
    "mutation_reader",
    "slots_reader",
    "values_reader",
]


MISSING = object()


def bytes_digest(a: np.ndarray) -> bytes:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).digest()


# Readers of what can change in place, C-level where possible (the check runs on every call).


#: what a writable array holds, by two C calls: its layout and its bytes
ARRAY_LAYOUT = operator.attrgetter("shape", "strides", "dtype")
ARRAY_BYTES = np.ndarray.tobytes


ALL = operator.itemgetter(slice(None))


def entries(mapping: Any) -> tuple[Any, ...]:
    """A dict's (or mapping proxy's) keys, then its values: one watched entry for both."""
    return (*mapping, *mapping.values())


ENTRIES = entries


def values_reader(mapping: Any) -> Any:
    """A dict's (mapping proxy's) values view by the type's C method (``methodcaller`` looks
    the method up on each call: eight times slower)."""
    values = getattr(type(mapping), "values", None)
    return values if isinstance(values, types.MethodDescriptorType) else VALUES


VALUES = operator.methodcaller("values")


@functools.cache
def global_reader(name: str) -> Any:
    """``globals.get(name)``, one reader per name, so that a global seen twice is watched once."""
    return operator.methodcaller("get", name, MISSING)


#: what can be assigned on a function (``__closure__`` is read-only; its cells are watched)
FUNCTION_STATE = operator.attrgetter("__code__", "__defaults__", "__kwdefaults__")
CELL = operator.attrgetter("cell_contents")  # an empty cell raises: the check then fails
CLASS = operator.attrgetter("__class__")
DEFINITION_VERSION = operator.attrgetter("_definition_version")


def mutation_reader(backend: Any) -> Any:
    return lambda x: (backend.mutation_count(x), tuple(x.shape))


@functools.cache
def slots_reader(slots: tuple[str, ...]) -> Any:
    return lambda obj: tuple(getattr(obj, s, MISSING) for s in slots)


class Watch:
    """What could change in place in a definition, with what it held when hashed.

    ``object`` entries hold one object (compared by identity), ``items`` entries
    a sequence of objects (identities compared), ``value`` entries a value
    compared by ``==`` (an array's bytes, a tensor's version counter).  The
    objects seen are kept alive, so an identity is never reused.

    :meth:`unchanged` runs on every derivative call, so it compares everything
    in a few C-level passes (``map`` over the readers, ``operator.is_`` over
    the flattened identities) with no Python frame per entry: a dict or a
    list is iterated as it is (its keys, its items) and a dict's values
    through its view, none copied.
    """

    def __init__(self) -> None:
        self.objects: list[tuple[Any, Any, Any]] = []
        self.items: list[tuple[Any, Any, tuple[Any, ...]]] = []
        self.values: list[tuple[Any, Any, Any]] = []
        self._kept: set[tuple[int, int]] = set()
        # the flat form unchanged() compares (built by keep)
        self._object_reads: list[Any] = []
        self._object_objs: list[Any] = []
        self._object_seen: list[Any] = []
        self._iterables: list[Any] = []  # iterated as they are (a dict: its keys; a list)
        self._item_reads: list[Any] = []  # read, then iterated (a dict's values view, ...)
        self._item_objs: list[Any] = []
        # what each held when hashed (the check compares with these, never with a later read)
        self._iterable_seen: list[tuple[Any, ...]] = []
        self._item_seen: list[tuple[Any, ...]] = []
        self._value_reads: list[Any] = []
        self._value_objs: list[Any] = []
        self._value_seen: list[Any] = []
        self._fast: tuple[Any, ...] | None = None

    def keep(self, kind: str, read: Any, obj: Any) -> None:
        key = (id(read), id(obj))  # both kept alive by the entry: the ids stay theirs
        if key in self._kept:  # the same thing reached twice (a function named by two closures)
            return
        self._kept.add(key)
        self._fast = None
        try:
            seen = read(obj)
        except ValueError:  # an empty cell: watched as changed until it is filled
            seen = MISSING
        if kind == "object":
            self.objects.append((read, obj, seen))
            self._object_reads.append(read)
            self._object_objs.append(obj)
            self._object_seen.append(seen)
        elif kind == "items":
            seen = tuple(seen)
            self.items.append((read, obj, seen))
            if read is ENTRIES:  # a dict or mapping proxy: its keys, then its values view
                half = len(seen) // 2
                self._iterables.append(obj)
                self._iterable_seen.append(seen[:half])
                self._item_reads.append(values_reader(obj))
                self._item_objs.append(obj)
                self._item_seen.append(seen[half:])
            elif read is ALL:  # a list: its items
                self._iterables.append(obj)
                self._iterable_seen.append(seen)
            else:
                self._item_reads.append(read)
                self._item_objs.append(obj)
                self._item_seen.append(seen)
        else:
            self.values.append((read, obj, seen))
            self._value_reads.append(read)
            self._value_objs.append(obj)
            self._value_seen.append(seen)

    def _compile(self) -> tuple[Any, ...]:
        # what was seen, flat, in the order unchanged() reads it
        flat = (*self._object_seen, *itertools.chain(*self._iterable_seen, *self._item_seen))
        self._fast = fast = (
            tuple(self._object_reads),
            tuple(self._object_objs),
            tuple(self._iterables),
            tuple(map(len, self._iterable_seen)),
            tuple(self._item_reads),
            tuple(self._item_objs),
            flat,
            tuple(self._value_reads),
            tuple(self._value_objs),
            tuple(self._value_seen),
        )
        return fast

    def unchanged(self) -> bool:
        """Whether everything watched holds what it held when hashed.

        C-level iterators, no Python frame per entry (the check runs on every
        derivative call): the lengths of the lists and dicts first, then every
        object watched by identity in one flat pass (a dict's keys, then its
        values through its view), then the values (bytes, version counters) by
        ``==``.
        """
        fast = self._fast
        if fast is None:
            fast = self._compile()
        o_reads, o_objs, iterables, lengths, i_reads, i_objs, flat, v_reads, v_objs, v_seen = fast
        call = operator.call
        try:  # empty passes skipped: each costs a call even with nothing to compare
            if lengths and tuple(map(len, iterables)) != lengths:
                return False
            read = map(call, i_reads, i_objs)
            now = (
                itertools.chain(map(call, o_reads, o_objs), *iterables, *read)
                if o_reads
                else itertools.chain(*iterables, *read)
            )
            return all(map(operator.is_, now, flat)) and (
                not v_reads or tuple(map(call, v_reads, v_objs)) == v_seen
            )
        except (ValueError, AttributeError, RuntimeError):  # an empty cell, an attribute
            return False  # deleted, a dict changed size while iterated

    def __len__(self) -> int:
        return len(self.objects) + len(self.items) + len(self.values)
