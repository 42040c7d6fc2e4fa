"""The diffrax solver: ``diffrax.diffeqsolve`` behind simdiff's solver contract (JAX only).

diffrax differentiates its adaptive ``while`` loop through an *adjoint*, and
each adjoint supports only some derivative modes:

==========================  =====================================================
adjoint                     supports
==========================  =====================================================
``"recursive"``             ``RecursiveCheckpointAdjoint`` (diffrax's default):
                            reverse mode only -- grad, vjp, jacobian(mode="rev").
                            ``jax.jvp`` through it fails (its checkpointed loop
                            has a custom VJP and no JVP rule), so no Hessian.
``"forward"``               ``ForwardMode``: forward mode only -- jvp,
                            jacobian(mode="fwd"), nested jvps (``derivative``).
``"direct"``                ``DirectAdjoint``: both modes and any nesting
                            (Hessians, HVPs, derivative tensors), at the cost of
                            memory and compile time (a bounded loop of
                            ``max_steps`` iterations).
==========================  =====================================================

:func:`~simdiff.ode.diffrax_problem` picks, for the derivative asked for, the adjoint that
supports it most cheaply, and raises :class:`~simdiff.errors.UnsupportedError`
with the reason when an explicitly requested adjoint cannot, or when no
adjoint can (Taylor propagation: diffrax's solvers are JAX programs, not
``ops`` programs, so the Taylor context cannot run them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import diffrax
import jax.numpy as jnp
import numpy as np

from simdiff.errors import InputError, UnsupportedError
from simdiff.ode.solvers._base import Rhs, SolveInfo, Solver
from simdiff.ode.solvers.adaptive import check_tolerances

__all__ = ["ADJOINTS", "DERIVATIVES", "Diffrax", "choose_adjoint"]

_SOLVERS = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "kvaerno5": diffrax.Kvaerno5}
_ADJOINT_CLASSES = {
    "recursive": diffrax.RecursiveCheckpointAdjoint,
    "forward": diffrax.ForwardMode,
    "direct": diffrax.DirectAdjoint,
}
_REVERSE = {"value", "grad", "value_and_grad", "vjp", "jacobian-rev"}
_FORWARD = {"value", "jvp", "jacobian-fwd", "derivative"}
_BOTH = _REVERSE | _FORWARD | {"hessian", "hvp", "derivative_tensor"}
#: The derivative kinds each adjoint supports.
ADJOINTS: dict[str, frozenset[str]] = {
    "recursive": frozenset(_REVERSE),
    "forward": frozenset(_FORWARD),
    "direct": frozenset(_BOTH),
}
#: Every derivative kind :func:`choose_adjoint` knows (``jacobian`` means forward mode).
DERIVATIVES = (*sorted(_BOTH), "jacobian", "taylor")
_WHY = {
    "recursive": "RecursiveCheckpointAdjoint is reverse-mode only (its checkpointed loop has "
    "no JVP rule)",
    "forward": "ForwardMode propagates tangents forward only and has no reverse mode",
    "direct": "DirectAdjoint supports every JAX transform",
}


def choose_adjoint(derivative: str, adjoint: str | None = None) -> str:
    """The diffrax adjoint for ``derivative``; ``adjoint`` checks an explicit choice.

    Reverse-mode kinds get ``"recursive"``, forward-mode kinds ``"forward"``,
    mixed and higher-order kinds (Hessian, HVP, derivative tensor) ``"direct"``.

    Raises
    ------
    UnsupportedError
        ``adjoint`` cannot compute ``derivative`` (the message says why), or
        ``derivative == "taylor"``.
    ValueError
        Unknown ``derivative`` or ``adjoint``.

    Examples
    --------
    >>> from simdiff.ode.solvers.diffrax import choose_adjoint
    >>> choose_adjoint("grad"), choose_adjoint("jvp"), choose_adjoint("hessian")
    ('recursive', 'forward', 'direct')
    """
    if derivative == "jacobian":
        derivative = "jacobian-fwd"
    if derivative == "taylor":
        raise UnsupportedError(
            "no diffrax adjoint supports Taylor propagation: diffrax's solvers are JAX programs, "
            "not ops programs, so the Taylor context cannot run them; use solver='dopri5', "
            "'rodas3' or 'rk4', or method='nested'"
        )
    if derivative not in _BOTH:
        raise InputError(f"unknown derivative {derivative!r}; expected one of {list(DERIVATIVES)}")
    if adjoint is None:
        if derivative in _REVERSE:
            return "recursive"
        return "forward" if derivative in _FORWARD else "direct"
    if adjoint not in ADJOINTS:
        raise InputError(f"unknown adjoint {adjoint!r}; expected one of {list(ADJOINTS)}")
    if derivative not in ADJOINTS[adjoint]:
        raise UnsupportedError(
            f"the diffrax adjoint {adjoint!r} cannot compute {derivative!r}: {_WHY[adjoint]}; "
            f"use adjoint={choose_adjoint(derivative)!r} (or leave adjoint=None)"
        )
    return adjoint


@dataclass(frozen=True)
class Diffrax(Solver):
    """An ODEProblem solver that calls ``diffrax.diffeqsolve`` (jax backend only).

    Parameters
    ----------
    solver : {"tsit5", "dopri5", "kvaerno5"}
        Tsit5 and Dopri5 are explicit (order 5); Kvaerno5 is an ESDIRK method
        for stiff systems (order 5).
    rtol, atol : float
        Tolerances of ``diffrax.PIDController``.
    max_steps : int
    adjoint : {"direct", "recursive", "forward"}
        How diffrax differentiates (see the module docs); ``"direct"`` (default)
        supports every derivative, :func:`~simdiff.ode.diffrax_problem` picks a cheaper one.

    Notes
    -----
    ``throw=False``: a failed solve gives NaN states and a status (1 for
    ``max_steps`` exhausted, 2 otherwise), as simdiff's own solvers do.
    diffrax's step-size controller also runs on values whose derivatives are
    not propagated, so derivatives are those of its discrete solution; they
    agree with simdiff's solvers to the solvers' accuracy, not to rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.ode import Diffrax, solve
    >>> ys = solve(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
    ...            solver=Diffrax("tsit5", rtol=1e-10, atol=1e-12), backend="jax")
    >>> bool(abs(ys[0, 0] - np.exp(-2.0)) < 1e-9)
    True
    """

    solver: str = "tsit5"
    rtol: float = 1e-6
    atol: float = 1e-9
    max_steps: int = 4096
    adjoint: str = "direct"
    backends = ("jax",)

    def __post_init__(self) -> None:
        if self.solver not in _SOLVERS:
            raise InputError(
                f"unknown diffrax solver {self.solver!r}; expected one of {list(_SOLVERS)}"
            )
        if self.adjoint not in ADJOINTS:
            raise InputError(f"unknown adjoint {self.adjoint!r}; expected one of {list(ADJOINTS)}")
        check_tolerances(self.rtol, self.atol, self.max_steps, None)

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"diffrax-{self.solver}"

    @property
    def order(self) -> int:  # type: ignore[override]
        return 5

    @property
    def stiff(self) -> bool:  # type: ignore[override]
        return self.solver == "kvaerno5"

    def integrate(
        self,
        rhs: Rhs,
        y0: Any,
        t0: float,
        save_at: np.ndarray,
        p: Any,
        ops: Any,
        adjoint: Any = None,
        events: Any = None,
    ) -> tuple[Any, SolveInfo]:
        """Solve with ``diffrax.diffeqsolve``; ``adjoint`` is ignored (this engine's
        own ``adjoint`` field, picked by :func:`~simdiff.ode.diffrax_problem`, applies).  Events
        are refused (:class:`~simdiff.ode.ODEProblem` refuses them for this engine)."""
        if events is not None:
            raise UnsupportedError(f"{self.name} does not locate events; use Dopri5 or Rodas5P")
        if ops.name != "jax":
            raise UnsupportedError(
                f"{self.name} runs in the 'jax' context only; got the {ops.name!r} context"
            )
        term = diffrax.ODETerm(lambda t, y, args: rhs(t, y, args, ops))
        sol = diffrax.diffeqsolve(
            term,
            _SOLVERS[self.solver](),
            t0=float(t0),
            t1=float(save_at[-1]),
            dt0=None,
            y0=y0,
            args=p,
            saveat=diffrax.SaveAt(ts=jnp.asarray(save_at)),
            stepsize_controller=diffrax.PIDController(rtol=self.rtol, atol=self.atol),
            max_steps=int(self.max_steps),
            adjoint=_ADJOINT_CLASSES[self.adjoint](),
            throw=False,
        )
        ok = sol.result == diffrax.RESULTS.successful
        exhausted = sol.result == diffrax.RESULTS.max_steps_reached
        status = jnp.where(ok, 0.0, jnp.where(exhausted, 1.0, 2.0))
        ys = sol.ys * jnp.where(ok, 1.0, jnp.nan)  # NaN-poisoning, as simdiff's solvers
        stats = sol.stats
        info = SolveInfo(
            status=status,
            t=jnp.where(ok, float(save_at[-1]), jnp.nan),
            y=ys[-1],
            n_accepted=jnp.asarray(stats["num_accepted_steps"], dtype=jnp.float64),
            n_rejected=jnp.asarray(stats["num_rejected_steps"], dtype=jnp.float64),
        )
        return ys, info
