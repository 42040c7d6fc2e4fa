"""The torch compile machinery: ``torch.compile`` of simdiff's callables and compiled parts.

:func:`compile_function` compiles one callable (``TorchBackend.compile``);
:class:`_PartCompiler` compiles the small pure parts a loop calls
(``ops.compile_part``), :class:`_RematPart` differentiates one by
recomputation; :func:`_graph_while_loop` is ``ops.while_loop`` inside a
compiled part; :func:`_forward_levels` counts the nested forward levels that
``TorchBackend.compile_refusal`` reads.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.func

from simdiff.backends._tree import tree_flatten, tree_unflatten
from simdiff.backends.torch.dispatch import dispatch_paused
from simdiff.backends.torch.leaks import paused
from simdiff.backends.torch.traced import TracedGraph
from simdiff.backends.torch.transforms import _in_transform, _kept_buffers

__all__ = ["INDUCTOR_MIN_CHUNK", "compile_function"]

#: A tracked zero made outside every compiled region (Dynamo refuses to create a leaf
#: that requires grad inside one): :func:`_graph_while_loop` adds ``0 * _ANCHOR`` to each
#: floating carry leaf.
_ANCHOR = torch.zeros((1,), dtype=torch.float64, requires_grad=True)


def _scalars_lifted(args: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """``args`` with each 0-d float64 CPU tensor as a 1-element vector, and their positions.

    Dynamo's fake tensor of a 0-d float64 CPU input carries a symbolic float
    for its ``item()``; when the graph does not turn that float into tensor
    arithmetic, torch 2.13 specialises it and traces the whole function again
    ("Restarting analysis due to ... _tensorify_python_scalars"): a
    compiled dopri5 loop, whose step size is such an input, traced twice,
    the first trace discarded (docs/performance.md).  A 1-element vector has no
    such float; :func:`_scalars_restored` makes it 0-d again inside the graph
    (a view, no copy).  Not a tensor that requires grad: its vector would be a
    view outside the graph, a non-leaf input whose ``.grad`` Dynamo reads
    (torch warns).
    """
    scalars = tuple(
        i for i, a in enumerate(args)
        if isinstance(a, torch.Tensor) and a.dim() == 0 and a.dtype == torch.float64
        and a.device.type == "cpu" and not a.requires_grad
    )  # fmt: skip
    if not scalars:
        return args, scalars
    return tuple(a.reshape(1) if i in scalars else a for i, a in enumerate(args)), scalars


def _scalars_restored(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called with the arguments :func:`_scalars_lifted` made vectors back at 0-d."""

    @functools.wraps(fn)
    def restored(*args: Any, _simdiff_scalars: tuple[int, ...] = (), **kwargs: Any) -> Any:
        args = tuple(a.reshape(()) if i in _simdiff_scalars else a for i, a in enumerate(args))
        return fn(*args, **kwargs)

    return restored


def _graph_while_loop(
    cond: Callable[[Any], Any], body: Callable[[Any], Any], carry: Any, max_steps: int
) -> Any:
    """``ops.while_loop`` as ``torch._higher_order_ops.while_loop``, inside a compiled part.

    A counter bounds the loop at ``max_steps``.  Every floating carry leaf
    enters the loop as ``leaf + 0 * _ANCHOR``, always: in torch 2.13 the
    gradient of the loop's output with respect to a tensor the body closes
    over (an ODE's parameters) is silently wrong -- the backward does not
    flow into it -- unless the carry leaf through which it flows already
    requires grad at loop entry (cf. pytorch#184528); a carry leaf computed
    from another tracked tensor was measured not to be enough, a leaf tied to
    a tracked leaf created outside the compiled region is
    (``tests/test_ode_compiled_loop.py`` fails without it).  The op supports
    only first-order reverse mode by plain autograd outside the compiled
    region: under ``torch.func`` transforms it fails ("Expected FakeTensor"),
    and double backward is refused (compiled) or silently 0 (eager), so only
    the top-level contexts of ``Backend.ops_compiling_parts`` reach it.
    """
    from torch._higher_order_ops import while_loop as graph_while
    from torch.utils import _pytree

    leaves, spec = _pytree.tree_flatten(carry)

    def entering(x: Any) -> Any:
        x = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
        if x.is_floating_point():
            return x + 0.0 * _ANCHOR.to(x.dtype).reshape(())
        return x

    def running(i: Any, *xs: Any) -> Any:
        return (i < max_steps) & cond(_pytree.tree_unflatten(list(xs), spec))

    def step(i: Any, *xs: Any) -> tuple[Any, ...]:
        out = _pytree.tree_leaves(body(_pytree.tree_unflatten(list(xs), spec)))
        return (i + 1, *out)

    start = (torch.zeros((), dtype=torch.int64), *(entering(x) for x in leaves))
    out = graph_while(running, step, start)
    return _pytree.tree_unflatten(list(out[1:]), spec)


