r"""The Hessians of the terms of a sum, many small ones in one call of the backend.

The Hessian of a sum of ``m`` terms is assembled (:mod:`simdiff.pes.terms`)
from the ``m`` Hessians of one term, each ``(w, w)`` with ``w = k dim`` (or
``dim`` for a pair term written as a function of the displacement).  They are
computed as the backend computes many small Hessians best
(``Backend.term_hessians``): ``"batched"`` (JAX), the Hessian of one term at a
batch of points, one vmapped call; ``"hvp-sum"`` (torch), ``w``
Hessian-vector products of the sum of the terms over a batch of rows, whose
Hessian is block-diagonal with the term Hessians as blocks.  Cost: ``w``
HVPs of one term per term, ``O(m w)`` work in batches padded to
:func:`bucket_size`; see docs/performance.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from simdiff.backends import get_backend
from simdiff.core.cache import RecentlyUsed
from simdiff.core.config import Config
from simdiff.core.derivatives import cached_derivatives
from simdiff.core.problem import Problem

__all__ = ["DifferenceSum", "TermHessians", "TermSum", "bucket_size", "shared_problem", "tangents"]


class TermSum:
    """The sum of ``rows`` terms as a problem function of their ``rows * k * dim`` coordinates.

    The Hessian of this sum is block-diagonal: block ``t`` is the Hessian of
    term ``t`` alone (picklable).
    """

    def __init__(self, term: Callable[[Any, Any], Any], rows: int, k: int, dim: int) -> None:
        self.term, self.rows, self.k, self.dim = term, rows, k, dim
        self.__name__ = f"{getattr(term, '__name__', 'term')}_sum{rows}"

    def __call__(self, y: Any, ops: Any) -> Any:
        return ops.sum(self.term(ops.reshape(y, (self.rows, self.k, self.dim)), ops))


class DifferenceSum:
    """The sum of ``rows`` pair terms as a function of their displacements ``r_1 - r_0``.

    Block-diagonal Hessian, block ``t`` the ``dim x dim`` one of pair ``t`` (picklable).
    """

    def __init__(self, term: Any, rows: int, dim: int) -> None:
        self.term, self.rows, self.dim = term, rows, dim
        self.__name__ = f"{getattr(term, '__name__', 'term')}_of_difference_sum{rows}"

    def __call__(self, d: Any, ops: Any) -> Any:
        return ops.sum(self.term.of_difference(ops.reshape(d, (self.rows, self.dim)), ops))


#: Term-sum problems shared by every energy with an equal term function (their compiled
#: Hessian-vector products with them): rebuilding a problem at a new geometry, with a
#: term count in the same bucket (:func:`bucket_size`), does not recompile.
_SHARED_MAX = 64
_SHARED: RecentlyUsed[tuple[Any, ...], Problem] = RecentlyUsed(_SHARED_MAX)


def shared_problem(kind: str, term: Any, k: int, dim: int, rows: int) -> Problem:
    key = (kind, term, k, dim, rows)
    try:
        hash(key)
    except TypeError:  # an unhashable term: a problem of its own
        return _make_problem(kind, term, k, dim, rows)
    return _SHARED.get(key, lambda: _make_problem(kind, term, k, dim, rows))


def _make_problem(kind: str, term: Any, k: int, dim: int, rows: int) -> Problem:
    name = getattr(term, "__name__", "term")
    if kind == "difference":
        return Problem(DifferenceSum(term, rows, dim), np.ones(rows * dim), name=name)
    # a placeholder point of one term, generic (distinct atoms, not collinear: an angle or
    # a dihedral is defined there), for the problem's shape check
    y0 = np.random.default_rng(0).standard_normal((k, dim))
    return Problem(TermSum(term, rows, k, dim), np.tile(y0.reshape(-1), rows), name=name)


#: Unit tangents tiled over the rows, ``(w, rows * w)``, per ``(rows, w)`` (see ``tangents``).
_TANGENTS: RecentlyUsed[tuple[int, int], np.ndarray] = RecentlyUsed(_SHARED_MAX)


def tangents(rows: int, w: int) -> np.ndarray:
    """``w`` directions, direction ``j`` the unit vector ``e_j`` in every row (cached)."""

    def build() -> np.ndarray:
        v = np.zeros((w, rows, w))
        v[np.arange(w), :, np.arange(w)] = 1.0
        return v.reshape(w, rows * w)

    return _TANGENTS.get((rows, w), build)


def bucket_size(m: int) -> int:
    """The smallest size ``>= m`` of the form ``s * 2**e`` with ``s`` in 4..7 (at most 1.25x ``m``).

    Batches of term Hessians are padded to these sizes, so that a compiled
    vectorised call serves every number of terms in its bucket: a neighbour list
    whose length changes with the geometry does not recompile each time.

    Examples
    --------
    >>> [bucket_size(m) for m in (1, 5, 9, 100, 1000)]
    [4, 5, 10, 112, 1024]
    """
    if m <= 4:
        return 4
    e = max(int(m - 1).bit_length() - 3, 0)
    return -(-m // 2**e) * 2**e


class TermHessians:
    """The term-Hessian computations of one energy, and the record of those it ran.

    ``term(r, ops)`` of ``k`` atoms in ``dim`` dimensions.  The computations
    themselves are shared by every energy with an equal term (:func:`shared_problem`,
    the problem's derivative cache): one compilation serves them all.  Pickled
    without them.
    """

    def __init__(self, term: Callable[[Any, Any], Any], k: int, dim: int) -> None:
        self.term, self.k, self.dim = term, k, dim
        #: the Derivatives this energy used, by (backend, dtype, compile, rows): (d, x's shape)
        self.pieces: dict[tuple[str, str, str, int], tuple[Any, tuple[int, ...]]] = {}
        self.calls: dict[tuple[str, str, str, int], int] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the built derivatives of the term sums."""
        return {**self.__dict__, "pieces": {}, "calls": {}}

    def batches(
        self, kind: str, y: Any, config: Config, chunk: int
    ) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, hessians)`` of one term (``kind`` "term" or "difference") at the rows of ``y``.

        As the backend computes many small Hessians fastest
        (``Backend.term_hessians``): ``"batched"`` (JAX), one call of
        :meth:`simdiff.Derivatives.hessian` of one term at a batch of points;
        ``"hvp-sum"`` (torch), ``w`` Hessian-vector products of the sum of the
        terms over the rows, whose Hessian is block-diagonal with the term
        Hessians as blocks (direction ``j``: ``e_j`` in every row), one call of
        :meth:`simdiff.Derivatives.hvp`.  The rows are split into equal batches
        of at most ``chunk`` rows, each padded (with copies of its first row) to
        :func:`bucket_size`, so one compilation serves a range of term counts and
        memory stays bounded.  ``config`` (backend, dtype, and the caller's
        compile policy and expected calls, :class:`simdiff.Derivatives`) applies
        to these Hessians.
        """
        backend = str(config.backend)
        dtype = "float64" if config.dtype is None else config.dtype  # one cache entry for it
        total, w = y.shape
        batches = -(-total // chunk)  # equal batches, padded to a bucket: little padding
        size = min(bucket_size(-(-total // batches)), chunk)
        be = get_backend(backend)
        batched = be.term_hessians == "batched"  # else w HVPs of the sum of the terms
        problem = shared_problem(kind, self.term, self.k, self.dim, 1 if batched else size)
        # JAX always compiles: one cache entry, one trace
        compile = config.compile if be.optional_compiler else False
        d = cached_derivatives(problem, backend, dtype=dtype, check_finite=False, compile=compile)
        key = (backend, dtype, str(compile), size)
        self.pieces[key] = (d, (size, w) if batched else (size * w,))  # and its x's shape
        self.calls[key] = self.calls.get(key, 0) + 1
        expected = config.expected_calls
        d.expect_calls(None if expected is None else expected * batches)
        v = None if batched else tangents(size, w)
        for s in range(0, total, size):
            part = y[s : s + size]
            rows = part.shape[0]
            if rows < size:
                part = np.concatenate([part, np.repeat(part[:1], size - rows, 0)])
            if v is None:  # the Hessian of one term at a batch of points
                h = np.asarray(d.hessian(part))[:rows]
            else:
                hv = np.asarray(d.hvp(v, part.reshape(-1))).reshape(w, size, w)
                h = hv.transpose(1, 2, 0)[:rows]  # [t, i, j] = (H e_j)[t, i]
            yield s, 0.5 * (h + h.transpose(0, 2, 1))  # symmetric to the last bit

    def stacked(self, kind: str, y: Any, config: Config, chunk: int) -> np.ndarray:
        """Term Hessians at the rows of ``y``, ``(rows, w, w)`` (see :meth:`batches`)."""
        total, w = y.shape
        out = np.empty((total, w, w))
        for s, h in self.batches(kind, y, config, chunk):
            out[s : s + h.shape[0]] = h
        return out

    def cache_info(self, config: Config) -> list[dict[str, Any]]:
        """``cache_info()`` of the term-Hessian computations run with ``config``'s settings.

        One record per bucket of term counts; each says the path that ran
        (``"jit"``, ``"eager"``, ``"compiled"``) and, under the compile policy,
        why (see :meth:`simdiff.Derivatives.cache_info`).  ``calls`` counts this
        energy's calls, ``shared_calls`` those of every energy with an equal
        term (they share the computation, compiled once).
        """
        backend = str(config.backend)
        dtype = "float64" if config.dtype is None else config.dtype
        compile = config.compile if get_backend(backend).optional_compiler else False
        out = []
        for key, (d, shape) in self.pieces.items():
            if key[:3] == (backend, dtype, str(compile)):
                own = {"piece": f"term Hessians ({key[3]} rows)", "calls": self.calls[key]}
                out += [{**r, **own, "shared_calls": r["calls"]} for r in d.cache_info()
                        if tuple(r.get("shape", shape)) == shape]  # fmt: skip
        return out
