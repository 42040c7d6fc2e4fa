"""The step loop on eager contexts: the method in ``ops``, the controller on the host.

:func:`drive_eager` is :func:`~simdiff.ode.solvers.driver.drive` where the
context is eager and its values concrete: the loop branches in Python and an
autodiff tape holds the accepted steps only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends.numpy import NumpyOps
from simdiff.errors import InputError
from simdiff.ode.events import ZERO, EventRecord
from simdiff.ode.solvers._base import SolveInfo, Step

__all__ = ["drive_eager", "host_ops"]


@functools.cache
def host_ops() -> Any:
    """The controller's context on eager backends: its decisions are taken on plain numbers."""
    return NumpyOps()


def drive_eager(
    step: Step,
    state0: Any,
    y0: Any,
    t0: float,
    save_at: np.ndarray,
    ops: Any,
    *,
    h0: Any,
    controller: Any,
    max_steps: int,
    ev: Any = None,
    p: Any = None,
    measured: Callable[..., tuple[Any, Any, Any, Any]] | None = None,
) -> tuple[Any, SolveInfo] | None:
    """``drive`` where the context is eager and its values concrete (not under vmap).

    Returns ``None``, having computed nothing that is kept, as soon as a value
    has no concrete value (``ops.concrete`` gives ``None``: a batched tensor
    under ``torch.func.vmap``); :func:`~simdiff.ode.solvers.driver.drive` then runs its traced loop.

    The same method, controller and saving, but only the step and the
    controller's measure of it (``controller.measure``: the error norm, one
    scalar) run in ``ops``: the rest of the controller (accept/reject, next
    step, save-time logic) runs on that number in numpy, since it is taken
    on ``stop_gradient`` values anyway, and the loop branches in Python.
    ``measured(t, y, h, state)``, where given, is the step that returns the
    measure too, ``(y_new, err, state_new, measure)`` (a compiled step: one
    graph, :func:`~simdiff.ode.solvers.driver._compiled_step`).  So an
    eager autodiff tape (torch) holds the accepted steps' stage arithmetic and
    nothing else: no ``where`` over the state, the method's state or a save
    buffer per step, no scalar tensors for the controller, and a rejected step
    is not on the path of the output.  The saved rows are stacked once at the
    end.  The arithmetic is that of :func:`~simdiff.ode.solvers.driver.drive`'s traced loop, so the
    numbers (and the derivatives) agree with JAX's to rounding.

    With events the conditions at each accepted step's end are read as
    numbers; only a step in which one changes sign runs
    :meth:`~simdiff.ode.events.EventSet.locate` in ``ops``.  After an event
    the time ``t_d`` is an array of ``ops`` (it carries the event time's
    derivatives), and the step that lands on a save time is ``t_next - t_d``.
    """
    host = host_ops()
    m = int(save_at.shape[0])
    t = float(t0)
    h_c = ops.concrete(ops.stop_gradient(h0))
    if h_c is None or ops.concrete(ops.stop_gradient(y0)) is None:
        return None
    h = float(h_c)
    idx = int(np.count_nonzero(save_at == t0))
    rows: list[Any] = [y0] * idx
    y, state = y0, state0
    n_acc = n_rej = 0
    bad = False
    memory = controller.memory0(host)
    t_d: Any = None  # the time as an array of ops, once an event made it depend on the inputs
    if ev is not None:
        evs, dense, restart, ev_step = ev
        sg = ops.stop_gradient
        g_prev = ops.concrete(sg(evs.values(ops.asarray(t), y0, p, ops)))
        if g_prev is None:
            return None
        g_prev = np.asarray(g_prev, dtype=np.float64)
        if np.any(g_prev == 0.0):
            i = int(np.flatnonzero(g_prev == 0.0)[0])
            raise InputError(
                f"events[{i}].condition is 0 at t0={t0}: an event needs a sign at the start"
            )
        tol = ZERO * (1.0 + np.abs(g_prev))
        last = [-np.inf] * evs.n
        times: list[Any] = []
        which: list[float] = []
        term, code, index = False, 0, -1
        t_ev: Any = ops.asarray(float("nan"))
        y_ev: Any = ops.full((int(y0.shape[0]),), float("nan"))
    with host.errstate():
        while idx < m and not bad and n_acc + n_rej < max_steps:
            t_next = float(save_at[idx])
            remaining = t_next - t
            h_try = float(controller.try_step(h, remaining, host))
            if t_d is None:
                t_arg, h_arg = ops.asarray(t), h_try
            else:
                t_arg = t_d
                h_arg = controller.try_step(ops.asarray(h), t_next - t_d, ops)
            if measured is None:
                y_new, err, state_new = step(t_arg, y, h_arg, state)
                measure = controller.measure(y, y_new, err, ops)
            else:
                y_new, err, state_new, measure = measured(t_arg, y, h_arg, state)
            measure_c = ops.concrete(ops.stop_gradient(measure))
            if measure_c is None:
                return None  # batched from here on (vmap): the traced loop takes over
            accept, h_next, failed, memory = controller.judge(
                h, h_try, remaining, measure_c, memory, host
            )
            h = float(h_next)
            if bool(accept):
                n_acc += 1
                hits = h_try >= remaining
                t_end = t_next if hits else t + h_try
                if ev is not None:
                    g_new = ops.concrete(sg(evs.values(ops.asarray(t_end), sg(y_new), sg(p), ops)))
                    if g_new is None:
                        return None
                    g_new = np.asarray(g_new, dtype=np.float64)
                    trig = np.asarray(evs.triggered(g_prev, g_new, tol, host))
                    if trig.any():
                        roots = evs.bracket(
                            t_arg, h_arg, y, state, y_new, ops.asarray(g_prev.tolist()), p,
                            dense, ops,
                        )  # fmt: skip
                        _, k, te, ye, yp, terminal = evs.locate(
                            t_arg, h_arg, y, state, ops.asarray(trig.tolist()), roots, p, ops,
                            ev_step,
                        )  # fmt: skip
                        kc = round(float(ops.concrete(k)))
                        te_c = float(ops.concrete(sg(te)))
                        t, t_d = te_c, te
                        if te_c - last[kc] < evs.min_gap[kc]:
                            code, y = 3, yp
                            break
                        last[kc] = te_c
                        times.append(te)
                        which.append(float(kc))
                        if len(times) > evs.max_events:
                            code, y = 4, yp
                            break
                        if bool(ops.concrete(terminal)):
                            term, index, t_ev, y_ev, y = True, kc, te, ye, ye
                            break
                        y, state = yp, restart(te, yp)
                        g_after = evs.restarted(
                            te, h_arg, yp, state, p, ops.asarray(tol.tolist()), ev_step, ops
                        )
                        g_prev = np.asarray(ops.concrete(g_after), dtype=np.float64)
                        continue
                    g_prev = g_new
                if t_d is not None:
                    t_d = ops.asarray(t_next) if hits else t_d + h_arg
                t = t_end
                y, state = y_new, state_new
                if hits:
                    rows.append(y_new)
                    idx += 1
            else:
                n_rej += 1
                bad = bool(failed)
    status = 2.0 if bad else (0.0 if idx >= m else 1.0)
    record = None
    if ev is not None:
        if term:
            rows = rows + [y_ev] * (m - len(rows))
            status = 0.0 if not bad else status
        if code:
            status = float(code)
        elif status == 0.0 and evs.require and not term:
            status = 5.0
        poison = 1.0 if status == 0.0 else float("nan")
        n_rec = int(evs.max_events)
        kept = times[:n_rec]
        nan = ops.asarray(float("nan"))
        record = EventRecord(
            t=t_ev * poison, y=y_ev * poison, fired=ops.asarray(1.0 if term else 0.0),
            index=ops.asarray(float(index)),
            times=ops.stack(kept + [nan] * (n_rec - len(kept))) * poison,
            which=ops.asarray(which[:n_rec] + [-1.0] * (n_rec - len(which[:n_rec]))),
            count=ops.asarray(float(len(times))),
        )  # fmt: skip
    if status == 0.0:
        ys = ops.stack(rows) + 0.0 * ops.sum(y)
    else:  # NaN rows, tied to the inputs as in the traced loop
        dim = int(y0.shape[0])
        filled = rows + [ops.zeros((dim,))] * (m - len(rows))
        ys = (ops.stack(filled) + 0.0 * ops.sum(y)) * float("nan")
    info = SolveInfo(
        status=ops.asarray(status), t=ops.asarray(t), y=y,
        n_accepted=ops.asarray(float(n_acc)), n_rejected=ops.asarray(float(n_rej)),
        events=record,
    )  # fmt: skip
    return ys, info