def _numpy_guards_dropped(entries: Any) -> list[bool]:
    """Dynamo guard filter: keep every guard except the tensor guards of numpy arrays.

    Dynamo turns a numpy array read inside the compiled frame into a graph
    input (``___from_numpy(...)``); its ``TENSOR_MATCH`` guard records the
    dispatch keys of torch.func's transform level and fails as soon as it is
    checked, so ``fullgraph=True`` compiles failed with an ``AssertionError``
    on every problem with a numpy constant or index array.  Shapes stay
    static (one callable per shape); the array itself is passed on each call.
    """
    return [not (e.guard_type == "TENSOR_MATCH" and "___from_numpy(" in e.name) for e in entries]


#: Elements per thread below which Inductor's C++ kernels run serially: ATen's eager
#: grain size (``at::internal::GRAIN_SIZE``) instead of Inductor's default 512.  With 512,
#: the 703-pair loops of LJ-38 ran under ``#pragma omp parallel``, and each graph paid an
#: OpenMP fork/join per kernel, which made the compiled gradient slower than the eager one
#: (docs/performance.md).
INDUCTOR_MIN_CHUNK = 32768


def _inductor_options(pointwise_cat: bool) -> dict[str, Any]:
    """Inductor's settings for simdiff's graphs (``TorchBackend.compile``)."""
    return {
        "cpp.min_chunk_size": INDUCTOR_MIN_CHUNK,
        **({"force_pointwise_cat": True} if pointwise_cat else {}),
    }


_NON_LEAF_GRAD = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"


class _PartCompiler:
    """``ops.compile_part`` on torch: small pure functions compiled once each, run where it applies.

    ``compile_part(key, make, remat=False)`` returns a callable that runs
    ``make()`` compiled (``torch.compile``, one whole graph:
    ``fullgraph=True``) when no ``torch.func`` transform is active and Dynamo
    is not tracing, and eagerly otherwise (under ``vmap``, ``jacrev``,
    ``jvp``: the compiled graph would see the transform's wrapped tensors).
    A function that cannot be compiled as one graph raises torch's error on
    its first compiled call.  A call whose compiled code raises torch's
    linear-algebra error runs again eagerly, where the function's own ``try``
    sees it: a part that calls ``torch.linalg`` itself on a singular matrix.
    simdiff's own solves (``ops.linalg.solve``, ``ops.lu_factor``) do not
    raise there; they give non-finite results, as on JAX.

    With ``remat=True`` the part is rematerialised in reverse mode
    (:class:`_RematPart`): its forward is an inference graph that saves
    nothing but the part's inputs, and its backward a second compiled graph,
    the VJP of the part recomputed from them.  Without it the part is one
    AOTAutograd graph whose forward saves its intermediates for its backward.

    ``compiled_calls`` and ``eager_calls`` count the calls of parts that ran
    compiled and eagerly, ``backward_calls`` the backward calls of
    rematerialised parts.
    """

    def __init__(self, compile: Callable[..., Callable[..., Any]]) -> None:
        self._compile = compile
        self._parts: dict[Any, Callable[..., Any]] = {}
        self.compiled_calls = 0
        self.eager_calls = 0
        self.backward_calls = 0

    def __call__(
        self, key: Any, make: Callable[[], Callable[..., Any]], remat: bool = False
    ) -> Callable[..., Any]:
        part = self._parts.get((key, remat))
        if part is None:
            pure = make()
            part = self._parts[key, remat] = _RematPart(self, pure) if remat else self._part(pure)
        return part

    def _part(self, pure: Callable[..., Any]) -> Callable[..., Any]:
        compiled = self._compile(pure, fullgraph=True)

        def part(*args: Any) -> Any:
            if torch.compiler.is_compiling() or _in_transform():
                self.eager_calls += 1
                return pure(*args)
            return self.run(compiled, pure, args)

        return part

    def run(
        self, compiled: Callable[..., Any], pure: Callable[..., Any], args: Any,
        backward: bool = False, dynamo: bool = True,
    ) -> Any:  # fmt: skip
        """``compiled(*args)``, or ``pure(*args)`` where compiled code raised a LinAlgError.

        ``backward``: a rematerialised part's backward (counted in ``backward_calls``).
        ``dynamo=False``: ``compiled`` is a :class:`TracedGraph` (a rematerialised
        part's graphs), called as it is: no Dynamo guards to run, and no AOTAutograd
        backward whose buffers need keeping (:func:`_kept_buffers`).  Its C++
        wrapper reports a singular matrix as a bare ``RuntimeError`` (the
        ``LinAlgError`` of the kernel it calls is lost in the C++ call), so there
        any ``RuntimeError`` runs the call again eagerly: the eager code raises
        what is a real error, and handles a singular matrix as its own ``try`` does.
        """
        if backward:
            self.backward_calls += 1
        else:
            self.compiled_calls += 1
        try:
            if not dynamo:
                return compiled(*args)
            with warnings.catch_warnings(), _kept_buffers(), paused():
                # Dynamo reads .grad of the non-leaf inputs (the state, the FSAL stage)
                # while it builds its guards; the warning is about that read, not ours
                warnings.filterwarnings("ignore", _NON_LEAF_GRAD, UserWarning)
                # and the leak guard is paused (:func:`paused`): its Tensor.item() raised in
                # Dynamo's guard evaluation, a failed guard, so a trace on every call
                return compiled(*args)
        except torch.linalg.LinAlgError:
            pass
        except RuntimeError:
            if dynamo:
                raise
        # torch's linear-algebra error (a part calling torch.linalg on a singular matrix;
        # simdiff's own solves give NaN instead): the part's eager code handles or raises it
        if not backward:
            self.compiled_calls -= 1
            self.eager_calls += 1
        return pure(*args)


