"""The comparison rule of :func:`simdiff.check`: element-wise tolerances and verdicts.

One function, :func:`compare_arrays`, decides every comparison ``check``
makes (against finite differences, exact references, the other backend, and
nested-vs-Taylor); :func:`tolerance` is its formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "C_ERR",
    "ERR_FRAC",
    "FLOOR",
    "RESOLVE",
    "RTOL_CROSS",
    "RTOL_EXACT",
    "RTOL_FD",
    "S_GAP",
    "Comparison",
    "compare_arrays",
    "strictly_within",
    "tolerance",
]

EPS = float(np.finfo(np.float64).eps)
#: Safety factor on SciPy's Richardson error estimate.
C_ERR = 10.0
#: Relative tolerance against finite differences: ``sqrt(eps)`` (~1.5e-8).
RTOL_FD = math.sqrt(EPS)
#: Relative tolerance against exact references: ``1e4 * eps`` (~2.2e-12).
RTOL_EXACT = 1e4 * EPS
#: Relative tolerance across backends and nested-vs-Taylor (same mathematics, same
#: discrete solver; only the order of floating-point operations differs).
RTOL_CROSS = 1e4 * EPS
#: The absolute floor, as a fraction of the array's scale ``S``.
FLOOR = 1e-2
#: Safety factor on the measured solver-tolerance gap (working solve against the
#: tight-tolerance variant, see :func:`simdiff.check`).
S_GAP = 2.0
#: An element is *resolved* when its tolerance is below this fraction of ``|ref_i|``
#: (a relative error of ``RESOLVE`` in it would fail); an unresolved element is
#: inconclusive, never a pass.
RESOLVE = 1.0 / 3.0
#: A finite-difference element whose ``C_ERR * err`` exceeds this fraction of
#: ``|ref| + FLOOR * S`` cannot resolve the element: the comparison is inconclusive.
ERR_FRAC = 1e-3


def tolerance(
    err: Any,
    ref: Any,
    scale: float,
    *,
    rtol: float,
    c: float = C_ERR,
    gap: Any = None,
    s: float = S_GAP,
) -> np.ndarray:
    """Element-wise ``tol_i = c * err_i + s * gap_i + rtol * (|ref_i| + FLOOR * scale)``.

    Parameters
    ----------
    err : array_like
        SciPy's error estimate of each element (``0`` for exact, cross-backend
        and nested-vs-Taylor references).
    ref : array_like
        The reference values.
    scale : float
        ``S``, the scale of the array: the larger of ``max |ref|`` (converged
        elements) and the function's scale for this derivative,
        ``max|f(x)| * max|v|^k / max(1, max|x|)^k`` for a derivative of
        order ``k`` (along ``v``; ``max|v| = 1`` for full arrays).
    rtol : float
        :data:`RTOL_FD`, :data:`RTOL_EXACT` or :data:`RTOL_CROSS`, raised by a
        problem's :class:`~simdiff.CheckOptions` where it declares a less
        accurate solver or reference.
    c : float
        Safety factor on the error estimate (default 10): SciPy's estimate is
        the change between the last two extrapolations, not a bound.
    gap : array_like, optional
        The measured solver-tolerance gap of each element: ``|d_i - d'_i|``
        with ``d`` the derivative of the working problem and ``d'`` that of
        its tight-tolerance variant (:meth:`simdiff.Problem.tightened`);
        ``0`` (default) for a problem without an adaptive solver.
    s : float
        Safety factor on the gap (default 2: the gap measures the working
        solve's error to within the tight solve's, ~1000 times smaller).

    Notes
    -----
    Each element is held to its own size: an element ``>= FLOOR * S`` gets a
    relative tolerance of at most ``2 * rtol`` (plus ``c * err``).  The absolute
    floor ``rtol * FLOOR * S`` is there for rounding: an element computed in
    floating point carries an absolute error of order ``eps`` times the terms
    summed into it, and those are of the order of the array's (or the
    function's) scale, not of the element, so an element that is zero up to
    cancellation cannot be held to a relative tolerance.  With ``FLOOR =
    1e-2`` the floor is ``100 * eps * S`` against exact references and
    ``1.5e-10 * S`` against finite differences; hence the stated detection
    power: a relative error ``delta`` in any element ``>= 1e-3 * S`` is caught
    when ``delta > 11 * rtol`` and ``c * err`` is below it (``1e-8`` against
    exact references, ``1e-5`` against finite differences with a converged
    estimate).

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.evidence.check.tolerance import tolerance
    >>> tolerance(np.zeros(2), np.array([1.0, 0.0]), 1.0, rtol=1e-8)
    array([1.01e-08, 1.00e-10])
    """
    err = np.abs(np.asarray(err, dtype=np.float64))
    gap = 0.0 if gap is None else np.abs(np.asarray(gap, dtype=np.float64))
    size = np.abs(np.asarray(ref, dtype=np.float64)) + FLOOR * float(scale)
    return c * err + s * gap + rtol * size


def _scale(trusted: np.ndarray, fscale: float) -> float:
    """``S``: the larger of the largest trusted reference element and the function's scale."""
    return max(float(np.max(trusted, initial=0.0)), float(fscale))


