"""The one derivative cache: owned by the problem, freed with it.

Each test builds many problems, runs them through every path that builds
(and compiles) derivatives — the API functions, ``simdiff.sweep`` and the PES
cubic force constants — drops them, and checks that memory returns: every
problem is garbage (weak references die) and the interpreter's allocated
blocks do not grow with the number of problems.  Measured on this machine
(400 problems after 100 warm-up ones, torch): 0.4 blocks
per problem without a leak, 131 per problem when one Derivatives per problem
is kept alive (as the sweep's former module-level worker cache did), so 1000
problems give ~400 against ~130,000 blocks.  The resident-set bound is coarse
(native memory of compiled functions; a Python-level leak moves it by only
~3 MB per 1000 problems) and guards against large native leaks only.
"""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import simdiff
from simdiff.core.cache import DerivativeCache
from simdiff.pes.derivatives import cubic_force_constants

POINTS = np.linspace(0.5, 1.5, 12).reshape(4, 3)


def _problem(i: int) -> simdiff.Problem:
    c = 1e-3 * i  # a different function each time (a closure over its own constant)
    return simdiff.Problem(lambda x, ops: ops.sum((x - c) ** 4) + x[0] * x[1], x0=np.ones(3))


def _use(p: simdiff.Problem, backend: str, cubic: bool) -> None:
    simdiff.grad(p, backend=backend)
    r = simdiff.sweep(p, POINTS, ("value", "grad"), chunk_size=4, backend=backend)
    assert r.ok.all()
    if cubic:
        cubic_force_constants(p, p.x0, np.eye(3)[:, :2], backend=backend, gtol=np.inf)


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        import os

        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _run(n: int, backend: str, cubic_every: int) -> list[weakref.ref]:
    refs = []
    for i in range(n):
        p = _problem(i)
        _use(p, backend, cubic=i % cubic_every == 0)
        refs.append(weakref.ref(p))
        del p
    return refs


def test_sweeping_1000_problems_returns_memory() -> None:
    _run(100, "torch", cubic_every=10)  # warm: imports, allocator pools, lru caches
    gc.collect()
    blocks0, rss0 = sys.getallocatedblocks(), _rss_mb()
    refs = _run(1000, "torch", cubic_every=10)
    gc.collect()
    blocks1, rss1 = sys.getallocatedblocks(), _rss_mb()
    alive = sum(r() is not None for r in refs)
    assert alive == 0, f"{alive} of 1000 problems are still referenced after gc"
    # clean: ~0.4 blocks per problem; one leaked Derivatives per problem: ~130
    assert blocks1 - blocks0 < 5000, (blocks0, blocks1)
    assert rss1 - rss0 < 64, f"resident set grew {rss1 - rss0:.1f} MB over 1000 problems"


def test_jax_compiled_functions_die_with_their_problem() -> None:
    refs, derivs = [], []
    for i in range(6):
        p = _problem(i)
        _use(p, "jax", cubic=True)
        refs.append(weakref.ref(p))
        derivs += [weakref.ref(v) for v in p.cache._items.values()]
        del p
    gc.collect()
    assert all(r() is None for r in refs)
    assert derivs and all(r() is None for r in derivs)


def test_the_problem_owns_what_is_built_for_it() -> None:
    p = _problem(0)
    assert isinstance(p.cache, DerivativeCache) and len(p.cache) == 0
    _use(p, "torch", cubic=True)
    keys = p.cache.keys()
    # one shared Derivatives for the API and the sweep (whose check_finite differs), and
    # the PES contraction: every built object of this problem is in its own cache
    assert ("pes.cubic_force_constants", "torch") in keys
    assert sum(k[0] == "derivatives" for k in keys) == 2
    d = simdiff.core.derivatives.cached_derivatives(p, "torch")
    assert d is simdiff.core.derivatives.cached_derivatives(p, "torch")
    before = d.compilations
    simdiff.grad(p, backend="torch")
    assert d.compilations == before  # reused, not rebuilt
    p.cache.clear()
    assert len(p.cache) == 0
    assert simdiff.core.derivatives.cached_derivatives(p, "torch") is not d


def test_cache_get_builds_once() -> None:
    cache = DerivativeCache()
    calls = []
    assert cache.get(("k", 1), lambda: calls.append(1) or "built") == "built"
    assert cache.get(("k", 1), lambda: calls.append(1) or "other") == "built"
    assert calls == [1] and ("k", 1) in cache and list(cache) == [("k", 1)]
    with pytest.raises(ZeroDivisionError):
        cache.get("bad", lambda: 1 / 0)
    assert "bad" not in cache  # a failed build leaves nothing behind