class _RematPart:
    """A compiled part differentiated by recomputation: two graphs, few buffers.

    Called at the top level with inputs that require a gradient, the part is
    one :class:`_Remat` node of the autograd tape.  Its forward runs the part
    compiled without autograd (an inference graph: no intermediate is kept,
    so Inductor's wrapper allocates the outputs and a few temporaries only),
    and the node saves the part's inputs.  Its backward runs a second
    compiled function: ``torch.func.vjp`` of the part at the saved inputs,
    applied to the output cotangents -- the forward recomputed next to its
    transpose, in one graph.  The arithmetic of both is the part's own, so
    the derivative is the one plain autograd of the part gives, to rounding.

    Cost: the forward once more per backward, against the saved
    intermediates of an AOTAutograd graph (for a Rosenbrock step of HIRES,
    about 120 buffers allocated and reinterpreted per step by Inductor's
    Python wrapper, which dominated that step's time).

    Both graphs are compiled with pointwise concatenations and without
    Dynamo (``TorchBackend.compile``, ``pointwise_cat``, ``dynamo=False``:
    traced once per input signature and called directly): a part is built
    once per key with a fixed closure.

    Where the inputs need no gradient, or grad mode is off, the forward graph
    alone runs; inside a ``torch.func`` transform or Dynamo's tracing, the
    plain function.  A backward asked for with ``create_graph`` (a derivative
    of the derivative) runs the VJP eagerly, so it is differentiable.
    """

    def __init__(self, parts: _PartCompiler, pure: Callable[..., Any]) -> None:
        self.parts = parts
        self.pure = pure
        self.forward = parts._compile(pure, fullgraph=True, pointwise_cat=True, dynamo=False)
        # (structure, wrt, compiled VJP, eager VJP): compared by ==, one entry in practice
        self._vjps: list[tuple[Any, tuple[int, ...], Callable[..., Any], Callable[..., Any]]] = []
        self.out_def: Any = None

    def __call__(self, *args: Any) -> Any:
        if torch.compiler.is_compiling() or _in_transform():
            self.parts.eager_calls += 1
            return self.pure(*args)
        leaves, treedef = tree_flatten(args)
        tracked = torch.is_grad_enabled() and any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in leaves
        )
        if not tracked:
            with torch.no_grad():
                return self.parts.run(self.forward, self.pure, args, dynamo=False)
        where = tuple(i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor))
        static = [None if isinstance(x, torch.Tensor) else x for x in leaves]
        outs = _Remat.apply(self, (static, treedef, where), *(leaves[i] for i in where))
        return tree_unflatten(self.out_def, list(outs))

    def run_forward(self, leaves: list[Any], treedef: Any) -> tuple[Any, ...]:
        args = tree_unflatten(treedef, leaves)
        out = self.parts.run(self.forward, self.pure, args, dynamo=False)
        flat, self.out_def = tree_flatten(out)
        return tuple(flat)

    def vjp(self, leaves: list[Any], treedef: Any, wrt: tuple[int, ...], cts: Any) -> Any:
        """The cotangents of ``leaves[wrt]`` for the output cotangents ``cts`` (a tuple)."""
        fns = next((f[2:] for f in self._vjps if f[1] == wrt and f[0] == treedef), None)
        if fns is None:
            pure = self.pure

            def pullback(*xs: Any) -> Any:
                inputs, cotangents = list(xs[: len(leaves)]), xs[len(leaves) :]

                def f(*diff: Any) -> Any:
                    full = list(inputs)
                    for i, d in zip(wrt, diff, strict=True):
                        full[i] = d
                    return tuple(tree_flatten(pure(*tree_unflatten(treedef, full)))[0])

                return torch.func.vjp(f, *(inputs[i] for i in wrt))[1](cotangents)

            compiled = self.parts._compile(
                pullback, fullgraph=True, pointwise_cat=True, dynamo=False
            )
            fns = (compiled, pullback)
            self._vjps.append((treedef, wrt, *fns))
        compiled, eager = fns
        if torch.is_grad_enabled():  # create_graph: a derivative of this backward
            self.parts.backward_calls += 1
            return eager(*leaves, *cts)
        return self.parts.run(compiled, eager, (*leaves, *cts), backward=True, dynamo=False)


