"""The built callables of a :class:`~simdiff.Derivatives`: build, compile, cache, call.

One callable per derivative kind, options, batching pattern, input shapes,
dtype and device (the key of ``d._fns``), built by :func:`make` from the
builders (:mod:`simdiff.core.builders`), mapped over a batch axis, compiled
under the compile policy (:mod:`simdiff.core.compile`: jit on JAX;
``torch.compile`` on torch with ``compile=True`` or ``"auto"``), and counted
(``d.compilations``).  :func:`call` is the general path of every derivative
call: the boundary's checks (:mod:`simdiff.core.boundary`), the callable looked
up or built, run under the leak guard (:mod:`simdiff.core.leaks`), its record
(``d._info``, what :meth:`Derivatives.cache_info` reports) updated and its
result checked and converted.

The functions take the :class:`~simdiff.Derivatives` ``d`` whose callables they keep.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff._log import get_logger
from simdiff.backends._tree import tree_map
from simdiff.core import arrays as A
from simdiff.core.boundary import check_points, model_cause, prepare, traced_inputs
from simdiff.core.builders import build
from simdiff.core.compile import CompiledCall
from simdiff.core.leaks import guarded, leak, leak_guard, run_probe
from simdiff.errors import NonFiniteError, ShapeError, UnsupportedError

__all__ = ["NO_AD_KINDS", "SCALAR_ONLY", "TOP_LEVEL_KINDS", "call", "make", "plain", "records"]

_log = get_logger(__name__)

#: Derivatives defined for scalar-valued problems only.
SCALAR_ONLY = frozenset({"grad", "value_and_grad", "hvp"})
#: What the numpy context can do (it evaluates, it does not differentiate).
NO_AD_KINDS = frozenset({"value", "taylor", "taylor_derivative", "derivative_sum"})
#: Derivatives whose transforms run at the top level on torch (plain autograd, no
#: torch.func level), where a problem's own compiled parts (an ODE step) apply.
TOP_LEVEL_KINDS = frozenset({"value", "grad", "value_and_grad", "vjp"})


def call(
    d: Any,
    kind: str,
    params: dict[str, Any],
    x: Any,
    extras: list,
    reason: str | None = None,
) -> Any:
    """``kind`` with ``params`` at ``x`` and the ``extras`` (``(name, array, point shape)``):
    the general path of every derivative call of ``d``; ``reason`` is recorded as the
    callable's ``method_reason`` (why ``method="auto"`` ran another method)."""
    problem = d.problem
    if not d.backend.differentiable and kind not in NO_AD_KINDS:
        raise UnsupportedError(
            f"simdiff.{kind} is not available in the {d.backend.name!r} context: it "
            "evaluates (values and Taylor coefficients) but does not differentiate; "
            "use backend='jax' or backend='torch'"
        )
    if kind in SCALAR_ONLY and not problem.is_scalar:
        raise ShapeError(
            f"simdiff.{kind} needs a scalar-valued problem; {problem.name!r} returns shape "
            f"{problem.output_shape} (use jacobian, jvp or vjp)"
        )
    check = d.check_finite
    x = problem.x0 if x is None else x
    xsrc, x, xb, device = prepare(d, x, "x", (problem.n,), check)
    check_points(d, xsrc, x, xb)  # may rebuild what fn holds (a neighbour list)
    generation = problem.cache.refresh()
    if generation != d._generation:  # the definition changed: rebuild, re-probe
        d._fns.clear()
        d._fused.clear()
        d._fused_keys.clear()
        d._info.clear()
        d.probe_result = None
        d._generation = generation
    prepared = [prepare(d, e, name, shape, check) for name, e, shape in extras]
    names = [name for name, _, _ in extras]
    inputs = [(xsrc, x, "x")] + [
        (k, a, nm) for (k, a, _, _), nm in zip(prepared, names, strict=True)
    ]
    traced = traced_inputs(d, inputs, kind)
    batches = {int(x.shape[0])} if xb else set()
    batches |= {int(a.shape[0]) for _, a, b, _ in prepared if b}
    if len(batches) > 1:
        raise ShapeError(f"batch sizes of x and {[e[0] for e in extras]} differ: {sorted(batches)}")
    axes = (0 if xb else None, *(0 if b else None for _, _, b, _ in prepared))
    arrays = [(xsrc, x)] + [(k, a) for k, a, _, _ in prepared]
    key = (
        kind,
        tuple(sorted(params.items())),
        axes,
        tuple(tuple(int(s) for s in a.shape) for _, a in arrays),
        d._dtype_name,
        str(device),
    )
    fn = d._fns.get(key)
    if fn is not None and d.backend.calls_take_numpy:  # built: numpy points as they are
        native = [a if type(a) is np.ndarray and a.dtype == d.dtype
                  else A.to_backend(a, k, d.backend, d.dtype, device)
                  for k, a in arrays]  # fmt: skip
    else:
        native = [A.to_backend(a, k, d.backend, d.dtype, device) for k, a in arrays]
    if fn is None:
        fn = d._fns[key] = make(d, kind, params, axes, device, key)
        d._info[key] = {
            "kind": kind,
            **params,
            "shape": tuple(x.shape),
            "batched": any(a is not None for a in axes),
            "calls": 0,
            "traced_calls": 0,
            "compile": d.compile,
            "path": d.backend.plain_path,
        }
        if reason is not None:
            d._info[key]["method_reason"] = reason
        if traced:  # building it now, inside the caller's trace: no honest timing
            d._info[key]["first_call_s"] = math.nan
            out = guarded(d, lambda: plain(fn)(*native), kind, fn, guard=False)
        else:
            if d.probe and isinstance(fn, CompiledCall) and fn.mode is True:
                # once, before the first trace: the same callable eagerly, under the leak
                # guard, so that a leak the compiled graph would carry raises at its op
                # ("auto" runs its first calls eagerly, under the guard, before it compiles)
                guarded(d, lambda: fn.eager(*native), kind)
            start = time.perf_counter()
            out = guarded(d, lambda: d.backend.block_until_ready(fn(*native)), kind, fn)
            d._info[key]["first_call_s"] = time.perf_counter() - start  # honest first call
            _log.debug(
                "%s of %r on %s built; first call %.3g s (shape %s)",
                kind, d.problem.name, d.backend.name,
                d._info[key]["first_call_s"], tuple(x.shape),
            )  # fmt: skip
            if d.probe and d.probe_result is None and kind not in NO_AD_KINDS:
                run_probe(d, kind, native[0], xb, out, device)
    else:
        info = d._info[key]
        watched = not traced and d.probe
        try:
            if traced:
                out = plain(fn)(*native)
            elif watched:
                with leak_guard(d):  # a leak at this point raises, at the op
                    out = fn(*native)
            else:
                out = fn(*native)
        except Exception as exc:  # the framework's leak errors become LeakError
            raise leak(d, exc, kind) from exc
        first_concrete = not traced and info["calls"] == info["traced_calls"]
        if first_concrete and d.probe and d.probe_result is None:
            if kind not in NO_AD_KINDS:  # the probe waits for a call with values
                run_probe(d, kind, native[0], xb, out, device)
    d._info[key]["calls"] += 1
    d._info[key]["traced_calls"] += int(traced)
    host = not traced and xsrc is not d.backend and type(x) is np.ndarray
    if host:  # the caller's arrays are numpy: one copy to the host, checked there
        out = tree_map(d.backend.to_numpy, out)
    if check:
        try:
            tree_map(lambda y: A.check_finite_result(y, d.backend, f"simdiff.{kind}"), out)
        except NonFiniteError as exc:  # a compiled call only says NaN: ask the model why
            cause = model_cause(d, xsrc, x, xb)
            if cause is not None:
                raise cause from exc
            raise
    if traced or host:  # inside the caller's transform: the backend's own (traced) arrays
        return out
    return tree_map(lambda y: A.convert_out(y, xsrc, d.backend), out)


