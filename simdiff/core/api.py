"""The derivative API: ``grad``, ``hessian``, ``hvp``, ``jvp``, ``vjp``, ``jacobian``,
``derivative``, ``derivative_tensor``, ``taylor`` and the cached ``Derivatives``.

Every function takes a :class:`~simdiff.Problem`, a point ``x`` (``None`` means
``problem.x0``; a leading batch axis maps over points with vmap) and a
``backend``.  Results follow the input's array type.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np

from simdiff._log import get_logger
from simdiff.backends import Ops, get_backend
from simdiff.backends._tree import tree_map
from simdiff.backends.taylor import taylor_function
from simdiff.core import arrays as A
from simdiff.core.compile import CompiledCall, check_compile
from simdiff.core.operator_builders import OPERATOR_KINDS, OperatorMethods, build_operator
from simdiff.core.probe import probe
from simdiff.core.problem import Problem, bad_output
from simdiff.core.structure import StructuredHessian, memory_budget
from simdiff.core.taylor_tensor import assemble_tensor
from simdiff.errors import (
    ArgumentOrderError,
    InputError,
    InputTypeError,
    LeakError,
    MemoryBudgetError,
    NonFiniteError,
    OptionError,
    ShapeError,
    SimdiffError,
    UnsupportedError,
)

__all__ = [
    "HESSIAN_METHODS",
    "JACOBIAN_MODES",
    "Derivatives",
    "auto_hessian_method",
    "derivative",
    "derivative_tensor",
    "grad",
    "hessian",
    "hvp",
    "jacobian",
    "jvp",
    "taylor",
    "value_and_grad",
    "vjp",
]

_log = get_logger(__name__)

HESSIAN_METHODS = ("auto", "fwd-rev", "rev-rev", "fwd-fwd")
JACOBIAN_MODES = ("auto", "fwd", "rev")
DERIVATIVE_METHODS = ("taylor", "nested")
_SCALAR_ONLY = {"grad", "value_and_grad", "hvp"}
# what the numpy context can do (it evaluates, it does not differentiate)
_NO_AD_KINDS = {"value", "taylor", "taylor_derivative", "derivative_sum"}


def _check_order(order: Any, what: str = "order") -> int:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise InputError(f"{what} must be a non-negative integer; got {order!r}")
    if order > _MAX_ORDER:
        raise InputError(
            f"{what} must be at most {_MAX_ORDER} (the derivative is a Taylor coefficient times "
            f"{what}!, and {_MAX_ORDER + 1}! overflows float64); got {order}"
        )
    return int(order)


#: The highest derivative order: 170! is the largest factorial float64 holds.
_MAX_ORDER = 170


def _check_taylor_order(order: Any) -> int:
    """``order`` of :func:`taylor`, refusing the retired ``(problem, x, direction, order)`` call.

    An array (or list, tensor) in the ``order`` slot is a call in the old
    argument order; it is refused rather than read as an order.
    """
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)):
        if hasattr(order, "shape") or isinstance(order, (list, tuple)) or order is None:
            raise ArgumentOrderError(
                "taylor takes (order, direction, x=None), the order of simdiff.derivative, "
                f"e.g. simdiff.taylor(problem, 3, direction, x); got {type(order).__name__} "
                "for order (an x where the order goes: the call is in the retired order "
                "(problem, x, direction, order))"
            )
    return _check_order(order)


def _choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise InputError(f"unknown {what} {value!r}; expected one of {list(allowed)}")
    return value


# --------------------------------------------------------------------------- builders
# Each builder returns a function of (x, *extras) for one point, written with the
# transforms every differentiating backend shares (jax and torch.func signatures).


def _nested_derivative(f: Callable[[Any], Any], T: Any, order: int) -> Callable[[Any, Any], Any]:
    def g0(x: Any, v: Any) -> Any:
        return f(x)

    g = g0
    for _ in range(order):
        g = (lambda h: lambda x, v: T.jvp(lambda y: h(y, v), (x,), (v,))[1])(g)
    return g


def _derivative_tensor(f: Callable[[Any], Any], T: Any, order: int) -> Callable[[Any], Any]:
    if order == 0:
        return f
    g = T.jacrev(f)
    for _ in range(order - 1):
        g = T.jacfwd(g)
    return g


def _value_and_grad(f: Callable[[Any], Any], T: Any) -> Callable[[Any], Any]:
    def vg(x: Any) -> Any:
        y, pullback = T.vjp(f, x)
        return y, pullback(y * 0 + 1)[0]

    return vg


#: Largest ``n`` for which a reverse-over-reverse Hessian of a scalar problem is built
#: from ``n`` reverse-over-reverse HVPs instead of ``jacrev(jacrev f)`` (see
#: :func:`_hessian_by_hvps`).
HVP_HESSIAN_MAX_N = 1


def _hessian_by_hvps(f: Callable[[Any], Any], T: Any, ops: Ops, n: int) -> Callable[[Any], Any]:
    """The ``(n, n)`` Hessian of a scalar ``f`` as ``n`` reverse-over-reverse HVPs.

    For one parameter ``jacrev(jacrev f)`` maps its pullbacks over a basis of
    one vector; one HVP takes 0.16x to 0.57x of its time on torch (seed,
    heat_diffusivity, burgers_colehopf, ode_rk4_decay), the same numbers.
    For n > 1 the ratio depends on the problem (0.74x to 1.02x on small
    closed forms, 2.2x to 2.3x on the ODE fits, 0.12x on heat_modes), so
    ``jacrev(jacrev f)`` stays: ``python -m
    validation.benchmarks.bench_torch_hessian_hvps``, docs/results/bench_torch_hessian_hvps.txt.
    """
    basis = [ops.eye(n)[i] for i in range(n)]
    hvp = _rev_rev_hvp(f, T, ops)

    def hessian(x: Any) -> Any:
        return ops.stack([hvp(x, v) for v in basis])

    return hessian


def _rev_rev_hvp(f: Callable[[Any], Any], T: Any, ops: Ops) -> Callable[[Any, Any], Any]:
    """``H(x) v`` of a scalar ``f`` as the gradient of ``<grad f(x), v>`` (reverse over reverse)."""
    return lambda x, v: T.grad(lambda y: ops.sum(T.grad(f)(y) * v))(x)


def _build(kind: str, params: dict[str, Any], problem: Problem, ops: Ops, T: Any) -> Callable:
    if kind in OPERATOR_KINDS:  # laplacian, biharmonic, derivative_sum (simdiff/_operators*.py)
        return build_operator(kind, params, problem, ops, T)

    call = T.problem_call(problem.fn)

    def f(x: Any) -> Any:
        y = call(x, ops)
        if isinstance(y, (int, float, np.integer, np.floating)) and not isinstance(y, bool):
            return ops.sum(x * 0.0) + float(y)  # a constant: zero derivatives on every backend
        if y is None or isinstance(y, (bool, str, bytes, complex, np.complexfloating)):
            # every kind, ``value`` included, at every point: not only where output_shape looked
            raise InputTypeError(bad_output(problem.name, y, type(y).__name__))
        return y

    if kind == "value":
        return f
    if kind == "grad":
        return T.grad(f)
    if kind == "value_and_grad":
        return _value_and_grad(f, T)
    if kind == "hessian":
        if params["method"] == "rev-rev" and problem.is_scalar and problem.n <= HVP_HESSIAN_MAX_N:
            return _hessian_by_hvps(f, T, ops, problem.n)
        outer, inner = {
            "fwd-rev": ("jacfwd", "jacrev"),
            "rev-rev": ("jacrev", "jacrev"),
            "fwd-fwd": ("jacfwd", "jacfwd"),
        }[params["method"]]
        return getattr(T, outer)(getattr(T, inner)(f))
    if kind == "hvp":
        if params["method"] == "rev-rev":
            return _rev_rev_hvp(f, T, ops)
        return lambda x, v: T.jvp(T.grad(f), (x,), (v,))[1]
    if kind == "jvp":
        return lambda x, v: T.jvp(f, (x,), (v,))[1]
    if kind == "vjp":
        return lambda x, u: T.vjp(f, x)[1](u)[0]
    if kind == "jacobian":
        return getattr(T, "jacfwd" if params["mode"] == "fwd" else "jacrev")(f)
    if kind == "derivative":
        return _nested_derivative(f, T, params["order"])
    if kind == "derivative_tensor":
        return _derivative_tensor(f, T, params["order"])
    if kind == "taylor":
        return taylor_function(problem, ops, params["order"])
    if kind == "taylor_derivative":  # k! c_k, sliced inside the compiled function
        g, k = taylor_function(problem, ops, params["order"]), params["order"]
        scale = float(math.factorial(k))
        return lambda x, v: g(x, v)[k] * scale
    raise UnsupportedError(f"unknown derivative kind {kind!r}")


def auto_hessian_method(backend: Any, n: int, m: int, compiled: bool = False) -> str:
    """The Hessian method ``method="auto"`` runs for ``n`` inputs and ``m`` outputs.

    ``compiled`` asks for the method of the compiled path (torch.compile):
    see ``TorchBackend.hessian_method``.

    The backend decides (``Backend.hessian_method``), from measurements kept
    in docs/performance.md (``python -m validation.benchmarks.bench_torch_hessian``): on
    JAX forward over reverse for scalar functions and forward over forward for
    vector-valued ones with ``n <= m``; on torch.func reverse over reverse
    everywhere (its double backward beats forward mode through a backward pass
    by 1.4x to 20x on every catalogue entry measured).

    Examples
    --------
    >>> from simdiff.backends import get_backend
    >>> auto_hessian_method(get_backend("jax"), 114, 1)
    'fwd-rev'
    >>> auto_hessian_method(get_backend("jax"), 4, 12)
    'fwd-fwd'
    """
    return backend.hessian_method(int(n), int(m), compiled=bool(compiled))


# --------------------------------------------------------------------------- Derivatives


class Derivatives(OperatorMethods):
    """Compiled, cached derivative callables of one problem on one backend.

    Each derivative is built (and on JAX jit-compiled) once per input shape,
    dtype and batching pattern, and reused afterwards.  ``compilations``
    counts the builds: on JAX it is the number of jit traces (so a retrace is
    visible), on torch the number of transform chains built (and compiled,
    with ``compile=True``).

    Parameters
    ----------
    problem : Problem
    backend : {"jax", "torch", "numpy"}, optional
        Default ``problem.default_backend``: jax, or torch for a problem that
        runs on torch only (:meth:`Problem.from_torch`).
    dtype : {"float64", "float32"}, optional
        Computation dtype (default float64); inputs are cast to it.
    compile : {False, True, "auto"}
        torch: ``True`` wraps each callable in ``torch.compile``; a compilation
        failure raises :class:`~simdiff.errors.UnsupportedError` with torch's
        reason.  ``"auto"`` compiles a callable once the expected number of
        calls pays for the compile (break-even from the measured eager time and
        the compile time; :meth:`expect_calls` announces the number), and runs
        eagerly, saying why, when torch.compile fails or does not speed it up.
        :meth:`cache_info` states the path each callable ran and the numbers.
        JAX always jit-compiles: ``False`` and ``"auto"`` are accepted there,
        ``True`` is refused.  Any other value raises
        :class:`~simdiff.errors.OptionError`.  See docs/performance.md.
    check_finite : bool
        Reject non-finite inputs (``ValueError`` naming the first bad index)
        and non-finite results (:class:`~simdiff.errors.NonFiniteError`).
    probe : bool, optional
        On the first derivative call, on a backend whose tracer does not
        catch a problem leaving the traced computation (torch), compare one
        directional derivative with a difference quotient of the values and
        raise :class:`~simdiff.errors.LeakError` if they disagree (cost, once:
        three function evaluations, plus one VJP unless the first call was a
        gradient or Jacobian; see docs/errors.md).  Default: as
        ``check_finite``, so benchmarks that switch the checks off do not pay
        for it.  On every backend, the framework's own leak errors and
        warnings become ``LeakError``.  With the probe on, every later call
        runs under the backend's leak guard too (torch: ``x.item()``,
        ``x.tolist()``, ``float(x)``, ``int(x)``, ``x.detach()``, ``x.data``,
        ``torch.tensor(x)`` on a value with a derivative raise ``LeakError``
        at that op, by whatever reference: one bound before simdiff, such
        as ``torch._C.TensorBase.detach(x)``, is seen at torch's dispatcher),
        so a leak that appears only at other points (behind a branch) is
        caught there; a compiled callable's first call runs it eagerly once
        under the guard before the trace (docs/errors.md says what the guard
        cannot see).  ``"strict"`` (torch, ``compile=False``): as ``True``,
        and the guard also sees the C type's ``data`` descriptor and
        ``tolist``, which dispatch no operation, and any torch operation of
        the problem run while gradients are off that were on when ``fn``
        was called (a switch the wrappers cannot see, such as
        ``torch._C._set_grad_enabled`` bound before simdiff, turned off and
        back on), at the cost of a Python call per torch operation (``python -m
        validation.benchmarks.bench_leak_guard --strict``).

    structured : bool
        For a problem with structured parameters (``problem.param_spec``):
        results in the parameters' structure (default; gradients, HVPs and
        VJPs as trees, Hessians as :class:`~simdiff.Labelled`), or, with
        ``False``, the flat arrays.  Points and directions are accepted in
        either form.

    Notes
    -----
    Every method accepts traced inputs (JAX tracers inside ``jax.jit``,
    ``jax.vmap`` or ``jax.grad``; tensors inside ``torch.func`` transforms)
    and then returns the backend's own traced arrays: shape and dtype checks
    run, finite and point checks run only where the values exist, and host
    assemblies (structured Hessians, chunked Hessians, Taylor-interpolated
    tensors) take a traced path or refuse with the reason.  See
    docs/composability.md.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 3), x0=np.ones(2))
    >>> d = simdiff.Derivatives(p, backend="jax")
    >>> d.hessian(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    >>> _ = d.hessian(np.array([3.0, 4.0]))
    >>> d.compilations
    1
    """

    def __init__(
        self,
        problem: Problem,
        backend: str | None = None,
        *,
        dtype: Any = None,
        compile: bool | str = False,
        check_finite: bool = True,
        probe: bool | str | None = None,
        structured: bool = True,
    ) -> None:
        if not isinstance(problem, Problem):
            raise InputTypeError(f"expected a simdiff.Problem; got {type(problem).__name__}")
        self.backend = get_backend(problem.default_backend if backend is None else backend)
        problem.require(self.backend.name)
        self.problem = problem
        self.dtype = A.resolve_dtype(dtype)
        self._dtype_name = np.dtype(self.dtype).name
        self.compile = check_compile(compile, self.backend)
        self.check_finite = bool(check_finite)
        if probe not in (None, True, False, "strict"):
            raise OptionError(f"Derivatives probe must be True, False or 'strict'; got {probe!r}")
        if probe == "strict" and self.compile is not False and self.backend.optional_compiler:
            raise OptionError(
                "Derivatives probe='strict' watches every torch operation from Python, which "
                f"a compiled graph does not run; use compile=False (got compile={compile!r})"
            )
        self.probe = self.check_finite if probe is None else bool(probe)
        #: ``probe="strict"``: the leak guard sees every operation (``Backend.leak_guard``).
        self.strict_leaks = probe == "strict"
        #: Whether results of a problem with structured parameters come back in their
        #: structure (False: flat arrays, what simdiff's own analyses compute on).
        self.structured = bool(structured)
        #: The leak probe's findings (None until it ran; see simdiff.core.probe).
        self.probe_result: dict[str, Any] | None = None
        self._fns: dict[tuple, Callable] = {}
        #: The compiled tree calls of :meth:`_fused_call`, by the key of their flat derivative.
        self._fused: dict[tuple, Callable] = {}
        #: The key of :meth:`_fused_call`'s flat derivative by ``(kind, method, host)``.
        self._fused_keys: dict[tuple, tuple] = {}
        #: ``(problem.fn, whether it is a StructuredHessian)``, see :meth:`_has_structure`.
        self._structure_of: tuple[Any, bool] | None = None
        self._info: dict[tuple, dict[str, Any]] = {}
        self._traces = 0
        self._expected_calls: int | None = None
        self._structured_calls = 0
        self._generation = problem.cache.refresh()

    # ------------------------------------------------------------------ public
    @property
    def compilations(self) -> int:
        """Number of compilations so far (JAX: jit traces; torch: callables built)."""
        return self._traces

    def cache_info(self) -> list[dict[str, Any]]:
        """One record per built callable: kind, parameters, shapes, first-call seconds, calls.

        Also the compile policy's account: ``compile`` (the setting), ``path``
        (``"jit"``, ``"eager"`` or ``"compiled"``: what the last call ran) and,
        under ``compile=True | "auto"`` on torch, ``eager_s`` (seconds per eager
        call), ``compile_s``, ``compiled_s``, ``break_even_calls``, ``reason``
        and, when torch.compile failed, ``compile_error`` with torch's reason.
        A structured Hessian (``method="structured"``) adds one record per
        computation of its pieces (``kind="hessian"``, ``method="structured"``,
        ``piece``, ``piece_kind``: e.g. the term Hessians of
        :class:`simdiff.pes.TermEnergy` as HVPs of the sum of the terms), with
        the path that computation ran under the same compile policy.  A
        problem with a cutoff neighbour list (:func:`simdiff.pes.cluster_problem`)
        adds a last record ``kind="neighbour_list"``: ``pairs``, ``rebuilds``
        (the list was rebuilt at a new geometry that many times; the
        callables above are those built for the current list), ``follow``,
        ``skin``, ``radius``.  An ODE problem built with ``solver="auto"`` adds a
        record ``kind="solver_choice"`` (:class:`simdiff.ode.auto.SolverChoice`:
        the chosen ``solver``, ``stiff``, ``stiffness_ratio``, ``reason``, ...).

        ``traced_calls`` counts the calls made with traced inputs (inside
        ``jax.jit``/``vmap``/``grad`` or a ``torch.func`` transform; there
        ``first_call_s`` is NaN if the first call was traced), and
        ``method_reason`` says why ``method="auto"`` ran a method other than
        its first choice (a problem without the Taylor context, a structured
        Hessian asked for with a traced ``x``): docs/composability.md.
        """
        out = []
        for key, info in self._info.items():
            fn = self._fns[key]
            out.append({**info, **fn.record} if isinstance(fn, CompiledCall) else dict(info))
        if self._structured_calls:  # the structured Hessian: its pieces' computations
            pieces = self.problem.fn.structured_cache_info(
                self.backend.name, np.dtype(self.dtype).name, self.compile
            )
            base = {"kind": "hessian", "method": "structured", "calls": self._structured_calls}
            base["shape"] = (self.problem.n,)
            out += [{**r, **base, "piece_kind": r["kind"], "piece_shape": r["shape"],
                     "piece_calls": r["calls"]} for r in pieces]  # fmt: skip
        out += self.problem.cache_notes()  # what the problem decided when built
        account = getattr(self.problem.fn, "neighbour_list", None)
        lists = account() if callable(account) else None
        if lists is not None:  # a cutoff neighbour list: its size and rebuilds so far
            out.append({"kind": "neighbour_list", **lists})
        return out

    def expect_calls(self, n: int | None) -> Derivatives:
        """Announce how many calls each derivative will get (``None``: unknown); returns self.

        ``compile="auto"`` compiles a callable at once when the remaining
        announced calls exceed its break-even number; without an announcement
        it compiles once the eager time spent reaches the expected compile time.

        Examples
        --------
        >>> import numpy as np, simdiff
        >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2), x0=np.ones(2))
        >>> d = simdiff.Derivatives(p, backend="torch", compile="auto").expect_calls(1)
        >>> d.grad()
        array([2., 2.])
        >>> d.cache_info()[0]["path"]
        'eager'
        """
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0):
            raise OptionError(f"expect_calls needs a non-negative integer or None; got {n!r}")
        self._expected_calls = None if n is None else int(n)
        return self

    def value(self, x: Any = None) -> Any:
        """``f(x)``: shape ``out`` (``()`` or ``(m,)``), with a leading batch axis if batched."""
        return self._call("value", {}, x, [])

    def grad(self, x: Any = None) -> Any:
        """Gradient of a scalar problem, shape ``(n,)``."""
        return self._out("grad", self._call("grad", {}, x, []))

    def value_and_grad(self, x: Any = None) -> tuple[Any, Any]:
        """``(f(x), grad f(x))`` in one reverse pass."""
        return self._out("value_and_grad", self._call("value_and_grad", {}, x, []))

    def hessian(self, x: Any = None, *, method: str = "auto", sparse: bool = False) -> Any:
        """Hessian, shape ``(out..., n, n)``; ``method`` is fwd-rev, rev-rev, fwd-fwd or structured.

        ``"auto"`` is ``"structured"`` when the problem's ``fn`` assembles its
        Hessian from structure (:class:`~simdiff.core.structure.StructuredHessian`,
        e.g. a sum of terms from :mod:`simdiff.pes`); otherwise the backend
        decides (:func:`auto_hessian_method`), and the method that ran is the
        ``method`` field of :meth:`cache_info`.  A dense AD Hessian whose
        intermediates would exceed the memory budget is computed in chunks of
        Hessian-vector products, or refused with
        :class:`~simdiff.errors.MemoryBudgetError` if even one would not fit.

        ``sparse=True`` returns the structured Hessian at one point as a
        ``scipy.sparse.csr_array`` (memory and time ``O(pieces)``, no ``n^2``
        output; a scipy array whatever the type of ``x``).  It needs a problem
        with structure and ``method`` ``"auto"`` or ``"structured"``; otherwise
        it raises :class:`~simdiff.errors.UnsupportedError` (no structure) or
        :class:`~simdiff.errors.OptionError` (a dense AD method).
        """
        out = self._hessian(x, method=method, sparse=sparse)
        return out if sparse else self._out("hessian", out)

    def _hessian(self, x: Any = None, *, method: str = "auto", sparse: bool = False) -> Any:
        method = _choice(method, (*HESSIAN_METHODS, "structured"), "Hessian method")
        if not isinstance(sparse, (bool, np.bool_)):
            raise OptionError(f"sparse must be True or False; got {sparse!r}")
        has_structure = self._has_structure()
        structured = has_structure
        reason = None
        if structured and _is_traced(x) and method in ("auto", "structured"):
            if sparse or method == "structured":
                raise UnsupportedError(
                    f"the structured Hessian of {self.problem.name!r} is assembled on the host "
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
                    f"structure (e.g. simdiff.pes.term_energy); {self.problem.name!r} has none: "
                    "use the dense Hessian (sparse=False) or simdiff.hvp (matrix-free)"
                )
            return self._structured_hessian(x, sparse=bool(sparse))
        if sparse:  # method "auto" on a problem without structure
            raise UnsupportedError(
                f"sparse=True needs a problem whose fn assembles its Hessian from structure "
                f"(e.g. simdiff.pes.term_energy); {self.problem.name!r} has none: use the dense "
                "Hessian (sparse=False) or simdiff.hvp (matrix-free)"
            )
        if method == "auto":
            m = math.prod(self.problem.output_shape)
            compiled = self.compile is not False and self.backend.optional_compiler
            method = auto_hessian_method(self.backend, self.problem.n, m, compiled=compiled)
        chunk = self._dense_chunk() if has_structure else None
        if chunk is not None:
            if reason is not None:  # chunks are assembled on the host
                raise MemoryBudgetError(
                    f"the dense AD Hessian of {self.problem.name!r} exceeds the memory budget "
                    "and x is traced (inside a framework transform), where neither its "
                    "structured nor its chunked form can run: call outside the transform, or "
                    "use simdiff.hvp (matrix-free)"
                )
            return self._chunked_hessian(x, chunk)
        return self._call("hessian", {"method": method}, x, [], reason)

    def hvp(self, v: Any, x: Any = None) -> Any:
        """Hessian-vector product ``H(x) v``, shape ``(n,)``.

        Arguments in the order of :func:`simdiff.hvp`: direction first, ``x`` last.
        Forward over reverse on JAX, reverse over reverse on torch (the
        backend's ``hvp_method``; ``cache_info()`` names it).
        """
        params = {"method": self.backend.hvp_method}
        return self._out("hvp", self._call("hvp", params, x, [("v", v, (self.problem.n,))]))

    def jvp(self, v: Any, x: Any = None) -> Any:
        """Jacobian-vector product ``J(x) v``, shape ``out``."""
        return self._call("jvp", {}, x, [("v", v, (self.problem.n,))])

    def vjp(self, u: Any, x: Any = None) -> Any:
        """Vector-Jacobian product ``u^T J(x)``, shape ``(n,)``; ``u`` has shape ``out``."""
        return self._out("vjp", self._call("vjp", {}, x, [("u", u, self.problem.output_shape)]))

    def jacobian(self, x: Any = None, *, mode: str = "auto") -> Any:
        """Jacobian, shape ``(out..., n)``; ``mode="auto"`` is fwd when ``n <= m``."""
        mode = _choice(mode, JACOBIAN_MODES, "Jacobian mode")
        if mode == "auto":
            m = math.prod(self.problem.output_shape)
            mode = "fwd" if self.problem.n <= m else "rev"
        return self._out("jacobian", self._call("jacobian", {"mode": mode}, x, []))

    def derivative(self, order: int, direction: Any, x: Any = None, *, method: str = "auto") -> Any:
        """``order``-th directional derivative of ``t -> f(x + t v)`` at 0, shape ``out``.

        ``method="auto"`` is ``"taylor"`` where the problem runs in the Taylor
        context, else ``"nested"`` (a :meth:`Problem.from_jax` or
        :meth:`Problem.from_torch` function calls the framework directly);
        ``cache_info()`` names the method and, when ``"taylor"`` could not
        run, the reason (``method_reason``).
        """
        order = _check_order(order)
        method = _choice(method, ("auto", *DERIVATIVE_METHODS), "derivative method")
        method, reason = self._taylor_or(method, "nested")
        extras = [("direction", direction, (self.problem.n,))]
        if method == "nested":
            return self._call("derivative", {"order": order}, x, extras, reason)
        return self._call("taylor_derivative", {"order": order}, x, extras)

    def _taylor_or(self, method: str, fallback: str, taylor: str = "taylor") -> tuple[str, Any]:
        """``method``, with ``"auto"`` resolved: ``taylor`` if the problem runs in the Taylor
        context, else ``fallback`` and the reason; an explicit Taylor method it cannot run
        raises :class:`~simdiff.errors.UnsupportedError` naming the alternative."""
        if self.problem.supports("taylor"):
            return (taylor if method == "auto" else method), None
        why = (
            f"problem {self.problem.name!r} does not run in the Taylor context (its function "
            f"calls {self.problem.default_backend} directly: Problem.from_"
            f"{self.problem.default_backend})"
        )
        if method == "auto":
            if not self.backend.differentiable:
                raise UnsupportedError(
                    f"{why}, and the {self.backend.name!r} context does not differentiate: "
                    "no method can run; use a differentiating backend"
                )
            return fallback, f"{why}; {fallback!r} ran instead of {taylor!r}"
        if method != fallback:
            raise UnsupportedError(f"method={method!r} needs the Taylor context: {why}; "
                                   f"use method={fallback!r} (or 'auto')")  # fmt: skip
        return method, None

    def taylor(self, order: int, direction: Any, x: Any = None) -> Any:
        """Taylor coefficients ``c_0..c_K`` of ``t -> f(x + t v)``, shape ``(K+1, out...)``.

        Arguments in the order of :meth:`derivative`: ``order``, ``direction``, ``x``.
        """
        order = _check_taylor_order(order)
        if not self.problem.supports("taylor"):
            raise UnsupportedError(
                f"taylor coefficients need the Taylor context, and problem {self.problem.name!r} "
                f"does not run there (its function calls {self.problem.default_backend} "
                f"directly: Problem.from_{self.problem.default_backend}); use "
                "simdiff.derivative(problem, k, direction, x) (method 'auto' picks 'nested') "
                "and c_k = derivative / k!"
            )
        return self._call(
            "taylor", {"order": order}, x, [("direction", direction, (self.problem.n,))]
        )

    def derivative_tensor(self, order: int, x: Any = None, *, method: str = "nested") -> Any:
        """Full ``order``-th derivative tensor, shape ``(out..., n, ..., n)`` (``order`` n's).

        ``method="nested"`` nests Jacobians (``jacrev`` inside, ``jacfwd``
        outside; batched ``x`` is vmapped); ``"taylor"`` interpolates Taylor
        coefficients along ``binom(n+order-1, order)`` directions
        (:func:`simdiff.core.taylor_tensor.assemble_tensor`; one point at a time).
        """
        out = self._derivative_tensor(order, x, method=method)
        return self._out("derivative_tensor", out, _check_order(order))

    def _derivative_tensor(self, order: int, x: Any = None, *, method: str = "nested") -> Any:
        order = _check_order(order)
        method = _choice(method, DERIVATIVE_METHODS, "derivative-tensor method")
        if method == "nested":
            return self._call("derivative_tensor", {"order": order}, x, [])
        method, _ = self._taylor_or(method, "nested")
        if _is_traced(x):
            raise UnsupportedError(
                "derivative_tensor(method='taylor') interpolates Taylor coefficients on the "
                "host, and x is traced (inside a framework transform): use method='nested'"
            )
        x = self.problem.x0 if x is None else self.problem.flatten(x)
        src = A.backend_of(x)
        xs = np.asarray(src.to_numpy(x) if src.is_native(x) else x, dtype=np.float64)
        if xs.ndim not in (1, 2) or xs.shape[-1] != self.problem.n:
            raise ShapeError(
                f"x for problem {self.problem.name!r} must have shape ({self.problem.n},) or "
                f"(batch, {self.problem.n}); got {xs.shape}"
            )
        shape = self.problem.output_shape

        def coeffs(xb: np.ndarray, dirs: np.ndarray, d: int) -> Any:
            return np.asarray(self.taylor(d, dirs, xb))

        points = xs if xs.ndim == 2 else xs[None]
        out = np.stack([assemble_tensor(coeffs, p, order, shape) for p in points])
        out = out if xs.ndim == 2 else out[0]
        return A.convert_out(out, src, A.backend_of(out))

    # ------------------------------------------------------------------ structure
    def _structured_hessian(self, x: Any, sparse: bool = False) -> Any:
        x = self.problem.x0 if x is None else x
        src, a, _, _ = self._prepare(x, "x", (self.problem.n,), self.check_finite)
        xs = np.asarray(src.to_numpy(a), dtype=np.float64)
        self.problem.check_points(xs.reshape(-1, self.problem.n))
        h = self.problem.fn.structured_hessian(
            xs,
            self.backend.name,
            np.dtype(self.dtype).name,
            check_finite=self.check_finite,
            sparse=sparse,
            compile=self.compile,
            expected_calls=self._expected_calls,
        )
        self._structured_calls += 1
        if sparse:  # a scipy.sparse array, whatever the array type of x
            return h.astype(self.dtype, copy=False)
        return A.convert_out(h.astype(self.dtype, copy=False), src, get_backend("numpy"))

    def _dense_chunk(self) -> int | None:
        """Tangents per batch for a dense Hessian within the memory budget (None: all at once)."""
        n = self.problem.n
        need = int(self.problem.fn.dense_hessian_bytes(n))
        budget = memory_budget()
        if need <= budget:
            return None
        chunk = int(n * budget // need)
        if chunk < 1:
            raise MemoryBudgetError(
                f"the dense AD Hessian of {self.problem.name!r} (n = {n}) would need about "
                f"{need / 2**30:.1f} GiB of intermediates ({need / n / 2**20:.1f} MiB per "
                f"Hessian-vector product) and {budget / 2**30:.1f} GiB are available; use "
                "method='structured' (assembled from the terms, the default) or "
                "simdiff.hvp (matrix-free)"
            )
        return chunk

    def _chunked_hessian(self, x: Any, chunk: int) -> Any:
        """The dense Hessian as ``H e_i`` for batches of ``chunk`` unit vectors (H symmetric)."""
        n = self.problem.n
        x = self.problem.x0 if x is None else x
        src, a, batched, _ = self._prepare(x, "x", (n,), self.check_finite)
        if batched:
            raise ShapeError(
                f"a batch of points needs the Hessians at once, beyond the memory budget for "
                f"{self.problem.name!r}: pass one point of shape ({n},) at a time"
            )
        xs = np.asarray(src.to_numpy(a), dtype=np.float64)
        rows = []
        for s in range(0, n, chunk):
            e = np.zeros((chunk, n), dtype=self.dtype)  # a fixed chunk shape: one compilation
            m = min(chunk, n - s)
            e[np.arange(m), s + np.arange(m)] = 1.0
            rows.append(np.asarray(self._call("hvp", {"method": self.backend.hvp_method}, xs,
                                              [("v", e, (n,))]))[:m])  # fmt: skip
        return A.convert_out(np.concatenate(rows, axis=0), src, get_backend("numpy"))

    # ------------------------------------------------------------------ machinery
    def _out(self, kind: str, out: Any, order: int = 0) -> Any:
        """``out`` in the structure of the problem's parameters where it has one."""
        spec = self.problem.param_spec
        if spec is None or not self.structured:
            return out
        return spec.unflatten_tree(out, kind, order)

    def _fused_call(self, kind: str, parts: list[Any], method: str = "auto") -> Any:
        """``kind`` (``"grad"``, ``"value_and_grad"``, ``"hessian"``) at the point whose
        leaves are ``parts`` (flat order, :meth:`ParamSpec.matching_leaves`), in the
        parameters' structure, as one compiled call; None where it takes the general path
        (flatten, :meth:`_call`, split).

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
        T = self.backend
        spec = self.problem.param_spec
        if spec is None:
            return None
        host = type(parts[0]) in _HOST_LEAVES  # numpy leaves and numbers: numpy results
        x = None
        if host:  # read into one float64 vector here: one transfer, not one per leaf
            if self._dtype_name != "float64":
                return None
            x = spec.host_vector(parts)
            if x is None:
                return None
        elif not T.concrete_leaves(parts, spec.shapes, self.dtype):
            return None
        device = None if host else T.device_of(parts[0])  # a numpy point: the default device
        key = self._fused_keys.get((kind, method, device))
        if key is None:
            key = self._fused_key(kind, method, device)
            if key is None:
                return None
        info = self._info.get(key)
        if (
            info is None
            or info["calls"] == info["traced_calls"]
            or (self.probe and self.probe_result is None)
            or self.problem.cache.refresh() != self._generation
        ):
            return None  # not built, not probed, or the problem changed: the general path
        checks = self.problem.checks_points
        if x is not None:  # host leaves, read into one vector
            if checks and not self._checked(x):
                return None
            return self._host_call(kind, key, info, x)
        if not T.fuses_wrappers:  # an eager framework: one join, the flat derivative, a split
            return self._joined_call(kind, key, info, parts, checks)
        split = kind in ("grad", "value_and_grad")
        fused = self._fused.get((key, split, checks))
        if fused is None:
            device = T.device_of(parts[0])
            fused = self._fused[key, split, checks] = self._fuse(
                kind, self._fns[key], device, split, checks
            )
        out = self._steady(fused, parts, kind)
        if checks and not self._checked(T.to_numpy(out[-1])):
            return None  # the point was refused (raised) or fn rebuilt: the general path
        flat = out[0]
        results = (flat[0], flat[1]) if kind == "value_and_grad" else (flat,)
        if self.check_finite and not all(np.isfinite(T.to_numpy(y)).all() for y in results):
            return None  # the general path names the non-finite entry
        info["calls"] += 1
        if kind == "value_and_grad":
            return flat[0], spec._assemble(list(out[1]))
        if split:
            return spec._assemble(list(out[1]))
        return spec.unflatten_tree(flat, kind)

    def _joined_call(
        self, kind: str, key: tuple, info: dict[str, Any], parts: list[Any], checks: bool
    ) -> Any:
        """The steady tree call at concrete leaves of an eager framework (torch): the leaves
        joined in one operation (:meth:`ParamSpec._join_native`), the flat derivative
        called as :meth:`_call` calls it, the point and the result checked on the host, the
        result split into the structure (views: one operation or two)."""
        T = self.backend
        spec = self.problem.param_spec
        x = parts[0] if spec._whole is not None else T.join(parts, ())  # leaves checked
        point = T.to_numpy(x)
        if self.check_finite and not np.isfinite(point).all():
            return None  # the general path names the non-finite entry
        if checks and not self._checked(point):
            return None
        return self._finish(kind, info, self._steady(self._fns[key], x, kind), T.to_numpy)

    def _checked(self, x: np.ndarray) -> bool:
        """The problem's check of the point ``x`` (numpy ``(n,)``) on the fast path: raises
        the problem's error; False where ``x`` is not finite (the general path names the
        entry) or where the check rebuilt what ``fn`` holds (the general path rebuilds the
        derivatives)."""
        if self.check_finite and not np.isfinite(x).all():
            return False
        self.problem.check_points(x[None])
        return self.problem.cache.refresh() == self._generation

    def _has_structure(self) -> bool:
        """Whether the problem's ``fn`` is a :class:`~simdiff.core.structure.StructuredHessian`,
        kept per ``fn`` object (a check against a runtime protocol walks its members: tens
        of microseconds, on every Hessian call)."""
        fn = self.problem.fn
        known = self._structure_of
        if known is None or known[0] is not fn:
            known = self._structure_of = (fn, isinstance(fn, StructuredHessian))
        return known[1]

    def _fused_key(self, kind: str, method: str, device: Any) -> tuple | None:
        """The key of the flat derivative a steady tree call of ``kind`` runs (that of
        :meth:`_call` at an unbatched point on ``device``), kept per ``(kind, method,
        device)``; None where the tree call does not serve it (a structured Hessian, an
        unknown method)."""
        T = self.backend
        params: dict[str, Any] = {}
        if kind == "hessian":
            if self._has_structure() or method not in HESSIAN_METHODS:
                return None
            chosen = method
            if method == "auto":
                m = math.prod(self.problem.output_shape)
                compiled = self.compile is not False and T.optional_compiler
                chosen = auto_hessian_method(T, self.problem.n, m, compiled=compiled)
            params = {"method": chosen}
        key = (kind, tuple(sorted(params.items())), (None,), ((self.problem.n,),),
               self._dtype_name, str(device))  # fmt: skip
        self._fused_keys[kind, method, device] = key
        return key

    def _host_call(self, kind: str, key: tuple, info: dict[str, Any], x: np.ndarray) -> Any:
        """The steady tree call at numpy leaves or numbers read into the float64 vector
        ``x``: the flat derivative called as :meth:`_call` calls it, the point and the result
        checked on the host, the result split into the structure by views (numpy)."""
        T = self.backend
        if self.check_finite and not np.isfinite(x).all():
            return None  # the general path names the non-finite entry
        native = x if T.calls_take_numpy else T.from_numpy(x, self.dtype)
        out = self._steady(self._fns[key], native, kind)
        if kind == "value_and_grad":
            out = (T.to_numpy(out[0]), T.to_numpy(out[1]))
        else:
            out = T.to_numpy(out)
        return self._finish(kind, info, out, np.asarray)

    def _steady(self, fn: Callable, x: Any, kind: str) -> Any:
        """``fn(x)`` for a steady tree call: under the backend's leak guard where the leak
        checks are on; the framework's leak errors become ``LeakError``."""
        try:
            with self._leak_guard() if self.probe else nullcontext():
                return fn(x)
        except Exception as exc:
            raise self._leak(exc, kind) from exc

    def _finish(
        self, kind: str, info: dict[str, Any], out: Any, read: Callable[[Any], np.ndarray]
    ) -> Any:
        """The flat result ``out`` of a steady tree call (:meth:`_joined_call`,
        :meth:`_host_call`) in the parameters' structure, checked on the host (``read``
        gives its values there); None where it is not finite (the general path names the
        entry)."""
        results = out if kind == "value_and_grad" else (out,)
        if self.check_finite and not all(np.isfinite(read(y)).all() for y in results):
            return None  # the general path names the non-finite entry
        info["calls"] += 1
        spec = self.problem.param_spec
        if kind == "value_and_grad":
            return out[0], spec.unflatten(out[1])
        return spec.unflatten_tree(out, kind)

    def _fuse(
        self, kind: str, fn: Callable, device: Any, split: bool = False, point: bool = False
    ) -> Callable:
        """One compiled function of a tree's leaves: they are joined and ``fn`` called, and
        the result is NaN in the entries of the point that are not finite (the columns of
        a Hessian), checked on the host; ``(result, ...)``.

        ``split`` (a gradient of framework leaves): the gradient split into the
        parameters' leaves follows the flat result (read on the host for its check, one
        array; the leaves are what the caller gets).  ``point``: the joined point follows
        too (what the problem's check of its points reads, one array).

        Elementwise only (``where(isfinite(x), ...)``, no reduction): a reduction is a
        kernel of its own on XLA's CPU runtime and each kernel costs microseconds, more
        than the work of a cheap function (docs/parameters.md, Cost).
        """
        ops = self.backend.ops(self.dtype, device)
        spec = self.problem.param_spec

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

        return self.backend.jit(
            fused, on_compile=self._count_compilation, step_loop=self.problem.step_loop
        )

    def _prepare(self, a: Any, what: str, point_shape: tuple[int, ...], check: bool):
        spec = self.problem.param_spec
        if spec is not None and point_shape == (self.problem.n,) and spec.is_input(a):
            a = spec.flatten(a, what)
        src = A.backend_of(a)
        a = src.from_numpy(a, None) if not src.is_native(a) else a  # lists, scalars
        A.check_input_dtype(a, src, what)
        ndim = len(point_shape)
        shape = tuple(int(s) for s in a.shape)
        if a.ndim not in (ndim, ndim + 1) or (ndim and shape[a.ndim - ndim :] != point_shape):
            want = f"{point_shape} or {('batch', *point_shape)}".replace("'batch'", "batch")
            raise ShapeError(
                f"{what} for problem {self.problem.name!r} must have shape {want}; got {shape}"
            )
        A.warn_low_precision(a, src, self.dtype, what)
        if check:
            A.check_finite_array(a, src, what)
        device = self.backend.device_of(a) if src is self.backend else None
        return src, a, a.ndim == ndim + 1, device

    def _cause(self, src: Any, x: Any, batched: bool) -> Exception | None:
        """The model's own error at the first point where eager evaluation raises one
        (``Problem.failure_at``: an exhausted ``max_steps`` names the time reached), or None."""
        values = src.concrete(x)
        if values is None:
            return None
        values = np.asarray(values, dtype=np.float64)
        for row in values if batched else values[None]:
            cause = self.problem.failure_at(row, backend=self.backend.name)
            if cause is not None and not isinstance(cause, NonFiniteError):
                return cause
        return None

    def _check_points(self, src: Any, x: Any, batched: bool) -> None:
        """``problem.check_point`` at each concrete point, outside any compiled function.

        A point that is symbolic (a tracer: the function face under a
        framework transform) is not checked here.
        """
        if not self.problem.checks_points:
            return  # nothing to check: no conversion
        values = src.concrete(x)
        if values is None:
            return
        values = np.asarray(values, dtype=np.float64)
        self.problem.check_points(values if batched else values[None])

    def _traced(self, inputs: list[tuple[Any, Any, str]], kind: str) -> bool:
        """Whether any input is traced (inside a framework transform); refuse a foreign one.

        ``inputs``: ``(src, array, name)``.  A traced array can only be
        computed on by its own framework: it has no values to convert.
        """
        traced = False
        for src, a, name in inputs:
            if not src.is_traced(a):
                continue
            if src is not self.backend:
                raise InputTypeError(
                    f"simdiff.{kind} of problem {self.problem.name!r}: {name} is a traced "
                    f"{src.name} array (inside a {src.name} transform) but the derivative "
                    f"runs on backend {self.backend.name!r}; a traced value has no numbers "
                    f"to convert: use backend={src.name!r}"
                    + ("" if self.problem.supports(src.name) else
                       f" with a problem that runs there (this one runs on "
                       f"{list(self.problem.backends)})")
                    + ", or call outside the transform"
                )  # fmt: skip
            traced = True
        return traced

    def _call(
        self,
        kind: str,
        params: dict[str, Any],
        x: Any,
        extras: list,
        reason: str | None = None,
    ) -> Any:
        problem = self.problem
        if not self.backend.differentiable and kind not in _NO_AD_KINDS:
            raise UnsupportedError(
                f"simdiff.{kind} is not available in the {self.backend.name!r} context: it "
                "evaluates (values and Taylor coefficients) but does not differentiate; "
                "use backend='jax' or backend='torch'"
            )
        if kind in _SCALAR_ONLY and not problem.is_scalar:
            raise ShapeError(
                f"simdiff.{kind} needs a scalar-valued problem; {problem.name!r} returns shape "
                f"{problem.output_shape} (use jacobian, jvp or vjp)"
            )
        check = self.check_finite
        x = problem.x0 if x is None else x
        xsrc, x, xb, device = self._prepare(x, "x", (problem.n,), check)
        self._check_points(xsrc, x, xb)  # may rebuild what fn holds (a neighbour list)
        generation = problem.cache.refresh()
        if generation != self._generation:  # the definition changed: rebuild, re-probe
            self._fns.clear()
            self._fused.clear()
            self._fused_keys.clear()
            self._info.clear()
            self.probe_result = None
            self._generation = generation
        prepared = [self._prepare(e, name, shape, check) for name, e, shape in extras]
        names = [name for name, _, _ in extras]
        inputs = [(xsrc, x, "x")] + [
            (k, a, nm) for (k, a, _, _), nm in zip(prepared, names, strict=True)
        ]
        traced = self._traced(inputs, kind)
        batches = {int(x.shape[0])} if xb else set()
        batches |= {int(a.shape[0]) for _, a, b, _ in prepared if b}
        if len(batches) > 1:
            raise ShapeError(
                f"batch sizes of x and {[e[0] for e in extras]} differ: {sorted(batches)}"
            )
        axes = (0 if xb else None, *(0 if b else None for _, _, b, _ in prepared))
        arrays = [(xsrc, x)] + [(k, a) for k, a, _, _ in prepared]
        key = (
            kind,
            tuple(sorted(params.items())),
            axes,
            tuple(tuple(int(s) for s in a.shape) for _, a in arrays),
            self._dtype_name,
            str(device),
        )
        fn = self._fns.get(key)
        if fn is not None and self.backend.calls_take_numpy:  # built: numpy points as they are
            native = [a if type(a) is np.ndarray and a.dtype == self.dtype
                      else A.to_backend(a, k, self.backend, self.dtype, device)
                      for k, a in arrays]  # fmt: skip
        else:
            native = [A.to_backend(a, k, self.backend, self.dtype, device) for k, a in arrays]
        if fn is None:
            fn = self._fns[key] = self._make(kind, params, axes, device, key)
            self._info[key] = {
                "kind": kind,
                **params,
                "shape": tuple(x.shape),
                "batched": any(a is not None for a in axes),
                "calls": 0,
                "traced_calls": 0,
                "compile": self.compile,
                "path": self.backend.plain_path,
            }
            if reason is not None:
                self._info[key]["method_reason"] = reason
            if traced:  # building it now, inside the caller's trace: no honest timing
                self._info[key]["first_call_s"] = math.nan
                out = self._guarded(lambda: _plain(fn)(*native), kind, fn, guard=False)
            else:
                if self.probe and isinstance(fn, CompiledCall) and fn.mode is True:
                    # once, before the first trace: the same callable eagerly, under the leak
                    # guard, so that a leak the compiled graph would carry raises at its op
                    # ("auto" runs its first calls eagerly, under the guard, before it compiles)
                    self._guarded(lambda: fn.eager(*native), kind)
                start = time.perf_counter()
                out = self._guarded(lambda: self.backend.block_until_ready(fn(*native)), kind, fn)
                self._info[key]["first_call_s"] = time.perf_counter() - start  # honest first call
                _log.debug(
                    "%s of %r on %s built; first call %.3g s (shape %s)",
                    kind, self.problem.name, self.backend.name,
                    self._info[key]["first_call_s"], tuple(x.shape),
                )  # fmt: skip
                if self.probe and self.probe_result is None and kind not in _NO_AD_KINDS:
                    self._probe(kind, native[0], xb, out, device)
        else:
            info = self._info[key]
            guarded = not traced and self.probe
            try:
                if traced:
                    out = _plain(fn)(*native)
                elif guarded:
                    with self._leak_guard():  # a leak at this point raises, at the op
                        out = fn(*native)
                else:
                    out = fn(*native)
            except Exception as exc:  # the framework's leak errors become LeakError
                raise self._leak(exc, kind) from exc
            first_concrete = not traced and info["calls"] == info["traced_calls"]
            if first_concrete and self.probe and self.probe_result is None:
                if kind not in _NO_AD_KINDS:  # the probe waits for a call with values
                    self._probe(kind, native[0], xb, out, device)
        self._info[key]["calls"] += 1
        self._info[key]["traced_calls"] += int(traced)
        host = not traced and xsrc is not self.backend and type(x) is np.ndarray
        if host:  # the caller's arrays are numpy: one copy to the host, checked there
            out = tree_map(self.backend.to_numpy, out)
        if check:
            try:
                tree_map(lambda y: A.check_finite_result(y, self.backend, f"simdiff.{kind}"), out)
            except NonFiniteError as exc:  # a compiled call only says NaN: ask the model why
                cause = self._cause(xsrc, x, xb)
                if cause is not None:
                    raise cause from exc
                raise
        if traced or host:  # inside the caller's transform: the backend's own (traced) arrays
            return out
        return tree_map(lambda y: A.convert_out(y, xsrc, self.backend), out)

    def _leak(self, exc: Exception, kind: str) -> Exception:
        """``LeakError`` naming the cause if ``exc`` means a leak; ``UnsupportedError`` if it
        is the framework refusing a construct in the problem (``Backend.refusal_cause``);
        else ``exc`` itself."""
        leak = self._leak_error(exc, kind)
        if leak is not exc or isinstance(exc, SimdiffError):
            return leak
        refusal = self.backend.refusal_cause(exc)
        if refusal is None:
            return exc
        return UnsupportedError(
            f"simdiff.{kind} of problem {self.problem.name!r} on {self.backend.name}: "
            f"{refusal} ({type(exc).__name__}: {str(exc).splitlines()[0]})"
        )

    def _leak_error(self, exc: Exception, kind: str) -> Exception:
        """``LeakError`` naming the cause if ``exc`` means a leak; else ``exc`` itself.

        The chain of causes is read too: a leak raised while ``torch.compile``
        traced or ran the callable reaches here wrapped (``UnsupportedError``
        "torch.compile failed", Dynamo's own errors).
        """
        source: BaseException | None = exc
        for _ in range(8):
            if source is None:
                return exc
            cause = self.backend.leak_cause(source)
            if cause is not None:
                break
            if isinstance(source, SimdiffError) and not isinstance(source, UnsupportedError):
                # simdiff's own verdict (a SolverError raised while an earlier failure was
                # handled, say) stands; only compile failures wrap a leak
                return exc
            source = source.__cause__ or (
                None if source.__suppress_context__ else source.__context__
            )
        else:
            return exc
        return LeakError(
            f"simdiff.{kind} of problem {self.problem.name!r} on {self.backend.name}: the "
            f"problem leaves the traced computation ({cause}), so the derivative cannot see "
            "part of it. Write it with ops: ops.where for branches, ops.stop_gradient for "
            f"values meant to be constant. ({type(source).__name__}: "
            f"{str(source).splitlines()[0]})"
        )

    def _leak_guard(self) -> Any:
        """The backend's leak guard for this problem (its trusted packages, the strict mode)."""
        return self.backend.leak_guard(self.problem.trusted_packages, self.strict_leaks)

    def _guarded(
        self, thunk: Callable[[], Any], kind: str, fn: Any = None, guard: bool = True
    ) -> Any:
        """Run ``thunk``; the framework's leak errors and warnings become ``LeakError``.

        Under the backend's leak guard (``Backend.leak_guard``) unless the leak
        checks are off (``probe=False``) or ``guard`` is false.  Compiled
        callables run under it too: the guard is entered outside the compiled
        frame, its wrappers are torch's own while Dynamo traces, and the eager
        calls of the ``"auto"`` policy and the Python between graph breaks are
        watched.
        """
        guarded = guard and self.probe
        context = self._leak_guard() if guarded else nullcontext()
        try:
            with warnings.catch_warnings(), context:
                for message in self.backend.leak_warnings:
                    warnings.filterwarnings("error", message=message, category=UserWarning)
                return thunk()
        except LeakError:
            raise
        except Exception as exc:
            raise self._leak(exc, kind) from exc

    def _probe(self, kind: str, x: Any, batched: bool, out: Any, device: Any) -> None:
        """Run the leak probe once (simdiff.core.probe) where the backend's tracer does not.

        A gradient or Jacobian just computed gives the probe its directional
        derivative; other first calls cost the probe one VJP.
        """
        T = self.backend
        if T.catches_leaks:
            self.probe_result = {"status": f"not needed: {T.name}'s tracer raises on leaks"}
            return
        start = time.perf_counter()
        point = T.to_numpy(x)
        point = point[0] if batched else point
        directional = None
        if kind in ("grad", "value_and_grad", "jacobian"):
            jac = T.to_numpy(out[1] if kind == "value_and_grad" else out)
            jac = jac[0] if batched else jac
            directional = lambda v: jac @ v  # noqa: E731
        ops = T.ops(self.dtype, device)
        self.probe_result = self._guarded(
            lambda: probe(self.problem, T, ops, point, self.dtype, directional), "leak probe"
        )
        self.probe_result["seconds"] = time.perf_counter() - start

    def _make(
        self, kind: str, params: dict[str, Any], axes: tuple, device: Any, key: tuple
    ) -> Callable:
        T = self.backend
        with T.building():  # possibly inside the caller's trace: constants stay values
            core = _build(kind, params, self.problem, T.ops(self.dtype, device), T)
        if any(a is not None for a in axes):
            core = T.vmap(core, in_axes=axes)
        core = T.jit(core, on_compile=self._count_compilation, step_loop=self.problem.step_loop)
        if self.compile is False or not T.optional_compiler:
            return core
        # "auto" insists on one whole graph: a graph break would otherwise run
        # eagerly behind the compiled wrapper, and the break-even would be a fiction.
        compiler = T.compile if self.compile is True else _fullgraph(T.compile)
        part = self.problem.compiles_parts
        parts_ops = None
        if part is not None and kind in _TOP_LEVEL_KINDS and all(a is None for a in axes):
            # the problem compiles a part of itself (an ODE's step loop)
            parts_ops = T.ops_compiling_parts(self.dtype, device)
        if parts_ops is not None:
            compiler = lambda fn: _build(kind, params, self.problem, parts_ops, T)  # noqa: E731
        # batched: the point itself (axis 0 is x's); a batch of directions alone does not count
        refusal = T.compile_refusal(kind, params, self.problem.is_scalar, batched=axes[0] == 0)
        if refusal is not None:  # a crash no try can catch: fail like a compile failure
            compiler = _refused(refusal)
        ident = (self.problem.name, self.problem.n, *key)  # what compile-time estimates match
        call = CompiledCall(core, compiler, self.compile, kind, lambda: self._expected_calls, ident)
        call.record["compiles"] = part if parts_ops is not None else "the whole callable"
        return call

    def _count_compilation(self) -> None:
        self._traces += 1


#: Derivatives whose transforms run at the top level on torch (plain autograd, no
#: torch.func level), where a problem's own compiled parts (an ODE step) apply.
_TOP_LEVEL_KINDS = frozenset({"value", "grad", "value_and_grad", "vjp"})


#: Leaves of a point that give numpy results (:meth:`Derivatives._fused_call`).
_NUMBERS = frozenset({float, int, np.float64})
_HOST_LEAVES = _NUMBERS | {np.ndarray}
_FLOAT64 = frozenset({np.ndarray, np.float64})

#: Types that are never traced (what most points are made of): skipped without a lookup.
_UNTRACED = frozenset({float, int, np.ndarray, np.float64, np.float32, type(None)})


def _is_traced(a: Any) -> bool:
    """Whether ``a`` is a traced array of any framework (inside one of its transforms)."""
    if a is None:
        return False
    src = A.backend_of(a)
    return bool(src.is_native(a) and src.is_traced(a))


def _plain(fn: Callable) -> Callable:
    """The uncompiled callable behind ``fn``: what a traced input runs (no torch.compile
    inside a ``torch.func`` transform; on JAX the jitted core, which nests in the caller's
    trace)."""
    return fn.eager if isinstance(fn, CompiledCall) else fn


def _fullgraph(compile: Callable) -> Callable[[Callable], Callable]:
    return lambda fn: compile(fn, fullgraph=True)


def _refused(reason: str) -> Callable[[Callable], Callable]:
    def compiler(fn: Callable) -> Callable:
        raise UnsupportedError(reason)

    return compiler


# --------------------------------------------------------------------------- functions


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
            if type(a) in _UNTRACED:
                continue
            if _is_traced(a):
                name = A.backend_of(a).name
                if problem.supports(name):
                    return name
    return problem.default_backend


def cached_derivatives(
    problem: Problem,
    backend: str | None = None,
    *arrays: Any,
    dtype: Any = None,
    check_finite: bool = True,
    compile: bool | str = False,
) -> Derivatives:
    """The problem's shared :class:`Derivatives` for these settings (built on first use).

    ``backend=None`` is resolved by :func:`resolve_backend` from ``arrays``
    (the call's arguments) and the problem.

    Its results are flat arrays whatever the problem's parameters (what
    simdiff's analyses compute on); the functions of the API put them in the
    parameters' structure (:func:`_structured`).

    Kept in the problem's :class:`~simdiff.core.cache.DerivativeCache`
    (``problem.cache``), so every function of the API and every analysis built
    on it (sensitivity, optimisation, sweeps) compile each derivative once, and
    the compiled functions live exactly as long as the problem.
    """
    if not isinstance(problem, Problem):
        raise InputTypeError(f"expected a simdiff.Problem; got {type(problem).__name__}")
    backend = resolve_backend(problem, backend, *arrays)
    key = ("derivatives", str(backend), str(dtype), bool(check_finite), str(compile))
    return problem.cache.get(
        key,
        lambda: Derivatives(
            problem,
            backend,
            dtype=dtype,
            check_finite=check_finite,
            compile=compile,
            structured=False,
        ),
        refresh=False,  # each call of a Derivatives checks the problem's fingerprint
    )


def _flat(problem: Problem, a: Any, what: str = "x") -> Any:
    """``a`` as the flat vector where it is a tree of ``problem``'s parameters (flattened once,
    here, before the backend is chosen and the point checked), else ``a`` itself."""
    spec = getattr(problem, "param_spec", None)  # not a Problem: the caller's check says so
    if spec is None or a is None or not spec.is_input(a):
        return a
    return spec.flatten(a, what)


def _tree_call(
    problem: Problem,
    kind: str,
    x: Any,
    backend: Any,
    dtype: Any,
    compile: Any,
    method: str = "auto",
) -> Any:
    """``(result, x, d)``: ``kind`` at a tree point ``x`` as one compiled call
    (:meth:`Derivatives._fused_call`), or ``(None, x, d)`` where the general path runs (a
    flat point, a first call, a backend that does not fuse, ...); there ``x`` is the flat
    vector where the tree's leaves are arrays of one framework that join as they are, or
    float64 numpy arrays and numbers of their leaves' shapes (else the point as given: the
    general path flattens and checks it), and ``d`` the :class:`Derivatives` looked up here
    (None where none was: :func:`_general` looks it up)."""
    spec = getattr(problem, "param_spec", None)
    if spec is None or x is None or type(x) is np.ndarray or not spec.is_input(x):
        return None, x, None
    parts = spec.matching_leaves(x)
    if parts is None:
        return None, x, None
    d = cached_derivatives(problem, backend, x, dtype=dtype, compile=compile)
    out = d._fused_call(kind, parts, method)
    if out is not None:
        return out, x, d
    if type(parts[0]) in _HOST_LEAVES:  # numpy leaves and numbers: one float64 vector
        joined = spec.host_vector(parts)
    else:
        joined = spec._join_native(parts)
    return None, (x if joined is None else joined), d


def _general(
    problem: Problem, x: Any, d: Derivatives | None, backend: Any, dtype: Any, compile: Any
) -> tuple[Any, Derivatives]:
    """The flat point and the :class:`Derivatives` of the general path (``d``, the one
    :func:`_tree_call` looked up for the same point, where it did)."""
    x = _flat(problem, x)
    if d is None:
        d = cached_derivatives(problem, backend, x, dtype=dtype, compile=compile)
    return x, d


def _structured(problem: Problem, kind: str, out: Any, order: int = 0) -> Any:
    """``out`` in the structure of ``problem``'s parameters where it has one."""
    spec = problem.param_spec
    return out if spec is None else spec.unflatten_tree(out, kind, order)


def grad(
    problem: Problem,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Gradient of a scalar problem.

    Parameters
    ----------
    problem : Problem
        Scalar-valued.
    x : array_like, shape (n,) or (batch, n), optional
        Point(s); default ``problem.x0``.
    backend : {"jax", "torch"}, optional
        Default (``None``): the framework of a traced argument (called inside
        ``jax.jit``/``vmap``/``grad`` or a ``torch.func`` transform), else
        ``problem.default_backend`` (torch for :meth:`Problem.from_torch`,
        jax otherwise); every function of this module takes it.
    dtype : {"float64", "float32"}, optional
    compile : {False, True, "auto"}
        Compile policy on torch (see :class:`Derivatives`); every function of
        this module takes it and shares one cached ``Derivatives`` per setting.

    Returns
    -------
    array, shape (n,) or (batch, n)
        Same array type as ``x``; inside a framework transform, the backend's
        own (traced) arrays (docs/composability.md).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2), x0=np.array([1.0, 2.0]))
    >>> simdiff.grad(p)
    array([2., 4.])
    >>> simdiff.grad(p, np.ones((3, 2)), backend="torch").shape
    (3, 2)
    """
    fast, x, d = _tree_call(problem, "grad", x, backend, dtype, compile)
    if fast is not None:
        return fast
    x, d = _general(problem, x, d, backend, dtype, compile)
    return _structured(problem, "grad", d.grad(x))


def value_and_grad(
    problem: Problem,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
):
    """``(f(x), grad f(x))`` of a scalar problem in one reverse pass.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2), x0=np.array([1.0, 2.0]))
    >>> simdiff.value_and_grad(p)
    (array(5.), array([2., 4.]))
    """
    fast, x, d = _tree_call(problem, "value_and_grad", x, backend, dtype, compile)
    if fast is not None:
        return fast
    x, d = _general(problem, x, d, backend, dtype, compile)
    return _structured(problem, "value_and_grad", d.value_and_grad(x))


def hessian(
    problem: Problem,
    x: Any = None,
    *,
    backend: str | None = None,
    method: str = "auto",
    dtype: Any = None,
    compile: bool | str = False,
    sparse: bool = False,
) -> Any:
    """Hessian, shape ``(out..., n, n)`` (``(n, n)`` for a scalar problem).

    ``method``: ``"fwd-rev"`` (forward over reverse), ``"rev-rev"`` or
    ``"fwd-fwd"``, all the same matrix to rounding; ``"structured"`` assembles
    it from the problem's structure (a sum of terms, :func:`simdiff.pes.term_energy`,
    :func:`simdiff.pes.cluster_problem`).  ``"auto"`` is ``"structured"`` where
    the problem has structure, else the backend's choice (:func:`auto_hessian_method`).

    The result is dense, as JAX and torch users expect.  ``sparse=True``
    returns the structured Hessian as a ``scipy.sparse.csr_array`` instead
    (one point ``x`` of shape ``(n,)``; no ``n^2`` output, so ``O(terms)`` for
    a sum of terms with a cutoff); it raises
    :class:`~simdiff.errors.UnsupportedError` for a problem without structure
    and :class:`~simdiff.errors.OptionError` with a dense AD ``method``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1], x0=np.array([1.0, 2.0]))
    >>> simdiff.hessian(p)
    array([[4., 2.],
           [2., 0.]])
    """
    d = None
    if not sparse:
        fast, x, d = _tree_call(problem, "hessian", x, backend, dtype, compile, method)
        if fast is not None:
            return fast
    x, d = _general(problem, x, d, backend, dtype, compile)
    out = d.hessian(x, method=method, sparse=sparse)
    return out if sparse else _structured(problem, "hessian", out)


def hvp(
    problem: Problem,
    v: Any,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
):
    """Hessian-vector product ``H(x) v`` of a scalar problem without forming ``H``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1], x0=np.array([1.0, 2.0]))
    >>> simdiff.hvp(p, np.array([1.0, 0.0]))
    array([4., 2.])
    """
    v, x = _flat(problem, v, "v"), _flat(problem, x)
    d = cached_derivatives(problem, backend, v, x, dtype=dtype, compile=compile)
    return _structured(problem, "hvp", d.hvp(v, x))


def jvp(
    problem: Problem,
    v: Any,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
):
    """Jacobian-vector product ``J(x) v`` (forward mode), shape ``out``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1], ops.sin(x[0])]),
    ...                     x0=np.array([0.0, 2.0]))
    >>> simdiff.jvp(p, np.array([1.0, 0.0]))
    array([2., 1.])
    """
    v, x = _flat(problem, v, "v"), _flat(problem, x)
    return cached_derivatives(problem, backend, v, x, dtype=dtype, compile=compile).jvp(v, x)


def vjp(
    problem: Problem,
    u: Any,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
):
    """Vector-Jacobian product ``u^T J(x)`` (reverse mode), shape ``(n,)``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1], ops.sin(x[0])]),
    ...                     x0=np.array([0.0, 2.0]))
    >>> simdiff.vjp(p, np.array([1.0, 1.0]))
    array([3., 0.])
    """
    x = _flat(problem, x)
    d = cached_derivatives(problem, backend, u, x, dtype=dtype, compile=compile)
    return _structured(problem, "vjp", d.vjp(u, x))


def jacobian(
    problem: Problem,
    x: Any = None,
    *,
    backend: str | None = None,
    mode: str = "auto",
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Jacobian, shape ``(out..., n)``; ``mode`` is ``"fwd"``, ``"rev"`` or ``"auto"``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.stack([x[0] * x[1], ops.sin(x[0])]),
    ...                     x0=np.array([0.0, 2.0]))
    >>> simdiff.jacobian(p)
    array([[2., 0.],
           [1., 0.]])
    """
    x = _flat(problem, x)
    d = cached_derivatives(problem, backend, x, dtype=dtype, compile=compile)
    return _structured(problem, "jacobian", d.jacobian(x, mode=mode))