def _filled(spec: Any, tensors: Any) -> list[Any]:
    """The leaves of a :class:`_Remat` call: its static leaves with ``tensors`` put back."""
    static, _, where = spec
    leaves = list(static)
    for i, x in zip(where, tensors, strict=True):
        leaves[i] = x
    return leaves


class _Remat(torch.autograd.Function):
    """The autograd node of a :class:`_RematPart` call: saves its inputs, recomputes in backward."""

    @staticmethod
    def forward(ctx: Any, part: _RematPart, spec: Any, *tensors: Any) -> Any:
        ctx.part, ctx.spec = part, spec
        ctx.save_for_backward(*tensors)
        return part.run_forward(_filled(spec, tensors), spec[1])

    @staticmethod
    def backward(ctx: Any, *cts: Any) -> Any:
        _, treedef, where = ctx.spec
        leaves = _filled(ctx.spec, ctx.saved_tensors)
        need = ctx.needs_input_grad[2:]
        wrt = tuple(i for i, n in zip(where, need, strict=True) if n)
        grads = iter(ctx.part.vjp(leaves, treedef, wrt, cts))
        return (None, None, *(next(grads) if n else None for n in need))


def _forward_levels(kind: str, params: dict[str, Any], scalar: bool = True) -> int:
    """Forward-mode (``jvp``/``jacfwd``) levels nested in the callable ``Derivatives`` builds.

    Examples
    --------
    >>> _forward_levels("hessian", {"method": "fwd-fwd"})
    2
    >>> _forward_levels("derivative", {"order": 3})
    3
    """
    order = int(params.get("order", 0))
    if kind == "hessian":
        return {"fwd-fwd": 2, "fwd-rev": 1}.get(params.get("method", ""), 0)
    if kind == "derivative_sum_nested" and order == 2 and scalar:
        return 1  # forward over reverse (simdiff.core.operator_builders._nested_order_k)
    if kind in ("derivative", "derivative_sum_nested"):
        return order
    if kind == "derivative_tensor":
        return max(order - 1, 0)
    if kind == "biharmonic_nested":
        return 2
    if kind == "jvp" or (kind == "hvp" and params.get("method") != "rev-rev"):
        return 1
    if kind == "jacobian" and params.get("mode") == "fwd":
        return 1
    return 0


