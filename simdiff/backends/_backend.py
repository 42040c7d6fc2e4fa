"""The :class:`Backend` base class: a framework's transforms, conversions and capabilities."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from simdiff.backends._base import Ops
from simdiff.backends._ops_base import OpsBase
from simdiff.errors import UnsupportedError

__all__ = ["Backend"]


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
        (JAX); torch: :class:`simdiff.backends.torch.leaks.LeakGuard`.  ``trusted``:
        the problem's ``trusted_packages``, whose own deliberate detaches pass;
        ``strict``: ``Derivatives(probe="strict")``, every operation watched.
        """
        return contextlib.nullcontext()

    def problem_call(self, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``fn(x, ops)``, the problem's function, as every derivative built here calls it.

        ``fn`` itself where the problem has no framework state to leave switched
        (JAX, numpy); torch: raising, under the leak guard, where ``fn`` returns
        with gradients switched off that were on when it was called
        (:func:`simdiff.backends.torch.leaks.watching_grad_mode`).
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
