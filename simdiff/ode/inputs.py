"""The inputs of :class:`~simdiff.ode.ODEProblem`, checked and converted once, at construction.

Each check raises a :mod:`simdiff.errors` class whose message names the
argument, what was expected and what was got.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from simdiff.backends import get_backend
from simdiff.core.params import ParamSpec, TreeRhs
from simdiff.errors import InputError, InputTypeError, ShapeError, SolverError
from simdiff.ode.events import Event, EventSet, takes_event
from simdiff.ode.solvers._base import Rhs, Solver

__all__ = ["WRT", "check_rhs", "make_events", "tree_events", "validate", "vector"]

WRT = ("params", "y0", "both")


def vector(a: Any, what: str, allow_empty: bool = False) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiu":
        raise InputTypeError(f"{what} must be a real array; got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 1 or (arr.size == 0 and not allow_empty):
        raise ShapeError(f"{what} must have shape (n,) with n >= 1; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise InputError(f"{what} must be finite; {what}[{bad}] = {arr[bad]}")
    return arr


def validate(
    y0: Any, t_span: Any, params: Any, save_at: Any, wrt: str
) -> tuple[np.ndarray, float, float, np.ndarray, np.ndarray]:
    """Check and convert the inputs of :class:`ODEProblem`; errors name expected vs got."""
    y0 = vector(y0, "y0")
    params = vector(params, "params", allow_empty=True)
    span = np.asarray(t_span, dtype=np.float64)
    if span.shape != (2,):
        raise ShapeError(f"t_span must be (t0, t1); got shape {span.shape}")
    t0, t1 = float(span[0]), float(span[1])
    if not (np.isfinite(t0) and np.isfinite(t1)) or t1 <= t0:
        raise InputError(f"t_span must satisfy t0 < t1 (forward in time, finite); got {(t0, t1)}")
    save = np.asarray([t1] if save_at is None else save_at, dtype=np.float64)
    if save.ndim != 1 or save.size == 0:
        raise ShapeError(f"save_at must be a 1-D array of times; got shape {save.shape}")
    if np.any(np.diff(save) <= 0):
        raise InputError(f"save_at must be strictly increasing; got {save}")
    if save[0] < t0 or save[-1] > t1:
        raise InputError(f"save_at must lie in t_span [{t0}, {t1}]; got [{save[0]}, {save[-1]}]")
    if save[-1] == t0:
        raise InputError(f"save_at must contain a time after t0={t0}; got {save}")
    if wrt not in WRT:
        raise InputError(f"wrt must be one of {list(WRT)}; got {wrt!r}")
    if wrt == "params" and params.size == 0:
        raise ShapeError("wrt='params' needs at least one parameter; got params of shape (0,)")
    return y0, t0, t1, params, save


def make_events(
    events: Any, max_events: int, observable: Any, solver: Solver, rhs: Rhs, y0: np.ndarray,
    t0: float, params: np.ndarray,
) -> EventSet | None:  # fmt: skip
    """The :class:`EventSet` of ``events`` (None without events), checked at ``(t0, y0)``.

    ``observable`` reading the event record needs events; ``solver`` must
    support them (``solver.supports_events``); ``max_events`` is a positive
    integer.  Errors name what was expected and what was got.
    """
    reads = takes_event(observable)
    if events is None or (isinstance(events, (list, tuple)) and len(events) == 0):
        if reads:
            raise InputTypeError(
                "observable takes a third argument (the event record), which needs "
                "events=[Event(...)]; got no events"
            )
        return None
    if isinstance(events, Event):
        events = [events]
    if not isinstance(events, (list, tuple)) or not all(isinstance(e, Event) for e in events):
        raise InputTypeError(f"events must be a list of simdiff.ode.Event; got {events!r}")
    if not solver.supports_events:
        raise InputError(
            f"solver {solver.name!r} does not support events; use 'dopri5', 'rk4', "
            "'rodas3' or 'rodas5p'"
        )
    if isinstance(max_events, bool) or not isinstance(max_events, (int, np.integer)):
        raise InputTypeError(f"max_events must be a positive integer; got {max_events!r}")
    if max_events < 1:
        raise InputError(f"max_events must be >= 1; got {max_events}")
    require = reads and any(e.terminal for e in events)
    evs = EventSet(tuple(events), int(max_events), require)
    evs.check_start(rhs, y0, t0, params, get_backend("numpy").ops())
    return evs


def check_rhs(rhs: Rhs, y0: np.ndarray, t0: float, params: np.ndarray) -> None:
    """Raise unless ``rhs`` at ``(t0, y0, params)`` is finite and shaped like ``y0`` (numpy)."""
    ops = get_backend("numpy").ops()
    f = np.asarray(rhs(np.float64(t0), y0, params, ops))
    if f.shape != y0.shape:
        raise ShapeError(f"rhs must return shape ({y0.shape[0]},) like y0; got shape {f.shape}")
    if not np.all(np.isfinite(f)):
        raise SolverError(f"the right-hand side is not finite at t={t0}, y={y0}: {f}")


def tree_events(events: Any, spec: ParamSpec) -> Any:
    """``events`` with conditions and updates called with structured parameters."""
    if isinstance(events, Event):
        events = [events]
    if not isinstance(events, (list, tuple)):
        return events  # refused, with its message, by make_events
    return [
        dataclasses.replace(
            e, condition=TreeRhs(e.condition, spec),
            update=None if e.update is None else TreeRhs(e.update, spec),
        ) if isinstance(e, Event) and callable(e.condition) else e
        for e in events
    ]  # fmt: skip