def compile_function(
    fn: Callable[..., Any],
    fullgraph: bool = False,
    pointwise_cat: bool = False,
    dynamo: bool = True,
) -> Callable[..., Any]:
    """``torch.compile`` for static shapes (simdiff builds one callable per shape).

    ``fullgraph=True`` makes a graph break an error instead of a silent
    eager fallback; the compile policy's ``"auto"`` uses it.

    ``pointwise_cat=True``: Inductor lowers every concatenation (an
    ``ops.stack`` of a right-hand side's components) as pointwise code
    fused into its consumers (``force_pointwise_cat``), where on CPU it
    otherwise writes the inputs in place into a buffer, each through an
    aliasing view that its Python wrapper builds on every call (one per
    input of each concatenation: 75 a call in a Rosenbrock step of HIRES,
    whose eight components are stacked for each of its 17 right-hand sides).  For
    small parts (:class:`_RematPart`); torch keeps it off on CPU because
    masked loads do not vectorise, which matters for long arrays.

    ``dynamo=False``: no Dynamo on any call (:class:`~simdiff.backends.torch.traced.TracedGraph`):
    ``fn`` is traced by ``make_fx`` on fake tensors and compiled by Inductor
    once per input signature (the tensors' shapes, strides, dtypes and
    devices, the other arguments' values), runs with gradients off (an
    inference graph), and each call checks the signature by a dictionary
    look-up and calls Inductor's code directly: no frame hook, no guards,
    no Dynamo wrapper.  What ``fn`` reads besides its tensor arguments is
    baked into the graph, as in ``jax.jit``.  For a part built once per key
    whose closure is fixed and which is called thousands of times (a
    solver's step and its VJP, :class:`_RematPart`), where Dynamo's entry
    per call was the larger part of each call (a Rodas5P step of HIRES and
    its VJP; docs/performance.md); it also compiles in less time.
    ``fullgraph`` is implied (a function that is not one graph fails in
    its trace).  Its wrapper is C++ (Inductor's ``cpp_wrapper``): the
    graph's buffers are allocated and its kernels called without Python,
    which saves a Python call per buffer and kernel on every call, for
    more compile time (``validation/benchmarks/bench_ode.py``,
    docs/performance.md).  Such a wrapper reports an error of
    an ATen kernel it calls (a singular matrix among them) as a bare
    ``RuntimeError``; :meth:`_PartCompiler.run` runs the call again eagerly.

    Dynamo keeps its graphs on the code object of the frame it compiles
    (here torch.func's wrapper, shared by every simdiff callable) and,
    after ``torch._dynamo.config.recompile_limit`` (8) graphs on one code
    object, silently runs it eagerly: the ninth compiled derivative in a
    process ran eager behind the compiled wrapper.  ``isolate_recompiles``
    keeps each simdiff callable's graphs apart and ``recompile_limit`` (per
    call of ``torch.compile``) lifts the limit for it; torch's global
    settings are untouched.

    A numpy array a problem reads (a constant, an index array such as
    :class:`simdiff.pes.TermEnergy`'s pairs) becomes a graph input whose
    tensor guard Dynamo records inside torch.func's transform and then
    fails on the same frame ("Guard failed on the same frame it was
    created": torch 2.13, every such problem under ``torch.func.grad``);
    :func:`_numpy_guards_dropped` drops those guards (the array is still
    read on every call, so a changed value is seen).

    The compiled callable runs with the leak guard's dispatch-level watch
    off (:func:`~simdiff.backends.torch.dispatch.dispatch_paused`: Dynamo's
    fake tensors cannot pass a Python kernel); its wrappers stay.
    """
    if not dynamo:
        return TracedGraph(fn, {**_inductor_options(pointwise_cat), "cpp_wrapper": True})
    compiled = torch.compile(  # type: ignore[call-overload]  # torch 2.13 keywords, not in stubs
        _scalars_restored(fn),
        fullgraph=fullgraph,
        dynamic=False,
        isolate_recompiles=True,
        recompile_limit=1024,
        options={"guard_filter_fn": _numpy_guards_dropped, **_inductor_options(pointwise_cat)},
    )

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():  # inside another trace: Dynamo inlines it
            return fn(*args, **kwargs)
        args, scalars = _scalars_lifted(args)
        with dispatch_paused():
            return compiled(*args, _simdiff_scalars=scalars, **kwargs)

    return call
