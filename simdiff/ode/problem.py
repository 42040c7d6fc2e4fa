"""``ODEProblem``: an initial-value problem as a :class:`simdiff.Problem` of its parameters."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from simdiff.backends import get_backend
from simdiff.core.config import Config
from simdiff.core.params import ParamSpec, TreeRhs, is_tree
from simdiff.core.problem import CheckOptions, Problem
from simdiff.errors import InputTypeError, ShapeError, SimdiffError, SolverError
from simdiff.ode.adjoint import Adjoint, make_adjoint
from simdiff.ode.auto import SolverChoice, choose_solver, failure_note
from simdiff.ode.events import takes_event
from simdiff.ode.inputs import WRT, check_rhs, make_events, tree_events, validate
from simdiff.ode.solvers import make_solver
from simdiff.ode.solvers._base import Rhs, SolveInfo, Solver, status_message
from simdiff.ode.solvers.adaptive import tightened_solver

__all__ = ["WRT", "ODEProblem", "solve"]

Observable = Callable[[Any, Any], Any]


class ODEProblem(Problem):
    r"""An ODE ``y' = rhs(t, y, p)`` as a :class:`simdiff.Problem` of its parameters.

    The problem's input ``x`` is ``params`` (``wrt="params"``), the initial
    state (``"y0"``) or both concatenated (``"both"``: ``x = [params, y0]``);
    its value is ``observable(ys, ops)`` of the states ``ys`` at ``save_at``
    (shape ``(len(save_at), dim)``).  Every function of the derivative API
    applies: gradients and Hessians of a scalar observable, Jacobians (forward
    sensitivities) of the trajectory, JVPs, VJPs, nth directional derivatives,
    and batches of parameter sets (``x`` of shape ``(batch, n)``, vmapped).

    Parameters
    ----------
    rhs : callable
        ``rhs(t, y, p, ops) -> (dim,)`` written with ``ops`` (as a problem
        function is); ``t`` is a 0-d array, ``y`` shape ``(dim,)``, ``p`` the
        parameters, in the structure ``params`` was given in.
    y0 : array_like, shape (dim,)
    t_span : (float, float)
        ``t0 < t1``.
    params : array_like, shape (p,), or a tree of arrays
        May be empty when ``wrt="y0"``.  Structured parameters (a dict such
        as ``{"alpha": 1.1, "beta": 0.4}``, a named tuple, a dataclass, a
        pytree) reach ``rhs`` and the events in that structure; they are
        flattened once (``problem.params`` is the flat vector) and, for
        ``wrt="params"`` (``"both"``: ``{"params": ..., "y0": ...}``), every
        derivative returns the structure (:class:`simdiff.ParamSpec`).
    save_at : array_like, shape (m,), optional
        Strictly increasing times in ``[t0, t1]`` (default ``[t1]``); the solve
        stops at ``save_at[-1]``.
    observable : callable, optional
        ``observable(ys, ops)`` returning a scalar or a 1-D array; default the
        flattened trajectory ``ys.reshape(-1)`` (vector-valued, length ``m * dim``).
    solver : str or Solver
        A name in :data:`~simdiff.ode.solvers.SOLVERS` (default ``"dopri5"``) or a solver object
        (:class:`FixedStep`, :class:`Dopri5`, :class:`Rodas3`,
        :class:`Rodas5P`, :class:`Diffrax`).  ``"auto"`` chooses Dopri5, or
        for a stiff system Rodas5P (Rodas3 at ``rtol >= 1e-3``), once, at
        construction, from Hairer's stiffness test on a short Dormand–Prince
        pilot at ``x0`` (:mod:`simdiff.ode.auto`); ``solver_choice`` and
        ``Derivatives(problem).cache_info()`` say which and why, and every
        backend runs that solver.
    wrt : {"params", "y0", "both"}
    adjoint : Adjoint or {"checkpoint", "direct", "forward"}, optional
        How derivatives go through the step loop (:mod:`simdiff.ode.adjoint`):
        :class:`CheckpointAdjoint` (default; every mode, reverse-mode memory
        ``O(sqrt(max_steps))`` states on JAX, plus an adaptive solver's step
        decisions, a float and a flag per step), :class:`DirectAdjoint` (every mode,
        no recomputation, memory ``O(max_steps)``) or :class:`ForwardAdjoint`
        (forward mode only: values, JVPs, forward Jacobians, Taylor).  The
        diffrax solvers choose their own adjoint (:func:`diffrax_problem`).
    name, exact, meta
        As for :class:`simdiff.Problem`.
    check_options : CheckOptions, optional
        As for :class:`simdiff.Problem`; default
        ``CheckOptions(solver_rtol=solver.rtol)`` for an adaptive solver (the
        accuracy :func:`simdiff.check` floors its references at).
    **solver_options
        Passed to the solver named by ``solver`` (``rtol``, ``atol``,
        ``max_steps``, ``n_steps``, ...).

    Raises
    ------
    ShapeError, InputError
        Wrong shapes, ``t0 >= t1``, ``save_at`` outside ``t_span`` or not
        increasing, unknown ``wrt`` or ``solver`` (both are ``ValueError``).
    StabilityError
        A fixed-step explicit solver whose step exceeds its stability limit
        for the spectral radius of ``df/dy`` at the start (e.g. decay rate
        100 with 20 RK4 steps on ``[0, 1]``: ``dt |lambda| = 5 > 2.785``).
    SolverError
        On evaluation outside a compiled function, when the solver exhausts
        ``max_steps`` (the message gives the time reached and suggests a
        stiff solver) or the right-hand side is not finite (time and state).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.ode import ODEProblem
    >>> decay = ODEProblem(lambda t, y, p, ops: -p[0] * y, y0=[1.0], t_span=(0.0, 1.0),
    ...                    params=[2.0], observable=lambda ys, ops: ys[-1, 0],
    ...                    solver="dopri5", rtol=1e-10, atol=1e-12)
    >>> g = simdiff.grad(decay)                   # d/dk exp(-k) = -exp(-k) at k = 2
    >>> bool(abs(g[0] + np.exp(-2.0)) < 1e-8)
    True
    >>> simdiff.hessian(decay, backend="torch").shape
    (1, 1)
    """

    def __init__(
        self,
        rhs: Rhs,
        y0: Any,
        t_span: Any,
        params: Any = (),
        *,
        save_at: Any = None,
        observable: Observable | None = None,
        solver: str | Solver = "dopri5",
        wrt: str = "params",
        adjoint: Adjoint | str | None = None,
        name: str | None = None,
        exact: Mapping[str, Callable[..., Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
        check_options: CheckOptions | None = None,
        events: Any = None,
        max_events: int = 32,
        **solver_options: Any,
    ) -> None:
        if not callable(rhs):
            raise InputTypeError(
                f"rhs must be callable rhs(t, y, p, ops); got {type(rhs).__name__}"
            )
        if observable is not None and not callable(observable):
            raise InputTypeError(
                f"observable must be callable observable(ys, ops); got {observable!r}"
            )
        pspec = None
        if is_tree(params):  # structured: rhs and the events get the tree, the solver the vector
            pspec, params = ParamSpec.from_tree(params, "params")
            rhs = TreeRhs(rhs, pspec)
            events = tree_events(events, pspec)
        y0, t0, t1, params, save = validate(y0, t_span, params, save_at, wrt)
        self.rhs = rhs
        self.y0 = y0
        self.t_span = (t0, t1)
        self.params = params
        self.save_at = save
        self.observable = observable
        self.wrt = wrt
        self.adjoint = make_adjoint(adjoint)
        check_rhs(rhs, y0, t0, params)
        #: What ``solver="auto"`` chose at construction and why (None for a named solver).
        self.solver_choice: SolverChoice | None = None
        if isinstance(solver, str) and solver == "auto":
            self.solver, self.solver_choice = choose_solver(
                rhs, y0, t0, float(save[-1]), params, **solver_options
            )
        else:
            self.solver = make_solver(solver, **solver_options)
        self.solver.check(rhs, y0, t0, save, params)
        self.events = make_events(
            events, max_events, self.observable, self.solver, rhs, y0, t0, params
        )
        x0 = {"params": params, "y0": y0, "both": np.concatenate([params, y0])}[wrt]
        backends = getattr(self.solver, "backends", None)
        if check_options is None:  # an adaptive solver declares its accuracy to simdiff.check
            check_options = CheckOptions(solver_rtol=float(getattr(self.solver, "rtol", 0.0)))
        super().__init__(
            self._fn, x0, name=name or getattr(rhs, "__name__", "ode"), exact=exact,
            backends=backends, meta=meta, check_options=check_options,
        )  # fmt: skip
        if pspec is not None and wrt != "y0":  # the input's names and structure
            tree = pspec.unflatten(params)
            self.param_spec = (
                pspec if wrt == "params" else ParamSpec.from_tree({"params": tree, "y0": y0})[0]
            )

    # ------------------------------------------------------------------ internals
    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the problem: :class:`~simdiff.Problem`'s fields and every setting
        of the solve (right-hand side, observable, initial state, times, ``wrt``,
        the solver with its tolerances and ``max_steps``, the adjoint)."""
        return {
            **super().__fingerprint__(),
            "rhs": self.rhs,
            "observable": self.observable,
            "y0": self.y0,
            "t_span": self.t_span,
            "params": self.params,
            "save_at": self.save_at,
            "wrt": self.wrt,
            "solver": self.solver,
            **({} if self.solver_choice is None else {"solver_choice": "auto"}),
            "adjoint": self.adjoint,
            **({} if self.events is None else {"events": self.events}),
        }

    def cache_notes(self) -> list[dict[str, Any]]:
        """The ``solver="auto"`` choice as a ``cache_info()`` record (none for a named solver)."""
        return [] if self.solver_choice is None else [self.solver_choice.record()]

    def tightened(self, factor: float) -> ODEProblem | None:
        """This problem with the adaptive solver's ``rtol`` and ``atol`` divided by ``factor``.

        The solver is :func:`~simdiff.ode.solvers.adaptive.tightened_solver`'s
        (the division stops at ``rtol = 1e-12``; ``max_steps`` grows with it)
        and ``check_options.solver_rtol`` is divided by the same factor;
        ``None`` where the solver cannot be tightened.  :func:`simdiff.check`
        uses the variant for its finite-difference references and for the
        measured solver-tolerance gap (see ``docs/evidence.md``).

        Examples
        --------
        >>> from simdiff.ode import ODEProblem
        >>> p = ODEProblem(lambda t, y, p, ops: -p * y, [1.0], (0.0, 1.0), [1.0], rtol=1e-6)
        >>> tight = p.tightened(1e3)
        >>> f"{tight.solver.rtol:.1e} {tight.check_options.solver_rtol:.1e}"
        '1.0e-09 1.0e-09'
        >>> tight.solver.max_steps
        40960
        """
        tight = tightened_solver(self.solver, factor)
        if tight is None:
            return None
        new = copy.copy(self)
        new.solver, factor = tight
        new.fn = new._fn
        opts = self.check_options
        new.check_options = dataclasses.replace(opts, solver_rtol=opts.solver_rtol / factor)
        return new

    def check_point(self, x: np.ndarray) -> None:
        """The solver's construction check (``solver.check``: an explicit fixed step
        against its stability limit) at the parameters and initial state of ``x``."""
        if not self._solver_checks:
            return
        p, y0 = self.split(np.asarray(x, dtype=np.float64), get_backend("numpy").ops())
        self.solver.check(self.rhs, np.asarray(y0), self.t_span[0], self.save_at, np.asarray(p))

    def failure_at(self, x: Any, *, backend: str = "numpy") -> Exception | None:
        """The :class:`SolverError` an eager solve at ``x`` raises, or None.

        As :meth:`simdiff.Problem.failure_at` (which evaluates on numpy), except
        for a stiff solver whose Jacobian comes by AD (no ``jac=``): numpy's
        is a central difference, finite where the AD Jacobian of a compiled
        call was not (``sqrt`` at 0), so the solve is repeated eagerly on
        ``backend``, the context that failed (where it differentiates).
        """
        by_ad = self.solver.stiff and getattr(self.solver, "jac", "given") is None
        if not by_ad or not self.supports(backend) or not get_backend(backend).differentiable:
            return super().failure_at(x, backend=backend)
        try:
            with np.errstate(all="ignore"):
                self.evaluate(x, backend=backend)
        except SimdiffError as exc:
            return exc
        return None

    @property
    def _solver_checks(self) -> bool:
        """Whether the solver checks anything before a solve (it overrides ``Solver.check``)."""
        return type(self.solver).check is not Solver.check

    @property
    def checks_points(self) -> bool:
        """Whether :meth:`check_points` does anything: only a solver that checks
        (:class:`~simdiff.ode.FixedStep`), or ``fn``'s own check; otherwise every
        derivative call skips the conversion of its points."""
        own = callable(getattr(self.fn, "check_points", None))
        return own or self._solver_checks

    #: Its derivatives are programs of the solver's step loop (:attr:`Problem.step_loop`).
    step_loop = True

    @property
    def compiles_parts(self) -> str | None:  # type: ignore[override]
        """What the solver compiles by itself under ``compile=True | "auto"``, or None.

        Dopri5 and FixedStep (``solver.loop_compiles``): the whole step loop,
        one graph (:func:`simdiff.ode.solvers.driver._compiled_loop`).  Rodas3 and
        Rodas5P (``solver.step_compiles``; their loop fails to compile in
        torch 2.13): each step, one graph, the loop on the host
        (:func:`simdiff.ode.solvers.driver._compiled_step`); under an adjoint that
        rematerialises steps (``adjoint.remat_steps``: the default
        :class:`~simdiff.ode.CheckpointAdjoint`) the step's VJP, recomputing
        it, is a second graph.
        """
        if self.solver.loop_compiles:
            return f"the {self.solver.name} step loop (method, controller, saving), one graph"
        if self.solver.step_compiles:
            vjp = ", and its VJP by recomputation, another" if self.adjoint.remat_steps else ""
            return (
                f"the {self.solver.name} step (Jacobian, factorisation, stages), one graph{vjp}; "
                "the loop on the host"
            )
        return None

    @property
    def dim(self) -> int:
        """State dimension."""
        return int(self.y0.shape[0])

    def split(self, x: Any, ops: Any) -> tuple[Any, Any]:
        """``(params, y0)`` from an input ``x`` in context ``ops``."""
        if self.wrt == "params":
            return x, ops.asarray(self.y0)
        if self.wrt == "y0":
            return ops.asarray(self.params), x
        n = int(self.params.shape[0])
        return x[:n], x[n:]

    def _solve(self, x: Any, ops: Any) -> tuple[Any, SolveInfo]:
        p, y0 = self.split(x, ops)
        # Overflow in a rejected trial step is expected and handled (the status
        # reports real failures), so numpy's floating-point warnings are silenced.
        with ops.errstate():
            if self.events is None:
                return self.solver.integrate(
                    self.rhs, y0, self.t_span[0], self.save_at, p, ops, adjoint=self.adjoint
                )
            return self.solver.integrate(
                self.rhs, y0, self.t_span[0], self.save_at, p, ops, adjoint=self.adjoint,
                events=self.events,
            )  # fmt: skip

    def failure_note(self, status: int, t: float, y: np.ndarray, p: Any = None) -> str:
        """What the :class:`SolverError` of a failed solve at ``(t, y)`` adds
        (:func:`~simdiff.ode.auto.failure_note`; ``p``: the parameters as numpy,
        default ``self.params``)."""
        params = self.params if p is None else np.asarray(p, dtype=np.float64)
        return failure_note(
            self.solver, self.solver_choice, self.rhs, status, t, y, params,
            float(self.save_at[-1]),
        )  # fmt: skip

    def _note(self, p: Any, ops: Any) -> Callable[[int, float, np.ndarray], str]:
        """:meth:`failure_note` with the parameters ``p`` of context ``ops`` read as numpy."""

        def note(status: int, t: float, y: np.ndarray) -> str:
            pc = ops.concrete(ops.stop_gradient(p))
            return self.failure_note(status, t, y, None if pc is None else np.asarray(pc))

        return note

    def _fn(self, x: Any, ops: Any) -> Any:
        ys, info = self._solve(x, ops)
        raise_on_failure(
            info, self.save_at[-1], self.solver, ops, self._note(self.split(x, ops)[0], ops)
        )
        if self.observable is None:
            return ops.reshape(ys, (-1,))
        if self.events is not None and takes_event(self.observable):
            return self.observable(ys, ops, info.events)  # type: ignore[call-arg]
        return self.observable(ys, ops)

    # ------------------------------------------------------------------ public
    def trajectory(
        self, x: Any = None, *, backend: str | None = None, config: Config | None = None
    ) -> np.ndarray:
        """States at ``save_at``, shape ``(len(save_at), dim)``, as numpy.

        The solve runs in the context of ``backend`` (or ``config.backend``;
        default ``"numpy"``).  Raises :class:`~simdiff.errors.SolverError` if
        the solve failed.

        Examples
        --------
        >>> from simdiff.ode import ODEProblem
        >>> p = ODEProblem(lambda t, y, p, ops: p * y, [1.0], (0.0, 1.0), [0.0],
        ...                save_at=[0.5, 1.0])
        >>> p.trajectory()
        array([[1.],
               [1.]])
        """
        ys, _ = run(self, x, Config.of(config, backend=backend))
        return ys

    def solve_info(
        self, x: Any = None, *, backend: str | None = None, config: Config | None = None
    ) -> dict[str, Any]:
        """What the solver did at ``x``: status, message, time reached, step counts.

        Does not raise on failure (use it to diagnose a NaN from a compiled
        call).  ``backend`` and ``config`` as for :meth:`trajectory`.

        Examples
        --------
        >>> from simdiff.ode import ODEProblem
        >>> p = ODEProblem(lambda t, y, p, ops: p * y, [1.0], (0.0, 1.0), [-1.0])
        >>> p.solve_info()["status"]
        0
        """
        _, info = run(self, x, Config.of(config, backend=backend), check=False)
        status = int(info.status)
        steps = int(info.n_accepted) + int(info.n_rejected)
        point = self.x0 if x is None else np.asarray(self.flatten(x), dtype=np.float64)
        p = self.split(point, get_backend("numpy").ops())[0]
        note = self.failure_note(status, float(info.t), np.asarray(info.y), p) if status else ""
        return {
            "status": status,
            "message": status_message(
                status, float(info.t), self.save_at[-1], info.y, self.solver, steps, note
            )
            if status
            else "success",
            "t": float(info.t),
            "y": np.asarray(info.y),
            "n_accepted": int(info.n_accepted),
            "n_rejected": int(info.n_rejected),
        }


