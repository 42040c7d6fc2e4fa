"""The derivative cache: built and compiled callables of one problem, owned by the problem.

Owner and lifetime
------------------
Every :class:`~simdiff.Problem` owns one :class:`DerivativeCache`
(``problem.cache``).  Whatever simdiff builds for the problem — the shared
:class:`~simdiff.Derivatives` per backend and dtype (and through it each
compiled derivative), or a specialised compiled function such as the PES
cubic force constants — goes in it, under a key made of strings and numbers
only.  Nothing else in simdiff keeps built derivatives: there is no
module-level dictionary keyed by problems, so nothing outlives its problem.
When the last reference to a problem goes, the problem, its cache and the
compiled functions in it go too (the cache and its values refer back to the
problem, a cycle that Python's garbage collector frees).  ``problem.cache.clear()``
frees them earlier; a pickled problem travels without its cache.

Validity
--------
What is built is valid for the problem's definition at build time, so the
cache is keyed by the problem's fingerprint (:mod:`simdiff.core.fingerprint`)
less what no derivative reads (the exact references and the check options,
which :func:`simdiff.check` uses; results stored by :mod:`simdiff.store`
are keyed by the whole fingerprint):
before each use (:meth:`DerivativeCache.refresh`, run by :meth:`get` and by
every call of a :class:`~simdiff.Derivatives`), a changed fingerprint (a
closure value, a referenced module global, a default or an array changed
after the first call) drops everything built, so every backend recomputes
with the new definition.  A problem whose fingerprint is ``None`` (an opaque
object in its definition) shares nothing: each use rebuilds.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

from simdiff.core.fingerprint import Identity

__all__ = ["DerivativeCache", "RecentlyUsed"]

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
_MISSING: Any = object()


#: what a problem's ``__fingerprint__`` holds that no built derivative reads
_NOT_COMPUTED = ("exact", "check_options")


class _Computed:
    """What the derivatives of ``problem`` compute from: its definition less the exact
    references and check options (the recheck on every call then skips them)."""

    __slots__ = ("problem",)

    def __init__(self, problem: Any) -> None:
        self.problem = problem

    @property
    def __fingerprint_of__(self) -> Any:
        """The problem this is a view of: a reference to it from within its definition
        (an ODE's ``fn`` naming its problem) is hashed as a cycle, not as the whole problem."""
        return self.problem

    def __fingerprint__(self) -> Any:
        defined = self.problem.__fingerprint__()
        if type(defined) is not dict:
            return defined
        return {k: v for k, v in defined.items() if k not in _NOT_COMPUTED}


class DerivativeCache:
    """Built derivative objects of one problem, built once per key.

    Keys are tuples of strings and numbers naming what was built and with
    which settings (``("derivatives", "jax", "float64", True)``).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2), x0=np.ones(2))
    >>> _ = simdiff.grad(p)
    >>> len(p.cache) >= 1
    True
    >>> p.cache.clear()
    >>> len(p.cache)
    0
    """

    def __init__(self, owner: Any = None) -> None:
        self._items: dict[Hashable, Any] = {}
        self._owner = None if owner is None else weakref.ref(owner)
        self._identity = Identity()
        self._computed: _Computed | None = None  # the owner's definition as derivatives read it
        self._built_for: str | None = None
        self._built_state: Any = None
        #: the shallow check of the definition and evaluation state (None: traverse anew)
        self._unchanged: Callable[[], bool] | None = None
        #: Bumped whenever what was built is dropped because the definition changed.
        self.generation = 0

    def refresh(self) -> int:
        """Drop what was built if the owner's fingerprint changed (or is None), or its
        evaluation state (``owner.evaluation_state()``: a neighbour list rebuilt); the generation.

        The check is shallow while nothing changed (:class:`~simdiff.core.fingerprint.Identity`;
        the evaluation state is one more entry of what it watches): one call.
        """
        unchanged = self._unchanged
        if unchanged is not None and unchanged():
            return self.generation
        return self._refresh()

    def _refresh(self) -> int:
        """:meth:`refresh` when something watched changed: the fingerprint anew."""
        self._unchanged = None
        owner = None if self._owner is None else self._owner()
        if owner is None:
            return self.generation
        computed: Any = self._computed
        if computed is None or computed.problem is not owner:
            # a Problem (its attributes one counter); any other owner is watched whole
            versioned = isinstance(getattr(owner, "_definition_version", None), int)
            computed = self._computed = _Computed(owner) if versioned else None
        identity = self._identity
        fp = identity.current(owner if computed is None else computed)
        state_of = getattr(type(owner), "evaluation_state", None)
        state = None if state_of is None else state_of(owner)
        if fp is None or fp != self._built_for or state != self._built_state:
            self._items.clear()
            self._built_for, self._built_state = fp, state
            self.generation += 1
        watch = identity.watch
        if fp is not None and watch is not None:
            if state_of is not None:  # compared with the state seen now on the next calls
                watch.keep("value", state_of, owner)
            self._unchanged = watch.unchanged
        return self.generation

    @property
    def fingerprint(self) -> str | None:
        """The fingerprint of the owner's definition (less the exact references and check
        options, which no derivative reads) that what is in the cache was built for."""
        return self._built_for

    def __fingerprint__(self) -> None:
        """Nothing: what was built for a problem is not part of its definition."""
        return None

    def get(self, key: Hashable, build: Callable[[], T], *, refresh: bool = True) -> T:
        """The object stored under ``key``, built by ``build()`` on first use.

        Built anew after the owner's definition changed (:meth:`refresh`;
        ``refresh=False`` when the object checks at each use by itself, as a
        :class:`~simdiff.Derivatives` does).
        """
        if refresh:
            self.refresh()
        try:
            return self._items[key]
        except KeyError:
            value = self._items[key] = build()
            return value

    def clear(self) -> None:
        """Drop every built object (they are rebuilt, and recompiled, when next asked for)."""
        self._items.clear()

    def keys(self) -> list[Hashable]:
        """The keys in build order."""
        return list(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(list(self._items))

    def __repr__(self) -> str:
        return f"<DerivativeCache: {len(self)} entries>"


class RecentlyUsed(Generic[K, V]):
    """The values of the last ``size`` keys used, each built once while it is kept.

    For what is shared beyond one problem and must stay bounded (the
    term-sum problems of :mod:`simdiff.pes.terms`, the factors of a
    covariance, the operands of an operator): a call of :meth:`get` makes
    its key the most recent; the least recently used goes when there are
    more than ``size``.  An unhashable key raises ``TypeError`` before
    anything is built.

    Examples
    --------
    >>> kept = RecentlyUsed(2)
    >>> [kept.get(k, lambda: k * 10) for k in (1, 2, 1, 3)]
    [10, 20, 10, 30]
    >>> kept.keys()
    [1, 3]
    """

    def __fingerprint__(self) -> None:
        """Nothing: what is kept is built from a definition, it is not part of one."""
        return None

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: dict[K, V] = {}

    def get(self, key: K, build: Callable[[], V]) -> V:
        """The value kept under ``key``, built by ``build()`` if it is not kept."""
        value = self._items.pop(key, _MISSING)
        if value is _MISSING:
            value = build()
        self._items[key] = value  # most recently used last
        while len(self._items) > self.size:
            del self._items[next(iter(self._items))]
        return value

    def keys(self) -> list[K]:
        """The keys kept, least recently used first."""
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)
