"""The ``ops`` protocol: the namespace a problem is written against.

A problem is ``fn(x, ops)``.  ``ops`` offers Array-API names and semantics
plus the three things simulators need and the Array API lacks (``scan``,
``checkpoint``, ``stop_gradient``).  Every context (numpy, jax, torch, taylor)
implements every name in :data:`OP_NAMES`; a test enumerates the list.

Arithmetic (``+ - * / ** @``), comparisons and indexing (``x[i]``,
``x[:, None]``) are the arrays' own operators and are not listed here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from simdiff.backends._tree import tree_flatten, tree_map, tree_unflatten
from simdiff.errors import AttributeNotFoundError, InputError, UnsupportedError

__all__ = ["CAPABILITIES", "OP_NAMES", "Array", "Backend", "LoopOps", "Namespace", "Ops", "OpsBase"]

UNARY = (
    "abs", "negative", "sign", "sqrt", "square", "exp", "expm1", "log", "log1p",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "isfinite", "floor", "round",
)  # fmt: skip
BINARY = ("add", "subtract", "multiply", "divide", "pow", "atan2", "maximum", "minimum")
REDUCTIONS = ("sum", "prod", "mean", "max", "min", "cumsum")
SHAPE = (
    "reshape", "stack", "concat", "roll", "permute_dims", "expand_dims", "squeeze",
    "broadcast_to", "flip", "take", "where", "safe_where", "clip",
)  # fmt: skip
LINEAR = ("matmul", "vecdot", "einsum", "linalg.solve", "fft.rfft", "fft.irfft", "fft.fft",
          "fft.ifft")  # fmt: skip
CREATION = (
    "asarray", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange",
    "linspace", "eye", "fft.rfftfreq", "fft.fftfreq",
)  # fmt: skip
CONTROL = ("scan", "while_loop", "cond", "checkpoint", "stop_gradient")

#: Every operation each context must provide (dotted names live in sub-namespaces).
OP_NAMES: tuple[str, ...] = UNARY + BINARY + REDUCTIONS + SHAPE + LINEAR + CREATION + CONTROL

#: Non-callable attributes each context provides.
CONSTANTS = ("pi", "e", "inf", "name", "dtype")


class Namespace:
    """A sub-namespace such as ``ops.linalg`` or ``ops.fft``."""

    def __init__(self, **members: Callable[..., Any]) -> None:
        self.__dict__.update(members)

    def __getattr__(self, item: str) -> Any:
        # Only reached for missing members; typed Any so that a Namespace satisfies the
        # sub-namespace protocols (its members are set at run time).
        raise AttributeNotFoundError(f"namespace has no member {item!r}")


#: An array of the active context: ``numpy.ndarray``, ``jax.Array``,
#: ``torch.Tensor`` or a Taylor array.  The frameworks' array types share no
#: common static type, so this is ``Any``; the op signatures below carry the rest.
Array = Any


Norm = str | None


class _Linalg(Protocol):
    def solve(self, a: Array, b: Array, /) -> Array: ...


class _FFT(Protocol):
    def rfft(
        self, x: Array, /, n: int | None = None, axis: int = -1, norm: Norm = None
    ) -> Array: ...
    def irfft(
        self, x: Array, /, n: int | None = None, axis: int = -1, norm: Norm = None
    ) -> Array: ...
    def fft(
        self, x: Array, /, n: int | None = None, axis: int = -1, norm: Norm = None
    ) -> Array: ...
    def ifft(
        self, x: Array, /, n: int | None = None, axis: int = -1, norm: Norm = None
    ) -> Array: ...
    def rfftfreq(self, n: int, /, d: float = 1.0) -> Array: ...
    def fftfreq(self, n: int, /, d: float = 1.0) -> Array: ...


class Ops(Protocol):
    """The ``ops`` namespace a problem is written against, typed over :data:`OP_NAMES`.

    Use it to annotate ``fn(x: Array, ops: Ops)``; every context (numpy, jax,
    torch, taylor) satisfies it.  A test checks that its members are exactly
    :data:`OP_NAMES`, :data:`CONSTANTS` and :data:`CAPABILITIES`.

    Examples
    --------
    >>> from simdiff.backends import Ops, get_ops
    >>> def energy(x, ops: Ops):
    ...     return ops.sum(ops.square(x))
    >>> float(energy(get_ops("numpy").asarray([1.0, 2.0]), get_ops("numpy")))
    5.0
    """

    # --- constants and facts
    name: str
    dtype: Any
    pi: float
    e: float
    inf: float

    @property
    def linalg(self) -> _Linalg: ...
    @property
    def fft(self) -> _FFT: ...

    # --- capabilities (see CAPABILITIES)
    @property
    def eager(self) -> bool: ...
    def concrete(self, x: Array, /) -> Any: ...
    def jacfwd(self, fn: Callable[..., Array], /) -> Callable[..., Array]: ...
    def lu_factor(self, a: Array, /) -> Any: ...
    def lu_solve(self, lu: Any, b: Array, /) -> Array: ...
    def errstate(self) -> AbstractContextManager[Any]: ...
    def forward_only(self, x: Array, message: str, /) -> Array: ...
    def gated(
        self, fn: Callable[..., Any], keep: Callable[[Any], Any], /
    ) -> Callable[..., Any]: ...
    def checkpoint_saving(
        self, fn: Callable[..., Any], names: tuple[str, ...], /
    ) -> Callable[..., Any]: ...
    def checkpoint_name(self, x: Array, name: str, /) -> Array: ...
    def traced_once(self, fn: Callable[..., Any], /) -> Callable[..., Any]: ...

    # --- unary
    def abs(self, x: Array, /) -> Array: ...
    def negative(self, x: Array, /) -> Array: ...
    def sign(self, x: Array, /) -> Array: ...
    def sqrt(self, x: Array, /) -> Array: ...
    def square(self, x: Array, /) -> Array: ...
    def exp(self, x: Array, /) -> Array: ...
    def expm1(self, x: Array, /) -> Array: ...
    def log(self, x: Array, /) -> Array: ...
    def log1p(self, x: Array, /) -> Array: ...
    def sin(self, x: Array, /) -> Array: ...
    def cos(self, x: Array, /) -> Array: ...
    def tan(self, x: Array, /) -> Array: ...
    def asin(self, x: Array, /) -> Array: ...
    def acos(self, x: Array, /) -> Array: ...
    def atan(self, x: Array, /) -> Array: ...
    def sinh(self, x: Array, /) -> Array: ...
    def cosh(self, x: Array, /) -> Array: ...
    def tanh(self, x: Array, /) -> Array: ...
    def asinh(self, x: Array, /) -> Array: ...
    def acosh(self, x: Array, /) -> Array: ...
    def atanh(self, x: Array, /) -> Array: ...
    def isfinite(self, x: Array, /) -> Array: ...
    def floor(self, x: Array, /) -> Array: ...
    def round(self, x: Array, /) -> Array: ...

    # --- binary
    def add(self, x1: Array, x2: Array, /) -> Array: ...
    def subtract(self, x1: Array, x2: Array, /) -> Array: ...
    def multiply(self, x1: Array, x2: Array, /) -> Array: ...
    def divide(self, x1: Array, x2: Array, /) -> Array: ...
    def pow(self, x1: Array, x2: Array, /) -> Array: ...
    def atan2(self, x1: Array, x2: Array, /) -> Array: ...
    def maximum(self, x1: Array, x2: Array, /) -> Array: ...
    def minimum(self, x1: Array, x2: Array, /) -> Array: ...

    # --- reductions
    def sum(self, x: Array, /, axis: Any = None, keepdims: bool = False) -> Array: ...
    def prod(self, x: Array, /, axis: Any = None, keepdims: bool = False) -> Array: ...
    def mean(self, x: Array, /, axis: Any = None, keepdims: bool = False) -> Array: ...
    def max(self, x: Array, /, axis: Any = None, keepdims: bool = False) -> Array: ...
    def min(self, x: Array, /, axis: Any = None, keepdims: bool = False) -> Array: ...
    def cumsum(self, x: Array, /, axis: int | None = None) -> Array: ...

    # --- shape
    def reshape(self, x: Array, shape: Any, /) -> Array: ...
    def stack(self, arrays: Sequence[Array], /, axis: int = 0) -> Array: ...
    def concat(self, arrays: Sequence[Array], /, axis: int = 0) -> Array: ...
    def roll(self, x: Array, shift: Any, /, axis: Any = None) -> Array: ...
    def permute_dims(self, x: Array, axes: Sequence[int], /) -> Array: ...
    def expand_dims(self, x: Array, /, axis: int) -> Array: ...
    def squeeze(self, x: Array, /, axis: Any) -> Array: ...
    def broadcast_to(self, x: Array, shape: Any, /) -> Array: ...
    def flip(self, x: Array, /, axis: Any = None) -> Array: ...
    def take(self, x: Array, indices: Any, /, axis: int | None = None) -> Array: ...
    def where(self, condition: Array, x1: Array, x2: Array, /) -> Array: ...
    def safe_where(
        self,
        condition: Array,
        x: Array,
        if_true: Any,
        if_false: Any = 0.0,
        *,
        fill_true: Any = 1.0,
        fill_false: Any = 1.0,
    ) -> Array: ...
    def clip(self, x: Array, /, min: Any = None, max: Any = None) -> Array: ...

    # --- linear algebra and transforms
    def matmul(self, x1: Array, x2: Array, /) -> Array: ...
    def vecdot(self, x1: Array, x2: Array, /, axis: int = -1) -> Array: ...
    def einsum(self, subscripts: str, /, *operands: Array) -> Array: ...

    # --- creation
    def asarray(self, x: Any, /, dtype: Any = None) -> Array: ...
    def zeros(self, shape: Any, /, dtype: Any = None) -> Array: ...
    def ones(self, shape: Any, /, dtype: Any = None) -> Array: ...
    def full(self, shape: Any, fill_value: Any, /, dtype: Any = None) -> Array: ...
    def zeros_like(self, x: Array, /) -> Array: ...
    def ones_like(self, x: Array, /) -> Array: ...
    def full_like(self, x: Array, fill_value: Any, /) -> Array: ...
    def arange(
        self, start: Any, /, stop: Any = None, step: Any = 1, dtype: Any = None
    ) -> Array: ...
    def linspace(self, start: Any, stop: Any, num: int, /, endpoint: bool = True) -> Array: ...
    def eye(self, n: int, /, m: int | None = None, k: int = 0) -> Array: ...

    # --- control
    def scan(
        self,
        step: Callable[[Any, Any], tuple[Any, Any]],
        carry: Any,
        /,
        xs: Any = None,
        length: int | None = None,
    ) -> tuple[Any, Any]: ...
    def while_loop(
        self,
        cond: Callable[[Any], Any],
        body: Callable[[Any], Any],
        carry: Any,
        max_steps: int,
        /,
    ) -> Any: ...
    def cond(
        self,
        pred: Any,
        true_fn: Callable[..., Any],
        false_fn: Callable[..., Any],
        /,
        *operands: Any,
    ) -> Any: ...
    def checkpoint(self, fn: Callable[..., Any], /) -> Callable[..., Any]: ...
    def stop_gradient(self, x: Array, /) -> Array: ...


#: What a context says about itself beyond the ops (asked by solvers instead of its name):
#: ``eager`` (Python control flow runs on concrete values: numpy, torch and Taylor over
#: them; False where functions are traced and compiled, JAX), ``concrete(x)`` (``x`` as
#: numpy, or ``None`` where it has no value now: a tracer, a vmapped tensor) and
#: ``jacfwd(fn)`` (forward-mode Jacobian inside a solver).
#: ``errstate()`` silences floating-point warnings for a block (numpy emits them).
#: ``forward_only(x, message)`` is ``x``, forward-mode derivatives pass through it, and
#: reverse mode through it raises ``UnsupportedError(message)`` (identity where a
#: context has no reverse mode).
#: ``checkpoint_saving(fn, names)`` is ``checkpoint(fn)`` except that the values tagged
#: inside ``fn`` by ``checkpoint_name(x, name)`` with a name in ``names`` are stored for
#: the backward pass, not recomputed (JAX: a ``jax.checkpoint`` policy; elsewhere
#: ``checkpoint(fn)`` and the identity).
#: ``traced_once(fn)`` is ``fn`` for a function called several times inside one traced
#: program: JAX traces it, and builds its derivatives, once per argument signature (a
#: nested ``jax.jit``); elsewhere ``fn``.
CAPABILITIES = ("eager", "concrete", "jacfwd", "lu_factor", "lu_solve", "errstate", "forward_only",
                "gated", "checkpoint_saving", "checkpoint_name", "traced_once")  # fmt: skip


class OpsBase:
    """Base class of the ``ops`` namespaces (each satisfies the :class:`Ops` protocol).

    Attributes
    ----------
    name : str
        The context: ``"numpy"``, ``"jax"``, ``"torch"`` or ``"taylor"``.
    dtype : object
        The floating dtype new arrays get (float64 unless asked otherwise).
    eager : bool
        True where Python control flow runs on concrete values (numpy, torch,
        and the Taylor context over them), so a loop can stop as soon as its
        condition fails; False where functions are traced and compiled (JAX),
        so loops need ``ops.scan`` and static bounds.
    compile_part : callable or None
        ``compile_part(key, make) -> fn``: where set (a context from
        :meth:`Backend.ops_compiling_parts`), a part of the computation (an
        ODE's step loop: ``make()``, a pure function of arrays, built once per
        ``key``) may run under the backend's optional compiler; ``fn`` runs it
        eagerly where the compiler does not apply.  ``None`` (the default):
        nothing is compiled.
    """

    name: str = "base"
    dtype: Any = None
    eager: bool = False
    compile_part: Any = None
    pi = 3.141592653589793
    e = 2.718281828459045
    inf = float("inf")

    def concrete(self, x: Array) -> Any:
        """``x`` as a numpy array, or ``None`` where it has no value now."""
        raise UnsupportedError(f"ops.concrete is not available in the {self.name!r} context")

    def errstate(self) -> AbstractContextManager[Any]:
        """Silence floating-point warnings for a block (numpy emits them; the others do not)."""
        return contextlib.nullcontext()

    def checkpoint_saving(
        self, fn: Callable[..., Any], names: tuple[str, ...]
    ) -> Callable[..., Any]:
        """``checkpoint(fn)``, storing (not recomputing) the values tagged with one of ``names``.

        Where a context rematerialises (JAX), the backward pass recomputes
        ``fn`` from its inputs and from the stored tagged values, so a
        recomputation reuses those values exactly instead of re-deriving them
        (a recomputation compiled apart from the forward may round
        differently).  Default: ``checkpoint(fn)``, the tags being the identity.
        """
        return self.checkpoint(fn)  # type: ignore[attr-defined,no-any-return]

    def checkpoint_name(self, x: Array, name: str) -> Array:
        """``x``, tagged ``name`` for :meth:`checkpoint_saving` (the identity by default)."""
        return x

    def traced_once(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, for a function called several times inside one traced program.

        Where a context traces (JAX), each call with the same argument shapes
        reuses one trace of ``fn`` and the derivatives built from it (a
        solver's right-hand side, called once per stage).  Default: ``fn``.
        """
        return fn

    def jacfwd(self, fn: Callable[..., Array]) -> Callable[..., Array]:
        """Forward-mode Jacobian ``d fn(z, *consts) / dz`` inside a solver (the context's own
        transform); ``consts`` are passed through undifferentiated."""
        raise UnsupportedError(
            f"ops.jacfwd is not available in the {self.name!r} context; pass an analytic "
            "Jacobian instead"
        )

    def lu_factor(self, a: Array) -> Any:
        """The pivoted LU factorisation of a square ``a`` (an opaque value for :meth:`lu_solve`).

        Differentiable to every order where the context has AD (a stiff
        solver factorises ``W = I - h gamma J`` once a step and solves each
        stage with it).  A singular ``a`` gives non-finite solutions (JAX,
        torch) or raises (numpy: ``LinAlgError``-type ``ValueError``).
        """
        raise UnsupportedError(f"ops.lu_factor is not available in the {self.name!r} context")

    def lu_solve(self, lu: Any, b: Array) -> Array:
        """``a^-1 b`` from ``lu = lu_factor(a)``; ``b`` of shape ``(n,)`` or ``(n, k)``."""
        raise UnsupportedError(f"ops.lu_solve is not available in the {self.name!r} context")

    def gated(self, fn: Callable[..., Any], keep: Callable[[Any], Any]) -> Callable[..., Any]:
        """``fn``, whose derivatives are exactly 0 (not NaN) wherever ``keep(fn(*args))`` is false.

        Reverse mode selects the cotangents of ``fn``'s inputs *after* ``fn``'s
        own backward pass, so a discarded evaluation whose intermediates
        overflowed (a rejected ODE step) contributes zeros instead of the NaN
        of ``0 * inf``; forward mode selects the tangents likewise.  Values are
        ``fn``'s.  Here (no reverse mode, or no evaluation on the tape that is
        not used) ``fn`` itself.
        """
        return fn

    def forward_only(self, x: Array, message: str) -> Array:
        """``x``, marked so that reverse mode through it raises ``UnsupportedError(message)``.

        Values and forward-mode derivatives (JVPs, nested JVPs, Taylor) pass
        through unchanged.  Here (numpy, Taylor: no reverse mode) the identity;
        JAX and torch refuse their reverse pass with ``message``.
        """
        return x

    def split_leaves(
        self,
        flat: Array,
        bounds: tuple[tuple[int, int], ...],
        shapes: tuple[tuple[int, ...], ...],
    ) -> list[Array]:
        """The leaves of one flat point ``flat`` (shape ``(n,)``): ``flat[a:b]`` reshaped to
        ``shape`` for each ``(a, b)`` of ``bounds`` (a scalar leaf, shape ``()``, is
        ``flat[a]``).

        What rebuilds structured parameters inside a problem's function
        (:meth:`simdiff.ParamSpec.unflatten` with ``ops``), differentiable in
        the context.  Here one slice (and a reshape) per leaf; a context whose
        every operation is a recorded node (torch's eager autograd) makes it
        fewer.
        """
        return [flat[a] if s == () else flat[a:b] if len(s) == 1
                else self.reshape(flat[a:b], s)
                for (a, b), s in zip(bounds, shapes, strict=True)]  # fmt: skip

    def __getattr__(self, item: str) -> Any:
        # Only reached for names the context lacks.
        raise UnsupportedError(
            f"operation ops.{item} is not available in the {self.name!r} context"
        )

    def __repr__(self) -> str:
        return f"<simdiff ops: {self.name}, dtype={self.dtype}>"

    def safe_where(
        self,
        condition: Any,
        x: Any,
        if_true: Any,
        if_false: Any = 0.0,
        *,
        fill_true: Any = 1.0,
        fill_false: Any = 1.0,
    ) -> Any:
        """``where(condition, if_true(x), if_false(x))`` with finite derivatives in every context.

        The "double where": ``ops.where(x > 0, ops.sqrt(x), 0.0)`` has the
        right value at ``x = -1`` but a NaN derivative, because the branch
        not taken is still differentiated (``0 * sqrt'(-1) = 0 * nan``).
        Here each callable branch is evaluated only at points where it is
        selected; elsewhere its argument is replaced by ``fill_true`` /
        ``fill_false`` (a point where the branch is smooth), so the
        derivative of the result is that of the selected branch.

        Parameters
        ----------
        condition : boolean array
            Where to take ``if_true``; it must not depend on derivatives
            (comparisons of arrays are fine).
        x : array
            The argument of the branches.
        if_true, if_false : callable or array_like
            A function of one array (applied to ``x``), or a value.
        fill_true, fill_false : float
            Stand-in arguments for the branch where it is not selected; the
            default 1.0 suits ``sqrt``, ``log`` and ``1 / x``.

        Returns
        -------
        array
            The broadcast shape of ``condition``, ``x`` and the branches.

        Examples
        --------
        >>> import numpy as np, simdiff
        >>> p = simdiff.Problem(
        ...     lambda x, ops: ops.sum(ops.safe_where(x > 0, x, ops.sqrt, 0.0)),
        ...     x0=np.array([-1.0, 4.0]))
        >>> simdiff.grad(p)            # sqrt'(4) = 0.25, and 0 (not nan) at x = -1
        array([0.  , 0.25])
        """
        t = if_true(self.where(condition, x, fill_true)) if callable(if_true) else if_true
        f = if_false(self.where(condition, fill_false, x)) if callable(if_false) else if_false
        return self.where(condition, t, f)