def run(
    problem: ODEProblem, x: Any, config: Config, check: bool = True
) -> tuple[np.ndarray, SolveInfo]:
    """The states at ``save_at`` and the :class:`SolveInfo` of ``problem`` at ``x``, as numpy.

    The solve runs eagerly in the context of ``config.backend`` (``"numpy"``
    where None), in float64; ``check`` raises :class:`SolverError` for a
    failed solve.
    """
    backend = config.backend or "numpy"
    problem.require(backend)
    be = get_backend(backend)
    x = problem.x0 if x is None else np.asarray(problem.flatten(x), dtype=np.float64)
    if x.shape != (problem.n,):
        raise ShapeError(
            f"problem {problem.name!r} expects x of shape ({problem.n},); got {x.shape}"
        )
    ys, info = problem._solve(be.from_numpy(x, np.float64), be.ops())
    fields = (info.status, info.t, info.y, info.n_accepted, info.n_rejected)
    info = SolveInfo(*(np.asarray(be.to_numpy(v) if be.is_native(v) else v) for v in fields))
    if check:
        numpy_ops = get_backend("numpy").ops()
        p = problem.split(x, numpy_ops)[0]
        raise_on_failure(
            info, problem.save_at[-1], problem.solver, numpy_ops,
            lambda status, t, y: problem.failure_note(status, t, y, p),
        )  # fmt: skip
    return np.asarray(be.to_numpy(ys) if be.is_native(ys) else ys), info


