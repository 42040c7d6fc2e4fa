"""The steady tree call: a derivative at a tree of structured parameters as one compiled call.

Where a problem's parameters are a tree (``problem.param_spec``), a steady call
of ``grad``, ``value_and_grad`` or ``hessian`` skips the general path
(flatten, convert, check, call, split): on a backend that fuses wrappers into
its compiled calls (JAX) the leaves are joined inside one compiled function
(:func:`fuse`); on an eager framework (torch) they are joined in one operation
(:func:`joined_call`); numpy leaves and numbers are read into one float64
vector (:func:`host_call`).  Each path checks the point and the result as the
general path does, and returns None where the general path must run (to name a
non-finite entry, or because the problem changed).  docs/parameters.md, Cost.

The functions take the :class:`~simdiff.Derivatives` ``d`` whose call they serve
and read its built callables (``d._fns``, ``d._info``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np

from simdiff.core.boundary import HOST_LEAVES
from simdiff.core.builders import HESSIAN_METHODS, auto_hessian_method
from simdiff.core.leaks import leak, leak_guard
from simdiff.core.structure import StructuredHessian

__all__ = [
    "checked",
    "finish",
    "fuse",
    "fused_call",
    "fused_key",
    "has_structure",
    "host_call",
    "joined_call",
    "steady",
]


def fused_call(d: Any, kind: str, parts: list[Any], method: str = "auto") -> Any:
    """``kind`` (``"grad"``, ``"value_and_grad"``, ``"hessian"``) at the point whose
    leaves are ``parts`` (flat order, :meth:`ParamSpec.matching_leaves`), in the
    parameters' structure, as one compiled call; None where it takes the general path
    (flatten, ``callables.call``, split).

    The fast path serves a steady call: the problem's parameters are a tree, the
    backend fuses wrappers into its compiled calls (``Backend.fuses_wrappers``: JAX),
    every leaf is a concrete array of the backend in the computation's dtype and its
    leaf's shape (unbatched; or every leaf a float64 numpy array or a number, for
    numpy results in float64), the flat derivative was built and probed by an earlier
    call and the problem is unchanged since.  The leaves are joined inside the compiled
    derivative (no dispatch of their own), a gradient comes back from the same call
    split into the leaves, and the point's finite check is folded into the result's
    (NaN where an entry of the point is not finite).  The result is checked on the
    host, as on the general path (one read of the flat result), and a problem that
    checks its points (an ODE's fixed-step stability check) checks the point read from
    the same call before the result is returned.  Where the result is not finite, None:
    the general path then raises the error that names the entry.
    """
    T = d.backend
    spec = d.problem.param_spec
    if spec is None:
        return None
    host = type(parts[0]) in HOST_LEAVES  # numpy leaves and numbers: numpy results
    x = None
    if host:  # read into one float64 vector here: one transfer, not one per leaf
        if d._dtype_name != "float64":
            return None
        x = spec.host_vector(parts)
        if x is None:
            return None
    elif not T.concrete_leaves(parts, spec.shapes, d.dtype):
        return None
    device = None if host else T.device_of(parts[0])  # a numpy point: the default device
    key = d._fused_keys.get((kind, method, device))
    if key is None:
        key = fused_key(d, kind, method, device)
        if key is None:
            return None
    info = d._info.get(key)
    if (
        info is None
        or info["calls"] == info["traced_calls"]
        or (d.probe and d.probe_result is None)
        or d.problem.cache.refresh() != d._generation
    ):
        return None  # not built, not probed, or the problem changed: the general path
    checks = d.problem.checks_points
    if x is not None:  # host leaves, read into one vector
        if checks and not checked(d, x):
            return None
        return d._host_call(kind, key, info, x)
    if not T.fuses_wrappers:  # an eager framework: one join, the flat derivative, a split
        return d._joined_call(kind, key, info, parts, checks)
    split = kind in ("grad", "value_and_grad")
    fused = d._fused.get((key, split, checks))
    if fused is None:
        device = T.device_of(parts[0])
        fused = d._fused[key, split, checks] = fuse(d, kind, d._fns[key], device, split, checks)
    out = steady(d, fused, parts, kind)
    if checks and not checked(d, T.to_numpy(out[-1])):
        return None  # the point was refused (raised) or fn rebuilt: the general path
    flat = out[0]
    results = (flat[0], flat[1]) if kind == "value_and_grad" else (flat,)
    if d.check_finite and not all(np.isfinite(T.to_numpy(y)).all() for y in results):
        return None  # the general path names the non-finite entry
    info["calls"] += 1
    if kind == "value_and_grad":
        return flat[0], spec._assemble(list(out[1]))
    if split:
        return spec._assemble(list(out[1]))
    return spec.unflatten_tree(flat, kind)


def joined_call(
    d: Any, kind: str, key: tuple, info: dict[str, Any], parts: list[Any], checks: bool
) -> Any:
    """The steady tree call at concrete leaves of an eager framework (torch): the leaves
    joined in one operation (:meth:`ParamSpec._join_native`), the flat derivative
    called as ``callables.call`` calls it, the point and the result checked on the host, the
    result split into the structure (views: one operation or two)."""
    T = d.backend
    spec = d.problem.param_spec
    x = parts[0] if spec._whole is not None else T.join(parts, ())  # leaves checked
    point = T.to_numpy(x)
    if d.check_finite and not np.isfinite(point).all():
        return None  # the general path names the non-finite entry
    if checks and not checked(d, point):
        return None
    return finish(d, kind, info, steady(d, d._fns[key], x, kind), T.to_numpy)


def checked(d: Any, x: np.ndarray) -> bool:
    """The problem's check of the point ``x`` (numpy ``(n,)``) on the fast path: raises
    the problem's error; False where ``x`` is not finite (the general path names the
    entry) or where the check rebuilt what ``fn`` holds (the general path rebuilds the
    derivatives)."""
    if d.check_finite and not np.isfinite(x).all():
        return False
    d.problem.check_points(x[None])
    return d.problem.cache.refresh() == d._generation


def has_structure(d: Any) -> bool:
    """Whether the problem's ``fn`` is a :class:`~simdiff.core.structure.StructuredHessian`,
    kept per ``fn`` object (a check against a runtime protocol walks all its members,
    which would otherwise run on every Hessian call)."""
    fn = d.problem.fn
    known = d._structure_of
    if known is None or known[0] is not fn:
        known = d._structure_of = (fn, isinstance(fn, StructuredHessian))
    return known[1]


def fused_key(d: Any, kind: str, method: str, device: Any) -> tuple | None:
    """The key of the flat derivative a steady tree call of ``kind`` runs (that of
    ``callables.call`` at an unbatched point on ``device``), kept per ``(kind, method,
    device)``; None where the tree call does not serve it (a structured Hessian, an
    unknown method)."""
    T = d.backend
    params: dict[str, Any] = {}
    if kind == "hessian":
        if has_structure(d) or method not in HESSIAN_METHODS:
            return None
        chosen = method
        if method == "auto":
            m = math.prod(d.problem.output_shape)
            compiled = d.compile is not False and T.optional_compiler
            chosen = auto_hessian_method(T, d.problem.n, m, compiled=compiled)
        params = {"method": chosen}
    key = (kind, tuple(sorted(params.items())), (None,), ((d.problem.n,),),
           d._dtype_name, str(device))  # fmt: skip
    d._fused_keys[kind, method, device] = key
    return key


def host_call(d: Any, kind: str, key: tuple, info: dict[str, Any], x: np.ndarray) -> Any:
    """The steady tree call at numpy leaves or numbers read into the float64 vector
    ``x``: the flat derivative called as ``callables.call`` calls it, the point and the result
    checked on the host, the result split into the structure by views (numpy)."""
    T = d.backend
    if d.check_finite and not np.isfinite(x).all():
        return None  # the general path names the non-finite entry
    native = x if T.calls_take_numpy else T.from_numpy(x, d.dtype)
    out = steady(d, d._fns[key], native, kind)
    if kind == "value_and_grad":
        out = (T.to_numpy(out[0]), T.to_numpy(out[1]))
    else:
        out = T.to_numpy(out)
    return finish(d, kind, info, out, np.asarray)


def steady(d: Any, fn: Callable, x: Any, kind: str) -> Any:
    """``fn(x)`` for a steady tree call: under the backend's leak guard where the leak
    checks are on; the framework's leak errors become ``LeakError``."""
    try:
        with leak_guard(d) if d.probe else nullcontext():
            return fn(x)
    except Exception as exc:
        raise leak(d, exc, kind) from exc


