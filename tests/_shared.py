"""Catalogue problems shared by the tests of one process, with what simdiff built for them.

A problem owns its derivative cache (simdiff/core/cache.py): a test that builds
its own with ``problems.get`` traces and compiles every derivative it asks
for, although an earlier test in the process compiled the same ones for the
same definition.  :func:`shared_problem` hands every test of the process the
same problem object per catalogue name, and with it the compiled derivatives
(the suite's JAX programs are a third of its CPU time).

A test may read a shared problem and call anything on it; it must not change
it.  After each test (tests/conftest.py) :func:`changed` compares every
problem lent during the test with its definition when first built — the
fingerprint simdiff keys its caches and stored results by, the ``meta``
mapping (tolerances, tags), the name — and a changed one is dropped (the next
test builds a new one) and fails the test that changed it.  Tests that count
compiles or traces, measure memory, or change the problem build their own
with ``problems.get``.
"""

from __future__ import annotations

from typing import Any

import problems
import simdiff
from simdiff.core.fingerprint import _digest, fingerprint

__all__ = ["changed", "shared_problem"]

_SHARED: dict[str, tuple[simdiff.Problem, tuple[Any, ...]]] = {}
_LENT: set[str] = set()


def _definition(problem: simdiff.Problem) -> tuple[Any, ...] | None:
    """What a test must leave as it found: ``None`` where simdiff shares nothing anyway."""
    built = fingerprint(problem)
    if built is None:  # an opaque definition: its cache rebuilds on every use
        return None
    try:
        meta = _digest(problem.meta)
    except simdiff.SimdiffError:
        return None
    return (type(problem), problem.name, built, meta)


def shared_problem(name: str) -> simdiff.Problem:
    """The catalogue problem ``name``, the same object for every test of this process."""
    entry = _SHARED.get(name)
    if entry is None:
        problem = problems.get(name)
        definition = _definition(problem)
        if definition is None:
            return problem
        _SHARED[name] = entry = (problem, definition)
    _LENT.add(name)
    return entry[0]


def changed() -> list[str]:
    """Names of the problems lent since the last call whose definition changed; they are dropped."""
    names = []
    for name in sorted(_LENT):
        problem, definition = _SHARED[name]
        if _definition(problem) != definition:
            del _SHARED[name]
            names.append(name)
    _LENT.clear()
    return names
