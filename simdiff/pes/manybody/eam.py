r"""The embedded-atom method: analytic or tabulated (funcfl, setfl), as a site potential.

.. math::

    E = \sum_i F_{s_i}(\rho_i) + \tfrac12 \sum_i \sum_{j \ne i} \phi_{s_i s_j}(r_{ij}),
    \qquad \rho_i = \sum_{j \ne i} f_{s_j}(r_{ij}),

over the neighbours within the cutoff (``s_i`` the element of atom ``i``).
Atom ``i``'s site energy is :math:`F(\rho_i) + \frac12 \sum_j \phi(r_{ij})`
(:mod:`simdiff.pes.manybody.sites`), its per-atom energy in ASE.

Tabulated functions are :class:`~simdiff.pes.manybody.UniformSpline`\ s of
the file's samples (the interpolant of ASE's EAM calculator); a point where a
distance within the cutoff or a density falls outside the tables raises
:class:`~simdiff.errors.InputError` naming the atoms and the file, and is NaN
in a traced evaluation: never an extrapolated value.

*Hessian structure* (:func:`eam_hessian`).  With
:math:`n = d / r` and :math:`u_{ik}(r) = \frac12 \phi(r) + F'(\rho_i) f(r)`,

.. math::

    H = \sum_{i,k} A_{ik}^T \bigl(u'' n n^T + \tfrac{u'}{r}(I - n n^T)\bigr) A_{ik}
        + \sum_i F''(\rho_i)\, g_i g_i^T,
    \qquad g_i = \partial \rho_i / \partial R,

one ``3 x 3`` block per neighbour pair plus one rank-one term per atom, dense
over the atom and its neighbours.  :class:`EAMHessian` keeps the factors:
``O(N K)`` memory and time, products with vectors in ``O(N K)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

from simdiff.backends import Ops, get_ops
from simdiff.core.derivatives import cached_derivatives
from simdiff.core.problem import Problem
from simdiff.errors import InputError
from simdiff.pes.manybody.sites import SiteEvaluator
from simdiff.pes.manybody.spline import SplineSet, UniformSpline
from simdiff.pes.manybody.table import SiteTable
from simdiff.pes.manybody.tabulated import EAMTables, read_eam

__all__ = ["EAM", "EAMHessian", "eam", "eam_hessian"]

Radial = Callable[[Any, Any], Any]


class EAM:
    """An embedded-atom potential: a site potential (see the module docstring).

    Parameters
    ----------
    embedding : sequence of callables, one per element
        ``F_a(rho, ops)``.
    density : sequence of callables, one per element
        ``f_a(r, ops)``: the density an atom of element ``a`` contributes.
    pair : sequence of sequences of callables, ``(S, S)``, symmetric
        ``phi_ab(r, ops)``.
    cutoff : float
        Neighbours farther apart do not interact (analytic functions must go
        to zero there with their first two derivatives for exact Hessians).
    elements : tuple of str, optional
        Element names (``None``: one element, every atom alike).
    source : str
        Where the potential came from, for error messages.
    r_range, rho_range : (float, float), optional
        Tabulated ranges of the distance (within the cutoff) and the density;
        points outside raise (see :meth:`check`).
    """

    def __init__(
        self,
        embedding: Sequence[Radial],
        density: Sequence[Radial],
        pair: Sequence[Sequence[Radial]],
        *,
        cutoff: float,
        elements: tuple[str, ...] | None = None,
        source: str = "analytic EAM",
        r_range: tuple[float, float] | None = None,
        rho_range: tuple[float, float] | None = None,
    ) -> None:
        s = len(embedding)
        if len(density) != s or len(pair) != s or any(len(row) != s for row in pair):
            raise InputError(f"{source}: expected {s} embedding and density functions and "
                             f"{s} x {s} pair functions")  # fmt: skip
        if elements is not None and len(elements) != s:
            raise InputError(f"{source}: {len(elements)} element names for {s} elements")
        if not cutoff > 0.0:
            raise InputError(f"{source}: the cutoff must be positive; got {cutoff}")
        self.embedding = tuple(embedding)
        self.density = tuple(density)
        self.pair = tuple(tuple(row) for row in pair)
        self.cutoff = float(cutoff)
        self.elements = None if elements is None else tuple(elements)
        self.source = source
        self.r_range = r_range
        self.rho_range = rho_range
        self.masses: np.ndarray | None = None
        self._radial: dict[tuple[int, int], Problem] = {}
        # tabulated on shared grids: one interval search for all functions of r, one for rho
        self.r_set: SplineSet | None = None
        self.rho_set: SplineSet | None = None
        functions = [*self.density, *(f for row in self.pair for f in row)]
        if all(isinstance(f, UniformSpline) for f in functions + list(self.embedding)):
            self.r_set = SplineSet(functions)
            self.rho_set = SplineSet(self.embedding)

    @property
    def species(self) -> int:
        """Number of elements."""
        return len(self.embedding)

    def _safe_r(self) -> float:
        lo = 0.0 if self.r_range is None else self.r_range[0]
        return 0.5 * (lo + self.cutoff)

    def site_energies(self, d: Any, ops: Ops, centre: Any, neighbours: Any) -> Any:
        """:math:`F(\\rho_i) + \\frac12 \\sum_k \\phi(r_{ik})` of rows ``d`` ``(B, K, 3)``.

        Notes
        -----
        "Double where": slots beyond the cutoff (padding among them) enter
        the functions at a distance inside the tables and are masked after,
        so no derivative sees a value from outside the tables.  Inside the
        cutoff, a distance or density outside the tabulated range makes the
        energy NaN (:meth:`check` names the atom on the host).
        """
        rc = self.cutoff
        r2 = ops.sum(d * d, axis=-1)
        inside = r2 < rc * rc
        r = ops.sqrt(ops.where(inside, r2, self._safe_r() ** 2))
        s = self.species
        if self.r_set is not None:
            values = self.r_set(r, ops)  # f_b, then phi_ab row by row
            dens = [values[b] for b in range(s)]
            pairs = [[values[s + a * s + b] for b in range(s)] for a in range(s)]
        else:
            dens = [self.density[b](r, ops) for b in range(s)]
            pairs = [[self.pair[a][b](r, ops) for b in range(s)] for a in range(s)]
        rho = 0.0
        pair = 0.0
        for b in range(s):
            wb = neighbours[..., b] if s > 1 else 1.0
            rho = rho + ops.sum(ops.where(inside, wb * dens[b], 0.0), axis=-1)
            for a in range(s):
                w = centre[:, None, a] * wb if s > 1 else 1.0
                pair = pair + ops.sum(ops.where(inside, w * pairs[a][b], 0.0), axis=-1)
        if self.rho_set is not None:
            emb = self.rho_set(rho, ops)
            embs = [emb[a] for a in range(s)]
        else:
            embs = [self.embedding[a](rho, ops) for a in range(s)]
        embedded = embs[0] if s == 1 else 0.0
        if s > 1:
            for a in range(s):
                embedded = embedded + centre[:, a] * embs[a]
        energy = embedded + 0.5 * pair
        bad = None
        if self.rho_range is not None:
            bad = (rho < self.rho_range[0]) | (rho > self.rho_range[1])
        if self.r_range is not None:
            far = inside & ((r < self.r_range[0]) | (r > self.r_range[1]))
            near = ops.max(ops.where(far, 1.0, 0.0), axis=-1) > 0.5
            bad = near if bad is None else bad | near
        if bad is not None:  # outside the tables: NaN, never an extrapolated value
            energy = energy * ops.where(bad, float("nan"), 1.0)
        return energy

    # ------------------------------------------------------------------ host side
    def check(self, d: np.ndarray, valid: np.ndarray, codes: np.ndarray, table: SiteTable) -> None:
        """Raise :class:`~simdiff.errors.InputError` where the energy leaves the tables.

        Names the pair of atoms at a distance within the cutoff outside the
        tabulated distances (or coincident), or the atom whose density is
        outside the tabulated densities, and the file.
        """
        r = np.sqrt(np.einsum("ikx,ikx->ik", d, d))
        inside = valid & (r < self.cutoff)
        lo, hi = (0.0, np.inf) if self.r_range is None else self.r_range
        out = inside & ((r < lo) | (r > hi) | (r == 0.0))
        if out.any():
            i, k = (int(v) for v in np.argwhere(out)[0])
            raise InputError(
                f"atoms {i} and {int(table.index[i, k])} are {r[i, k]:.6g} apart, outside the "
                f"distances [{lo:.6g}, {hi:.6g}] tabulated in {self.source} (cutoff "
                f"{self.cutoff:.6g}): the potential is not defined there"
            )
        if self.rho_range is None:
            return
        rho = self.densities(r, inside, codes, table)
        lo, hi = self.rho_range
        bad = np.flatnonzero((rho < lo) | (rho > hi))
        if bad.size:
            i = int(bad[0])
            raise InputError(
                f"atom {i} has the electron density {rho[i]:.6g}, outside the densities "
                f"[{lo:.6g}, {hi:.6g}] tabulated in {self.source}: the embedding energy is not "
                "defined there"
            )

    def hessian(
        self,
        positions: np.ndarray,
        cell: np.ndarray,
        pbc: np.ndarray,
        symbols: Any = None,
        *,
        sparse: bool = False,
        evaluator: SiteEvaluator | None = None,
    ) -> Any:
        """The exact Hessian ``(3N, 3N)`` (CSR with ``sparse``) from :func:`eam_hessian`."""
        h = eam_hessian(self, positions, cell, pbc, symbols, evaluator=evaluator)
        return h.sparse() if sparse else h.toarray()

    def densities(self, r: np.ndarray, inside: np.ndarray, codes: np.ndarray,
                  table: SiteTable) -> np.ndarray:  # fmt: skip
        """:math:`\\rho_i` of each atom (numpy) from the distances ``r`` ``(N, K)``."""
        rho = np.zeros(r.shape[0])
        kinds = codes[table.index]
        for b in range(self.species):
            use = inside & (kinds == b)
            rho += np.where(use, self.radial(self.density[b], np.where(use, r, self._safe_r()))[0],
                            0.0).sum(axis=1)  # fmt: skip
        return rho

    def radial(self, fn: Radial, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Value, first and second derivative of ``fn`` at ``x`` (numpy, any shape).

        A spline gives them from its cubics; an analytic function by AD
        (a gradient and one Hessian-vector product of the sum over ``x``, whose
        Hessian is diagonal), on JAX.
        """
        if isinstance(fn, UniformSpline):
            return fn.derivatives(x)
        flat = np.asarray(x, dtype=np.float64).reshape(-1)
        key = (id(fn), flat.size)
        if key not in self._radial:
            self._radial[key] = Problem(_Summed(fn), flat.copy(), name="eam_radial")
        der = cached_derivatives(self._radial[key], "jax")
        value, first = der.value_and_grad(flat)
        del value
        second = np.asarray(der.hvp(np.ones_like(flat), flat))
        values = np.asarray(fn(flat, get_ops("numpy")))
        shape = np.shape(x)
        return values.reshape(shape), np.asarray(first).reshape(shape), second.reshape(shape)

    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the potential: its functions, cutoff, elements and tabulated ranges."""
        return {"embedding": self.embedding, "density": self.density, "pair": self.pair,
                "cutoff": self.cutoff, "elements": self.elements, "r_range": self.r_range,
                "rho_range": self.rho_range}  # fmt: skip

    def __repr__(self) -> str:
        names = "one element" if self.elements is None else ", ".join(self.elements)
        return f"EAM({self.source!r}: {names}, cutoff {self.cutoff:.6g})"


class _Summed:
    """``sum(fn(x))``: its gradient is ``fn'`` and its Hessian ``diag(fn'')``."""

    def __init__(self, fn: Radial) -> None:
        self.fn = fn
        self.__name__ = f"sum_{getattr(fn, '__name__', 'radial')}"

    def __call__(self, x: Any, ops: Any) -> Any:
        return ops.sum(self.fn(x, ops))


