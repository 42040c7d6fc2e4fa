"""Two-dimensional model surfaces for reaction paths: the Müller–Brown potential."""

from __future__ import annotations

from typing import Any

import numpy as np

from simdiff.backends import Ops
from simdiff.core.problem import Problem

__all__ = ["MULLER_BROWN_PARAMS", "muller_brown", "muller_brown_energy"]

#: Standard parameters of Müller & Brown (1979):
#: ``V = sum_k A_k exp(a_k dx^2 + b_k dx dy + c_k dy^2)`` with ``dx = x - x0_k``, ``dy = y - y0_k``.
MULLER_BROWN_PARAMS: dict[str, tuple[float, ...]] = {
    "A": (-200.0, -100.0, -170.0, 15.0),
    "a": (-1.0, -1.0, -6.5, 0.7),
    "b": (0.0, 0.0, 11.0, 0.6),
    "c": (-10.0, -10.0, -6.5, 0.7),
    "x0": (1.0, 0.0, -0.5, -1.0),
    "y0": (0.0, 0.5, 1.5, 1.0),
}


def muller_brown_energy(x: Any, ops: Ops) -> Any:
    r"""Müller–Brown potential energy at the point ``x = (x, y)``.

    .. math:: V(x, y) = \sum_{k=1}^4 A_k
              e^{a_k \Delta x^2 + b_k \Delta x \Delta y + c_k \Delta y^2}

    Parameters
    ----------
    x : array, shape (2,)
        The point ``(x, y)``.
    ops : Ops

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> round(float(muller_brown_energy(np.array([-0.558, 1.442]), simdiff.get_ops("numpy"))), 2)
    -146.7
    """
    p = {k: ops.asarray(np.asarray(v)) for k, v in MULLER_BROWN_PARAMS.items()}
    dx = x[0] - p["x0"]
    dy = x[1] - p["y0"]
    return ops.sum(p["A"] * ops.exp(p["a"] * dx * dx + p["b"] * dx * dy + p["c"] * dy * dy))


def muller_brown(x0: Any = (-0.5, 1.5), *, name: str = "muller-brown", **kwargs: Any) -> Problem:
    """The Müller–Brown surface as a :class:`simdiff.Problem` over ``(x, y)``.

    It has three minima and two first-order saddles (Müller & Brown 1979);
    the catalogue entry ``problems.get("muller-brown")`` carries their
    literature positions and analytic derivatives.

    Parameters
    ----------
    x0 : array_like, shape (2,)
        Default point.
    name : str
    **kwargs
        ``exact`` and ``meta``, passed to :class:`simdiff.Problem`.

    References
    ----------
    K. Müller and L. D. Brown, Theor. Chim. Acta 53, 75 (1979).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = muller_brown()
    >>> simdiff.hessian(p, np.array([0.0, 0.5])).shape
    (2, 2)
    """
    meta = {"tags": ("pes", "small"), **kwargs.pop("meta", {})}
    return Problem(muller_brown_energy, np.asarray(x0, dtype=np.float64), name=name, meta=meta,
                   **kwargs)  # fmt: skip