def strictly_within(got: Any, ref: Any, *, rtol: float, fscale: float = 0.0) -> bool:
    """True when every element of ``got`` is within ``rtol * (|ref_i| + FLOOR * S)`` of ``ref``.

    The rule of :func:`compare_arrays` with no error estimate and no gap
    (every element of ``ref`` trusted): ``check`` asks it before measuring a
    cross-backend comparison's rounding noise, which only a failure needs.

    Examples
    --------
    >>> import numpy as np
    >>> strictly_within(np.array([1.0 + 1e-13]), np.array([1.0]), rtol=2.2e-12)
    True
    >>> strictly_within(np.array([1.0 + 1e-11]), np.array([1.0]), rtol=2.2e-12)
    False
    """
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    trusted = np.abs(ref)
    tol = tolerance(0.0, ref, _scale(trusted, fscale), rtol=rtol)
    return bool(np.all(np.abs(got - ref) <= tol))


@dataclass
class Comparison:
    """The outcome of :func:`compare_arrays`: a verdict, its numbers and per-element counts.

    ``elements`` holds each element's verdict (``"pass"``, ``"fail"`` or
    ``"inconclusive"``); ``n_pass``, ``n_fail`` and ``n_inconclusive`` count
    them.  ``resolution`` is the largest ``tol_i / |ref_i|`` over the passed
    elements: a relative error above it in any passed element would have
    failed.
    """

    verdict: str  # "pass" | "fail" | "inconclusive" | "error"
    message: str = ""
    max_abs_err: float = math.nan
    max_rel_err: float = math.nan  # max_i |got_i - ref_i| / (|ref_i| + FLOOR * S)
    err_estimate: float = math.nan
    tol: float = math.nan
    unresolved: int = 0
    size: int = 0
    n_pass: int = 0
    n_fail: int = 0
    n_inconclusive: int = 0
    resolution: float = math.nan
    gap: float = math.nan
    elements: np.ndarray | None = field(default=None, repr=False)


#: Element verdicts by code: 0 pass, 1 inconclusive, 2 fail.
_VERDICTS = np.array(["pass", "inconclusive", "fail"])


