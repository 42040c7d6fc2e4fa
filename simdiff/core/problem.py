"""``simdiff.Problem``: one function, written once against ``ops``."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.backends import BACKENDS, Ops, get_backend
from simdiff.core.cache import DerivativeCache
from simdiff.core.fingerprint import Versioned
from simdiff.core.params import ParamSpec, TreeFunction, is_tree
from simdiff.errors import (
    DTypeError,
    InputError,
    InputTypeError,
    OptionError,
    ShapeError,
    SimdiffError,
    UnsupportedError,
)

__all__ = ["EXACT_KEYS", "CheckOptions", "Problem"]

#: The keys ``Problem(exact=...)`` accepts (numpy callables of the reference derivatives).
EXACT_KEYS = ("value", "grad", "hessian", "jacobian", "derivative", "derivative_tensor")


@dataclass(frozen=True)
class CheckOptions:
    """What a problem declares about its own accuracy, for :func:`simdiff.check` and compare.

    Every field steers the evidence code; nothing else does (``Problem.meta``
    holds facts for people: citations, literature values, tags).

    Parameters
    ----------
    solver_rtol : float
        Relative accuracy of an adaptive solver inside ``fn`` (``0`` when there
        is none).  An adaptive solver's accepted steps change with the input,
        so finite differences of its output differ from the derivative of the
        discrete solver (what AD computes) by about the solver tolerance, and a
        closed form of the continuous problem differs from the discrete
        solution by as much: finite-difference and exact comparisons are
        floored at ``100 * solver_rtol``.  Cross-backend and Taylor-vs-nested
        comparisons are not: both sides run the same discrete solver.
    reference_rtol : float
        Relative accuracy of the problem's ``exact`` references as references
        of *this* discretisation (e.g. the spatial error of a PDE against its
        closed form); floors the ``exact`` comparisons only.
    fd_rtol : float
        Extra relative floor of finite-difference comparisons (noise the
        function has by construction, e.g. a chaotic rollout).
    fd_step : float, optional
        SciPy's initial finite-difference step (default
        ``0.1 * max(1, max |x|)``).
    max_exact_order : int, optional
        Highest order for which ``exact["derivative"]`` is valid (default: all).
    x : sequence of float, optional
        The point :func:`simdiff.check` uses when it is given none (default
        ``x0``): for a problem whose ``x0`` is a stationary point (a minimum
        used for normal modes), where the first derivatives are zero up to
        rounding and no relative tolerance can resolve them.

    Examples
    --------
    >>> import simdiff
    >>> simdiff.CheckOptions(solver_rtol=1e-4).solver_rtol
    0.0001
    >>> simdiff.CheckOptions(fd_step=-1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    simdiff.errors.OptionError: CheckOptions.fd_step must be a positive finite float ...
    """

    solver_rtol: float = 0.0
    reference_rtol: float = 0.0
    fd_rtol: float = 0.0
    fd_step: float | None = None
    max_exact_order: int | None = None
    x: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("solver_rtol", "reference_rtol", "fd_rtol"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise OptionError(f"CheckOptions.{name} must be a finite float >= 0; got {value!r}")
        step = self.fd_step
        if step is not None and (
            not isinstance(step, (int, float)) or not math.isfinite(step) or step <= 0
        ):
            raise OptionError(
                f"CheckOptions.fd_step must be a positive finite float or None; got {step!r}"
            )
        if self.x is not None:
            pt = tuple(float(v) for v in np.asarray(self.x, dtype=np.float64).ravel())
            if not all(math.isfinite(v) for v in pt):
                raise OptionError(f"CheckOptions.x must be finite; got {self.x!r}")
            object.__setattr__(self, "x", pt)
        order = self.max_exact_order
        if order is not None and (not isinstance(order, int) or order < 0):
            raise OptionError(
                f"CheckOptions.max_exact_order must be an int >= 0 or None; got {order!r}"
            )


def validate_exact(exact: Mapping[str, Any], where: str = "Problem") -> dict[str, Any]:
    """``exact`` as a dict, after checking its keys and values (a misspelt key is an error)."""
    unknown = sorted(set(exact) - set(EXACT_KEYS))
    if unknown:
        raise OptionError(
            f"{where}: unknown keys {unknown} in exact=; accepted keys are {list(EXACT_KEYS)}"
        )
    for key, value in exact.items():
        if not callable(value):
            got = type(value).__name__
            raise OptionError(f"{where}: exact[{key!r}] must be callable; got {got}")
    return dict(exact)


class Problem(Versioned):
    """A differentiable function of a flat parameter vector, defined once for every backend.

    Parameters
    ----------
    fn : callable
        ``fn(x, ops)`` where ``x`` is a 1-D float array of shape ``(n,)`` of the
        active context and ``ops`` is that context's operations namespace
        (:doc:`ops`).  It returns a scalar (shape ``()``) or a 1-D array of
        shape ``(m,)``, and must be pure: no in-place updates, no state.
    x0 : array_like, shape (n,), or a tree of arrays
        The default point; ``x=None`` in every derivative function means ``x0``.
        Structured parameters (a dict, a named tuple, a dataclass, nested
        lists/tuples of arrays, or any registered JAX pytree) are flattened
        once (:class:`~simdiff.ParamSpec`, ``problem.param_spec``): ``fn`` is
        then called with the same structure, the problem works on the flat
        vector, and every derivative comes back in the structure (a gradient
        of a dict is a dict, a Hessian a :class:`~simdiff.Labelled` matrix).
    name : str, optional
        Used in messages, reports and the result store (default ``fn.__name__``).
    exact : mapping, optional
        Known derivatives as numpy callables, used by :func:`simdiff.check` and
        the tests.  Keys: ``"value"(x)``, ``"grad"(x)``, ``"hessian"(x)``,
        ``"jacobian"(x)``, ``"derivative"(x, order, direction)``,
        ``"derivative_tensor"(x, order)``.  Any other key raises
        :class:`~simdiff.errors.OptionError` naming the accepted ones.
    backends : tuple of str, optional
        The contexts ``fn`` runs in (default: all of ``("jax", "torch", "numpy")``).
    meta : mapping, optional
        Free-form facts for people (literature values, citations, tags); no
        simdiff code reads a tolerance from it.
    check_options : CheckOptions, optional
        How accurate ``fn`` and ``exact`` are (an adaptive solver's tolerance,
        a discretisation error, a finite-difference step): what
        :func:`simdiff.check` needs to compare fairly.
    trusted_packages : tuple of str, optional
        Top-level names of third-party packages (``("torchdiffeq",)``) whose
        own code may call ``x.detach()``, ``x.data``, ``torch.tensor(x)`` or
        enter ``torch.no_grad()`` during a derivative call on torch: the
        leak guard lets those pass when the calling frame's module is in one
        of them, trusting the package to keep the derivative right (its own
        ``autograd.Function``, say).  The problem's code stays watched: the
        package ``fn`` is defined in is refused here, and ``x.item()``,
        ``float(x)`` stay errors in every package.  Default: none.

    Attributes
    ----------
    cache : DerivativeCache
        The derivatives simdiff has built (and compiled) for this problem.
        The problem owns them: they live as long as it does, and
        ``problem.cache.clear()`` frees them sooner.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> def rosen(x, ops):
    ...     return ops.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
    >>> p = simdiff.Problem(rosen, x0=np.zeros(3), name="rosen3")
    >>> p.n, p.output_shape
    (3, ())
    >>> float(p.evaluate(np.ones(3)))
    0.0
    """

    #: see ``trusted_packages`` above (set in ``__init__``; none for a subclass that skips it)
    trusted_packages: frozenset[str] = frozenset()

    def __init__(
        self,
        fn: Callable[[Any, Any], Any],
        x0: Any,
        *,
        name: str | None = None,
        exact: Mapping[str, Callable[..., Any]] | None = None,
        backends: tuple[str, ...] | None = None,
        meta: Mapping[str, Any] | None = None,
        check_options: CheckOptions | None = None,
        trusted_packages: tuple[str, ...] = (),
    ) -> None:
        if not callable(fn):
            raise InputTypeError(f"Problem needs a callable fn(x, ops); got {type(fn).__name__}")
        spec = None
        if is_tree(x0):
            spec, x0 = ParamSpec.from_tree(x0, "x0")
        x0 = np.asarray(x0)
        if x0.dtype.kind not in "fiu":
            raise DTypeError(f"Problem x0 must be a real float array; got dtype {x0.dtype}")
        x0 = x0.astype(np.float64)
        if x0.ndim != 1 or x0.size == 0:
            raise ShapeError(f"Problem x0 must have shape (n,) with n >= 1; got shape {x0.shape}")
        if not np.all(np.isfinite(x0)):
            bad = int(np.flatnonzero(~np.isfinite(x0))[0])
            at = f"[{bad}]" if spec is None else f"[{spec.names[bad]!r}]"
            raise InputError(f"Problem x0 must be finite; x0{at} = {x0[bad]}")
        _check_signature(fn)
        #: The function of the flat vector (for structured ``x0`` a :class:`TreeFunction`
        #: that rebuilds the tree and calls the user's function with it).
        self.fn: Callable[[Any, Any], Any] = fn if spec is None else TreeFunction(fn, spec)
        #: The structure of ``x0`` (None for a flat vector): names, shapes, treedef.
        self.param_spec: ParamSpec | None = spec
        self.x0 = x0
        self.name: str = name or str(getattr(fn, "__name__", "problem"))
        self.exact = validate_exact(exact or {})
        if check_options is None:
            check_options = CheckOptions()
        if not isinstance(check_options, CheckOptions):
            raise OptionError(
                "Problem check_options must be a simdiff.CheckOptions; "
                f"got {type(check_options).__name__}"
            )
        self.check_options = check_options
        unknown = set(backends or ()) - set(BACKENDS)
        if unknown:
            raise InputError(f"unknown backends {sorted(unknown)}; expected a subset of {BACKENDS}")
        self.backends = tuple(backends) if backends else BACKENDS
        self.meta = dict(meta or {})
        #: Third-party packages whose own code may detach or switch gradients off during a
        #: derivative call on torch (the leak guard, :mod:`simdiff.backends.torch.leaks`).
        self.trusted_packages: frozenset[str] = _trusted(trusted_packages, fn)
        self._output_shape: tuple[int, ...] | None = None
        #: What simdiff builds for this problem (see :class:`~simdiff.core.cache.DerivativeCache`):
        #: owned by the problem, freed with it.
        self.cache = DerivativeCache(self)

    # ------------------------------------------------------------------ wrappers
    @classmethod
    def from_jax(cls, f: Callable[[Any], Any], x0: Any, **kwargs: Any) -> Problem:
        """Wrap a function written with ``jax.numpy``; it runs on the jax backend only.

        Examples
        --------
        >>> import jax.numpy as jnp, numpy as np, simdiff
        >>> p = simdiff.Problem.from_jax(lambda x: jnp.sum(jnp.sin(x)), np.zeros(2))
        >>> simdiff.grad(p)
        array([1., 1.])
        """
        problem = cls(_only(f, "jax"), x0, backends=("jax",), **_named(f, kwargs))
        problem.runs_taylor = False
        return problem

    @classmethod
    def from_torch(cls, f: Callable[[Any], Any], x0: Any, **kwargs: Any) -> Problem:
        """Wrap a function written with ``torch``; it runs on the torch backend only.

        Examples
        --------
        >>> import torch, numpy as np, simdiff
        >>> p = simdiff.Problem.from_torch(lambda x: torch.sum(torch.sin(x)), np.zeros(2))
        >>> simdiff.grad(p)               # the default backend of a from_torch problem: torch
        array([1., 1.])
        """
        problem = cls(_only(f, "torch"), x0, backends=("torch",), **_named(f, kwargs))
        problem.runs_taylor = False
        return problem

    # ------------------------------------------------------------------ facts
    @property
    def n(self) -> int:
        """Number of inputs."""
        return int(self.x0.shape[0])

    @property
    def param_names(self) -> list[str]:
        """One name per input, in flat order.

        From :attr:`param_spec` for structured parameters (``"alpha"``,
        ``"k[0]"``, ``"w.b[1,2]"``), else ``meta["parameters"]`` where it
        names each input, else ``"x[0]"``, ``"x[1]"``, ...

        Examples
        --------
        >>> import numpy as np, simdiff
        >>> f = lambda p, ops: p["a"] * ops.sum(p["k"])
        >>> simdiff.Problem(f, x0={"a": 1.0, "k": np.ones(2)}).param_names
        ['a', 'k[0]', 'k[1]']
        """
        if self.param_spec is not None:
            return list(self.param_spec.names)
        meta = self.meta.get("parameters")
        if isinstance(meta, (list, tuple)) and len(meta) == self.n:
            return [str(v) for v in meta]
        return [f"x[{k}]" for k in range(self.n)]

    def unflatten(self, x: Any) -> Any:
        """The flat vector ``x`` (shape ``(..., n)``) in the structure of the parameters
        (``x`` itself for a problem with flat ``x0``)."""
        if self.param_spec is None:
            return x
        return self.param_spec.unflatten(x)

    def flatten(self, tree: Any, what: str = "x") -> Any:
        """Parameters in the problem's structure as the flat vector it computes on
        (:class:`~simdiff.errors.StructureError` for another structure); a flat
        array is returned as it is."""
        if self.param_spec is None or not self.param_spec.is_input(tree):
            return tree
        return self.param_spec.flatten(tree, what)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """``()`` for scalar problems, ``(m,)`` for vector-valued ones (evaluated once at x0)."""
        if self._output_shape is None:
            y = self.evaluate(self.x0, backend=self.backends[-1])
            shape = tuple(int(s) for s in y.shape)
            if len(shape) > 1:
                raise ShapeError(
                    f"problem {self.name!r} must return a scalar or a 1-D array; got shape {shape}"
                )
            self._output_shape = shape
        return self._output_shape

    @property
    def is_scalar(self) -> bool:
        """Whether the problem returns a scalar."""
        return self.output_shape == ()

    #: What the problem compiles by itself under ``compile=True | "auto"`` on a backend
    #: with an optional compiler (``ops.compile_part``: an ODE's step loop), or None when
    #: the whole derivative is compiled instead.
    compiles_parts: str | None = None

    #: Whether the problem's programs are dominated by a solver's step loop (an ODE's
    #: adaptive or fixed-step loop: small kernels in nested loops and branches), which a
    #: backend may compile with settings of its own (:meth:`Backend.jit`, ``step_loop``).
    step_loop: bool = False

    def check_point(self, x: np.ndarray) -> None:
        """Raise a :class:`~simdiff.SimdiffError` if ``x`` (numpy, shape ``(n,)``) is outside
        the problem's domain; nothing by default.

        Run at the boundary of every derivative call, outside any compiled
        function, with the actual point: the same rule a simulator applies at
        construction (an explicit fixed step beyond its stability limit at
        these parameters).
        """

    def cache_notes(self) -> list[dict[str, Any]]:
        """Records :meth:`Derivatives.cache_info` appends: what the problem decided when it
        was built (an ODE's ``solver="auto"`` choice); none by default."""
        return []

    def tightened(self, factor: float) -> Problem | None:
        """The same problem with its adaptive solver's tolerances divided by ``factor``, or None.

        :func:`simdiff.check` computes its finite-difference references on this
        variant and measures, per element, how far the working problem's AD
        result is from the variant's (the solver-tolerance gap).  ``None``
        (the default) means the problem has no adaptive solver to tighten;
        :class:`simdiff.ode.ODEProblem` returns one for its adaptive solvers.
        """
        return None

    def check_points(self, xs: np.ndarray) -> None:
        """Prepare and check the problem at the points ``xs`` (numpy, shape ``(B, n)``).

        Run at the boundary of every derivative call and of :meth:`evaluate`,
        outside any compiled function, with the actual points: first the
        function's own check (``fn.check_points(xs)`` where ``fn`` has one: a
        cutoff neighbour list rebuilt at the points, or an error naming the
        atom that left it; a rebuild changes :meth:`evaluation_state`, so the
        compiled derivatives are rebuilt), then :meth:`check_point` at each
        point.
        """
        own = getattr(self.fn, "check_points", None)
        if callable(own):
            own(xs)
        if type(self).check_point is not Problem.check_point:
            for row in xs:
                self.check_point(row)

    @property
    def checks_points(self) -> bool:
        """Whether :meth:`check_points` does anything (a subclass's check, or ``fn``'s own)."""
        own = callable(getattr(self.fn, "check_points", None))
        return own or type(self).check_point is not Problem.check_point

    def evaluation_state(self) -> Any:
        """What ``fn`` holds that changes between evaluations without changing the definition.

        ``fn.version`` where ``fn`` has one (a neighbour list that follows
        the atoms: its rebuilds), else None.  What is built for the problem
        (compiled derivatives) is valid for one state: the derivative cache
        drops it when the state changes (:meth:`DerivativeCache.refresh`).
        """
        return getattr(self.fn, "version", None)

    def failure_at(self, x: Any, *, backend: str = "numpy") -> Exception | None:
        """The simdiff error an eager evaluation at ``x`` raises, or None if it raises none.

        A compiled call cannot raise where its value is computed (a failed
        solve poisons its output with NaN); this evaluates once more, eagerly
        (on numpy where the problem runs there), so that the model's own error
        (an exhausted ``max_steps`` with the time reached, an instability)
        names the cause.

        Examples
        --------
        >>> import numpy as np, simdiff
        >>> p = simdiff.Problem(lambda x, ops: ops.sum(x ** 2), x0=np.ones(2))
        >>> p.failure_at(np.ones(2)) is None
        True
        """
        where = "numpy" if self.supports("numpy") else backend
        try:
            with np.errstate(all="ignore"):  # a NaN is known: its cause is asked for
                self.evaluate(x, backend=where)
        except SimdiffError as exc:
            return exc
        return None

    #: Whether ``fn`` runs in the Taylor context (:mod:`simdiff.backends.taylor`), which
    #: the Taylor and collapsed-Taylor methods need: False for ``Problem.from_jax`` and
    #: ``Problem.from_torch`` (their functions call jax.numpy / torch directly, not ``ops``).
    runs_taylor: bool = True

    @property
    def default_backend(self) -> str:
        """The backend the derivative functions use when none is named (``backend=None``).

        ``"jax"`` where ``fn`` runs there, else the first differentiating
        backend it runs on (``"torch"`` for :meth:`from_torch`), else its
        first context.

        Examples
        --------
        >>> import numpy as np, simdiff
        >>> simdiff.Problem(lambda x, ops: ops.sum(x), x0=np.ones(2)).default_backend
        'jax'
        """
        for name in ("jax", "torch"):
            if name in self.backends:
                return name
        return self.backends[0]

    def supports(self, backend: str) -> bool:
        """Whether ``fn`` runs in context ``backend`` (``"taylor"``: see ``runs_taylor``)."""
        if backend == "taylor":
            return self.runs_taylor
        return backend in self.backends

    def require(self, backend: str) -> None:
        """Raise :class:`UnsupportedError` if ``fn`` cannot run in ``backend``."""
        if backend not in self.backends:
            raise UnsupportedError(
                f"problem {self.name!r} runs on {list(self.backends)} only; "
                f"backend {backend!r} was asked for"
            )

    def evaluate(self, x: Any = None, *, backend: str = "numpy") -> Any:
        """Evaluate ``fn`` at ``x`` (default ``x0``) in ``backend``; returns a numpy array."""
        self.require(backend)
        be = get_backend(backend)
        x = self.flatten(x)
        x = self.x0 if x is None else np.asarray(x, dtype=np.float64)
        if x.shape != (self.n,):
            raise ShapeError(f"problem {self.name!r} expects x of shape ({self.n},); got {x.shape}")
        self.check_points(x[None])
        y = self.fn(be.from_numpy(x, np.float64), be.ops())
        if be.is_native(y):
            if be.dtype_name(y).startswith("complex"):
                raise InputTypeError(bad_output(self.name, y, f"a complex {backend} array"))
            return be.to_numpy(y)
        a = np.asarray(y) if isinstance(y, (int, float, np.ndarray, np.generic, list)) else None
        if a is None or isinstance(y, bool) or a.dtype.kind not in "fiu":
            raise InputTypeError(bad_output(self.name, y, type(y).__name__))
        return a.astype(np.float64)

    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the problem, for :func:`simdiff.store.fingerprint`.

        ``fn``, ``x0``, the backends, the exact references and the check
        options (they change what :func:`simdiff.check` concludes); not the
        name, ``meta`` or the cache.  A simulator adds its settings.
        """
        return {
            "fn": self.fn,
            "x0": self.x0,
            "backends": self.backends,
            "exact": self.exact,
            "check_options": self.check_options,
        }

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the cache of compiled callables (jit functions do not pickle)."""
        state = dict(self.__dict__)
        state["cache"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle with an empty cache of its own."""
        self.__dict__.update(state)
        self.cache = DerivativeCache(self)

    def __repr__(self) -> str:
        return f"Problem({self.name!r}, n={self.n}, backends={self.backends})"


def _check_signature(fn: Callable[..., Any]) -> None:
    """Refuse a ``fn`` that cannot be called as ``fn(x, ops)`` (before any backend traces it)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (a builtin, a C callable)
        return
    try:
        sig.bind(None, None)
    except TypeError:
        name = getattr(fn, "__name__", type(fn).__name__)
        raise InputTypeError(
            f"Problem fn must be callable as fn(x, ops) (two positional arguments); "
            f"{name}{sig} is not (Problem.from_jax / from_torch wrap a function of x alone)"
        ) from None


def bad_output(name: str, y: Any, got: str) -> str:
    return (
        f"problem {name!r}: fn must return a real scalar or 1-D array computed with ops "
        f"from x; got {got} ({str(y)[:40]!r})"
    )


def _only(f: Callable[[Any], Any], backend: str) -> Callable[[Any, Any], Any]:
    def fn(x: Any, ops: Ops) -> Any:
        if not get_backend(backend).runs(ops):
            raise UnsupportedError(
                f"this problem was written in {backend} (Problem.from_{backend}) and cannot run "
                f"in the {ops.name!r} context"
            )
        return f(x)

    fn.__name__ = getattr(f, "__name__", "fn")
    fn.user_function = f  # type: ignore[attr-defined]  # the user's code, for trusted_packages
    return fn


def _trusted(packages: Any, fn: Callable[..., Any]) -> frozenset[str]:
    """``trusted_packages`` checked: top-level package names, none of them ``fn``'s own."""
    if isinstance(packages, str) or not isinstance(packages, (tuple, list, frozenset, set)):
        raise OptionError(
            "Problem trusted_packages must be a tuple of package names such as "
            f"('torchdiffeq',); got {packages!r}"
        )
    for name in packages:
        if not isinstance(name, str) or not name.isidentifier():
            raise OptionError(
                "Problem trusted_packages must hold top-level package names (identifiers, no "
                f"dots); got {name!r}"
            )
    user = inspect.unwrap(getattr(fn, "user_function", fn))
    module = getattr(user, "__module__", None)
    own = module.partition(".")[0] if isinstance(module, str) else None
    if own in packages:
        raise OptionError(
            f"Problem trusted_packages names {own!r}, the package fn is defined in: the "
            "problem's own code stays watched by the leak guard; trust the third-party "
            "package that detaches, not the code that calls it"
        )
    return frozenset(packages)


def _named(f: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    kwargs.setdefault("name", getattr(f, "__name__", "problem"))
    return kwargs
