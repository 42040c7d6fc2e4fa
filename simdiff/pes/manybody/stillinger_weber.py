r"""The Stillinger-Weber potential: pair terms and angle terms over neighbour pairs.

.. math::

    E = \sum_{i<j} \phi_2(r_{ij})
        + \sum_i \sum_{j<k} \phi_3(r_{ij}, r_{ik}, \theta_{jik}),

    \phi_2(r) = A \epsilon \bigl[B (\sigma/r)^p - (\sigma/r)^q\bigr]
                \exp\!\Bigl(\frac{\sigma}{r - a\sigma}\Bigr),

    \phi_3 = \lambda \epsilon\, (\cos\theta_{jik} - \cos\theta_0)^2
             \exp\!\Bigl(\frac{\gamma\sigma}{r_{ij} - a\sigma}\Bigr)
             \exp\!\Bigl(\frac{\gamma\sigma}{r_{ik} - a\sigma}\Bigr),

for :math:`r < a\sigma` (zero beyond, where every derivative of both terms
goes to zero: the cutoff is smooth to all orders).  As a site potential
(:mod:`simdiff.pes.manybody.sites`) atom ``i`` carries half of each of its
pair terms and the angle terms it is the vertex of.

References
----------
F. H. Stillinger and T. A. Weber, Phys. Rev. B 31, 5262 (1985): silicon with
:math:`\epsilon = 2.1683` eV, :math:`\sigma = 2.0951` Å, ``a = 1.8``,
:math:`\lambda = 21`, :math:`\gamma = 1.2`, ``A = 7.049556277``,
``B = 0.6022245584``, ``p = 4``, ``q = 0``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simdiff.backends import Ops
from simdiff.errors import InputError

__all__ = ["StillingerWeber", "stillinger_weber"]


@dataclass(frozen=True)
class StillingerWeber:
    """Stillinger-Weber parameters (energies in eV, lengths in Å); a site potential.

    Attributes
    ----------
    epsilon, sigma, a, lam, gamma, A, B, p, q, cos0 : float
        As in the module's formulas (``lam`` is :math:`\\lambda`, ``cos0`` is
        :math:`\\cos\\theta_0`).
    elements : None
        Every atom is treated alike.
    """

    epsilon: float = 2.1683
    sigma: float = 2.0951
    a: float = 1.80
    lam: float = 21.0
    gamma: float = 1.20
    A: float = 7.049556277
    B: float = 0.6022245584
    p: float = 4.0
    q: float = 0.0
    cos0: float = -1.0 / 3.0
    elements: None = None
    source: str = "Stillinger-Weber"

    @property
    def cutoff(self) -> float:
        """:math:`a \\sigma`."""
        return self.a * self.sigma

    def site_energies(self, d: Any, ops: Ops, centre: Any, neighbours: Any) -> Any:
        """Site energies of rows ``d`` ``(B, K, 3)``: half the pair terms plus the angle terms.

        Notes
        -----
        The "double where" guards the cutoff: slots at or beyond ``a sigma``
        (padding among them) enter the formulas at ``r = sigma`` and are
        masked afterwards, so :math:`\\exp(\\sigma / (r - a\\sigma))` is never
        evaluated at a non-negative denominator and no derivative sees a NaN.
        """
        del centre, neighbours  # one element
        rc = self.cutoff
        r2 = ops.sum(d * d, axis=-1)
        inside = r2 < rc * rc
        r = ops.sqrt(ops.where(inside, r2, self.sigma**2))
        s = self.sigma / r
        cut = ops.exp(self.sigma / (r - rc))
        pair = self.A * self.epsilon * (self.B * s**self.p - s**self.q) * cut
        pair = ops.where(inside, pair, 0.0)
        g = ops.where(inside, ops.exp(self.gamma * self.sigma / (r - rc)), 0.0)
        u = d / r[..., None]
        cos = ops.einsum("bkx,blx->bkl", u, u)
        k = int(d.shape[-2])
        upper = ops.asarray(np.triu(np.ones((k, k)), 1))
        angle = (cos - self.cos0) ** 2 * g[:, :, None] * g[:, None, :] * upper
        return 0.5 * ops.sum(pair, axis=-1) + self.lam * self.epsilon * ops.sum(angle, axis=(1, 2))

    def check(self, d: np.ndarray, valid: np.ndarray, codes: np.ndarray, table: Any) -> None:
        """Coincident atoms (distance 0) raise :class:`~simdiff.errors.InputError` naming them."""
        del codes
        r2 = np.einsum("ikx,ikx->ik", d, d)
        bad = np.argwhere(valid & (r2 == 0.0))
        if bad.size:
            i, k = (int(v) for v in bad[0])
            raise InputError(f"atoms {i} and {int(table.index[i, k])} coincide (distance 0): the "
                             "Stillinger-Weber energy is undefined")  # fmt: skip


def stillinger_weber(**parameters: float) -> StillingerWeber:
    """The Stillinger-Weber potential, silicon's original parameters unless overridden.

    Parameters
    ----------
    **parameters : float
        Any of ``epsilon, sigma, a, lam, gamma, A, B, p, q, cos0``.

    Examples
    --------
    >>> sw = stillinger_weber()
    >>> sw.epsilon, sw.sigma, round(sw.cutoff, 5)
    (2.1683, 2.0951, 3.77118)
    """
    known = set(StillingerWeber.__dataclass_fields__) - {"elements", "source"}
    unknown = sorted(set(parameters) - known)
    if unknown:
        raise InputError(f"unknown Stillinger-Weber parameters {unknown}; known: {sorted(known)}")
    values: dict[str, Any] = {k: float(v) for k, v in parameters.items()}
    sw = replace(StillingerWeber(), **values)
    if not (sw.sigma > 0 and sw.a > 0 and sw.epsilon > 0):
        raise InputError(f"sigma, a and epsilon must be positive; got {sw}")
    return sw