def make(
    d: Any, kind: str, params: dict[str, Any], axes: tuple, device: Any, key: tuple
) -> Callable:
    T = d.backend
    with T.building():  # possibly inside the caller's trace: constants stay values
        core = build(kind, params, d.problem, T.ops(d.dtype, device), T)
    if any(a is not None for a in axes):
        core = T.vmap(core, in_axes=axes)
    core = T.jit(core, on_compile=d._count_compilation, step_loop=d.problem.step_loop)
    if d.compile is False or not T.optional_compiler:
        return core
    # "auto" insists on one whole graph: a graph break would otherwise run
    # eagerly behind the compiled wrapper, and the break-even would be a fiction.
    compiler = T.compile if d.compile is True else fullgraph(T.compile)
    part = d.problem.compiles_parts
    parts_ops = None
    if part is not None and kind in TOP_LEVEL_KINDS and all(a is None for a in axes):
        # the problem compiles a part of itself (an ODE's step loop)
        parts_ops = T.ops_compiling_parts(d.dtype, device)
    if parts_ops is not None:
        compiler = lambda fn: build(kind, params, d.problem, parts_ops, T)  # noqa: E731
    # batched: the point itself (axis 0 is x's); a batch of directions alone does not count
    refusal = T.compile_refusal(kind, params, d.problem.is_scalar, batched=axes[0] == 0)
    if refusal is not None:  # a crash no try can catch: fail like a compile failure
        compiler = refused(refusal)
    ident = (d.problem.name, d.problem.n, *key)  # what compile-time estimates match
    call = CompiledCall(core, compiler, d.compile, kind, lambda: d.config.expected_calls, ident)
    call.record["compiles"] = part if parts_ops is not None else "the whole callable"
    return call


def plain(fn: Callable) -> Callable:
    """The uncompiled callable behind ``fn``: what a traced input runs (no torch.compile
    inside a ``torch.func`` transform; on JAX the jitted core, which nests in the caller's
    trace)."""
    return fn.eager if isinstance(fn, CompiledCall) else fn


def fullgraph(compile: Callable) -> Callable[[Callable], Callable]:
    return lambda fn: compile(fn, fullgraph=True)


def refused(reason: str) -> Callable[[Callable], Callable]:
    def compiler(fn: Callable) -> Callable:
        raise UnsupportedError(reason)

    return compiler


def records(d: Any) -> list[dict[str, Any]]:
    """One record per built callable of ``d``, then the problem's own records (the
    structured Hessian's pieces, its notes, a neighbour list): what
    :meth:`Derivatives.cache_info` returns."""
    out = []
    for key, info in d._info.items():
        fn = d._fns[key]
        out.append({**info, **fn.record} if isinstance(fn, CompiledCall) else dict(info))
    if d._structured_calls:  # the structured Hessian: its pieces' computations
        pieces = d.problem.fn.structured_cache_info(
            d.backend.name, np.dtype(d.dtype).name, d.compile
        )
        base = {"kind": "hessian", "method": "structured", "calls": d._structured_calls}
        base["shape"] = (d.problem.n,)
        out += [{**r, **base, "piece_kind": r["kind"], "piece_shape": r["shape"],
                 "piece_calls": r["calls"]} for r in pieces]  # fmt: skip
    out += d.problem.cache_notes()  # what the problem decided when built
    account = getattr(d.problem.fn, "neighbour_list", None)
    lists = account() if callable(account) else None
    if lists is not None:  # a cutoff neighbour list: its size and rebuilds so far
        out.append({"kind": "neighbour_list", **lists})
    return out
