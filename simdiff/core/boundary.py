"""The call boundary of :class:`~simdiff.Derivatives`: conversion, checks, batching, trees.

What happens to the arguments of a derivative call before the compiled
function runs and to its result after: a point or direction given as a tree of
structured parameters is flattened (and the result put back in the structure),
an array of another framework or a list is converted, its dtype, shape and
finite values are checked, a leading batch axis is recognised, the problem's
own check of its points runs, and a traced argument (inside a framework
transform) is recognised and refused where its framework is not the backend.

The functions take the :class:`~simdiff.Derivatives` ``d`` whose call they serve.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simdiff.core import arrays as A
from simdiff.core.problem import Problem
from simdiff.errors import InputTypeError, NonFiniteError, ShapeError

__all__ = [
    "HOST_LEAVES",
    "check_points",
    "flat",
    "is_traced",
    "model_cause",
    "prepare",
    "resolve_backend",
    "structured",
    "traced_inputs",
]

#: Leaves of a point that give numpy results (the tree calls of :mod:`simdiff.core.tree_calls`).
NUMBERS = frozenset({float, int, np.float64})
HOST_LEAVES = NUMBERS | {np.ndarray}

#: Types that are never traced (what most points are made of): skipped without a lookup.
UNTRACED = frozenset({float, int, np.ndarray, np.float64, np.float32, type(None)})


def prepare(d: Any, a: Any, what: str, point_shape: tuple[int, ...], check: bool) -> tuple:
    """``(source backend, array, batched, device)`` of the argument ``a`` called ``what``:
    flattened where it is a tree of the parameters, converted where it is not an array of
    a framework, its dtype, shape (``point_shape``, or with a leading batch axis) and,
    with ``check``, finite values checked."""
    spec = d.problem.param_spec
    if spec is not None and point_shape == (d.problem.n,) and spec.is_input(a):
        a = spec.flatten(a, what)
    src = A.backend_of(a)
    a = src.from_numpy(a, None) if not src.is_native(a) else a  # lists, scalars
    A.check_input_dtype(a, src, what)
    ndim = len(point_shape)
    shape = tuple(int(s) for s in a.shape)
    if a.ndim not in (ndim, ndim + 1) or (ndim and shape[a.ndim - ndim :] != point_shape):
        want = f"{point_shape} or {('batch', *point_shape)}".replace("'batch'", "batch")
        raise ShapeError(
            f"{what} for problem {d.problem.name!r} must have shape {want}; got {shape}"
        )
    A.warn_low_precision(a, src, d.dtype, what)
    if check:
        A.check_finite_array(a, src, what)
    device = d.backend.device_of(a) if src is d.backend else None
    return src, a, a.ndim == ndim + 1, device


def model_cause(d: Any, src: Any, x: Any, batched: bool) -> Exception | None:
    """The model's own error at the first point where eager evaluation raises one
    (``Problem.failure_at``: an exhausted ``max_steps`` names the time reached), or None."""
    values = src.concrete(x)
    if values is None:
        return None
    values = np.asarray(values, dtype=np.float64)
    for row in values if batched else values[None]:
        cause = d.problem.failure_at(row, backend=d.backend.name)
        if cause is not None and not isinstance(cause, NonFiniteError):
            return cause
    return None


def check_points(d: Any, src: Any, x: Any, batched: bool) -> None:
    """``problem.check_point`` at each concrete point, outside any compiled function.

    A point that is symbolic (a tracer: the function face under a
    framework transform) is not checked here.
    """
    if not d.problem.checks_points:
        return  # nothing to check: no conversion
    values = src.concrete(x)
    if values is None:
        return
    values = np.asarray(values, dtype=np.float64)
    d.problem.check_points(values if batched else values[None])


def traced_inputs(d: Any, inputs: list[tuple[Any, Any, str]], kind: str) -> bool:
    """Whether any input is traced (inside a framework transform); refuse a foreign one.

    ``inputs``: ``(src, array, name)``.  A traced array can only be
    computed on by its own framework: it has no values to convert.
    """
    traced = False
    for src, a, name in inputs:
        if not src.is_traced(a):
            continue
        if src is not d.backend:
            raise InputTypeError(
                f"simdiff.{kind} of problem {d.problem.name!r}: {name} is a traced "
                f"{src.name} array (inside a {src.name} transform) but the derivative "
                f"runs on backend {d.backend.name!r}; a traced value has no numbers "
                f"to convert: use backend={src.name!r}"
                + ("" if d.problem.supports(src.name) else
                   f" with a problem that runs there (this one runs on "
                   f"{list(d.problem.backends)})")
                + ", or call outside the transform"
            )  # fmt: skip
        traced = True
    return traced


def is_traced(a: Any) -> bool:
    """Whether ``a`` is a traced array of any framework (inside one of its transforms)."""
    if a is None:
        return False
    src = A.backend_of(a)
    return bool(src.is_native(a) and src.is_traced(a))


def resolve_backend(problem: Problem, backend: Any, *arrays: Any) -> Any:
    """``backend``, or for ``None`` the backend of a traced argument (inside a framework
    transform, where only that framework can compute; a leaf of structured parameters
    counts) the problem runs on, else ``problem.default_backend``."""
    if backend is not None:
        return backend
    spec = problem.param_spec
    for arg in arrays:
        tree = spec is not None and spec.is_input(arg)
        for a in spec.leaves(arg) if tree else (arg,):  # type: ignore[union-attr]
            if type(a) in UNTRACED:
                continue
            if is_traced(a):
                name = A.backend_of(a).name
                if problem.supports(name):
                    return name
    return problem.default_backend


def flat(problem: Problem, a: Any, what: str = "x") -> Any:
    """``a`` as the flat vector where it is a tree of ``problem``'s parameters (flattened once,
    here, before the backend is chosen and the point checked), else ``a`` itself."""
    spec = getattr(problem, "param_spec", None)  # not a Problem: the caller's check says so
    if spec is None or a is None or not spec.is_input(a):
        return a
    return spec.flatten(a, what)


def structured(problem: Problem, kind: str, out: Any, order: int = 0) -> Any:
    """``out`` in the structure of ``problem``'s parameters where it has one."""
    spec = problem.param_spec
    return out if spec is None else spec.unflatten_tree(out, kind, order)