def eam(
    path: str | Path | EAMTables | None = None,
    *,
    form: str | None = None,
    embedding: Radial | None = None,
    density: Radial | None = None,
    pair: Radial | None = None,
    cutoff: float | None = None,
) -> EAM:
    """An EAM potential from a funcfl/setfl file (or tables), or from analytic functions.

    Parameters
    ----------
    path : str, Path or EAMTables, optional
        A DYNAMO file (``.eam``: funcfl, ``.alloy``: setfl; ``form`` overrides)
        or tables from :func:`~simdiff.pes.manybody.read_eam` /
        :func:`~simdiff.pes.manybody.tabulate_eam`.  Interpolated as ASE
        interpolates them (:class:`~simdiff.pes.manybody.UniformSpline`).
    embedding, density, pair : callables, optional
        Instead of a file, one element: ``F(rho, ops)``, ``f(r, ops)``,
        ``phi(r, ops)``, written against ``ops`` like any problem.
    cutoff : float, optional
        With analytic functions: the interaction range.

    Examples
    --------
    >>> import numpy as np
    >>> pot = eam(embedding=lambda rho, ops: -ops.sqrt(rho),
    ...           density=lambda r, ops: ops.exp(-r), pair=lambda r, ops: ops.exp(-2 * r),
    ...           cutoff=6.0)
    >>> pot
    EAM('analytic EAM': one element, cutoff 6)
    """
    if path is None:
        if embedding is None or density is None or pair is None or cutoff is None:
            raise InputError("eam() needs a file (path) or all of embedding=, density=, pair= "
                             "and cutoff=")  # fmt: skip
        return EAM([embedding], [density], [[pair]], cutoff=float(cutoff))
    tables = path if isinstance(path, EAMTables) else read_eam(path, form=form)
    return from_tables(tables)