class LoopOps(OpsBase):
    """Shared Python-loop implementations of ``scan``, ``while_loop`` and ``cond`` (eager contexts).

    ``while_loop`` and ``cond`` read their predicate as a Python bool.  Where
    it has no value (a batched tensor under ``torch.func.vmap``) they fall back
    to what ``jax.vmap`` does with ``lax.while_loop``/``lax.cond``: run both
    sides and select elementwise with ``where``.
    """

    def _select(self, pred: Any, new: Any, old: Any) -> Any:
        return tree_map(lambda a, b: self.where(pred, a, b), new, old)

    def while_loop(
        self,
        cond: Callable[[Any], Any],
        body: Callable[[Any], Any],
        carry: Any,
        max_steps: int,
    ) -> Any:
        """``carry = body(carry)`` while ``cond(carry)``, at most ``max_steps`` times.

        Same contract as ``jax.lax.while_loop`` with an iteration bound.  Here a
        Python loop that stops as soon as ``cond`` is false; when ``cond`` has no
        one value (batched under ``torch.func.vmap``) the carry is updated only
        where ``cond`` holds, and the loop stops once it holds in no lane
        (:meth:`_holds_anywhere`; what ``jax.vmap`` of ``lax.while_loop`` does),
        or after ``max_steps`` where the lanes cannot be read.
        """
        for _ in range(int(max_steps)):
            pred = cond(carry)
            try:
                go = bool(pred)
            except RuntimeError:  # batched under torch.func.vmap: no Python value
                if not self._holds_anywhere(pred):
                    break  # every lane is done: the rest would keep every carry as it is
                carry = self._select(pred, body(carry), carry)
                continue
            if not go:
                break
            carry = body(carry)
        return carry

    def _holds_anywhere(self, pred: Any) -> bool:
        """Whether a batched predicate holds in any lane (True where that cannot be read)."""
        return True

    def cond(
        self,
        pred: Any,
        true_fn: Callable[..., Any],
        false_fn: Callable[..., Any],
        *operands: Any,
    ) -> Any:
        """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (``jax.lax.cond``).

        A Python ``if``; when ``pred`` has no Python value (under
        ``torch.func.vmap``) both branches run and ``where`` selects.
        """
        try:
            take = bool(pred)
        except RuntimeError:  # batched under torch.func.vmap
            return self._select(pred, true_fn(*operands), false_fn(*operands))
        return true_fn(*operands) if take else false_fn(*operands)

    eager = True

    def scan(
        self,
        step: Callable[[Any, Any], tuple[Any, Any]],
        carry: Any,
        xs: Any = None,
        length: int | None = None,
    ) -> tuple[Any, Any]:
        """Loop ``carry, y = step(carry, x)`` over the leading axis of ``xs``.

        Same contract as ``jax.lax.scan``: returns the final carry and the
        ``y`` values stacked on a new leading axis (``None`` if ``step``
        returns ``None``).  Here it runs as a Python loop.
        """
        n = _scan_length(xs, length)
        ys = []
        for i in range(n):
            x = None if xs is None else tree_map(lambda a, i=i: a[i], xs)
            carry, y = step(carry, x)
            ys.append(y)
        if n == 0:
            raise InputError("ops.scan: length 0 loops are not supported outside JAX")
        leaves0, treedef = tree_flatten(ys[0])
        if not leaves0:
            return carry, tree_unflatten(treedef, [])
        columns = zip(*(tree_flatten(y)[0] for y in ys), strict=True)
        return carry, tree_unflatten(treedef, [self.stack(list(col)) for col in columns])


