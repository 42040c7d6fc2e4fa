"""Functions compiled by Inductor from a trace, called without Dynamo.

``torch.compile`` enters every call of a compiled function through Dynamo:
its frame hook, its guards on the inputs and on global state, then
AOTAutograd's runtime wrapper and Inductor's generated Python.  For the
small graphs simdiff calls thousands of times per derivative (an ODE step
and its VJP with the loop on the host, :class:`~simdiff.backends.torch._RematPart`)
that entry was the larger part of each call.  :class:`TracedGraph` builds
the graph once per input signature instead -- ``make_fx`` on fake tensors,
then Inductor (``torch._inductor.standalone_compile``) -- and calls
Inductor's code directly, after a check of its own that the tensor inputs
have the shapes, strides, dtypes and devices it was built for (what
Dynamo's tensor guards check); another signature builds another graph.

What the traced function reads besides its tensor arguments -- its closure,
constants, numpy arrays, the Python values among its arguments (these are
part of the signature) -- is baked into the graph, as in ``jax.jit``: for a
function built once with a fixed closure (a solver's step).  A function that
is not one graph fails while it is traced: a Python branch or a read of a
value (``float(x)``, ``x.item()``) on a fake tensor raises torch's
data-dependent error, as ``torch.compile(fullgraph=True)`` refuses it.

The graphs are built and run with gradients off: an inference graph, no
AOTAutograd backward (the callers differentiate by recomputation).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch._inductor
from torch.fx.experimental.proxy_tensor import make_fx

from simdiff.backends._tree import tree_flatten, tree_unflatten
from simdiff.backends.torch.leaks import paused

__all__ = ["TracedGraph"]

#: The warnings Inductor logs while it builds a graph that say nothing to simdiff's user:
#: (logger, a fragment of the message).  ``standalone_compile`` cannot bundle its cache
#: artifacts for saving to disk, which simdiff never does (the graph is compiled and used in
#: memory); the C++ wrapper calls an ATen kernel that has no C shim (``linalg_inv_ex``)
#: through its proxy executor.
_QUIET = (
    ("torch._inductor.standalone_compile", "standalone_compile artifact generation failed"),
    ("torch._inductor.ir", "is missing a c-shim implementation, using proxy executor"),
)
_NON_LEAF_GRAD = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"


class _Unsaid(logging.Filter):
    def __init__(self, fragment: str) -> None:
        super().__init__()
        self.fragment = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return self.fragment not in record.getMessage()


@contextlib.contextmanager
def _quiet_build() -> Iterator[None]:
    filters = [(logging.getLogger(name), _Unsaid(fragment)) for name, fragment in _QUIET]
    for log, quiet in filters:
        log.addFilter(quiet)
    try:
        yield
    finally:
        for log, quiet in filters:
            log.removeFilter(quiet)


def _signature(x: Any, tensors: list[Any]) -> Any:
    """The signature of ``x`` (hashable), its tensors appended to ``tensors`` in the order of
    :func:`~simdiff.backends._tree.tree_flatten`'s leaves."""
    if isinstance(x, torch.Tensor):
        tensors.append(x)
        return (x.shape, x.stride(), x.dtype, x.device)
    if isinstance(x, (tuple, list)):
        return (type(x), *[_signature(c, tensors) for c in x])
    if isinstance(x, dict):
        return (dict, *[(k, _signature(x[k], tensors)) for k in sorted(x)])
    return (type(x), x)


class TracedGraph:
    """``fn`` compiled per input signature by ``make_fx`` and Inductor; calls skip Dynamo.

    ``TracedGraph(fn, options)(*args)`` is ``fn(*args)`` with gradients off,
    computed by the Inductor code of ``fn``'s graph for the signature of
    ``args``: their pytree structure, each tensor's shape, strides, dtype and
    device, and the value of each other leaf (hashable).  ``options`` are
    Inductor's settings for its build.  ``graphs`` counts the graphs built,
    ``TracedGraph.built`` those of every instance in the process.

    Cost per call: flattening the arguments, a dictionary look-up of their
    signature, and Inductor's runtime wrapper with its generated wrapper code
    (Python, or C++ with ``options={"cpp_wrapper": True}``), which allocates
    the graph's buffers and calls its kernels.  The first call of a signature
    traces and compiles (the function's code runs once on fake tensors).
    """

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any]) -> None:
        self.fn = fn
        self.options = options
        # signature -> (compiled graph, output structure, the output's non-tensor leaves
        # with None where a tensor goes)
        self._graphs: dict[Any, tuple[Callable[..., Any], Any, list[Any]]] = {}
        self.graphs = 0

    #: graphs built by every instance in this process
    built = 0

    def __call__(self, *args: Any) -> Any:
        tensors: list[Any] = []
        key = _signature(args, tensors)
        entry = self._graphs.get(key)
        if entry is None:
            entry = self._graphs[key] = self._build(*tree_flatten(args))
        compiled, out_def, out_static = entry
        if torch.is_grad_enabled():
            with torch.no_grad():
                flat = compiled(*tensors)
        else:
            flat = compiled(*tensors)
        it = iter(flat)
        return tree_unflatten(out_def, [next(it) if s is None else s for s in out_static])

    def _build(self, leaves: list[Any], treedef: Any) -> tuple[Callable[..., Any], Any, list[Any]]:
        where = tuple(i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor))
        static = [None if isinstance(x, torch.Tensor) else x for x in leaves]
        out: dict[str, Any] = {}

        def flat_fn(*tensors: Any) -> tuple[Any, ...]:
            full = list(static)
            for i, x in zip(where, tensors, strict=True):
                full[i] = x
            result, out["def"] = tree_flatten(self.fn(*tree_unflatten(treedef, full)))
            out["static"] = [None if isinstance(r, torch.Tensor) else r for r in result]
            return tuple(r for r in result if isinstance(r, torch.Tensor))

        inputs = [leaves[i].detach() for i in where]
        # traced and compiled with the leak guard paused (its wrappers would judge the fake
        # tensors, and its dispatch-level kernel cannot take them): the function ran eagerly
        # under the guard before it is compiled (``Derivatives`` runs it eagerly first)
        with torch.no_grad(), paused(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", _NON_LEAF_GRAD, UserWarning)
            gm = make_fx(flat_fn, tracing_mode="fake")(*inputs)
            with torch._inductor.config.patch(self.options), _quiet_build():
                art = torch._inductor.standalone_compile(
                    gm, inputs, dynamic_shapes="from_example_inputs"
                )
        self.graphs += 1
        TracedGraph.built += 1
        return art, out["def"], out["static"]