def from_tables(tables: EAMTables) -> EAM:
    """The EAM potential of tabulated functions, interpolated by not-a-knot cubic splines.

    The pair function is the spline of :math:`r\\phi(r) / r` from the second grid
    point on (as ASE: the first is 0 by the ``r * phi`` format), so the
    distances tabulated are ``[dr, (nr - 1) dr]``; the densities ``[0, (nrho - 1) drho]``.
    """
    s = len(tables.elements)
    src = tables.source
    r = tables.dr * np.arange(tables.nr)
    names = tables.elements
    emb = [UniformSpline(0.0, tables.drho, tables.embedding[a], name=f"{src}: F(rho) of {e}")
           for a, e in enumerate(names)]  # fmt: skip
    dens = [UniformSpline(0.0, tables.dr, tables.density[a], name=f"{src}: f(r) of {e}")
            for a, e in enumerate(names)]  # fmt: skip
    pair = [[UniformSpline(tables.dr, tables.dr, tables.rphi[a, b, 1:] / r[1:],
                           name=f"{src}: phi(r) of {names[a]}-{names[b]}")
             for b in range(s)] for a in range(s)]  # fmt: skip
    pot = EAM(emb, dens, pair, cutoff=tables.cutoff, elements=tables.elements, source=src,
              r_range=(tables.dr, r[-1]),
              rho_range=(0.0, tables.drho * (tables.nrho - 1)))  # fmt: skip
    pot.masses = tables.masses
    return pot


