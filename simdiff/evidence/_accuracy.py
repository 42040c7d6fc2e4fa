"""The one accuracy rule of the evidence: the largest error relative to the largest reference.

``simdiff.compare``'s accuracy column, the report and the benchmarks under
``validation/benchmarks`` state how far a result is from its reference with
:func:`rel_error`, so a "rel. error" means the same thing in every table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simdiff.backends import to_host
from simdiff.errors import ShapeError


def rel_error(got: Any, ref: Any, *, floor: float = 0.0) -> float:
    """``max |got - ref| / max(max |ref|, floor)``, over every element.

    Parameters
    ----------
    got, ref : array_like
        The result and its reference, of one shape (numpy, JAX or torch arrays,
        or numbers).
    floor : float
        A scale below which the reference's size does not shrink the
        denominator: 0 for a relative error, 1 for an error that is absolute
        where the reference is smaller than 1.  A zero reference with
        ``floor=0`` gives ``inf`` for a nonzero error and 0 for none.

    Returns
    -------
    float
        The error, a plain float; NaN where either side holds a NaN.

    Raises
    ------
    ShapeError
        When ``got`` and ``ref`` differ in shape.

    Examples
    --------
    >>> float(f"{rel_error([1.0, 2.0], [1.0, 2.0 + 1e-6]):.2g}")
    5e-07
    >>> rel_error([0.5, 0.0], [0.5, 1e-3], floor=1.0)  # absolute below 1
    0.001
    """
    g, r = to_host(got), to_host(ref)
    if g.shape != r.shape:
        raise ShapeError(f"rel_error: shapes differ: got {g.shape}, reference {r.shape}")
    err = float(np.max(np.abs(g - r), initial=0.0))
    scale = max(float(np.max(np.abs(r), initial=0.0)), floor)
    if np.isnan(err) or np.isnan(scale):
        return float("nan")
    if scale == 0.0:
        return 0.0 if err == 0.0 else float("inf")
    return err / scale
