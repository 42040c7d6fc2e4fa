"""Pair potentials: pure functions of a distance with keyword parameters.

A pair potential is ``pair(r, ops) -> energy`` applied elementwise to an array
of distances ``r`` of the active context.  Parameters are keywords, bound with
:func:`functools.partial` (``partial(lennard_jones, epsilon=0.5)``), so the same
function runs in every context and is lifted to a system energy by
:func:`simdiff.pes.cluster_problem`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simdiff.backends import Ops
from simdiff.errors import InputError

__all__ = ["PairPotential", "SmoothCutoff", "lennard_jones", "morse", "smooth_cutoff", "switch_c2"]

#: A pair potential: ``pair(r, ops)`` elementwise over distances ``r``.
PairPotential = Callable[[Any, Any], Any]


def lennard_jones(r: Any, ops: Ops, *, epsilon: float = 1.0, sigma: float = 1.0) -> Any:
    r"""Lennard-Jones pair energy :math:`4\epsilon[(\sigma/r)^{12} - (\sigma/r)^6]`.

    Parameters
    ----------
    r : array
        Distances (> 0), any shape, of the active context.
    ops : Ops
        The context's operations namespace.
    epsilon : float
        Well depth; the minimum is ``-epsilon`` at ``r = 2**(1/6) * sigma``.
    sigma : float
        Distance at which the energy is zero.

    Returns
    -------
    array, same shape as ``r``

    Notes
    -----
    Reduced units (``epsilon = sigma = 1``, unit masses) are the convention of
    the Cambridge Cluster Database energies in the catalogue.  The energy is
    written through :math:`s = (\sigma/r)^2` so that it needs one division.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> ops = simdiff.get_ops("numpy")
    >>> float(lennard_jones(np.asarray(2.0 ** (1 / 6)), ops))
    -1.0
    """
    s2 = (sigma * sigma) / (r * r)
    s6 = s2 * s2 * s2
    return (4.0 * epsilon) * (s6 * s6 - s6)


def morse(r: Any, ops: Ops, *, D: float = 1.0, a: float = 1.0, r0: float = 1.0) -> Any:
    r"""Morse pair energy :math:`D[(1 - e^{-a(r - r_0)})^2 - 1]`.

    Zero at infinite separation, minimum ``-D`` at ``r = r0``; the curvature
    at the minimum is :math:`2 D a^2`.

    Parameters
    ----------
    r : array
        Distances, any shape.
    ops : Ops
    D, a, r0 : float
        Well depth, inverse width and equilibrium distance.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> ops = simdiff.get_ops("numpy")
    >>> float(morse(np.asarray(1.0), ops, D=2.0))
    -2.0
    """
    q = 1.0 - ops.exp(-a * (r - r0))
    return D * (q * q - 1.0)


def switch_c2(r: Any, ops: Ops, *, r_on: float, r_cut: float) -> Any:
    r"""C2 switching function: 1 below ``r_on``, 0 beyond ``r_cut``, quintic in between.

    With :math:`t = (r - r_\text{on}) / (r_\text{cut} - r_\text{on})`,
    :math:`S = 1 - 10 t^3 + 15 t^4 - 6 t^5` on :math:`0 \le t \le 1`; ``S``, ``S'``
    and ``S''`` are continuous at both ends (``S' = S'' = 0`` there), so a
    potential multiplied by ``S`` keeps continuous forces and Hessians.

    Notes
    -----
    ``t`` is clipped to ``[0, 1]`` before the polynomial is evaluated: ``clip``
    passes a zero derivative outside the interval, where ``S`` is constant, so
    no branch needs a ``where`` and no derivative order can see a NaN.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> ops = simdiff.get_ops("numpy")
    >>> switch_c2(np.array([0.5, 1.5, 3.0]), ops, r_on=1.0, r_cut=2.0)
    array([1. , 0.5, 0. ])
    """
    _check_cutoffs(r_on, r_cut)
    t = ops.clip((r - r_on) / (r_cut - r_on), 0.0, 1.0)
    t3 = t * t * t
    return 1.0 + t3 * (-10.0 + t * (15.0 - 6.0 * t))


def smooth_cutoff(pair: PairPotential, *, r_on: float, r_cut: float) -> PairPotential:
    r"""Wrap a pair potential so it goes to zero at ``r_cut`` with continuous second derivatives.

    Returns ``pair(r) * S(r)`` with :func:`switch_c2` between ``r_on`` and
    ``r_cut``, and exactly 0 beyond ``r_cut``.

    Parameters
    ----------
    pair : callable
        ``pair(r, ops)``.
    r_on, r_cut : float
        ``0 < r_on < r_cut``.

    Returns
    -------
    callable
        ``switched(r, ops)``.

    Notes
    -----
    The "double where" (safe-mask) pattern guards the region beyond the cutoff.
    ``pair`` is evaluated at ``r_safe = where(r < r_cut, r, r_on)``, not at
    ``r``, and the result is then masked again with ``where(r < r_cut, ..., 0)``.
    A single outer ``where`` is not enough: its derivative multiplies the
    masked-out branch's derivative by zero, and ``0 * inf`` or ``0 * nan`` (from
    a potential that overflows or is undefined far out, e.g. ``exp`` of a large
    argument or ``log(r_cut - r)``) is NaN in every derivative order.  The inner
    ``where`` makes the unused branch finite, so its zero weight gives zero.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> ops = simdiff.get_ops("numpy")
    >>> lj = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.5)
    >>> lj(np.array([1.5, 2.5, 3.0]), ops)
    array([-0.32033659,  0.        ,  0.        ])
    """
    return SmoothCutoff(pair, r_on=r_on, r_cut=r_cut)


class SmoothCutoff:
    """``pair(r) * switch_c2(r)`` inside ``r_cut``, 0 beyond: see :func:`smooth_cutoff`.

    A class rather than a closure so that problems built on it pickle (dask workers).
    """

    def __init__(self, pair: PairPotential, *, r_on: float, r_cut: float) -> None:
        _check_cutoffs(r_on, r_cut)
        self.pair = pair
        self.r_on = float(r_on)
        self.r_cut = float(r_cut)
        self.__name__ = f"{getattr(pair, '__name__', 'pair')}_switched"

    def __call__(self, r: Any, ops: Ops) -> Any:
        inside = r < self.r_cut
        r_safe = ops.where(inside, r, self.r_on)  # double where: see smooth_cutoff
        e = self.pair(r_safe, ops) * switch_c2(r_safe, ops, r_on=self.r_on, r_cut=self.r_cut)
        return ops.where(inside, e, 0.0)

    def _key(self) -> tuple[Any, float, float]:
        return (self.pair, self.r_on, self.r_cut)

    def __eq__(self, other: object) -> bool:  # equal switched potentials share compiled code
        return isinstance(other, SmoothCutoff) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"SmoothCutoff({self.pair!r}, r_on={self.r_on}, r_cut={self.r_cut})"


def _check_cutoffs(r_on: float, r_cut: float) -> None:
    if not (0.0 < float(r_on) < float(r_cut)):
        raise InputError(f"cutoffs must satisfy 0 < r_on < r_cut; got r_on={r_on}, r_cut={r_cut}")