@dataclass(frozen=True)
class EAMHessian:
    """The exact EAM Hessian in factored form (see the module docstring): ``O(N K)`` memory.

    Attributes
    ----------
    index : int ndarray, shape (N, K)
        Neighbour of each slot (the atom itself in an unused slot).
    blocks : ndarray, shape (N, K, 3, 3)
        :math:`u'' n n^T + (u'/r)(I - n n^T)` per slot (zero where unused).
    vectors : ndarray, shape (N, K, 3)
        :math:`f'(r) n`: the slot's part of :math:`g_i` (zero where unused).
    curvature : ndarray, shape (N,)
        :math:`F''(\\rho_i)`.
    """

    index: np.ndarray
    blocks: np.ndarray
    vectors: np.ndarray
    curvature: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        """``(3N, 3N)``."""
        n = 3 * self.index.shape[0]
        return (n, n)

    def matvec(self, v: Any) -> np.ndarray:
        """``H v`` for ``v`` of shape ``(3N,)``, in ``O(N K)``."""
        n = self.index.shape[0]
        x = np.asarray(v, dtype=np.float64).reshape(n, 3)
        dx = x[self.index] - x[:, None, :]  # (N, K, 3): the change of each displacement
        y = np.einsum("ikab,ikb->ika", self.blocks, dx)
        y = y + (self.curvature * np.einsum("ika,ika->i", self.vectors, dx))[:, None, None] * (
            self.vectors
        )
        out = np.zeros((n, 3))
        out -= y.sum(axis=1)
        for a in range(3):
            out[:, a] += np.bincount(self.index.reshape(-1), y[..., a].reshape(-1), n)
        return out.reshape(-1)

    def sparse(self) -> scipy.sparse.csr_array:
        """The Hessian as a ``scipy.sparse`` CSR array (``N (3K + 3)^2`` entries before summing)."""
        n, k = self.index.shape
        h = np.zeros((n, k + 1, 3, k + 1, 3))
        blocks = self.blocks
        # pair part, per slot [[B, -B], [-B, B]] on (i, j_k)
        idx = np.arange(k)
        h[:, 1 + idx, :, 1 + idx, :] += blocks.transpose(1, 0, 2, 3)
        h[:, 0, :, 1:, :] -= blocks.transpose(0, 2, 1, 3)
        h[:, 1:, :, 0, :] -= blocks
        h[:, 0, :, 0, :] += blocks.sum(axis=1)
        # rank-one part: g_i on atoms [i, j_1..j_K]
        g = np.concatenate([-self.vectors.sum(axis=1, keepdims=True), self.vectors], axis=1)
        h += self.curvature[:, None, None, None, None] * np.einsum("ipa,iqb->ipaqb", g, g)
        atoms = np.concatenate([np.arange(n)[:, None], self.index], axis=1)
        comp = (3 * atoms[:, :, None] + np.arange(3)).reshape(n, -1)
        rows = np.broadcast_to(comp[:, :, None], (n, comp.shape[1], comp.shape[1]))
        cols = np.broadcast_to(comp[:, None, :], rows.shape)
        out = scipy.sparse.coo_array((h.reshape(-1), (rows.reshape(-1), cols.reshape(-1))),
                                     shape=self.shape).tocsr()  # fmt: skip
        return (0.5 * (out + out.T)).tocsr()

    def toarray(self) -> np.ndarray:
        """The dense ``(3N, 3N)`` Hessian."""
        return self.sparse().toarray()