def derivative(
    problem: Problem,
    order: int,
    direction: Any,
    x: Any = None,
    *,
    backend: str | None = None,
    method: str = "auto",
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """The ``order``-th directional derivative ``d^k/dt^k f(x + t v) |_{t=0}``.

    ``method="taylor"`` propagates a truncated Taylor series in one pass (cost
    polynomial in the order); ``"nested"`` nests ``jvp`` (cost exponential in
    the order on eager backends).  ``"auto"`` (the default) is ``"taylor"``,
    or ``"nested"`` for a problem that does not run in the Taylor context
    (:meth:`Problem.from_jax`, :meth:`Problem.from_torch`); the choice and
    its reason are in :meth:`Derivatives.cache_info`.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.exp(2.0 * x)), x0=np.zeros(1))
    >>> float(simdiff.derivative(p, 3, np.ones(1), method="nested"))
    8.0
    """
    direction, x = _flat(problem, direction, "direction"), _flat(problem, x)
    d = cached_derivatives(problem, backend, direction, x, dtype=dtype, compile=compile)
    return d.derivative(order, direction, x, method=method)


def taylor(
    problem: Problem,
    order: int,
    direction: Any,
    x: Any = None,
    *,
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Taylor coefficients ``c_0..c_K`` of ``t -> f(x + t v)``, shape ``(K+1, out...)``.

    ``c_k = f^{(k)} / k!`` along ``direction``; a batch axis comes first.
    Arguments in the order of :func:`derivative`; ``x`` defaults to
    ``problem.x0``.  A call in the retired order ``(problem, x, direction,
    order)`` raises :class:`~simdiff.errors.ArgumentOrderError`.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.exp(x)), x0=np.zeros(1))
    >>> simdiff.taylor(p, 3, np.ones(1), np.zeros(1))
    array([1.        , 1.        , 0.5       , 0.16666667])
    """
    direction, x = _flat(problem, direction, "direction"), _flat(problem, x)
    d = cached_derivatives(problem, backend, direction, x, dtype=dtype, compile=compile)
    return d.taylor(order, direction, x)


def derivative_tensor(
    problem: Problem,
    order: int,
    x: Any = None,
    *,
    method: str = "nested",
    backend: str | None = None,
    dtype: Any = None,
    compile: bool | str = False,
) -> Any:
    """Full ``order``-th derivative tensor, shape ``(out..., n, ..., n)``.

    Parameters
    ----------
    problem : Problem
    order : int
        ``d >= 0``.
    x : array_like, shape (n,) or (batch, n), optional
        Default ``problem.x0``.
    method : {"nested", "taylor"}
        ``"nested"``: ``jacrev`` inside ``d - 1`` ``jacfwd`` (cost grows like
        ``n**d`` forward passes; needs a differentiating backend).
        ``"taylor"``: one batched Taylor propagation of order ``d`` along the
        ``binom(n+d-1, d)`` directions with ``|i| = d``, and the exact
        interpolation of Griewank, Utke & Walther (2000) (also runs on
        ``backend="numpy"``; its weights grow with ``d``, so a few digits are
        lost at high order: tested to ``d = 4``, ``n = 8``).
    backend : {"jax", "torch"} (``"numpy"`` too with ``method="taylor"``)
    dtype : {"float64", "float32"}, optional

    Returns
    -------
    array, shape ``(*out_shape, n, ..., n)`` (``order`` trailing axes), batch axis first
        Symmetric in its last ``order`` axes; same array type as ``x``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1], x0=np.array([1.0, 2.0]))
    >>> simdiff.derivative_tensor(p, 3)[0]
    array([[0., 2.],
           [2., 0.]])
    >>> simdiff.derivative_tensor(p, 2, method="taylor", backend="numpy")
    array([[4., 2.],
           [2., 0.]])
    """
    x = _flat(problem, x)
    d = cached_derivatives(problem, backend, x, dtype=dtype, compile=compile)
    out = d.derivative_tensor(order, x, method=method)
    return _structured(problem, "derivative_tensor", out, _check_order(order))
