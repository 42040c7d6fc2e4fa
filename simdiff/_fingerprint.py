"""A problem's fingerprint: what it computes at fixed probe points, plus its source text.

Stored results are matched to a problem by its fingerprint, never by its name
(every lambda is called ``'<lambda>'``), so a resumed sweep or run never
returns another function's numbers.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

import numpy as np

from ._api import jvp, value_and_grad
from ._problem import Problem
from .errors import InputTypeError

__all__ = ["fingerprint"]

_SEED = 20261201
_DIGITS = 12


def _probes(x0: np.ndarray, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(_SEED)
    scale = 1e-2 * (1.0 + np.abs(x0))
    return [x0] + [x0 + scale * rng.standard_normal(x0.shape) for _ in range(count - 1)]


def _numbers(a: Any) -> str:
    return ",".join(f"{v:.{_DIGITS}g}" for v in np.asarray(a, dtype=np.float64).ravel())


def _source(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):  # built in, defined in a REPL, or not a Python function
        return ""


def fingerprint(problem: Problem, *, backend: str | None = None, probes: int = 3) -> str:
    """A hash of what ``problem`` computes, to match stored results to it.

    Parameters
    ----------
    problem : Problem
    backend : {"jax", "torch"}, optional
        Where the derivatives at the probes are taken (default: the first of
        the two the problem supports; a problem that runs on numpy only is
        probed for values alone).
    probes : int
        Points probed: ``x0`` and ``probes - 1`` fixed perturbations of it
        (relative size 1e-2, from a fixed seed).

    Returns
    -------
    str
        64 hex digits (SHA-256) over: ``n``, the output shape, the value and
        the gradient (scalar problems) or a Jacobian-vector product along a
        fixed direction (vector-valued ones) at each probe point, printed to
        12 significant digits, and the source text of ``problem.fn`` where
        Python has it.  A probe that raises contributes its exception type.

    Notes
    -----
    Two problems with equal fingerprints agree at the probe points to 12
    digits and have the same source; the name is not used.  Changing a
    function's code (or a constant it closes over that changes its values)
    changes the fingerprint, so results stored for the old function are not
    resumed.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.store import fingerprint
    >>> a = simdiff.Problem(lambda x, ops: ops.sum(x**2), x0=np.ones(2))
    >>> b = simdiff.Problem(lambda x, ops: ops.sum(x**3), x0=np.ones(2))
    >>> fingerprint(a) == fingerprint(a), fingerprint(a) == fingerprint(b)
    (True, False)
    """
    if not isinstance(problem, Problem):
        raise InputTypeError(f"fingerprint needs a simdiff.Problem; got {type(problem).__name__}")
    if backend is None:
        backend = next((b for b in ("jax", "torch") if problem.supports(b)), None)
    h = hashlib.sha256()
    h.update(f"n={problem.n};out={problem.output_shape};".encode())
    direction = np.random.default_rng(_SEED + 1).standard_normal(problem.n)
    for x in _probes(problem.x0, probes):
        try:
            if backend is None:
                row = [problem.evaluate(x)]
            elif problem.is_scalar:
                row = list(value_and_grad(problem, x, backend=backend))
            else:
                row = [
                    problem.evaluate(x, backend=backend),
                    jvp(problem, direction, x, backend=backend),
                ]
            h.update(";".join(_numbers(a) for a in row).encode())
        except Exception as exc:  # a failing probe is part of what the problem computes
            h.update(f"raised {type(exc).__name__}".encode())
        h.update(b"|")
    h.update(_source(problem.fn).encode())
    return h.hexdigest()
