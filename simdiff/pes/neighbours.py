r"""A fixed-capacity neighbour list that follows the atoms inside compiled code.

:class:`NeighbourList` holds the rules (pair potential, periodic box, skin,
capacity multiplier); its state, :class:`Neighbours`, is a tuple of arrays
(a pytree: it passes through ``jax.jit``, ``jax.lax.scan`` and
``jax.lax.cond``) whose pair buffer has a fixed number of rows, the
*capacity*.  The pattern is that of jax-md's ``neighbor_list``:

1. on the host, :meth:`NeighbourList.allocate` counts the pairs closer than
   ``r_cut + skin`` (a k-d tree) and sizes the buffer to
   ``ceil(capacity_multiplier * count)``;
2. inside the compiled step, :meth:`NeighbourList.update` rebuilds the list
   when an atom has moved more than ``skin / 2`` from where it was last built,
   into the same buffer: the shapes never change, so a rebuild never
   recompiles.  A rebuild that finds more pairs than the capacity sets the
   ``overflow`` flag and records how many it needed;
3. back on the host, :meth:`NeighbourList.advance` sees the flag, re-allocates
   with a capacity for the number needed (one new shape: one recompile) and
   runs the chunk again from where it started.

Written once over ``ops``, so the same list, with the same overflow
semantics, runs on JAX (compiled) and on PyTorch (eagerly, where a larger
buffer costs no recompile but the flag means the same).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from simdiff._log import get_logger
from simdiff.backends import get_ops
from simdiff.errors import InputError, NeighbourListError
from simdiff.pes.cluster import PairTerm
from simdiff.pes.geometry import Cell, check_box, check_positions, image_displacement, pair_index
from simdiff.pes.potentials import PairPotential

__all__ = ["NeighbourList", "Neighbours"]

_log = get_logger(__name__)


class Neighbours(NamedTuple):
    """The state of a fixed-capacity neighbour list (a pytree of arrays).

    Attributes
    ----------
    pairs : int array, shape (capacity, 2)
        Atom pairs ``(i, j)``, ``i < j``, closer than ``r_cut + skin`` at
        :attr:`reference`; rows from :attr:`count` on are padding ``(0, 0)``.
    reference : float array, shape (N, dim)
        Positions at which the list was last built.
    count : int array, shape ()
        Pairs found at the last build; more than the capacity after an overflow
        (then the number a re-allocation needs).
    overflow : bool array, shape ()
        Whether a build found more pairs than the capacity.  Sticky: once set,
        the list is not rebuilt again, :attr:`count` keeps the number needed
        and energies are NaN, until :meth:`NeighbourList.reallocate`.
    rebuilds : int array, shape ()
        Rebuilds by :meth:`NeighbourList.update` since allocation.
    """

    pairs: Any
    reference: Any
    count: Any
    overflow: Any
    rebuilds: Any

    @property
    def capacity(self) -> int:
        """Rows of the pair buffer (static: part of the compiled shapes)."""
        return int(self.pairs.shape[0])


class NeighbourList:
    r"""Rules of a fixed-capacity Verlet list for a pair potential with a cutoff.

    Parameters
    ----------
    pair : callable
        ``pair(r, ops)`` with an ``r_cut`` attribute
        (:func:`~simdiff.pes.smooth_cutoff`).
    box : float, array_like of shape (3,) or (3, 3), or Cell, optional
        Periodic box as for :func:`~simdiff.pes.cluster_problem` (minimum
        image; ``r_cut`` at most half the shortest periodic height).
    skin : float, optional
        The list holds pairs closer than ``r_cut + skin`` and is rebuilt when
        an atom has moved more than ``skin / 2`` (default ``0.1 * r_cut``).
    capacity_multiplier : float
        Buffer rows per pair counted at allocation (``>= 1``; default 1.25):
        head-room for pairs that come within reach between re-allocations.
    backend : {"jax", "torch"}
        The array type of the state :meth:`allocate` returns and the default
        ``ops`` of :meth:`update` and :meth:`energy`.
    dim : int
        Spatial dimension (default 3).

    Notes
    -----
    *Exactness.*  The switched potential and its first two derivatives vanish
    beyond ``r_cut``.  A pair left out of the list was at least
    ``r_cut + skin`` apart when it was built; while no atom has moved more
    than ``skin / 2`` since (a straight-line, minimum-image distance), it is
    at least ``r_cut`` apart, so energy, forces and Hessian equal those of all
    pairs.  :meth:`energy` checks this at every call: at a point beyond the
    skin of its list, or with an overflowed list, it is NaN (a factor on the
    energy, so every derivative is NaN too), never a silently wrong number.

    *Cost.*  A rebuild inside compiled code tests all ``N (N - 1) / 2``
    candidate pairs (memory and time ``O(N^2)``, only on the steps that
    rebuild: the rebuild is the taken branch of a ``cond``) and packs the
    pairs found into the buffer by a binary search over their running count
    (``O(capacity log N)``).  The energy gathers ``capacity`` pairs.

    Examples
    --------
    >>> import jax, numpy as np, simdiff
    >>> from simdiff.pes import lennard_jones, smooth_cutoff
    >>> pair = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.5)
    >>> x = np.array([[0.0, 0, 0], [1.12, 0, 0], [0, 1.12, 0], [6.0, 0, 0]]).ravel()
    >>> nl = NeighbourList(pair, skin=0.3)
    >>> nbrs = nl.allocate(x)
    >>> nbrs.capacity, int(nbrs.count)
    (4, 3)
    >>> step = jax.jit(lambda x, nbrs: nl.update(x, nbrs))
    >>> nbrs = step(x + 0.5, nbrs)          # everyone moved by 0.87 > skin / 2: rebuilt
    >>> int(nbrs.rebuilds), bool(nbrs.overflow)
    (1, False)
    >>> round(float(nl.energy(x + 0.5, nbrs)), 6)
    -2.236922
    """

    def __init__(
        self,
        pair: PairPotential,
        *,
        box: Any = None,
        skin: float | None = None,
        capacity_multiplier: float = 1.25,
        backend: str = "jax",
        dim: int = 3,
    ) -> None:
        r_cut = getattr(pair, "r_cut", None)
        if r_cut is None:
            raise InputError(
                "a neighbour list needs a pair potential with a cutoff (an r_cut attribute); "
                f"got {pair!r} (wrap it with simdiff.pes.smooth_cutoff)"
            )
        skin = 0.1 * float(r_cut) if skin is None else float(skin)
        if not skin >= 0.0:
            raise InputError(f"skin must be a non-negative length; got {skin}")
        if not capacity_multiplier >= 1.0:
            raise InputError(f"capacity_multiplier must be at least 1; got {capacity_multiplier}")
        self.pair = pair
        self.dim = int(dim)
        self.box: np.ndarray | Cell | None = check_box(box, self.dim, pair)
        self.r_cut = float(r_cut)
        self.skin = skin
        self.radius = self.r_cut + skin
        self.capacity_multiplier = float(capacity_multiplier)
        self.backend = backend
        self.term = PairTerm(pair, self.box)
        #: Re-allocations by :meth:`reallocate` (each a new capacity: one recompile under jit).
        self.reallocations = 0
        self._candidates: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    # ------------------------------------------------------------------ host side
    def allocate(self, x: Any, *, capacity: int | None = None) -> Neighbours:
        """A list built at ``x`` (shape ``(N * dim,)`` or ``(N, dim)``), on the host.

        The capacity is ``ceil(capacity_multiplier * count)`` for the ``count``
        pairs within ``r_cut + skin`` (at least 1, at most ``N (N - 1) / 2``),
        or ``capacity`` if given (at least ``count``).
        """
        a = np.asarray(x, dtype=np.float64)
        n = a.size // self.dim
        pos = check_positions(a, n, self.dim, self.box)
        pairs = pair_index(pos, self.radius, self.box)
        count = pairs.shape[0]
        most = max(1, n * (n - 1) // 2)
        if capacity is None:
            capacity = math.ceil(self.capacity_multiplier * count)
        elif capacity < count:
            raise InputError(f"capacity {capacity} is below the {count} pairs within reach")
        capacity = min(max(1, int(capacity)), most)
        buffer = np.zeros((capacity, 2), dtype=np.int64)
        buffer[:count] = pairs
        ops = get_ops(self.backend)
        return Neighbours(ops.asarray(buffer), ops.asarray(pos), ops.asarray(np.int64(count)),
                          ops.asarray(np.bool_(False)), ops.asarray(np.int64(0)))  # fmt: skip

    def overflowed(self, nbrs: Neighbours) -> bool:
        """Whether ``nbrs`` overflowed (a concrete, host-side read of the flag)."""
        return bool(np.asarray(nbrs.overflow))

    def reallocate(self, x: Any, nbrs: Neighbours) -> Neighbours:
        """A new list at ``x`` whose capacity holds the pairs an overflowed ``nbrs`` needed.

        Capacity ``ceil(capacity_multiplier * max(needed, count at x))``:
        rerun from the same point, the build that overflowed now fits.  Logged
        at ``INFO`` on the ``"simdiff.pes.neighbours"`` logger (pairs needed,
        old and new capacity); :attr:`reallocations` counts them.
        """
        needed = int(np.asarray(nbrs.count))
        a = np.asarray(x, dtype=np.float64)
        here = pair_index(a.reshape(-1, self.dim), self.radius, self.box).shape[0]
        self.reallocations += 1
        capacity = math.ceil(self.capacity_multiplier * max(needed, here))
        _log.info("neighbour list overflowed (%d pairs needed, capacity %d): re-allocated with "
                  "capacity %d", needed, nbrs.capacity, capacity)  # fmt: skip
        return self.allocate(a, capacity=capacity)

    def advance(
        self,
        chunk: Callable[[Any, Neighbours], tuple[Any, Neighbours]],
        carry: Any,
        nbrs: Neighbours,
        *,
        positions: Callable[[Any], Any] = lambda carry: carry[0],
        max_reallocations: int = 4,
    ) -> tuple[Any, Neighbours]:
        """``chunk(carry, nbrs)``, re-allocated and run again from ``carry`` while it overflows.

        Parameters
        ----------
        chunk : callable
            ``(carry, nbrs) -> (carry, nbrs)``, typically a ``jax.jit`` of a
            ``lax.scan`` of steps that call :meth:`update`.
        carry : pytree
            The chunk's state (positions, velocities, ...).
        nbrs : Neighbours
        positions : callable
            ``carry -> x`` (default ``carry[0]``): where to re-allocate.
        max_reallocations : int
            Attempts before :class:`~simdiff.errors.NeighbourListError`.

        Returns
        -------
        (carry, nbrs)
            After the chunk, from a run whose list never overflowed.
        """
        for _ in range(max_reallocations + 1):
            new_carry, new_nbrs = chunk(carry, nbrs)
            if not self.overflowed(new_nbrs):
                return new_carry, new_nbrs
            nbrs = self.reallocate(positions(carry), new_nbrs)
        raise NeighbourListError(
            f"the neighbour list still overflowed after {max_reallocations} re-allocations "
            f"(capacity {nbrs.capacity}); raise capacity_multiplier"
        )

    # ------------------------------------------------------------------ traced side
    def _candidate_pairs(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if n not in self._candidates:
            i, j = np.triu_indices(n, k=1)
            self._candidates[n] = (i.astype(np.int64), j.astype(np.int64))
        return self._candidates[n]

    def _ops(self, ops: Any) -> Any:
        return get_ops(self.backend) if ops is None else ops

    def _shift2(self, pos: Any, reference: Any, ops: Any) -> Any:
        """Squared (minimum-image) displacement of the atom farthest from ``reference``."""
        moved = pos - ops.stop_gradient(reference)
        if self.box is not None:
            moved = image_displacement(moved, self.box, ops)
        return ops.max(ops.sum(moved * moved, axis=-1))

    def update(self, x: Any, nbrs: Neighbours, ops: Any = None) -> Neighbours:
        """``nbrs``, rebuilt at ``x`` if an atom has moved more than ``skin / 2`` since its build.

        Traceable (``jax.jit``, ``lax.scan``): the rebuild is a ``cond`` into the
        same buffer.  An overflowed list is left as it is (see :class:`Neighbours`).
        """
        ops = self._ops(ops)
        pos = ops.stop_gradient(ops.reshape(x, (-1, self.dim)))
        stale = self._shift2(pos, nbrs.reference, ops) > (0.5 * self.skin) ** 2
        return ops.cond(stale & ~nbrs.overflow, lambda: self._build(pos, nbrs, ops), lambda: nbrs)

    def _build(self, pos: Any, nbrs: Neighbours, ops: Any) -> Neighbours:
        n = int(pos.shape[0])
        ci, cj = self._candidate_pairs(n)
        c = ci.size
        first, second = ops.asarray(ci), ops.asarray(cj)
        d = ops.take(pos, second, axis=0) - ops.take(pos, first, axis=0)
        if self.box is not None:
            d = image_displacement(d, self.box, ops)
        within = ops.sum(d * d, axis=-1) < self.radius**2
        ones, zeros = ops.asarray(np.ones(c, np.int64)), ops.asarray(np.zeros(c, np.int64))
        running = ops.cumsum(ops.where(within, ones, zeros))  # pairs found up to each candidate
        count = running[-1]
        # slot k holds the candidate where the running count first reaches k + 1: a binary
        # search (lo, hi] over the candidates, the same number of halvings for every slot
        cap = nbrs.capacity
        target = ops.asarray(np.arange(1, cap + 1, dtype=np.int64))
        lo = ops.asarray(np.zeros(cap, np.int64))
        hi = ops.asarray(np.full(cap, c - 1, np.int64))
        for _ in range(max(1, math.ceil(math.log2(max(c, 2))))):
            mid = (lo + hi) // 2
            below = ops.take(running, mid) < target
            lo = ops.where(below, mid + 1, lo)
            hi = ops.where(below, hi, mid)
        found = target <= count
        slot = ops.where(found, lo, ops.asarray(np.zeros(cap, np.int64)))
        pairs = ops.stack([ops.take(first, slot), ops.take(second, slot)], axis=-1)
        pairs = ops.where(found[:, None], pairs, ops.asarray(np.zeros((cap, 2), np.int64)))
        overflow = nbrs.overflow | (count > cap)
        return Neighbours(pairs, pos, count, overflow, nbrs.rebuilds + 1)

    def energy(self, x: Any, nbrs: Neighbours, ops: Any = None) -> Any:
        """Pair energy of flat ``x`` from the list; NaN if the list does not hold at ``x``.

        Differentiable in ``x`` to any order (the list is a constant of the
        evaluation); forces ``-jax.grad``, Hessians ``jax.hessian`` or
        ``simdiff.jax.hessian`` of ``lambda x: nl.energy(x, nbrs)``.
        """
        ops = self._ops(ops)
        pos = ops.reshape(x, (-1, self.dim))
        cap = nbrs.capacity
        valid = ops.asarray(np.arange(cap, dtype=np.int64)) < nbrs.count
        d = ops.take(pos, nbrs.pairs[:, 1], axis=0) - ops.take(pos, nbrs.pairs[:, 0], axis=0)
        # double where: padding rows (atom 0 with itself, d = 0) get a displacement beyond the
        # cutoff before the potential, where it and all its derivatives are exactly 0
        far = np.zeros(self.dim)
        far[0] = 2.0 * self.radius
        d = ops.where(valid[:, None], d, ops.asarray(far))
        e = ops.sum(ops.where(valid, self.term.of_difference(d, ops), 0.0))
        holds = (self._shift2(pos, nbrs.reference, ops) <= (0.5 * self.skin) ** 2) & ~nbrs.overflow
        # a factor (1 or NaN), so every derivative order is NaN where the list does not hold
        return e * ops.where(holds, 1.0, float("nan"))

    def __repr__(self) -> str:
        return (
            f"NeighbourList({self.pair!r}, box={self.box}, skin={self.skin}, "
            f"capacity_multiplier={self.capacity_multiplier}, backend={self.backend!r})"
        )
