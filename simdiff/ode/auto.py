"""``solver="auto"``: an explicit or a stiff solver, chosen from a stiffness test at the start.

The test is Hairer's stiffness detection of DOPRI5 (Hairer, Nørsett & Wanner,
*Solving ODEs I*, 2nd ed., II.10, and the ``IASTI`` counter of their Fortran
code), run as a short *pilot*: Dormand–Prince steps from ``(t0, y0)`` in
float64 numpy, at the problem's ``rtol``/``atol``, with the controller the
explicit solver would use.  Each accepted step estimates the largest
eigenvalue modulus of ``df/dy`` along the step for free, from two stages
that end at ``t + h``,

    ``rho = ||k7 - k6|| / ||y_new - y6||``

(``y6`` the sixth stage's input, ``k6 = f(t + h, y6)``, ``k7 = f(t + h, y_new)``),
and compares ``h * rho`` with Dopri5's real stability interval ``s = 3.3066``.
A step with ``h * rho > 3.25`` is *stability-limited*: the step size the
accuracy controller settles on is the one at which the explicit method just
stays stable, which is what stiffness means.  Fifteen such steps without six
unlimited ones in between, the rule of Hairer's code, make the problem stiff.

The pilot stops at the verdict, at the end of the interval (the explicit
method solved the problem within the pilot: it is not stiff), or after
:data:`PILOT_STEPS` attempted steps.  A pilot that ran out of steps before it
could tell (at tight tolerances the steps stay limited by accuracy for long,
and a system such as Robertson's turns stiff after ``t0``) decides from where
it stopped: the spectral radius ``rho`` of ``df/dy`` there bounds the stable
explicit step by ``s / rho``, so the rest of the interval needs at least
``rho (t1 - t) / s`` explicit steps for stability alone; more than the
``max_steps`` left makes the problem stiff (an explicit solver could not
finish), fewer leaves it not stiff.  It runs once, at
construction, at the problem's ``x0``: the same numbers for every backend,
so JAX, torch and numpy run the same solver, which is part of the problem's
fingerprint.  A point evaluated later that is much stiffer than ``x0`` keeps
the chosen solver; an explicit one that then exhausts ``max_steps`` says
that the system is stiff there (:func:`stiffness_note`).

The stiff choice is :class:`~simdiff.ode.Rodas3` at ``rtol >= 1e-3``
(:data:`LOOSE_RTOL`) and :class:`~simdiff.ode.Rodas5P` below: at loose
tolerances the two take about the same number of steps and a Rodas3 step
costs about half a Rodas5P step (four stages against eight), at tight ones
Rodas5P takes far fewer (``docs/ode.md``, "Choosing the solver").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.backends.numpy import NumpyOps
from simdiff.errors import InputError
from simdiff.ode.solvers._base import Rhs, Solver
from simdiff.ode.solvers.adaptive import initial_step
from simdiff.ode.solvers.dopri5 import DOPRI5, ERROR_WEIGHTS, Dopri5
from simdiff.ode.solvers.rk import rk_stages, tableau_arrays
from simdiff.ode.solvers.rodas5p import Rodas5P
from simdiff.ode.solvers.rosenbrock import Rodas3
from simdiff.ode.stability import real_stability_interval, rhs_spectral_radius

__all__ = [
    "LIMITED",
    "LOOSE_RTOL",
    "PILOT_STEPS",
    "SolverChoice",
    "choose_solver",
    "failure_note",
    "stiffness_note",
]

#: Attempted pilot steps at most (capped by ``max_steps``).
PILOT_STEPS = 1000
#: ``h * rho`` above which a Dormand–Prince step counts as limited by stability
#: (Hairer's DOPRI5: 3.25, just inside the real stability interval 3.3066).
LIMITED = 3.25
#: Stability-limited steps that make the verdict "stiff", and the run of unlimited
#: steps that resets the count (Hairer's DOPRI5: 15 and 6).
STIFF_AFTER, RESET_AFTER = 15, 6
#: The stiff choice is Rodas3 at ``rtol >= LOOSE_RTOL``, Rodas5P below.
LOOSE_RTOL = 1e-3
#: Options every adaptive solver takes; the others (``jac``, ``dfdt``, ``controller``)
#: go to a stiff choice only.
COMMON_OPTIONS = ("rtol", "atol", "max_steps", "h0")
STIFF_OPTIONS = ("jac", "dfdt", "controller")


@dataclass(frozen=True)
class SolverChoice:
    """What ``solver="auto"`` chose and why (reported by ``Derivatives.cache_info()``).

    Attributes
    ----------
    solver : str
        The chosen solver's name (``"dopri5"``, ``"rodas3"`` or ``"rodas5p"``).
    stiff : bool
        The pilot's verdict.
    stiffness_ratio : float
        The median of ``h * rho / s`` over the pilot's last (up to 15) accepted
        steps: about 1 where the explicit steps are limited by stability
        (stiff), far below 1 where accuracy limits them.
    limited_steps : int
        Accepted pilot steps with ``h * rho > 3.25``.
    pilot_steps : int
        Attempted pilot steps.
    t_reached : float
        Where the pilot stopped.
    rho0 : float
        The spectral radius of ``df/dy`` at ``(t0, y0)`` (non-growing
        eigenvalues; :func:`~simdiff.ode.stability.rhs_spectral_radius`).
    explicit_steps_at_start : float
        ``rho0 * (t1 - t0) / s``: the explicit steps stability would force over
        the whole interval if the stiffness at the start persisted.
    seconds : float
        What the decision cost (pilot and spectral radius).
    reason : str
        The verdict in one sentence.
    """

    solver: str
    stiff: bool
    stiffness_ratio: float
    limited_steps: int
    pilot_steps: int
    t_reached: float
    rho0: float
    explicit_steps_at_start: float
    seconds: float
    reason: str

    def record(self) -> dict[str, Any]:
        """The fields as a dict (``kind="solver_choice"``), a record of ``cache_info()``."""
        return {"kind": "solver_choice", **self.__dict__}


def _pilot(
    rhs: Rhs, y0: np.ndarray, t0: float, t1: float, p: np.ndarray, explicit: Dopri5
) -> tuple[bool, list[float], int, int, float, np.ndarray]:
    """Hairer's stiffness test on Dormand–Prince steps from ``(t0, y0)`` in numpy.

    Returns ``(stiff, ratios, limited, attempts, t, y)``: the verdict,
    ``h rho / s`` of each accepted step, how many were limited, the attempted
    steps, the time reached and the state there.
    """
    ops = NumpyOps()
    s = real_stability_interval(DOPRI5)
    span = t1 - t0
    controller = explicit.make_controller(span)
    rows = tableau_arrays(DOPRI5, ops)
    err_w = np.asarray(ERROR_WEIGHTS)
    a6 = np.asarray(DOPRI5.a[5])
    t, y = float(t0), np.asarray(y0, dtype=np.float64)
    k1 = np.asarray(rhs(np.float64(t), y, p, ops), dtype=np.float64)
    h0 = explicit.h0
    h = float(
        initial_step(rhs, np.float64(t), y, k1, p, span, explicit.rtol, explicit.atol,
                     explicit.error_order, ops)
        if h0 is None else h0
    )  # fmt: skip
    memory = controller.memory0(ops)
    ratios: list[float] = []
    limited = stiff_count = unlimited_run = attempts = 0
    budget = min(PILOT_STEPS, int(explicit.max_steps))
    with np.errstate(all="ignore"):  # an overflowing trial step is rejected, as in the solver
        while attempts < budget and t < t1:
            attempts += 1
            remaining = t1 - t
            h_try = min(h, remaining)
            ks, y_new = rk_stages(
                rhs, np.float64(t), y, h_try, p, ops, DOPRI5, rows=rows, k1=k1,
                with_last_input=True,
            )  # fmt: skip
            err = h_try * (err_w @ ks)
            accept, h_next, failed, memory = controller.decide(
                h, h_try, remaining, y, y_new, err, memory, ops
            )
            h = float(h_next)
            if bool(failed) or not np.isfinite(h):
                break
            if not bool(accept):
                continue
            y6 = y + h_try * (a6 @ ks[:5])
            den = float(np.linalg.norm(y_new - y6))
            h_rho = h_try * float(np.linalg.norm(ks[6] - ks[5])) / den if den > 0 else 0.0
            ratios.append(h_rho / s)
            if h_rho > LIMITED:
                limited += 1
                stiff_count += 1
                unlimited_run = 0
                if stiff_count >= STIFF_AFTER:
                    return True, ratios, limited, attempts, t + h_try, y_new
            else:
                unlimited_run += 1
                if unlimited_run >= RESET_AFTER:
                    stiff_count = 0
            t = t1 if h_try >= remaining else t + h_try
            y, k1 = y_new, ks[6]
    return False, ratios, limited, attempts, t, y


def choose_solver(
    rhs: Rhs,
    y0: np.ndarray,
    t0: float,
    t1: float,
    p: np.ndarray,
    **options: Any,
) -> tuple[Solver, SolverChoice]:
    """The solver ``solver="auto"`` runs for ``y' = rhs(t, y, p)`` on ``[t0, t1]``, and why.

    ``options`` are the solver options of :class:`~simdiff.ode.ODEProblem`:
    ``rtol``, ``atol``, ``max_steps`` and ``h0`` go to whichever solver is
    chosen, ``jac``, ``dfdt`` and ``controller`` to a stiff one only.  See the
    module docstring for the test.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.ode.auto import choose_solver
    >>> vdp = lambda t, y, p, ops: ops.stack([y[1], p[0] * (1 - y[0] ** 2) * y[1] - y[0]])
    >>> solver, why = choose_solver(vdp, np.array([2.0, 0.0]), 0.0, 1.0, np.array([1000.0]))
    >>> solver.name, why.stiff
    ('rodas5p', True)
    >>> choose_solver(vdp, np.array([2.0, 0.0]), 0.0, 1.0, np.array([1.0]))[0].name
    'dopri5'
    """
    unknown = sorted(set(options) - set(COMMON_OPTIONS) - set(STIFF_OPTIONS))
    if unknown:
        raise InputError(
            f"solver='auto' takes the options {list(COMMON_OPTIONS + STIFF_OPTIONS)}; got {unknown}"
        )
    common = {k: v for k, v in options.items() if k in COMMON_OPTIONS}
    start = time.perf_counter()
    explicit = Dopri5(**common)
    stiff, ratios, limited, attempts, t_reached, y_end = _pilot(rhs, y0, t0, t1, p, explicit)
    ops = NumpyOps()
    s = real_stability_interval(DOPRI5)
    with np.errstate(all="ignore"):
        rho0 = rhs_spectral_radius(
            lambda y: np.asarray(rhs(np.float64(t0), y, p, ops), dtype=np.float64), y0
        )
    ratio = float(np.median(ratios[-STIFF_AFTER:])) if ratios else 0.0
    undecided = ""
    if not stiff and t_reached < t1:  # out of pilot steps before it could tell
        with np.errstate(all="ignore"):
            rho_end = rhs_spectral_radius(
                lambda y: np.asarray(rhs(np.float64(t_reached), y, p, ops), dtype=np.float64),
                y_end,
            )
        needed = float(rho_end * (t1 - t_reached) / s) if np.isfinite(rho_end) else 0.0
        left = int(explicit.max_steps) - attempts
        if needed > left:
            stiff = True
            undecided = (
                f"stiff: the dopri5 pilot ran {attempts} attempted steps to t={t_reached:.6g} "
                f"without a verdict; there |lambda_max(df/dy)| = {rho_end:.3g}, so the rest of "
                f"the interval needs at least {needed:.3g} explicit steps for stability alone, "
                f"more than the {left} of max_steps left"
            )
    if stiff:
        loose = explicit.rtol >= LOOSE_RTOL
        solver: Solver = (Rodas3 if loose else Rodas5P)(**options)
        why = (
            undecided
            or (
                f"stiff: {limited} of {len(ratios)} accepted dopri5 pilot steps were limited by "
                f"stability (h*rho > {LIMITED} of dopri5's {s:.4g}; median h*rho/s of the last "
                f"{min(len(ratios), STIFF_AFTER)}: {ratio:.2f}) by t={t_reached:.6g}"
            )
        ) + f"; {solver.name} at rtol={explicit.rtol:g} ({'>=' if loose else '<'} {LOOSE_RTOL:g})"
    else:
        solver = explicit
        where = (
            "reached the end" if t_reached >= t1 else
            f"ran {attempts} attempted steps to t={t_reached:.6g}"
        )  # fmt: skip
        why = (
            f"not stiff: the dopri5 pilot {where} with {limited} of {len(ratios)} accepted "
            f"steps limited by stability (median h*rho/s of the last "
            f"{min(len(ratios), STIFF_AFTER)}: {ratio:.2f})"
        )
    choice = SolverChoice(
        solver=solver.name, stiff=stiff, stiffness_ratio=ratio, limited_steps=limited,
        pilot_steps=attempts, t_reached=float(t_reached), rho0=float(rho0),
        explicit_steps_at_start=float(rho0 * (t1 - t0) / s),
        seconds=time.perf_counter() - start, reason=why,
    )  # fmt: skip
    return solver, choice


def stiffness_note(rhs: Rhs, t: float, y: np.ndarray, p: np.ndarray, t1: float) -> str:
    """What an explicit solver's exhausted budget says about stiffness at ``(t, y)``.

    The spectral radius ``rho`` of ``df/dy`` there (numpy central differences),
    the longest stable Dopri5 step ``s / rho`` and the steps that would take to
    the end; empty if ``rho`` is not finite.
    """
    ops = NumpyOps()
    with np.errstate(all="ignore"):
        rho = rhs_spectral_radius(
            lambda z: np.asarray(rhs(np.float64(t), z, p, ops), dtype=np.float64),
            np.asarray(y, dtype=np.float64),
        )
    if not np.isfinite(rho) or rho <= 0.0:
        return ""
    s = real_stability_interval(DOPRI5)
    return (
        f"; at t={t:.6g} |lambda_max(df/dy)| = {rho:.3g}, so an explicit step is stable only "
        f"up to h = {s / rho:.3g} ({s * 1.0:.4g}/|lambda|): about {max(t1 - t, 0.0) * rho / s:.3g} "
        "more steps to the end"
    )


def failure_note(
    solver: Solver, choice: SolverChoice | None, rhs: Rhs, status: int, t: float,
    y: np.ndarray, params: np.ndarray, t1: float,
) -> str:  # fmt: skip
    """What the :class:`~simdiff.errors.SolverError` of a failed solve at ``(t, y)`` adds.

    An explicit solver that exhausted ``max_steps`` (status 1): the spectral
    radius of ``df/dy`` at ``(t, y)`` and the longest stable step
    (:func:`stiffness_note`).  A solver that ``solver="auto"`` chose
    (``choice``): that it was chosen at ``x0``, with the reason.
    """
    text = ""
    if status == 1 and not solver.stiff and hasattr(solver, "rtol"):
        text = stiffness_note(rhs, t, y, params, t1)
    if choice is not None:
        text += f"; solver='auto' chose {choice.solver} at x0 ({choice.reason})"
        if status == 1 and not solver.stiff:
            text += (
                ", but the solve is stiffer here than the pilot found (a later time or "
                "another point): pass solver='rodas5p'"
            )
    return text
