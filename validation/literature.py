"""Reproduce the literature values a catalogue entry carries in ``meta``.

Rules, each applied where its key is present:

``minimum`` (a point)
    The gradient vanishes there: ``max |grad f| <= atol_grad`` (default
    ``1e-8 * max(1, |f|)``) on every backend, and ``f`` equals
    ``meta["minimum_value"]`` when given.
``minima`` / ``saddles`` (lists of ``(x_1, ..., x_n, value)`` as quoted)
    Starting at the quoted point, the stationary point is refined with
    ``scipy.optimize.root`` on the AD gradient (Jacobian: the AD Hessian); the
    refined point must lie within ``meta["atol_position"]`` of the quoted one,
    its value within ``meta["atol_energy"]``, and its Hessian must have no
    negative eigenvalue (minimum) or exactly one (saddle).

Other literature keys (``minimum_energy`` of a dimer, ``literature`` dicts of
trajectories, ...) have no generic rule here; they are listed as not
reproduced, with that reason, and their own tests check them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.optimize

import simdiff

__all__ = ["LITERATURE_KEYS", "reproduce"]

#: meta keys that carry literature values (used to say what was not reproduced).
LITERATURE_KEYS = (
    "minimum",
    "minima",
    "saddles",
    "minimum_energy",
    "minimum_distance",
    "literature",
    "harmonic_frequency",
    "cubic_constant_r",
)


def _plain(v: Any) -> str:
    """``repr`` with numpy scalars as plain numbers (``-0.558224``, not ``np.float64(...)``)."""
    if isinstance(v, np.generic):
        return repr(v.item())
    if isinstance(v, tuple):
        inner = ", ".join(_plain(e) for e in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(_plain(e) for e in v) + "]"
    return repr(v)


def _row(key: str, quoted: Any, measured: Any, tol: Any, ok: bool | None, note: str = ""):
    verdict = "n/a" if ok is None else ("pass" if ok else "fail")
    return {
        "key": key,
        "quoted": _plain(quoted)[:120],
        "measured": _plain(measured)[:120],
        "tol": _plain(tol),
        "verdict": verdict,
        "note": note,
    }


def _backend(problem: simdiff.Problem) -> str:
    return "jax" if problem.supports("jax") else "torch"


def _stationary(problem: simdiff.Problem, key: str, quoted: tuple, index: int) -> dict[str, Any]:
    b = _backend(problem)
    meta = problem.meta
    x0 = np.asarray(quoted[:-1], dtype=float)
    value = float(quoted[-1])
    atol_x = float(meta.get("atol_position", 1e-3))
    atol_v = float(meta.get("atol_energy", 1e-2))
    sol = scipy.optimize.root(
        lambda y: simdiff.grad(problem, y, backend=b),
        x0,
        jac=lambda y: simdiff.hessian(problem, y, backend=b),
        tol=1e-12,
    )
    x = sol.x
    f = float(problem.evaluate(x, backend=b))
    negative = int(np.sum(np.linalg.eigvalsh(simdiff.hessian(problem, x, backend=b)) < 0))
    want = 0 if key == "minima" else 1
    ok = (
        bool(sol.success)
        and float(np.max(np.abs(x - x0))) <= atol_x
        and abs(f - value) <= atol_v
        and negative == want
    )
    note = (
        f"root: {sol.message}; |dx| {np.max(np.abs(x - x0)):.1e}, |dV| {abs(f - value):.1e}, "
        f"{negative} negative Hessian eigenvalue(s), want {want}"
    )
    return _row(
        f"{key}[{index}]", quoted, (*np.round(x, 6), round(f, 6)), (atol_x, atol_v), ok, note
    )


def reproduce(problem: simdiff.Problem) -> list[dict[str, Any]]:
    """Check the problem's literature values; one row per value (see the module docstring).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum((x - 1.0) ** 2), x0=np.zeros(2),
    ...                     meta={"minimum": np.ones(2), "minimum_value": 0.0})
    >>> [r["verdict"] for r in reproduce(p)]
    ['pass', 'pass']
    """
    meta, rows = problem.meta, []
    if not problem.is_scalar:
        present = [k for k in LITERATURE_KEYS if k in meta]
        return [
            _row(k, meta[k], "-", "-", None, "vector-valued problem: no generic rule")
            for k in present
        ]
    b = _backend(problem)
    if "minimum" in meta:
        xm = np.asarray(meta["minimum"], dtype=float)
        f = float(problem.evaluate(xm, backend=b))
        g = float(np.max(np.abs(simdiff.grad(problem, xm, backend=b))))
        tol = float(meta.get("atol_grad", 1e-8 * max(1.0, abs(f))))
        rows.append(_row("minimum: max|grad|", 0.0, g, tol, g <= tol))
        if "minimum_value" in meta:
            ref = float(meta["minimum_value"])
            tol_v = float(meta.get("atol_energy", 1e-10 * max(1.0, abs(ref))))
            rows.append(_row("minimum_value", ref, f, tol_v, abs(f - ref) <= tol_v))
    for key in ("minima", "saddles"):
        for i, quoted in enumerate(meta.get(key, ())):
            try:
                rows.append(_stationary(problem, key, tuple(quoted), i))
            except Exception as exc:  # a refinement that breaks is a failed reproduction
                rows.append(
                    _row(
                        f"{key}[{i}]", quoted, "-", "-", False, f"{type(exc).__name__}: {exc}"[:200]
                    )
                )
    handled = {"minimum", "minima", "saddles"}
    for key in LITERATURE_KEYS:
        if key in meta and key not in handled:
            rows.append(
                _row(
                    key,
                    meta[key],
                    "-",
                    "-",
                    None,
                    "no generic rule; checked by the problem's own tests",
                )
            )
    return rows
