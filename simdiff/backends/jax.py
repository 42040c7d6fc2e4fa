"""The JAX context: ``jax.grad / jvp / vjp / jacfwd / jacrev / vmap / jit``.

Importing this module switches on JAX's 64-bit mode (``jax_enable_x64``):
simdiff computes in float64 by default, and JAX otherwise silently truncates
to float32.  float32 stays available on request (``dtype="float32"``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from simdiff.backends._backend import Backend
from simdiff.backends._caches import enable_persistent_caches
from simdiff.backends._threads import xla_threads
from simdiff.backends._xp import XPOps
from simdiff.errors import UnsupportedError

jax.config.update("jax_enable_x64", True)
enable_persistent_caches("jax")

#: XLA options of the programs of a solver's step loop (``jit(..., step_loop=True)``: the
#: derivatives of an :class:`~simdiff.ode.ODEProblem`).  XLA:CPU's MLIR fusion emitters
#: spend most of such a program's compile time on its many small fusions, nested in
#: loops and branches; the elemental emitters compile it in less time, with a steady state
#: as fast on the solvers' programs (not on every program: the LJ-38 Hessian is slower
#: with them, so only the step loops use them; figures in docs/performance.md).
STEP_LOOP_OPTIONS: dict[str, Any] = {"xla_cpu_use_fusion_emitters": False}

#: ``dtype -> its numpy name``, read once per dtype.
_DTYPE_NAMES: dict[Any, str] = {}

__all__ = ["STEP_LOOP_OPTIONS", "JaxBackend", "JaxOps"]


def _concrete(x: Any) -> Any:
    if isinstance(x, jax.core.Tracer):
        return None
    return np.asarray(x)


@jax.custom_jvp
def _abs_real(x: Any) -> Any:
    return jnp.abs(x)


@_abs_real.defjvp
def _abs_real_jvp(primals: tuple[Any], tangents: tuple[Any]) -> tuple[Any, Any]:
    # d|x| = sign(x) dx, so d|x|/dx = 0 at 0 (jnp.abs gives 1 there; torch gives 0).
    (x,), (t,) = primals, tangents
    return _abs_real(x), jnp.sign(x) * t  # the primal through the rule: nested AD agrees


# ``ops.forward_only``: an identity primitive, linear (its JVP applies it to the
# tangent, so nested forward mode works) whose transpose raises: JAX transposes
# the linear program from its end, so the marker on a loop's outputs refuses
# reverse mode before the loop's own transpose rule is reached.
_forward_only_p = Primitive("simdiff_forward_only")
_forward_only_p.def_impl(lambda x, *, message: x)
_forward_only_p.def_abstract_eval(lambda x, *, message: x)


def _forward_only_transpose(ct: Any, x: Any, *, message: str) -> Any:
    raise UnsupportedError(message)


ad.deflinear2(_forward_only_p, _forward_only_transpose)
batching.primitive_batchers[_forward_only_p] = lambda args, dims, *, message: (
    _forward_only_p.bind(args[0], message=message),
    dims[0],
)
mlir.register_lowering(
    _forward_only_p, mlir.lower_fun(lambda x, *, message: x, multiple_results=False)
)


def _gated(fn: Callable[..., Any], keep: Callable[[Any], Any]) -> Callable[..., Any]:
    """:meth:`JaxOps.gated`: ``fn`` with its closure made explicit arguments, under one rule."""

    def gated(*args: Any) -> Any:
        converted, consts = jax.closure_convert(fn, *args)
        return _gate(converted, keep, *args, *consts)

    return gated


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _gate(fn: Callable[..., Any], keep: Callable[[Any], Any], *args: Any) -> Any:
    return fn(*args)


def _gate_jvp(
    fn: Callable[..., Any], keep: Callable[[Any], Any], primals: tuple, tangents: tuple
) -> tuple[Any, Any]:
    # The tangents are selected on the way in: the transpose of ``lin(where(k, dx, 0))``
    # is ``where(k, lin^T(ct), 0)``, a select after the transposed step, which drops the
    # NaN that ``0 * inf`` makes inside a step whose intermediates overflowed (a multiply
    # by a zero cotangent would not).  Only the inputs with a tangent are linearised.  In
    # forward mode a rejected step's output tangents may be NaN: the caller discards
    # them with a select, as it discards the step's values.
    flat, tree = jax.tree_util.tree_flatten(primals)
    flat_t = jax.tree_util.tree_leaves(tangents, is_leaf=_is_zero)
    live = [i for i, t in enumerate(flat_t) if not _is_zero(t)]  # JAX calls with one or more

    def of_live(*xs: Any) -> Any:
        leaves = list(flat)
        for i, x in zip(live, xs, strict=True):
            leaves[i] = x
        return fn(*jax.tree_util.tree_unflatten(tree, leaves))

    out, lin = jax.linearize(of_live, *(flat[i] for i in live))
    k = keep(out)
    return out, lin(*(_select(k, flat_t[i]) for i in live))


_gate.defjvp(_gate_jvp, symbolic_zeros=True)


def _is_zero(t: Any) -> bool:
    return isinstance(t, jax.custom_derivatives.SymbolicZero)


def _select(k: Any, t: Any) -> Any:
    if getattr(t, "dtype", None) == jax.dtypes.float0:
        return t
    return JaxOps.where(k, t, jnp.zeros_like(t))


class JaxOps(XPOps):
    """``ops`` over ``jax.numpy``; ``scan`` is ``lax.scan`` (one compile for any length)."""

    name = "jax"

    def __init__(self, dtype: Any = jnp.float64) -> None:
        super().__init__(jnp, dtype)

    # --- kinks: simdiff's conventions (docs/errors.md), where jax.numpy's differ
    @staticmethod
    def abs(x: Any) -> Any:
        """``|x|`` with derivative ``sign(x)``: 0 at ``x = 0`` (a custom JVP rule)."""
        x = jnp.asarray(x)
        if jnp.issubdtype(x.dtype, jnp.complexfloating):
            return jnp.abs(x)
        return _abs_real(x)

    @staticmethod
    def clip(x: Any, min: Any = None, max: Any = None) -> Any:
        """Limit ``x`` to ``[min, max]``; the derivative is 1 on the closed interval.

        ``jnp.clip`` splits the derivative at a bound (0.5); simdiff's
        convention, shared with torch.clamp and the Taylor context, selects
        ``x`` while ``min <= x <= max``.
        """
        out = jnp.asarray(x)
        if min is not None:
            out = JaxOps.where(out < min, min, out)
        if max is not None:
            out = JaxOps.where(out > max, max, out)
        return out

    @staticmethod
    def where(condition: Any, x1: Any, x2: Any) -> Any:
        """``jnp.where(condition, x1, x2)`` traced into the caller's program.

        ``jnp.where`` is a jitted function: each call is a nested ``jit``
        equation that every transformation (JVP, partial evaluation,
        transposition) and the lowering process separately.  The step loops
        select their state with it on every carry leaf (216 nested calls in
        the gradient of the bouncing ball with drag); here it is the same
        promotion, broadcasting and ``lax.select``, inline.
        """
        c = jnp.asarray(condition)
        if c.dtype != jnp.bool_:
            c = c != 0
        a, b = jnp.asarray(x1), jnp.asarray(x2)
        if a.dtype != b.dtype or a.weak_type != b.weak_type:
            # jax.numpy's promotion (a Python number takes the array's type); two Python
            # numbers of one kind stay weakly typed, as with jnp.where
            dtype = jnp.result_type(x1, x2)
            a, b = jnp.asarray(x1, dtype=dtype), jnp.asarray(x2, dtype=dtype)
        shape = jnp.broadcast_shapes(c.shape, a.shape, b.shape)
        if c.ndim:  # a scalar condition selects whole arrays (lax.select takes it as is)
            c = jnp.broadcast_to(c, shape)
        return jax.lax.select(c, jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape))

    @staticmethod
    def scan(step: Callable[..., Any], carry: Any, xs: Any = None, length: int | None = None):
        """``jax.lax.scan``: returns ``(final_carry, stacked_ys)``."""
        return jax.lax.scan(step, carry, xs, length=length)

    @staticmethod
    def while_loop(cond: Callable[..., Any], body: Callable[..., Any], carry: Any, max_steps: int):
        """``jax.lax.while_loop`` with an iteration bound (forward-mode differentiable only)."""

        def go(state: tuple[Any, Any]) -> Any:
            return (state[0] < max_steps) & cond(state[1])

        def step(state: tuple[Any, Any]) -> tuple[Any, Any]:
            return state[0] + 1, body(state[1])

        return jax.lax.while_loop(go, step, (0, carry))[1]

    @staticmethod
    def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any):
        """``jax.lax.cond``: one branch runs (both under ``vmap``, selected)."""
        return jax.lax.cond(pred, true_fn, false_fn, *operands)

    @staticmethod
    def forward_only(x: Any, message: str) -> Any:
        """``x``; forward mode passes through, reverse mode raises ``UnsupportedError(message)``."""
        if not (hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.inexact)):
            return x
        return _forward_only_p.bind(x, message=message)

    @staticmethod
    def gated(fn: Callable[..., Any], keep: Callable[[Any], Any]) -> Callable[..., Any]:
        """``fn`` whose derivatives are exactly 0 wherever ``keep(fn(*args))`` is false
        (a ``jax.custom_jvp`` rule selecting the tangents in, and so the cotangents out)."""
        return _gated(fn, keep)

    @staticmethod
    def checkpoint(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``jax.checkpoint``: recompute ``fn``'s intermediates in the backward pass."""
        return jax.checkpoint(fn)

    @staticmethod
    def traced_once(fn: Callable[..., Any]) -> Callable[..., Any]:
        """A nested ``jax.jit``: every call with the same argument shapes and dtypes reuses
        one trace of ``fn``, and JAX builds each derivative of that trace (JVP, partial
        evaluation, transpose) once for all of them.  Inlined, a function called at seven
        stages of a step is traced, and each of its derivatives built, seven times.  XLA
        inlines the call: the compiled program is the same."""
        return jax.jit(fn)

    @staticmethod
    def checkpoint_saving(fn: Callable[..., Any], names: tuple[str, ...]) -> Callable[..., Any]:
        """``jax.checkpoint`` with the policy ``save_only_these_names(*names)``."""
        policy = jax.checkpoint_policies.save_only_these_names(*names)
        return jax.checkpoint(fn, policy=policy)

    @staticmethod
    def checkpoint_name(x: Any, name: str) -> Any:
        """``jax.ad_checkpoint.checkpoint_name``: ``x`` tagged for :meth:`checkpoint_saving`."""
        return jax.ad_checkpoint.checkpoint_name(x, name)

    @staticmethod
    def stop_gradient(x: Any) -> Any:
        """``jax.lax.stop_gradient``."""
        return jax.lax.stop_gradient(x)

    @staticmethod
    def jacfwd(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``jax.jacfwd`` in the first argument, ``d fn(z, *consts) / dz``, inside a solver."""
        return jax.jacfwd(fn, argnums=0)

    @staticmethod
    def lu_factor(a: Any) -> Any:
        """``jax.scipy.linalg.lu_factor`` (a singular ``a`` gives non-finite solutions)."""
        return jax.scipy.linalg.lu_factor(a)

    @staticmethod
    def lu_solve(lu: Any, b: Any) -> Any:
        """``jax.scipy.linalg.lu_solve``."""
        return jax.scipy.linalg.lu_solve(lu, b)

    @staticmethod
    def concrete(x: Any) -> Any:
        """``x`` as numpy, or ``None`` when it is traced (under ``jit``/``vmap``/``grad``)."""
        return _concrete(x)


_LEAKS = (
    (jax.errors.TracerBoolConversionError, "a Python `if`/`while`/bool() on an array value"),
    (jax.errors.TracerArrayConversionError, "a round trip through numpy (np.asarray(x), np.*)"),
    (jax.errors.TracerIntegerConversionError, "int(...) or an array used as a Python index"),
    (jax.errors.ConcretizationTypeError, "float(x[i]), x.item() or x.tolist() on an array"),
)


@functools.partial(jax.jit, static_argnums=1)
def _join(parts: list[Any], lead: tuple[int, ...]) -> Any:
    return jnp.concatenate([jnp.reshape(p, (*lead, -1)) for p in parts], axis=-1)


@functools.cache
def _concrete_type() -> Any:
    """The type of a concrete ``jax.Array`` (``ArrayImpl``; tracers are of other types), read
    from an array on first use, not at import (which would start XLA's client early).

    The array is made under ``jax.ensure_compile_time_eval``: a first use inside ``jax.jit``
    would otherwise make a tracer, and its type, cached, would pass tracers as concrete and
    refuse every concrete array after.
    """
    with jax.ensure_compile_time_eval():
        return type(jnp.zeros(()))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _split(flat: Any, bounds: tuple[tuple[int, int], ...], shapes: Any) -> list[Any]:
    lead = tuple(flat.shape[:-1])
    return [flat[..., a] if s == () else jnp.reshape(flat[..., a:b], (*lead, *s))
            for (a, b), s in zip(bounds, shapes, strict=True)]  # fmt: skip


class JaxBackend(Backend):
    name = "jax"
    plain_path = "jit"
    calls_take_numpy = True
    ops_class = JaxOps
    precision_hint = (
        " (JAX makes float32 arrays until x64 is on: import simdiff.backends.jax, or call "
        "jax.config.update('jax_enable_x64', True), before creating them)"
    )
    catches_leaks = True
    fuses_wrappers = True
    #: a vmapped Hessian of one term beats HVPs of the term sum from a few thousand pair
    #: terms up (Lennard-Jones, switched LJ; ``docs/pes.md`` section 11); about equal below
    term_hessians = "batched"
    grad = staticmethod(jax.grad)
    jvp = staticmethod(jax.jvp)
    vjp = staticmethod(jax.vjp)
    jacfwd = staticmethod(jax.jacfwd)
    jacrev = staticmethod(jax.jacrev)
    block_until_ready = staticmethod(jax.block_until_ready)

    def ops(self, dtype: Any = None, device: Any = None) -> JaxOps:
        return JaxOps(jnp.float64 if dtype is None else dtype)

    def vmap(self, fn: Callable[..., Any], in_axes: Any = 0) -> Callable[..., Any]:
        return jax.vmap(fn, in_axes=in_axes)

    def leak_cause(self, exc: BaseException) -> str | None:
        for kind, cause in _LEAKS:
            if isinstance(exc, kind):
                return cause
        return None

    def jit(
        self,
        fn: Callable[..., Any],
        on_compile: Callable[[], None] | None = None,
        *,
        step_loop: bool = False,
    ):
        """``jax.jit``; ``on_compile()`` runs each time JAX traces ``fn`` (once per compilation).

        ``step_loop=True`` compiles with :data:`STEP_LOOP_OPTIONS` where the call is
        a top-level one.  Called inside another trace (a caller's ``jax.jit``, or
        simdiff's own jit of a tree call around it) it is an ordinary nested ``jax.jit``:
        JAX takes compiler options on a top-level jit only, and the caller's
        compilation decides them for the whole program.
        """
        target = fn
        if on_compile is not None:
            notify = on_compile

            def counted(*args: Any) -> Any:
                notify()  # runs only while JAX traces, i.e. once per compilation
                return fn(*args)

            target = counted
        if not step_loop:
            return jax.jit(target)
        top = jax.jit(target, compiler_options=STEP_LOOP_OPTIONS)
        nested: list[Any] = []  # the plain jit, made at the first traced call

        def call(*args: Any) -> Any:
            if not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(args)):
                return top(*args)
            if not nested:
                nested.append(jax.jit(target))
            return nested[0](*args)

        return call

    def warm_up(self) -> None:
        jax.block_until_ready(jax.jit(jax.grad(lambda y: jnp.sin(y).sum()))(jnp.ones(1)))

    def join(self, parts: Any, lead: tuple[int, ...]) -> Any:
        """One jitted concatenation (one dispatch, not one per leaf; nests in a caller's trace)."""
        return _join(list(parts), tuple(lead))

    def split(self, flat: Any, bounds: Any, shapes: Any) -> list[Any]:
        """One jitted call returning every leaf (one dispatch, not one per leaf)."""
        return _split(flat, tuple(bounds), tuple(shapes))

    def is_native(self, x: Any) -> bool:
        return isinstance(x, jax.Array)

    def from_numpy(self, a: Any, dtype: Any, device: Any = None) -> Any:
        if (
            dtype is not None
            and isinstance(a, jax.Array)
            and getattr(a, "weak_type", True) is False  # asarray would make it strong
            and a.dtype == dtype
        ):
            return a  # already what asarray would give: no call through jnp
        return jnp.asarray(a, dtype=dtype)

    def to_numpy(self, x: Any) -> Any:
        return np.asarray(x)

    def dtype_name(self, x: Any) -> str:
        dtype = x.dtype
        name = _DTYPE_NAMES.get(dtype)
        if name is None:  # numpy computes a dtype's name in Python, on every read
            name = _DTYPE_NAMES[dtype] = np.dtype(dtype).name
        return name

    def concrete(self, x: Any) -> Any:
        return _concrete(x)

    def eval_shape(self, fn: Callable[[Any], Any], x: Any) -> tuple[int, ...]:
        """``jax.eval_shape``: the output shape from tracing ``fn``, no evaluation."""
        return tuple(int(s) for s in jax.eval_shape(fn, x).shape)

    def building(self) -> Any:
        """``jax.ensure_compile_time_eval``: constants made while building are values."""
        return jax.ensure_compile_time_eval()

    def is_traced(self, x: Any) -> bool:
        """Whether ``x`` is a JAX tracer (inside ``jax.jit``, ``vmap``, ``grad``, ...)."""
        return isinstance(x, jax.core.Tracer)

    def concrete_leaves(self, parts: Any, shapes: Any, dtype: Any) -> bool:
        """As :meth:`Backend.concrete_leaves`, by the concrete array type (a tracer is another
        type): one identity test per array instead of two ``isinstance`` checks."""
        concrete = _concrete_type()
        for p, shape in zip(parts, shapes, strict=True):
            if type(p) is not concrete or p.shape != shape or p.dtype != dtype:
                return False
        return True

    def threads(self) -> dict[str, Any]:
        """XLA's CPU threads: 1 if ``XLA_FLAGS`` made it single-threaded, else the affinity."""
        return {"xla": xla_threads()}
