"""Lift a pair potential to the energy of N particles and build a :class:`simdiff.Problem`.

The energy is the sum over pairs ``i < j`` of ``pair(r_ij)``, in free space or
in a periodic cell by the minimum-image convention, written as a sum of terms
(:class:`~simdiff.pes.TermEnergy`): its Hessian is assembled from one 6x6 block
per pair.  With a cutoff only the pairs within reach at the given geometry are
terms; in a cell shorter than twice the cutoff, the image pairs
(:mod:`simdiff.pes.images`).  The problem's input is the flat coordinate vector ``x``
of shape ``(N * dim,)`` (particle-major: ``x.reshape(N, dim)`` are the positions).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simdiff.core.fingerprint import Versioned
from simdiff.core.problem import CheckOptions, Problem
from simdiff.errors import InputError, ShapeError
from simdiff.pes.geometry import (
    Cell,
    ClusterInfo,
    check_box,
    check_masses,
    check_positions,
    fits_minimum_image,
    image_displacement,
    pair_index,
)
from simdiff.pes.images import ImagePairEnergy
from simdiff.pes.potentials import PairPotential
from simdiff.pes.term_checks import check_term
from simdiff.pes.terms import TermEnergy

__all__ = ["PairTerm", "cluster_energy", "cluster_problem"]


class PairTerm(Versioned):
    """The term of a pair potential: ``pair(|r_1 - r_0|)`` for ``r`` of shape ``(..., 2, dim)``.

    Minimum image in a periodic ``box``.  A class so that problems pickle.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pes import lennard_jones
    >>> t = PairTerm(lennard_jones)
    >>> float(t(np.array([[0.0, 0, 0], [2 ** (1 / 6), 0, 0]]), simdiff.get_ops("numpy")))
    -1.0
    """

    def __init__(self, pair: PairPotential, box: np.ndarray | Cell | None = None) -> None:
        self.pair = pair
        self.box = box
        self.__name__ = getattr(pair, "__name__", "pair")

    def __call__(self, r: Any, ops: Any) -> Any:
        return self.of_difference(r[..., 1, :] - r[..., 0, :], ops)

    def of_difference(self, d: Any, ops: Any) -> Any:
        """The term as a function of the displacement ``d = r_1 - r_0``, shape ``(..., dim)``.

        A term of two atoms that depends on them only through ``r_1 - r_0``
        offers this method: :class:`~simdiff.pes.TermEnergy` then assembles its
        Hessian from one ``dim x dim`` block per pair,
        :math:`\\partial^2 \\varepsilon / \\partial d^2`.
        """
        if self.box is not None:
            d = image_displacement(d, self.box, ops)
        r2 = ops.sum(d * d, axis=-1)
        apart = r2 > 0.0
        # double where: coincident particles never reach the potential; they get an explicit
        # +inf energy with NaN (not silently finite) derivatives, see cluster_energy
        e = self.pair(ops.sqrt(ops.where(apart, r2, 1.0)), ops)
        return ops.where(apart, e, ops.inf + ops.sqrt(ops.where(apart, 1.0, r2)))

    def _key(self) -> tuple[Any, Any]:
        box = self.box
        return (self.pair, box if box is None or isinstance(box, Cell) else tuple(box.tolist()))

    def __eq__(self, other: object) -> bool:
        # equal terms (same pair potential and box) share their compiled term Hessians
        return isinstance(other, PairTerm) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"PairTerm({self.pair!r}, box={self.box})"


def cluster_energy(
    x: Any,
    ops: Any,
    *,
    pair: PairPotential,
    n_particles: int,
    dim: int = 3,
    box: np.ndarray | Cell | None = None,
) -> Any:
    r"""Total pair energy :math:`\sum_{i<j} \phi(r_{ij})` of flat coordinates ``x``.

    Parameters
    ----------
    x : array, shape (n_particles * dim,)
    ops : Ops
    pair : callable
        ``pair(r, ops)``, elementwise.
    n_particles, dim : int
    box : ndarray of shape (dim,) or Cell, optional
        Periodic box lengths or a :class:`~simdiff.pes.Cell` (minimum image);
        ``None`` for free space.

    Returns
    -------
    scalar array
        ``+inf`` if two distinct particles coincide (see Notes).

    Notes
    -----
    All pairs are formed densely as ``R[:, None] - R[None, :]``, whose diagonal
    ``r_ii = 0``.  ``sqrt`` has an infinite derivative at 0, so evaluating the
    pair potential there and masking afterwards would put ``0 * inf = NaN`` into
    every derivative.  The "double where" pattern avoids it: squared distances
    of masked pairs are replaced by 1 *before* ``sqrt`` and ``pair``, and the
    resulting energies are masked again afterwards.

    Distinct particles at distance exactly 0 get an explicit ``+inf`` energy
    whose derivatives are NaN (``inf + sqrt(r2)`` at ``r2 = 0``), so
    :class:`simdiff.Derivatives` (``check_finite=True``) raises
    :class:`~simdiff.errors.NonFiniteError` rather than return a wrong force;
    :func:`check_positions` gives the clearer error beforehand.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pes import lennard_jones
    >>> ops = simdiff.get_ops("numpy")
    >>> x = np.array([0.0, 0.0, 0.0, 2 ** (1 / 6), 0.0, 0.0])
    >>> float(cluster_energy(x, ops, pair=lennard_jones, n_particles=2))
    -1.0
    """
    pos = ops.reshape(x, (n_particles, dim))
    d = pos[:, None, :] - pos[None, :, :]
    if box is not None:
        d = image_displacement(d, box, ops)
    r2 = ops.sum(d * d, axis=-1)
    offdiag = ops.asarray(~np.eye(n_particles, dtype=bool))
    safe = offdiag & (r2 > 0.0)
    # double where: masked pairs never reach sqrt or the potential (see Notes)
    r = ops.sqrt(ops.where(safe, r2, 1.0))
    energy = 0.5 * ops.sum(ops.where(safe, pair(r, ops), 0.0))
    coincide = offdiag & (r2 == 0.0)
    # explicit +inf for coincident particles, with NaN (not silently 0) derivatives
    blow = ops.inf + ops.sqrt(ops.where(coincide, r2, 1.0))
    return energy + 0.5 * ops.sum(ops.where(coincide, blow, 0.0))


def cluster_problem(
    pair: PairPotential,
    positions: Any,
    *,
    box: Any = None,
    masses: Any = None,
    skin: float | None = None,
    rebuild: bool = True,
    name: str | None = None,
    exact: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    check_options: CheckOptions | None = None,
) -> Problem:
    """The energy of N particles interacting by ``pair`` as a :class:`simdiff.Problem`.

    Parameters
    ----------
    pair : callable
        ``pair(r, ops)``, e.g. :func:`~simdiff.pes.lennard_jones` or
        ``functools.partial(morse, a=2.0)``.  A pair potential with a cutoff
        (an ``r_cut`` attribute, as :func:`~simdiff.pes.smooth_cutoff` gives)
        interacts only within ``r_cut``: the problem then holds only the pairs
        closer than ``r_cut + skin`` at ``positions`` (a Verlet neighbour list).
    positions : array_like, shape (N, 3) or (3N,)
        Start geometry; becomes ``problem.x0`` (flat, shape ``(3N,)``).
    box : float, array_like of shape (3,) or (3, 3), or Cell, optional
        Periodic box: the lengths of an orthorhombic one, a ``(3, 3)`` matrix
        of cell vectors (rows; periodic in all directions), or a
        :class:`~simdiff.pes.Cell` (triclinic, or periodic in some directions
        only: slabs, wires).  Needs a potential with a cutoff
        (:func:`~simdiff.pes.smooth_cutoff`).  Minimum image by fractional
        coordinates where the cutoff is at most half the shortest periodic
        height (``min(box) / 2`` for a box); in a smaller cell the energy sums
        over the image pairs within reach
        (:class:`~simdiff.pes.images.ImagePairEnergy`), an atom's pairs with
        its own images included.
    masses : float or array_like of shape (N,), optional
        Positive particle masses (default 1), used by normal-mode analysis.
    skin : float, optional
        Neighbour-list margin for a potential with a cutoff (default
        ``0.1 * r_cut``); ignored without a cutoff.  In a periodic box it is
        used as given, also where ``r_cut + skin`` exceeds half the box: the
        list holds the pairs by their minimum-image distance, and only
        ``r_cut <= min(box) / 2`` is needed for one image of a pair to interact.
    rebuild : bool
        With a cutoff: the neighbour list follows the atoms (default): at a
        point where an atom has moved more than ``skin / 2`` from where the
        list was built, it is rebuilt there before the evaluation
        (:meth:`~simdiff.pes.TermEnergy.check_points`).  ``False`` keeps the
        list of ``positions`` and raises
        :class:`~simdiff.errors.NeighbourListError` at such a point.
    name : str, optional
        Default ``"cluster{N}"``.
    exact, meta : dict, optional
        Passed to :class:`simdiff.Problem`; ``meta["pes"]`` is set to a
        :class:`ClusterInfo` and ``meta["tags"]`` defaults to ``("pes",)``.
    check_options : simdiff.CheckOptions, optional
        Passed to :class:`simdiff.Problem`.

    Returns
    -------
    Problem
        Scalar energy of ``x`` with shape ``(3N,)``; ``problem.fn`` is a
        :class:`~simdiff.pes.TermEnergy` of the pairs, so ``simdiff.hessian``
        assembles the Hessian from one 6x6 block per pair (in a cell shorter
        than twice the cutoff, an :class:`~simdiff.pes.images.ImagePairEnergy`
        with the dense AD Hessian).

    Notes
    -----
    *Exactness with a cutoff.*  The switched potential and its first two
    derivatives vanish at and beyond ``r_cut`` (:func:`~simdiff.pes.switch_c2`
    is C2), so a pair farther apart than ``r_cut`` contributes exactly zero to
    the energy, the forces and the Hessian.  A pair left out of the list was at
    least ``r_cut + skin`` apart at ``positions``; while no atom has moved more
    than ``skin / 2`` from there, it is still at least ``r_cut`` apart, and the
    energy and all derivatives up to the second are exactly those of the
    all-pairs energy (third and higher derivatives of ``switch_c2`` jump at
    ``r_cut``, so cubic force constants are exact only for pairs not at
    ``r_cut`` exactly).  Beyond ``skin / 2`` the list is rebuilt at the new
    geometry (``rebuild=True``) before the point is evaluated, outside any
    traced or compiled function, so each evaluation sees a constant list and
    its derivatives stay exact; with ``rebuild=False`` such a point raises
    :class:`~simdiff.errors.NeighbourListError`.  ``problem.fn.neighbour_list()``
    counts the rebuilds.  In a periodic box the list is built from positions
    wrapped into the box, so a rigidly translated box has the same energy.

    Raises
    ------
    ShapeError
        ``positions`` is not ``(N, 3)`` or ``(3N,)``, or ``masses`` has the wrong shape.
    InputError
        (a ``ValueError``) No particles, coincident particles, non-positive
        masses, a bad box, a periodic box without a cutoff, a negative skin.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.pes import lennard_jones
    >>> p = cluster_problem(lennard_jones, [[0, 0, 0], [1.2, 0, 0], [0, 1.2, 0]])
    >>> p.n, round(float(p.evaluate()), 6)
    (9, -1.94237)
    >>> forces = -simdiff.grad(p)
    >>> bool(abs(forces.reshape(3, 3).sum(axis=0)).max() < 1e-12)
    True
    """
    dim = 3
    a = np.asarray(positions, dtype=np.float64)
    if a.size == 0:
        raise InputError("a cluster needs at least one particle; got an empty position array")
    if a.ndim == 1 and a.size % dim == 0:
        a = a.reshape(-1, dim)
    if a.ndim != 2 or a.shape[1] != dim:
        raise ShapeError(
            f"positions must have shape (N, {dim}) or ({dim}N,); got shape {np.shape(positions)}"
        )
    n_particles = a.shape[0]
    b = check_box(box, dim, pair, images=True)
    pos = check_positions(a, n_particles, dim, b)
    m = check_masses(masses, n_particles)
    info = ClusterInfo(n_particles, dim, m, b)
    term = PairTerm(pair, b)
    r_cut = getattr(pair, "r_cut", None)
    meta = {"tags": ("pes",), **(meta or {}), "pes": info}
    name = name or f"cluster{n_particles}"
    if not fits_minimum_image(b, r_cut):  # a cell shorter than 2 r_cut: image pairs
        assert b is not None and r_cut is not None
        cell = b if isinstance(b, Cell) else Cell(np.diag(b), [True] * 3)
        skin = 0.1 * float(r_cut) if skin is None else float(skin)
        if not skin >= 0.0:
            raise InputError(f"skin must be a non-negative length; got {skin}")
        images = ImagePairEnergy(PairTerm(pair), n_particles, cell, pos, r_cut=float(r_cut),
                                 skin=skin, follow=bool(rebuild))  # fmt: skip
        return Problem(images, pos.reshape(-1), name=name, exact=exact, meta=meta,
                       check_options=check_options)  # fmt: skip
    if r_cut is None:
        fn = TermEnergy(term, pair_index(pos), n_particles, dim)
    else:
        skin = 0.1 * float(r_cut) if skin is None else float(skin)
        if not skin >= 0.0:
            raise InputError(f"skin must be a non-negative length; got {skin}")
        index = pair_index(pos, r_cut + skin, b)
        fn = TermEnergy(term, index, n_particles, dim, reference=pos.copy(),
                        max_shift=skin / 2, box=b, list_radius=r_cut + skin,
                        follow=bool(rebuild))  # fmt: skip
    check_term(term, fn.index, pos)
    return Problem(
        fn, pos.reshape(-1), name=name, exact=exact, meta=meta, check_options=check_options
    )