def finish(
    d: Any, kind: str, info: dict[str, Any], out: Any, read: Callable[[Any], np.ndarray]
) -> Any:
    """The flat result ``out`` of a steady tree call (:func:`joined_call`,
    :func:`host_call`) in the parameters' structure, checked on the host (``read``
    gives its values there); None where it is not finite (the general path names the
    entry)."""
    results = out if kind == "value_and_grad" else (out,)
    if d.check_finite and not all(np.isfinite(read(y)).all() for y in results):
        return None  # the general path names the non-finite entry
    info["calls"] += 1
    spec = d.problem.param_spec
    if kind == "value_and_grad":
        return out[0], spec.unflatten(out[1])
    return spec.unflatten_tree(out, kind)


def fuse(
    d: Any, kind: str, fn: Callable, device: Any, split: bool = False, point: bool = False
) -> Callable:
    """One compiled function of a tree's leaves: they are joined and ``fn`` called, and
    the result is NaN in the entries of the point that are not finite (the columns of
    a Hessian), checked on the host; ``(result, ...)``.

    ``split`` (a gradient of framework leaves): the gradient split into the
    parameters' leaves follows the flat result (read on the host for its check, one
    array; the leaves are what the caller gets).  ``point``: the joined point follows
    too (what the problem's check of its points reads, one array).

    Elementwise only (``where(isfinite(x), ...)``, no reduction): a reduction is a
    kernel of its own on XLA's CPU runtime, and a kernel's launch can cost more than
    the work of a cheap function (docs/parameters.md, Cost).
    """
    ops = d.backend.ops(d.dtype, device)
    spec = d.problem.param_spec

    def leaves(g: Any) -> tuple[Any, ...]:  # a gradient split into the parameters' leaves
        pieces = zip(spec._bounds, spec.shapes, strict=True)
        return tuple(g[a] if shape == () else ops.reshape(g[a:b], shape)
                     for (a, b), shape in pieces)  # fmt: skip

    def fused(parts: list[Any]) -> Any:
        x = ops.concat([ops.reshape(p, (-1,)) for p in parts], axis=0)
        finite = ops.isfinite(x)  # per entry: NaN in the gradient's entry, a Hessian's column
        out = fn(x)
        if kind == "value_and_grad":
            out = (out[0], ops.where(finite, out[1], math.nan))
        else:
            out = ops.where(finite, out, math.nan)
        result: tuple[Any, ...] = (out,)
        if split:
            result += (leaves(out[1] if kind == "value_and_grad" else out),)
        return (*result, x) if point else result

    return d.backend.jit(fused, on_compile=d._count_compilation, step_loop=d.problem.step_loop)