def compare_arrays(
    got: Any,
    ref: Any,
    *,
    rtol: float,
    err: Any = None,
    converged: Any = None,
    fscale: float = 0.0,
    c: float = C_ERR,
    gap: Any = None,
    s: float = S_GAP,
    resolve: float = RESOLVE,
) -> Comparison:
    """Compare ``got`` with ``ref`` element by element (see :func:`tolerance`).

    Each element is one of:

    - ``fail``: ``got_i`` is not finite, or ``|got_i - ref_i| > tol_i`` (for
      a judged element, below).
    - ``inconclusive``: the element cannot be decided.  Either the reference
      cannot resolve it (``c * err_i`` exceeds ``ERR_FRAC * size_i`` with
      ``size_i = |ref_i| + FLOOR * S``; ``|ref_i|`` counts as ``0`` where
      SciPy did not converge, ``converged`` False), or its tolerance is not
      below ``resolve * |ref_i|`` (default a third): a relative error of
      ``resolve`` would pass it, so a pass would say nothing.  Structural
      zeros and elements at the rounding floor are of this kind.
    - ``pass`` otherwise.

    Judged elements are the resolved ones plus the converged unresolved ones
    (their tolerance includes ``c * err``, so a failure there is real).

    Verdict of the comparison, in this order: ``"error"`` (the reference is
    not finite); ``"fail"`` (some element fails); ``"inconclusive"`` (the
    reference cannot resolve some element, or no element passed: a
    comparison where everything is inconclusive is not a pass);
    ``"pass"`` otherwise, with the inconclusive elements counted in
    ``n_inconclusive`` and named in the message.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.evidence.check.tolerance import compare_arrays
    >>> ref = np.array([1.0, 1e-3])
    >>> compare_arrays(ref * [1, 1 + 1e-8], ref, rtol=2e-12).verdict
    'fail'
    >>> compare_arrays(np.array([2.0]), np.array([1.0]), rtol=1e-8, err=np.array([5.0])).verdict
    'inconclusive'
    >>> r = compare_arrays(np.array([1.0, 0.0]), np.array([1.0, 0.0]), rtol=1e-8)
    >>> r.verdict, r.n_pass, r.n_inconclusive
    ('pass', 1, 1)
    >>> compare_arrays(np.array([1.1]), np.array([1.0]), rtol=1e-8, gap=np.array([0.2])).verdict
    'inconclusive'
    """
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return Comparison("fail", f"shape {got.shape}, reference {ref.shape}")
    err = (
        np.zeros_like(ref)
        if err is None
        else np.broadcast_to(np.abs(np.asarray(err, float)), ref.shape)
    )
    gap_a = (
        np.zeros_like(ref)
        if gap is None
        else np.broadcast_to(np.abs(np.asarray(gap, float)), ref.shape)
    )
    conv = (
        np.ones(ref.shape, bool)
        if converged is None
        else np.broadcast_to(np.asarray(converged, bool), ref.shape)
    )
    if not np.all(np.isfinite(ref)):
        return Comparison(
            "error", "reference is not finite (for finite differences: try a smaller fd_step)"
        )
    if not np.all(np.isfinite(gap_a)):
        return Comparison("error", "the tight-tolerance variant's derivative is not finite")
    trusted = np.where(conv, np.abs(ref), 0.0)
    scale = _scale(trusted, fscale)
    size_i = trusted + FLOOR * scale
    tol = c * err + s * gap_a + rtol * size_i
    diff = np.abs(got - ref)
    bad = ~np.isfinite(got)
    unresolved = c * err > ERR_FRAC * size_i
    judged = conv | ~unresolved
    failing = bad | (judged & (diff > tol))
    coarse = ~(tol < resolve * trusted)  # a relative error of `resolve` would pass
    code = np.where(failing, 2, np.where(unresolved | coarse, 1, 0))  # index into _VERDICTS
    passed = code == 0
    rel = np.where(judged, diff / np.where(size_i > 0, size_i, 1.0), 0.0)
    ratio = np.where(passed, tol / np.where(trusted > 0, trusted, 1.0), 0.0)
    n_pass = int(np.count_nonzero(passed))
    out = Comparison(
        "pass",
        max_abs_err=float(np.where(judged, diff, 0.0).max(initial=0.0)),
        max_rel_err=float(rel.max(initial=0.0)),
        err_estimate=float(err.max(initial=0.0)),
        tol=float(tol.max(initial=0.0)),
        unresolved=int(np.count_nonzero(unresolved)),
        size=int(ref.size),
        n_pass=n_pass,
        n_fail=int(np.count_nonzero(failing)),
        n_inconclusive=int(np.count_nonzero(code == 1)),
        resolution=float(ratio.max(initial=0.0)) if n_pass else math.nan,
        gap=float(gap_a.max(initial=0.0)),
        elements=_VERDICTS[code.ravel()].reshape(code.shape),  # an array also when 0-d
    )
    coarse_only = int(np.count_nonzero(coarse & ~unresolved & ~failing))
    below = (
        f"{coarse_only} of {ref.size} elements below resolution (tol >= {resolve:.2g} |ref|)"
        if coarse_only
        else ""
    )
    if np.any(failing):
        excess = np.where(bad, np.inf, np.where(judged, diff - tol, -np.inf))
        i = np.unravel_index(int(np.argmax(excess)), diff.shape)
        out.verdict = "fail"
        out.message = (
            f"{out.n_fail} of {ref.size} elements fail; worst at {tuple(int(j) for j in i)}: "
            f"got {got[i]:.6g}, ref {ref[i]:.6g} (tol {tol[i]:.2g})"
        )
    elif out.unresolved:
        nc = int(np.count_nonzero(unresolved & ~conv))
        out.verdict = "inconclusive"
        out.message = (
            f"{out.unresolved} of {ref.size} elements unresolved: {c:g} x error estimate "
            f"above {ERR_FRAC:g} of the element"
            + (f" ({nc} not converged in scipy.differentiate)" if nc else "")
        )
    elif not out.n_pass:
        out.verdict = "inconclusive"
        out.message = f"no element resolved: {below}" if below else "no element to compare"
    else:
        out.message = below
    return out
