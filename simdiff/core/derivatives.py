"""The cached derivatives of one problem: :class:`Derivatives` and :func:`cached_derivatives`.

A :class:`Derivatives` holds one problem, one :class:`~simdiff.core.config.Config`
and the callables built for it.  Its methods are the derivative kinds; the
work is done by the parts of the engine: the call boundary
(:mod:`simdiff.core.boundary`), the built and compiled callables
(:mod:`simdiff.core.callables`), the steady tree calls
(:mod:`simdiff.core.tree_calls`), the leak guard and probe
(:mod:`simdiff.core.leaks`) and the paths that choose a method or assemble on
the host (:mod:`simdiff.core.paths`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends import get_backend
from simdiff.core import arrays as A
from simdiff.core import callables, paths, tree_calls
from simdiff.core.boundary import resolve_backend
from simdiff.core.builders import (
    DERIVATIVE_METHODS,
    JACOBIAN_MODES,
    check_order,
    check_taylor_order,
    choice,
)
from simdiff.core.compile import check_compile
from simdiff.core.config import Config
from simdiff.core.operator_builders import OperatorMethods
from simdiff.core.problem import Problem
from simdiff.errors import InputTypeError, OptionError, UnsupportedError

__all__ = ["Derivatives", "cached_derivatives", "settings"]


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
    config : Config, optional
        The settings as one :class:`~simdiff.core.config.Config` (backend,
        dtype, compile policy, expected calls, checks, probe); a keyword above
        given a value other than its default replaces the field.  Kept as
        ``self.config``.

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
        config: Config | None = None,
    ) -> None:
        if not isinstance(problem, Problem):
            raise InputTypeError(f"expected a simdiff.Problem; got {type(problem).__name__}")
        if probe not in (None, True, False, "strict"):
            raise OptionError(f"Derivatives probe must be True, False or 'strict'; got {probe!r}")
        config = settings(config, backend, dtype, compile, check_finite, probe)
        self.backend = get_backend(
            problem.default_backend if config.backend is None else config.backend
        )
        problem.require(self.backend.name)
        self.problem = problem
        self.dtype = A.resolve_dtype(config.dtype)
        self._dtype_name = np.dtype(self.dtype).name
        check_compile(config.compile, self.backend)
        if (
            config.probe == "strict"
            and config.compile is not False
            and self.backend.optional_compiler
        ):
            raise OptionError(
                "Derivatives probe='strict' watches every torch operation from Python, which "
                f"a compiled graph does not run; use compile=False (got compile={config.compile!r})"
            )
        #: The settings (backend and dtype resolved): :class:`~simdiff.core.config.Config`.
        self.config = config.replace(backend=self.backend.name, dtype=self._dtype_name)
        #: Whether results of a problem with structured parameters come back in their
        #: structure (False: flat arrays, what simdiff's own analyses compute on).
        self.structured = bool(structured)
        #: The leak probe's findings (None until it ran; see simdiff.core.probe).
        self.probe_result: dict[str, Any] | None = None
        #: The built callables and their records, by key (:mod:`simdiff.core.callables`).
        self._fns: dict[tuple, Callable] = {}
        self._info: dict[tuple, dict[str, Any]] = {}
        #: The compiled tree calls (:mod:`simdiff.core.tree_calls`) by the key of their flat
        #: derivative, and that key by ``(kind, method, device)``.
        self._fused: dict[tuple, Callable] = {}
        self._fused_keys: dict[tuple, tuple] = {}
        #: ``(problem.fn, whether it is a StructuredHessian)``: ``tree_calls.has_structure``.
        self._structure_of: tuple[Any, bool] | None = None
        self._traces = 0
        self._structured_calls = 0
        self._generation = problem.cache.refresh()

    # ------------------------------------------------------------------ settings
    @property
    def compile(self) -> bool | str:
        """The compile policy: ``False``, ``True`` or ``"auto"`` (``config.compile``)."""
        return self.config.compile

    @property
    def check_finite(self) -> bool:
        """Whether non-finite inputs and results are refused (``config.check_finite``)."""
        return bool(self.config.check_finite)

    @property
    def probe(self) -> bool:
        """Whether the leak probe and guard run (``config.probe``; None: as ``check_finite``)."""
        probe = self.config.probe
        return self.check_finite if probe is None else bool(probe)

    @property
    def strict_leaks(self) -> bool:
        """``probe="strict"``: the leak guard sees every operation (``Backend.leak_guard``)."""
        return self.config.probe == "strict"

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
        return callables.records(self)

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
        self.config = self.config.replace(expected_calls=None if n is None else int(n))
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
        out = paths.hessian(self, x, method=method, sparse=sparse)
        return out if sparse else self._out("hessian", out)

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
        mode = choice(mode, JACOBIAN_MODES, "Jacobian mode")
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
        order = check_order(order)
        method = choice(method, ("auto", *DERIVATIVE_METHODS), "derivative method")
        method, reason = self._taylor_or(method, "nested")
        extras = [("direction", direction, (self.problem.n,))]
        if method == "nested":
            return self._call("derivative", {"order": order}, x, extras, reason)
        return self._call("taylor_derivative", {"order": order}, x, extras)

    def taylor(self, order: int, direction: Any, x: Any = None) -> Any:
        """Taylor coefficients ``c_0..c_K`` of ``t -> f(x + t v)``, shape ``(K+1, out...)``.

        Arguments in the order of :meth:`derivative`: ``order``, ``direction``, ``x``.
        """
        order = check_taylor_order(order)
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
        out = paths.taylor_tensor(self, order, x, method=method)
        return self._out("derivative_tensor", out, check_order(order))

    # ------------------------------------------------------------------ the parts
    def _out(self, kind: str, out: Any, order: int = 0) -> Any:
        """``out`` in the structure of the problem's parameters where it has one (and
        ``structured`` is on)."""
        spec = self.problem.param_spec
        if spec is None or not self.structured:
            return out
        return spec.unflatten_tree(out, kind, order)

    def _call(
        self, kind: str, params: dict[str, Any], x: Any, extras: list, reason: str | None = None
    ) -> Any:
        """The general path of a call: :func:`simdiff.core.callables.call`."""
        return callables.call(self, kind, params, x, extras, reason)

    def _taylor_or(self, method: str, fallback: str, taylor: str = "taylor") -> tuple[str, Any]:
        """``method`` with ``"auto"`` resolved: :func:`simdiff.core.paths.taylor_or`."""
        return paths.taylor_or(self, method, fallback, taylor)

    def _fused_call(self, kind: str, parts: list[Any], method: str = "auto") -> Any:
        """A steady tree call: :func:`simdiff.core.tree_calls.fused_call`."""
        return tree_calls.fused_call(self, kind, parts, method)

    def _joined_call(self, kind: str, key: tuple, info: dict, parts: list, checks: bool) -> Any:
        """A steady tree call on an eager framework (:func:`.tree_calls.joined_call`)."""
        return tree_calls.joined_call(self, kind, key, info, parts, checks)

    def _host_call(self, kind: str, key: tuple, info: dict, x: np.ndarray) -> Any:
        """A steady tree call at numpy leaves (:func:`.tree_calls.host_call`)."""
        return tree_calls.host_call(self, kind, key, info, x)

    def _count_compilation(self) -> None:
        self._traces += 1


def cached_derivatives(
    problem: Problem,
    backend: str | None = None,
    *arrays: Any,
    dtype: Any = None,
    check_finite: bool = True,
    compile: bool | str = False,
    config: Config | None = None,
) -> Derivatives:
    """The problem's shared :class:`Derivatives` for these settings (built on first use).

    ``backend=None`` is resolved by :func:`~simdiff.core.boundary.resolve_backend`
    from ``arrays`` (the call's arguments) and the problem.  ``config`` gives the
    settings as one :class:`~simdiff.core.config.Config`; a keyword given a value
    other than its default replaces its field, and the config's ``expected_calls``
    (where not None) is announced to the shared object (:meth:`Derivatives.expect_calls`).

    Its results are flat arrays whatever the problem's parameters (what
    simdiff's analyses compute on); the functions of the API put them in the
    parameters' structure.

    Kept in the problem's :class:`~simdiff.core.cache.DerivativeCache`
    (``problem.cache``), so every function of the API and every analysis built
    on it (sensitivity, optimisation, sweeps) compile each derivative once, and
    the compiled functions live exactly as long as the problem.
    """
    if not isinstance(problem, Problem):
        raise InputTypeError(f"expected a simdiff.Problem; got {type(problem).__name__}")
    config = settings(config, backend, dtype, compile, check_finite)
    resolved = resolve_backend(problem, config.backend, *arrays)
    shared = config.replace(backend=str(resolved), expected_calls=None)
    key = ("derivatives", str(resolved), str(shared.dtype), bool(shared.check_finite),
           str(shared.compile), shared.probe)  # fmt: skip
    d = problem.cache.get(
        key,
        lambda: Derivatives(problem, config=shared, structured=False),
        refresh=False,  # each call of a Derivatives checks the problem's fingerprint
    )
    if config.expected_calls is not None:
        d.expect_calls(config.expected_calls)
    return d


def settings(
    config: Config | None,
    backend: Any = None,
    dtype: Any = None,
    compile: Any = False,
    check_finite: Any = True,
    probe: Any = None,
) -> Config:
    """``config`` (a default :class:`~simdiff.core.config.Config` if None) with the
    keywords of :class:`Derivatives` that differ from their defaults applied (validated:
    ``compile=None`` is refused as any value outside ``False``, ``True``, ``"auto"``)."""
    base = Config.of(config, backend=backend, dtype=dtype, probe=probe)
    changes: dict[str, Any] = {}
    if compile is not False:
        changes["compile"] = compile
    if check_finite is not True:
        changes["check_finite"] = bool(check_finite)
    return base.replace(**changes) if changes else base