def eam_hessian(
    potential: EAM,
    positions: Any,
    cell: Any = None,
    pbc: Any = None,
    symbols: Any = None,
    *,
    evaluator: SiteEvaluator | None = None,
) -> EAMHessian:
    """The exact Hessian of an EAM energy, factored by the embedding's rank structure.

    Parameters
    ----------
    potential : EAM
    positions : array_like, shape (N, 3)
    cell : array_like, shape (3, 3), optional
    pbc : array_like of 3 bool, optional
        Default: periodic in all directions with a cell, none without.
    symbols : sequence of str, optional
    evaluator : SiteEvaluator, optional
        Whose neighbour table to use (and keep up to date); default a new one
        with no skin.

    Returns
    -------
    EAMHessian
        ``.matvec``, ``.sparse()``, ``.toarray()``.

    Notes
    -----
    Cost: one pass over the ``N K`` neighbour slots (three radial functions
    and their first two derivatives: the cubics of a spline, or AD of an
    analytic function), no Hessian-vector product and no dense block.
    """
    pos = np.asarray(positions, dtype=np.float64)
    c = np.zeros((3, 3)) if cell is None else np.asarray(cell, dtype=np.float64)
    p = np.asarray(pbc if pbc is not None else [cell is not None] * 3, dtype=bool)
    ev = SiteEvaluator(potential, skin=0.0) if evaluator is None else evaluator
    ev.update(pos, c, p, symbols)
    table = ev.table
    assert table is not None
    d = table.displacements(pos, ev.matrix)
    potential.check(d, table.valid, ev.codes, table)
    r = np.sqrt(np.einsum("ikx,ikx->ik", d, d))
    inside = table.valid & (r < potential.cutoff)
    rs = np.where(inside, r, potential._safe_r())
    codes = ev.codes
    kinds = codes[table.index]
    n, k = r.shape
    f = np.zeros((3, n, k))  # f, f', f'' of each slot's neighbour element
    phi = np.zeros((3, n, k))
    for b in range(potential.species):
        use = inside & (kinds == b)
        vb = potential.radial(potential.density[b], rs)
        f = np.where(use, np.array(vb), f)
        for a in range(potential.species):
            both = use & (codes[:, None] == a)
            phi = np.where(both, np.array(potential.radial(potential.pair[a][b], rs)), phi)
    rho = f[0].sum(axis=1)
    emb = np.zeros((3, n))
    for a in range(potential.species):
        ea = np.array(potential.radial(potential.embedding[a], rho))
        emb = np.where(codes == a, ea, emb)
    u1 = 0.5 * phi[1] + emb[1][:, None] * f[1]
    u2 = 0.5 * phi[2] + emb[1][:, None] * f[2]
    unit = d / np.where(inside, r, 1.0)[..., None]
    nn = np.einsum("ika,ikb->ikab", unit, unit)
    eye = np.eye(3)
    blocks = u2[..., None, None] * nn + (u1 / np.where(inside, r, 1.0))[..., None, None] * (
        eye - nn
    )
    blocks = np.where(inside[..., None, None], blocks, 0.0)
    vectors = np.where(inside[..., None], f[1][..., None] * unit, 0.0)
    return EAMHessian(table.index, blocks, vectors, emb[2])