def raise_on_failure(
    info: SolveInfo, t1: float, solver: Solver, ops: Any,
    note: Callable[[int, float, np.ndarray], str] | None = None,
) -> None:  # fmt: skip
    """Raise :class:`SolverError` for a failed solve, when the status can be read.

    Under ``jax.jit``/``vmap`` tracing, or ``torch.func.vmap``, the status is
    symbolic (``ops.concrete`` gives ``None``): the NaN-poisoned output
    carries the failure instead.  ``note(status, t, y)`` adds to the message
    (:meth:`ODEProblem.failure_note`).
    """
    status = ops.concrete(info.status)
    if status is None or int(status) == 0:
        return
    t = float(ops.concrete(info.t))
    y = np.asarray(ops.concrete(ops.stop_gradient(info.y)), dtype=np.float64)
    counts = [ops.concrete(info.n_accepted), ops.concrete(info.n_rejected)]
    steps = None if any(c is None for c in counts) else int(sum(float(c) for c in counts))
    text = "" if note is None else note(int(status), t, y)
    raise SolverError(status_message(int(status), t, t1, y, solver, steps, text))


def solve(
    rhs: Rhs,
    y0: Any,
    t_span: Any,
    params: Any = (),
    *,
    save_at: Any = None,
    solver: str | Solver = "dopri5",
    backend: str | None = None,
    **solver_options: Any,
) -> np.ndarray:
    """Solve ``y' = rhs(t, y, p, ops)`` and return the states at ``save_at`` (numpy).

    Returns an array of shape ``(len(save_at), dim)``.  Raises
    :class:`~simdiff.errors.SolverError` when the solver fails (``max_steps``
    exhausted: time reached and a stiff-solver hint; non-finite right-hand
    side: time and state).  ``backend`` picks the context that runs the
    solver; by default ``"numpy"``, or the solver's first backend where
    numpy cannot run it (diffrax: ``"jax"``).

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.ode import solve
    >>> ys = solve(lambda t, y, p, ops: ops.stack([y[1], -y[0]]), [1.0, 0.0], (0.0, np.pi),
    ...            save_at=[np.pi], rtol=1e-10, atol=1e-12)
    >>> np.round(ys, 8) + 0.0
    array([[-1.,  0.]])
    """
    problem = ODEProblem(
        rhs, y0, t_span, params, save_at=save_at, solver=solver,
        wrt="y0", **solver_options,
    )  # fmt: skip
    if backend is None:  # plain evaluation where the solver allows it (diffrax: JAX only)
        backend = "numpy" if problem.supports("numpy") else problem.backends[0]
    return problem.trajectory(backend=backend)
