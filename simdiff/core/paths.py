"""The paths of a derivative that choose a method or assemble the result on the host.

A Hessian is dense AD (the backend's method for ``method="auto"``), assembled
from the problem's structure (:class:`~simdiff.core.structure.StructuredHessian`,
dense or ``scipy.sparse``), or, beyond the memory budget, computed in chunks of
Hessian-vector products; a derivative runs the Taylor pass where the problem
runs in the Taylor context, nested AD otherwise; a derivative tensor nests
Jacobians or interpolates Taylor coefficients.

The functions take the :class:`~simdiff.Derivatives` ``d`` whose call they serve.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simdiff.backends import get_backend
from simdiff.core import arrays as A
from simdiff.core.boundary import is_traced, prepare
from simdiff.core.builders import (
    DERIVATIVE_METHODS,
    HESSIAN_METHODS,
    auto_hessian_method,
    check_order,
    choice,
)
from simdiff.core.structure import memory_budget
from simdiff.core.taylor_tensor import assemble_tensor
from simdiff.core.tree_calls import has_structure
from simdiff.errors import MemoryBudgetError, OptionError, ShapeError, UnsupportedError

__all__ = [
    "chunked_hessian",
    "dense_chunk",
    "hessian",
    "structured_hessian",
    "taylor_or",
    "taylor_tensor",
]


def hessian(d: Any, x: Any = None, *, method: str = "auto", sparse: bool = False) -> Any:
    """The Hessian of :meth:`Derivatives.hessian` (flat: not yet in the parameters' structure)."""
    method = choice(method, (*HESSIAN_METHODS, "structured"), "Hessian method")
    if not isinstance(sparse, (bool, np.bool_)):
        raise OptionError(f"sparse must be True or False; got {sparse!r}")
    structure = has_structure(d)
    structured = structure
    reason = None
    if structured and is_traced(x) and method in ("auto", "structured"):
        if sparse or method == "structured":
            raise UnsupportedError(
                f"the structured Hessian of {d.problem.name!r} is assembled on the host "
                "from the values of its pieces, and x is traced (inside a framework "
                "transform: no values): use method='auto' (the dense AD Hessian under "
                "tracing) or call outside the transform"
            )
        structured = False  # the dense AD Hessian: the same matrix, no host step
        reason = (
            "x traced (inside a framework transform): the structured Hessian assembles "
            "its pieces on the host, so the dense AD Hessian ran"
        )
    if sparse and method not in ("auto", "structured"):
        raise OptionError(
            f"sparse=True gives the structured Hessian; method={method!r} is the dense AD "
            "Hessian: use method='auto' (or 'structured') with sparse=True, or sparse=False"
        )
    if method == "structured" or (method == "auto" and structured):
        if not structured:
            what = "sparse=True" if sparse else "method='structured'"
            raise UnsupportedError(
                f"{what} needs a problem whose fn assembles its Hessian from "
                f"structure (e.g. simdiff.pes.term_energy); {d.problem.name!r} has none: "
                "use the dense Hessian (sparse=False) or simdiff.hvp (matrix-free)"
            )
        return structured_hessian(d, x, sparse=bool(sparse))
    if sparse:  # method "auto" on a problem without structure
        raise UnsupportedError(
            f"sparse=True needs a problem whose fn assembles its Hessian from structure "
            f"(e.g. simdiff.pes.term_energy); {d.problem.name!r} has none: use the dense "
            "Hessian (sparse=False) or simdiff.hvp (matrix-free)"
        )
    if method == "auto":
        m = math.prod(d.problem.output_shape)
        compiled = d.compile is not False and d.backend.optional_compiler
        method = auto_hessian_method(d.backend, d.problem.n, m, compiled=compiled)
    chunk = dense_chunk(d) if structure else None
    if chunk is not None:
        if reason is not None:  # chunks are assembled on the host
            raise MemoryBudgetError(
                f"the dense AD Hessian of {d.problem.name!r} exceeds the memory budget "
                "and x is traced (inside a framework transform), where neither its "
                "structured nor its chunked form can run: call outside the transform, or "
                "use simdiff.hvp (matrix-free)"
            )
        return chunked_hessian(d, x, chunk)
    return d._call("hessian", {"method": method}, x, [], reason)


def taylor_or(d: Any, method: str, fallback: str, taylor: str = "taylor") -> tuple[str, Any]:
    """``method``, with ``"auto"`` resolved: ``taylor`` if the problem runs in the Taylor
    context, else ``fallback`` and the reason; an explicit Taylor method it cannot run
    raises :class:`~simdiff.errors.UnsupportedError` naming the alternative."""
    if d.problem.supports("taylor"):
        return (taylor if method == "auto" else method), None
    why = (
        f"problem {d.problem.name!r} does not run in the Taylor context (its function "
        f"calls {d.problem.default_backend} directly: Problem.from_"
        f"{d.problem.default_backend})"
    )
    if method == "auto":
        if not d.backend.differentiable:
            raise UnsupportedError(
                f"{why}, and the {d.backend.name!r} context does not differentiate: "
                "no method can run; use a differentiating backend"
            )
        return fallback, f"{why}; {fallback!r} ran instead of {taylor!r}"
    if method != fallback:
        raise UnsupportedError(f"method={method!r} needs the Taylor context: {why}; "
                               f"use method={fallback!r} (or 'auto')")  # fmt: skip
    return method, None


def taylor_tensor(d: Any, order: int, x: Any = None, *, method: str = "nested") -> Any:
    """The tensor of :meth:`Derivatives.derivative_tensor` (flat), by ``method``."""
    order = check_order(order)
    method = choice(method, DERIVATIVE_METHODS, "derivative-tensor method")
    if method == "nested":
        return d._call("derivative_tensor", {"order": order}, x, [])
    method, _ = taylor_or(d, method, "nested")
    if is_traced(x):
        raise UnsupportedError(
            "derivative_tensor(method='taylor') interpolates Taylor coefficients on the "
            "host, and x is traced (inside a framework transform): use method='nested'"
        )
    x = d.problem.x0 if x is None else d.problem.flatten(x)
    src = A.backend_of(x)
    xs = np.asarray(src.to_numpy(x) if src.is_native(x) else x, dtype=np.float64)
    if xs.ndim not in (1, 2) or xs.shape[-1] != d.problem.n:
        raise ShapeError(
            f"x for problem {d.problem.name!r} must have shape ({d.problem.n},) or "
            f"(batch, {d.problem.n}); got {xs.shape}"
        )
    shape = d.problem.output_shape

    def coeffs(xb: np.ndarray, dirs: np.ndarray, k: int) -> Any:
        return np.asarray(d.taylor(k, dirs, xb))

    points = xs if xs.ndim == 2 else xs[None]
    out = np.stack([assemble_tensor(coeffs, p, order, shape) for p in points])
    out = out if xs.ndim == 2 else out[0]
    return A.convert_out(out, src, A.backend_of(out))


def structured_hessian(d: Any, x: Any, sparse: bool = False) -> Any:
    """The Hessian assembled from the structure of the problem's ``fn`` on the host."""
    x = d.problem.x0 if x is None else x
    src, a, _, _ = prepare(d, x, "x", (d.problem.n,), d.check_finite)
    xs = np.asarray(src.to_numpy(a), dtype=np.float64)
    d.problem.check_points(xs.reshape(-1, d.problem.n))
    h = d.problem.fn.structured_hessian(
        xs,
        d.backend.name,
        np.dtype(d.dtype).name,
        check_finite=d.check_finite,
        sparse=sparse,
        compile=d.compile,
        expected_calls=d.config.expected_calls,
    )
    d._structured_calls += 1
    if sparse:  # a scipy.sparse array, whatever the array type of x
        return h.astype(d.dtype, copy=False)
    return A.convert_out(h.astype(d.dtype, copy=False), src, get_backend("numpy"))


def dense_chunk(d: Any) -> int | None:
    """Tangents per batch for a dense Hessian within the memory budget (None: all at once)."""
    n = d.problem.n
    need = int(d.problem.fn.dense_hessian_bytes(n))
    budget = memory_budget()
    if need <= budget:
        return None
    chunk = int(n * budget // need)
    if chunk < 1:
        raise MemoryBudgetError(
            f"the dense AD Hessian of {d.problem.name!r} (n = {n}) would need about "
            f"{need / 2**30:.1f} GiB of intermediates ({need / n / 2**20:.1f} MiB per "
            f"Hessian-vector product) and {budget / 2**30:.1f} GiB are available; use "
            "method='structured' (assembled from the terms, the default) or "
            "simdiff.hvp (matrix-free)"
        )
    return chunk


def chunked_hessian(d: Any, x: Any, chunk: int) -> Any:
    """The dense Hessian as ``H e_i`` for batches of ``chunk`` unit vectors (H symmetric)."""
    n = d.problem.n
    x = d.problem.x0 if x is None else x
    src, a, batched, _ = prepare(d, x, "x", (n,), d.check_finite)
    if batched:
        raise ShapeError(
            f"a batch of points needs the Hessians at once, beyond the memory budget for "
            f"{d.problem.name!r}: pass one point of shape ({n},) at a time"
        )
    xs = np.asarray(src.to_numpy(a), dtype=np.float64)
    rows = []
    for s in range(0, n, chunk):
        e = np.zeros((chunk, n), dtype=d.dtype)  # a fixed chunk shape: one compilation
        m = min(chunk, n - s)
        e[np.arange(m), s + np.arange(m)] = 1.0
        rows.append(np.asarray(d._call("hvp", {"method": d.backend.hvp_method}, xs,
                                          [("v", e, (n,))]))[:m])  # fmt: skip
    return A.convert_out(np.concatenate(rows, axis=0), src, get_backend("numpy"))