def _scan_length(xs: Any, length: int | None) -> int:
    if xs is None:
        if length is None:
            raise InputError("ops.scan needs xs or length; got neither")
        return int(length)
    leaves, _ = tree_flatten(xs)
    lengths = {int(leaf.shape[0]) for leaf in leaves}
    if len(lengths) != 1:
        raise InputError(f"ops.scan: xs leaves have different leading lengths {sorted(lengths)}")
    (n,) = lengths
    if length is not None and int(length) != n:
        raise InputError(f"ops.scan: length={length} but xs has leading length {n}")
    return n


class Backend:
    """A framework simdiff differentiates with: transforms, conversions and capabilities.

    Subclasses provide ``grad, jvp, vjp, jacfwd, jacrev, vmap`` with the
    signatures of ``jax``/``torch.func``, ``jit`` (identity where there is no
    compiler), and conversion between native arrays and numpy.  Code above
    ``simdiff/backends/`` asks a backend what it can do through the attributes
    and methods below, never by comparing its name.

    Attributes
    ----------
    name : str
    differentiable : bool
        Whether the transforms exist (numpy: evaluation only).
    optional_compiler : bool
        Whether :meth:`compile` exists (an optional compiler on top of ``jit``:
        ``torch.compile``).
    prefers_batched_calls : bool
        Whether one vmapped call over many points beats a loop of single calls
        (JAX: yes, one compiled kernel; torch eager: no, vmap adds overhead per op).
    precision_hint : str
        Appended to the float32-input warning (how to get float64 arrays in this framework).
    """

    name: str = "base"
    differentiable: bool = True
    #: True where compiling is a choice (torch.compile); False where the backend
    #: always compiles (jax.jit) or never does (numpy).  See ``simdiff.core.compile``.
    optional_compiler: bool = False
    #: What an uncompiled call runs as (``cache_info()``'s ``path``): "jit" or "eager".
    plain_path: str = "eager"
    #: Whether a built derivative callable takes numpy arrays of its dtype as they are
    #: (jax.jit's dispatch moves them to the device itself, faster than a conversion first).
    calls_take_numpy: bool = False
    prefers_batched_calls: bool = True
    precision_hint: str = ""
    #: The class of this backend's ``ops`` namespaces.
    ops_class: type[OpsBase] = OpsBase

    # --- transforms (subclasses set these to the framework's functions)
    grad: Callable[..., Any]
    jvp: Callable[..., Any]
    vjp: Callable[..., Any]
    jacfwd: Callable[..., Any]
    jacrev: Callable[..., Any]

    def vmap(self, fn: Callable[..., Any], in_axes: Any = 0) -> Callable[..., Any]:
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")

    #: The tracer itself raises when a problem leaves the traced computation
    #: (``float(x)``, ``.item()``, numpy): JAX.  Where it does not (torch), the
    #: leak probe of :class:`simdiff.Derivatives` checks the first call.
    catches_leaks: bool = False

    #: :meth:`jit` traces a Python wrapper around an already compiled callable into one
    #: compiled call (JAX), so joining the leaves of structured parameters and splitting
    #: the result inside it costs no dispatch per leaf: :class:`simdiff.Derivatives` then
    #: calls a derivative at a tree of this backend's arrays as one compiled call.
    fuses_wrappers: bool = False

    def leak_cause(self, exc: BaseException) -> str | None:
        """What ``exc`` says the problem did to leave the traced computation, or None."""
        return None

    def refusal_cause(self, exc: BaseException) -> str | None:
        """What the problem did that the framework's transforms refuse (``exc`` raised by
        the framework while a derivative ran), with the way out; None if ``exc`` is not one."""
        return None

    def leak_guard(
        self, trusted: frozenset[str] = frozenset(), strict: bool = False
    ) -> AbstractContextManager[Any]:
        """A context in which a value with a derivative cannot leave the computation silently.

        Entered around every eager derivative call of :class:`simdiff.Derivatives`
        (not only the probed first one).  Nothing where the tracer catches leaks
        (JAX); torch: :class:`simdiff.backends._torch_leaks.LeakGuard`.  ``trusted``:
        the problem's ``trusted_packages``, whose own deliberate detaches pass;
        ``strict``: ``Derivatives(probe="strict")``, every operation watched.
        """
        return contextlib.nullcontext()

    def problem_call(self, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``fn(x, ops)``, the problem's function, as every derivative built here calls it.

        ``fn`` itself where the problem has no framework state to leave switched
        (JAX, numpy); torch: raising, under the leak guard, where ``fn`` returns
        with gradients switched off that were on when it was called
        (:func:`simdiff.backends._torch_leaks.watching_grad_mode`).
        """
        return fn

    #: Messages (regular expressions) of warnings the framework emits when a value
    #: leaves the traced computation; simdiff turns them into errors (``leak_cause``).
    leak_warnings: tuple[str, ...] = ()

    def ops(self, dtype: Any = None, device: Any = None) -> Ops:
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")

    def ops_compiling_parts(self, dtype: Any = None, device: Any = None) -> Ops | None:
        """A context that compiles parts (``OpsBase.compile_part``: an ODE's step loop), or None.

        None (the default) where the backend has no optional compiler.
        """
        return None

    def runs(self, ops: Any) -> bool:
        """Whether ``ops`` is this backend's own context (not, e.g., Taylor over it)."""
        return type(ops) is self.ops_class

    # --- compilation
    def jit(
        self,
        fn: Callable[..., Any],
        on_compile: Callable[[], None] | None = None,
        *,
        step_loop: bool = False,
    ):
        """``fn`` compiled where the framework compiles; ``on_compile()`` runs once per compilation.

        ``step_loop``: ``fn`` is dominated by a solver's step loop
        (:attr:`Problem.step_loop`); a backend may compile such programs with
        settings of its own (JAX: :data:`simdiff.backends.jax.STEP_LOOP_OPTIONS`).
        The default (eager frameworks) compiles nothing: ``fn`` is returned
        and ``on_compile`` runs once, now (building the callable is its
        "compilation"), so counters mean the same on every backend.
        """
        if on_compile is not None:
            on_compile()
        return fn

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """An optional compiler on top of :meth:`jit` (see ``optional_compiler``)."""
        raise UnsupportedError(f"backend {self.name!r} has no compiler beyond jit")

    @staticmethod
    def block_until_ready(x: Any) -> Any:
        """Wait for an asynchronous result (JAX); eager backends return ``x`` at once."""
        return x

    def warm_up(self) -> None:
        """Initialise the framework (imports, runtime start-up) outside any timing."""

    # --- arrays

    def hessian_method(self, n: int, m: int, compiled: bool = False) -> str:
        """Hessian method for ``method="auto"``: ``n`` inputs, ``m`` outputs (1 if scalar).

        ``compiled``: the method for a callable run under the backend's
        optional compiler (``compile=True | "auto"``), where the best method
        may differ from the eager one; a backend without one ignores it.

        The default is JAX's measured rule (``python -m
        validation.benchmarks.bench_torch_hessian``, docs/performance.md): forward over
        reverse for a scalar function, forward over forward for a vector-valued
        one with no more inputs than outputs (each output's reverse pass costs
        as much as a forward pass over all inputs).  Backends override it.
        """
        return "fwd-fwd" if 1 < m and n <= m else "fwd-rev"

    def compile_refusal(
        self, kind: str, params: dict[str, Any], scalar: bool, batched: bool = False
    ) -> str | None:
        """Why the optional compiler must not be tried on this derivative; ``None``: it may.

        ``kind`` and ``params`` as ``Derivatives`` builds them; ``scalar``: the
        problem returns a scalar; ``batched``: the callable is vmapped over a
        batch of points (``x`` batched; a batch of directions alone is not).
        For compilations known to crash the process (which no ``try`` can
        catch); ``compile=True`` raises the reason, ``"auto"`` runs eagerly
        and states it.
        """
        return None

    #: How ``Derivatives.hvp`` differentiates: "fwd-rev" (jvp of the gradient) or
    #: "rev-rev" (gradient of <grad f, v>); measured per backend (docs/performance.md).
    hvp_method: str = "fwd-rev"
    #: How many small Hessians of one function (the term Hessians of a sum of terms,
    #: :class:`simdiff.pes.TermEnergy`) are computed fastest: "hvp-sum" (``w`` HVPs of the
    #: sum of the functions over a batch, whose Hessian is block-diagonal) or "batched"
    #: (``Derivatives.hessian`` of one function at a batch of points); measured per backend.
    term_hessians: str = "hvp-sum"

    def join(self, parts: Sequence[Any], lead: tuple[int, ...]) -> Any:
        """Native arrays ``parts`` (each ``(*lead, *shape)``) as one ``(*lead, total)`` vector.

        What flattens structured parameters (:meth:`simdiff.ParamSpec.flatten`)
        whose leaves are this framework's arrays; traced parts stay traced.
        The default concatenates through :meth:`ops`; a backend whose
        per-operation cost is high (JAX dispatch) makes it one call.
        """
        ops = self.ops()
        return ops.concat([ops.reshape(p, (*lead, -1)) for p in parts], axis=-1)

    def split(
        self,
        flat: Any,
        bounds: tuple[tuple[int, int], ...],
        shapes: tuple[tuple[int, ...], ...],
    ) -> list[Any]:
        """The inverse of :meth:`join`: ``flat[..., a:b]`` reshaped to ``(*lead, *shape)``
        for each ``(a, b)`` of ``bounds`` (a scalar leaf, shape ``()``, is ``flat[..., a]``)."""
        lead = tuple(flat.shape[:-1])
        return [flat[..., a] if s == () else flat[..., a:b] if len(s) == 1
                else flat[..., a:b].reshape((*lead, *s))
                for (a, b), s in zip(bounds, shapes, strict=True)]  # fmt: skip

    def is_native(self, x: Any) -> bool:
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")

    def concrete_leaves(
        self, parts: Sequence[Any], shapes: Sequence[tuple[int, ...]], dtype: Any
    ) -> bool:
        """Whether every array of ``parts`` is one of this backend's, not traced, of ``dtype``
        and of its entry of ``shapes``: what may go into a compiled call as it is."""
        for p, shape in zip(parts, shapes, strict=True):
            if not self.is_native(p) or self.is_traced(p) or p.shape != shape or p.dtype != dtype:
                return False
        return True

    def from_numpy(self, a: Any, dtype: Any, device: Any = None) -> Any:
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")

    def to_numpy(self, x: Any) -> Any:
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")

    def dtype_name(self, x: Any) -> str:
        """The dtype of native array ``x`` as numpy spells it (``"float32"``, ``"bool"``, ...)."""
        return str(x.dtype)

    def device_of(self, x: Any) -> Any:
        """The device of native array ``x``, or ``None`` where the backend has one device."""
        return None

    def concrete(self, x: Any) -> Any:
        """``x`` as a numpy array, or ``None`` if it has no value now (a tracer under jit/vmap)."""
        return self.to_numpy(x)

    def eval_shape(self, fn: Callable[[Any], Any], x: Any) -> tuple[int, ...]:
        """The shape of ``fn(x)`` (eager frameworks: one evaluation of ``fn``)."""
        return tuple(int(s) for s in getattr(fn(x), "shape", ()))

    def building(self) -> AbstractContextManager[Any]:
        """A block in which derivative functions are built, possibly inside a caller's trace.

        Constants made while building (``ops.eye(n)`` of a basis) must be
        values, not tracers of the trace that happens to be active, since the
        built function is kept and called again.  Eager frameworks: nothing to do.
        """
        return contextlib.nullcontext()

    def is_traced(self, x: Any) -> bool:
        """Whether native array ``x`` is an argument inside one of the framework's transforms.

        A JAX tracer (under ``jax.jit``, ``jax.vmap``, ``jax.grad``, ...), a
        torch tensor wrapped by a ``torch.func`` transform or traced by
        torch.compile.  Such an array cannot be converted to numpy
        (:meth:`to_numpy`); :meth:`concrete` says whether it has values now
        (torch under ``torch.func.grad``: yes; JAX tracers, ``torch.func.vmap``:
        no).  :class:`simdiff.Derivatives` keeps such inputs in the framework
        (docs/composability.md).  False here: arrays without transforms (numpy).
        """
        return False

    def mutation_count(self, x: Any) -> Any:
        """A counter that changes with every in-place change of native array ``x``, or
        ``None`` where arrays are immutable (what a fingerprint rechecks cheaply)."""
        return None

    # --- threads
    def threads(self) -> dict[str, Any]:
        """The framework's thread counts in effect (empty where it has no setting)."""
        return {}

    def intra_op_threads(self) -> int | None:
        """Intra-op threads the framework uses now, if it can change them at run time, else None.

        Where this is a number, :meth:`set_threads` may change it between calls
        (``simdiff.sweep`` measures one thread against this many).
        """
        return None

    def set_threads(self, n: int) -> None:
        """Use ``n`` threads from now on, where the framework allows it after import."""
        raise UnsupportedError(
            f"backend {self.name!r} cannot change its thread count after import; "
            "call simdiff.backends.set_threads(n) before it is first used"
        )

    def __repr__(self) -> str:
        return f"<simdiff backend {self.name!r}>"
