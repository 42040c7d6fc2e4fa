"""The one step loop shared by every simdiff ODE solver (FixedStep, Dopri5, Rodas3, Rodas5P).

A solve is the composition of four separate pieces, as in diffrax:

- the *method* (``solver.init`` / ``solver.step``): one step ``(t, y, h) ->
  (y_new, err, state)``, with ``err`` the embedded error estimate (``None``
  for methods without one) and ``state`` what the next step reuses when this
  one is accepted (Dopri5's last stage: first-same-as-last);
- the *controller* (:class:`~simdiff.ode.solvers.adaptive.AdaptiveController`,
  :class:`~simdiff.ode.solvers.rk.FixedController`): the step to try and whether
  it is accepted, on ``ops.stop_gradient`` values;
- *saving*: the step is shortened to land on the next ``save_at`` time and the
  state is written into that time's row;
- the *loop*, chosen by the derivative strategy (:mod:`simdiff.ode.adjoint`):
  a while loop on eager contexts and for forward-only work, a scan over
  checkpointed, skippable blocks of steps for reverse mode on JAX.

The loop stops when every save time is reached, when the right-hand side
failed, or after ``max_steps`` attempted steps; :class:`SolveInfo` says which.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends._tree import tree_flatten, tree_map
from simdiff.ode.adjoint import DECISION, Adjoint, make_adjoint
from simdiff.ode.events import ZERO, EventRecord
from simdiff.ode.solvers._base import Rhs, SolveInfo, Solver, Step
from simdiff.ode.solvers.eager import drive_eager

__all__ = ["drive", "integrate_steps"]


def integrate_steps(
    solver: Solver,
    stepper: Callable[[Rhs, Any], Step],
    rhs: Rhs,
    y0: Any,
    t0: float,
    save_at: np.ndarray,
    p: Any,
    ops: Any,
    *,
    state0: Any,
    h0: Any,
    controller: Any,
    max_steps: int,
    adjoint: Adjoint | str | None,
    events: Any = None,
) -> tuple[Any, SolveInfo]:
    """The ``integrate`` of every solver that steps in :func:`drive`: one place for the block.

    ``stepper(f, p)`` is the method's step ``step(t, y, h, state)`` for the
    right-hand side ``f`` and parameters ``p``.  The adjoint
    (:func:`~simdiff.ode.adjoint.make_adjoint` of ``adjoint``) gives the
    right-hand side the stages see (:meth:`~simdiff.ode.adjoint.Adjoint.step_rhs`)
    and the one the location of events sees
    (:meth:`~simdiff.ode.adjoint.Adjoint.event_rhs`); ``(solver, rhs,
    adjoint)`` keys the compiled loop (``solver.loop_compiles``) or the
    compiled step (``solver.step_compiles``); ``events`` (an
    :class:`~simdiff.ode.events.EventSet`) are located with the solver's
    :meth:`~simdiff.ode.solvers.Solver.dense` output and restarted with its
    :meth:`~simdiff.ode.solvers.Solver.restart`.  The other arguments are
    :func:`drive`'s.
    """
    adjoint = make_adjoint(adjoint)
    stage_rhs = adjoint.step_rhs(rhs, ops)
    event_rhs = adjoint.event_rhs(rhs, ops)
    key = (solver, rhs, adjoint)
    return drive(
        lambda q: stepper(stage_rhs, q), p, state0, y0, t0, save_at, ops, h0=h0,
        controller=controller, max_steps=max_steps, adjoint=adjoint,
        key=key if solver.loop_compiles else None,
        step_key=key if solver.step_compiles else None,
        events=None if events is None else (
            events,
            lambda q: solver.dense(rhs, q, ops),
            lambda q: solver.restart(event_rhs, q, ops),
            lambda q: stepper(event_rhs, q),
        ),
    )  # fmt: skip


def drive(
    stepper: Callable[[Any], Step],
    p: Any,
    state0: Any,
    y0: Any,
    t0: float,
    save_at: np.ndarray,
    ops: Any,
    *,
    h0: Any,
    controller: Any,
    max_steps: int,
    adjoint: Any,
    key: Any = None,
    step_key: Any = None,
    events: Any = None,
) -> tuple[Any, SolveInfo]:
    """Integrate from ``t0`` through every ``save_at`` time.

    Parameters
    ----------
    stepper : callable
        ``stepper(p)`` gives the method's step ``step(t, y, h, state) ->
        (y_new, err, state_new)`` for parameters ``p``.  ``h`` may be 0 (an
        evaluation that is discarded) and must then give finite values.
    p : pytree
        The parameters the step closes over.
    state0 : pytree
        The method's state before the first step (``()`` if none).
    y0 : array, shape (dim,)
    t0 : float
    save_at : numpy array, shape (m,)
        Increasing times ``>= t0``; times equal to ``t0`` save ``y0``.
    h0 : array, shape ()
        First step proposal (for fixed-step controllers the step bound).
    controller : AdaptiveController or FixedController
        ``controller.memory0(ops)`` (what the controller remembers between
        steps, e.g. the PI controller's previous error; ``()`` if nothing),
        ``controller.try_step(h, remaining, ops)``,
        ``controller.decide(h, h_try, remaining, y, y_new, err, memory, ops) ->
        (accept, h_next, failed, memory)``, and the two halves of ``decide``:
        ``controller.measure(y, y_new, err, ops)``, the scalar it reads of the
        step's arrays (an error norm), and ``controller.judge(h, h_try,
        remaining, measure, memory, ops)``, the decision from it.
    max_steps : int
        Attempted steps (accepted and rejected) before giving up.
    adjoint : Adjoint
        Runs the loop (:mod:`simdiff.ode.adjoint`).
    key : hashable, optional
        What the step is a function of besides ``p`` (the solver and the
        right-hand side).  Where given and the context compiles parts
        (``ops.compile_part``), the loop is one compiled part
        (:func:`_compiled_loop`).
    step_key : hashable, optional
        The same, for a solver whose loop cannot be one graph: where given
        (and ``key`` is not) and the context compiles parts, each step is
        one compiled part and the loop runs on the host
        (:func:`_compiled_step`).
    events : tuple, optional
        ``(event_set, dense, restart, event_stepper)``: an
        :class:`~simdiff.ode.events.EventSet`, ``dense(p)`` the solver's dense
        output (:meth:`Solver.dense`), ``restart(p)`` its ``init(t, y)`` after
        an event and ``event_stepper(p)`` the method's step as the location of
        an event takes it (the step of ``stepper``, with the adjoint's
        :meth:`~simdiff.ode.adjoint.Adjoint.event_rhs`).  Events are located
        in accepted steps (:meth:`EventSet.locate`); the loop's time is then
        differentiable (it carries the event times' derivatives), and
        ``info.events`` is the :class:`~simdiff.ode.events.EventRecord`.  No
        compiled part runs with events.

    Returns
    -------
    ys : array, shape (m, dim)
        NaN rows where the solve failed (status != 0; see :class:`SolveInfo`).
    info : SolveInfo
    """
    adjoint.check(int(max_steps))
    # the dense output brackets event times on values only (EventSet.locate)
    ev = None if events is None else (
        events[0], events[1](tree_map(ops.stop_gradient, p)), events[2](p), events[3](p),
    )  # fmt: skip
    if ops.compile_part is not None and key is not None and ev is None:
        ys, info = _compiled_loop(
            stepper, p, state0, y0, t0, save_at, ops, h0=h0, controller=controller,
            max_steps=max_steps, key=key,
        )  # fmt: skip
        return adjoint.outputs(ys, ops), info
    measured = None
    if ops.compile_part is not None and step_key is not None and ev is None:
        step, measured = _compiled_step(
            stepper, p, ops, step_key, controller, remat=adjoint.remat_steps
        )
        # the first step's state depends on p like every later one's (0 * p adds no
        # derivative): one graph for every step, not a second for an untracked y0
        y0 = y0 + 0.0 * _sum_leaves(p, ops)
    else:
        step = stepper(p)
    if ops.eager:
        done = drive_eager(
            step, state0, y0, t0, save_at, ops, h0=h0, controller=controller,
            max_steps=max_steps, ev=ev, p=p, measured=measured,
        )  # fmt: skip
        if done is not None:
            ys, info = done
            if info.events is None:
                return adjoint.outputs(ys, ops), info
            ys, record = adjoint.outputs((ys, info.events), ops)
            return ys, dataclasses.replace(info, events=record)
    # a loop whose steps locate events (not only terminal ones, located after it)
    in_loop = ev is not None and not all(ev[0].terminal)
    return _traced_loop(
        step, state0, y0, float(t0), tuple(float(s) for s in save_at), ops, h0=h0,
        controller=controller, max_steps=max_steps,
        loop=functools.partial(adjoint.loop, events=in_loop), ev=ev, p=p,
        event_branch=adjoint.event_branch,
    )  # fmt: skip


def _traced_loop(
    step: Step,
    state0: Any,
    y0: Any,
    t0: float,
    save_at: tuple[float, ...],
    ops: Any,
    *,
    h0: Any,
    controller: Any,
    max_steps: int,
    loop: Callable[..., Any],
    ev: Any = None,
    p: Any = None,
    event_branch: Callable[[Any, Any], Any] | None = None,
) -> tuple[Any, SolveInfo]:
    """:func:`drive`'s loop on array values: masked steps, the controller in ``ops``.

    ``loop(cond, body, carry, max_steps, ops)`` runs it (the adjoint's loop,
    or ``ops.while_loop``); ``event_branch(fire, ops)`` is how the
    differentiable part of the branch that locates an event in a step runs
    (its Newton corrections; the adjoint's
    :meth:`~simdiff.ode.adjoint.Adjoint.event_branch`; default: as it is).
    The save times come as Python floats and the host numbers (counts) are
    computed from them, never read from arrays, so a compiler tracing this
    function sees them as constants (Dynamo turns a numpy array into a graph
    input, and ``float()`` of it into a data-dependent value it cannot
    compile).
    """
    m = len(save_at)
    dim = int(y0.shape[0])
    times = ops.asarray(list(save_at))
    slots = ops.arange(float(m))
    at_start = ops.asarray([s == t0 for s in save_at])
    saved0 = ops.where(at_start[:, None], y0[None, :], ops.zeros((m, dim)))
    zero = ops.asarray(0.0)
    carry0: tuple[Any, ...] = (
        ops.asarray(float(t0)),  # t
        y0,
        ops.stop_gradient(h0) + zero,  # h proposed for the next step
        ops.asarray(float(sum(s == t0 for s in save_at))),  # index of the next save time
        saved0,
        zero,  # accepted steps
        zero,  # rejected steps
        zero,  # 1.0 once the step failed (non-finite right-hand side)
        state0,
        controller.memory0(ops),
    )
    limit = float(max_steps)
    # Terminal events only: the loop stops *before* the step in which one fires,
    # and that step's event is located once, after the loop (_deferred_event).
    # The loop's body then holds no root finding, which in reverse mode on JAX
    # is linearised, stored and transposed at every step of every block.
    deferred = ev is not None and all(ev[0].terminal)
    if ev is not None:
        evs, dense, restart, ev_step = ev
        sg = ops.stop_gradient
        g0 = sg(evs.values(ops.asarray(float(t0)), y0, p, ops))
        tol = ZERO * (1.0 + ops.abs(g0))
        n_ev, n_rec = evs.n, int(evs.max_events)
        gaps = ops.asarray(list(evs.min_gap))
        if deferred:
            carry0 = (
                *carry0,
                (
                    g0,  # conditions at the start of the next step
                    zero,  # the step (stop-gradient) in which a terminal event fired
                    ops.full((n_ev,), 0.0) > 1.0,  # the events that fired in it
                ),
            )
        else:
            carry0 = (
                *carry0,
                (
                    g0,  # conditions at the start of the next step
                    ops.full((n_ev,), -float("inf")),  # last firing time of each event
                    zero,  # firings
                    ops.full((n_rec,), float("nan")),  # their times
                    ops.full((n_rec,), -1.0),  # and events
                    zero,  # 1.0 once a terminal event fired
                    ops.asarray(float("nan")),  # its time
                    ops.full((dim,), float("nan")),  # its state
                    zero,  # event failure: 3 chattering, 4 more than max_events
                    ops.asarray(-1.0),  # the terminal event's index
                ),
            )

    def running(c: tuple) -> Any:
        go = (c[3] < m) & (c[7] < 0.5) & (c[5] + c[6] < limit)
        if deferred:
            go = go & (ops.sum(ops.where(c[10][2], 1.0, 0.0)) < 0.5)
        elif ev is not None:
            go = go & (c[10][5] < 0.5) & (c[10][8] < 0.5)
        return go

    def corrected(t: Any, h_try: Any, y: Any, state: Any, trig: Any, roots: Any) -> tuple:
        _, k, te, ye, yp, terminal = evs.locate(t, h_try, y, state, trig, roots, p, ops, ev_step)
        return k, te, ye, yp, terminal, restart(te, yp)

    # the strategy's form of the differentiable part only: the root search on values
    # before it and the restarted conditions after it have no derivative, and a
    # rematerialised branch would recompute them in the reverse pass for nothing
    located_d = corrected if event_branch is None else event_branch(corrected, ops)

    def fire(t: Any, h_try: Any, y: Any, state: Any, y_new: Any, trig: Any, g_prev: Any,
             state_new: Any, g_new: Any) -> tuple:  # fmt: skip
        roots = evs.bracket(t, h_try, y, state, y_new, g_prev, p, dense, ops)
        k, te, ye, yp, terminal, state_after = located_d(t, h_try, y, state, trig, roots)
        g_after = evs.restarted(te, h_try, yp, state_after, p, tol, ev_step, ops)
        return k, te, ye, yp, terminal, state_after, g_after

    def quiet(t: Any, h_try: Any, y: Any, state: Any, y_new: Any, trig: Any, g_prev: Any,
              state_new: Any, g_new: Any) -> tuple:  # fmt: skip
        false = ops.asarray(0.0) > 1.0
        return ops.asarray(-1.0), t + h_try, y_new, y_new, false, state_new, g_new

    def attempted(t: Any, y: Any, h_try: Any, state: Any, h: Any, remaining: Any,
                  memory: Any) -> tuple:  # fmt: skip
        y_new, err, state_new = step(t, y, h_try, state)
        return (y_new, state_new), controller.decide(
            h, h_try, remaining, y, y_new, err, memory, ops
        )

    # A rejected step is discarded by the ``where``s below, and so are its derivatives in
    # forward mode; in reverse mode its outputs' zero cotangents still run through the
    # step's backward pass, where ``0 * inf`` is NaN if the step overflowed (a first step
    # far too long for a stiff system).  ``ops.gated`` selects the step's input cotangents
    # by the accept flag after that pass: a rejected step contributes exact zeros.
    attempt = ops.gated(attempted, lambda out: out[1][0])

    def body(c: tuple) -> tuple:
        t, y, h, idx, saved, n_acc, n_rej, bad, state, memory = c[:10]
        # Inside the loop ``done`` is false; it is true only where a vmapped loop
        # evaluates a finished lane, and then the step is h = 0 and nothing changes.
        done = ~running(c)
        slot = slots == idx
        t_next = ops.sum(ops.where(slot, times, 0.0))
        remaining = t_next - t
        h_try = ops.where(done, 0.0, controller.try_step(h, remaining, ops))
        (y_new, state_new), (accept, h_next, failed, memory_new) = attempt(
            t, y, h_try, state, h, remaining, memory
        )
        accept = accept & ~done
        hits = accept & (h_try >= remaining)
        t_new = ops.where(accept, ops.where(hits, t_next, t + h_try), t)
        y_out = ops.where(accept, y_new, y)
        extra: tuple = ()
        if ev is not None:
            g_prev = c[10][0]
            g_new = sg(evs.values(sg(t_new), sg(y_new), sg(p), ops))
            # tagged DECISION: stored per step by a checkpointed loop (blocked_loop), so that
            # its recomputation locates the events the forward located
            trig = ops.checkpoint_name(evs.triggered(g_prev, g_new, tol, ops) & accept, DECISION)
            any_trig = ops.sum(ops.where(trig, 1.0, 0.0)) > 0.5
        if deferred:
            # the step that fires is not taken: the loop stops at its start
            accept = accept & ~any_trig
            hits = hits & ~any_trig
            t_new = ops.where(any_trig, t, t_new)
            y_out = ops.where(any_trig, y, y_out)
            extra = ((
                ops.where(accept, g_new, g_prev), ops.where(any_trig, h_try, c[10][1]),
                ops.where(any_trig, trig, c[10][2]),
            ),)  # fmt: skip
        elif ev is not None:
            last, count, times_ev, which, term, t_ev, y_ev, code, index = c[10][1:]
            k, te, ye, yp, terminal, state_new, g_next = ops.cond(
                any_trig, fire, quiet, t, h_try, y, state, y_new, trig, g_prev, state_new, g_new
            )
            fired = any_trig & (k > -0.5)
            t_new = ops.where(fired, te, t_new)
            y_out = ops.where(fired, yp, y_out)
            hits = hits & ~fired
            onehot = ops.arange(float(n_ev)) == k
            te_c = sg(te)
            chatter = fired & (ops.sum(ops.where(onehot & (te_c - last < gaps), 1.0, 0.0)) > 0.5)
            slot_ev = (ops.arange(float(n_rec)) == count) & fired
            is_term = fired & terminal
            extra = ((
                ops.where(accept, g_next, g_prev),
                ops.where(onehot & fired, te_c, last),
                count + ops.where(fired, 1.0, 0.0),
                ops.where(slot_ev, te, times_ev),
                ops.where(slot_ev, k, which),
                ops.where(is_term, 1.0, term),
                ops.where(is_term, te, t_ev),
                ops.where(is_term, ye, y_ev),
                ops.maximum(code, ops.where(chatter, 3.0, ops.where(
                    fired & (count >= float(n_rec)), 4.0, 0.0))),
                ops.where(is_term, k, index),
            ),)  # fmt: skip
        saved = ops.where((slot & hits)[:, None], y_new[None, :], saved)
        state = tree_map(lambda new, old: ops.where(accept, new, old), state_new, state)
        taken = accept if not deferred else accept | any_trig  # the firing step counts
        return (  # noqa: RUF005
            t_new if ev is not None and not deferred else ops.stop_gradient(t_new),
            y_out,
            ops.stop_gradient(ops.where(done, h, h_next)),
            idx + ops.where(hits, 1.0, 0.0),
            saved,
            n_acc + ops.where(taken, 1.0, 0.0),
            n_rej + ops.where(~taken & ~done, 1.0, 0.0),
            ops.maximum(bad, ops.where(failed & ~done, 1.0, 0.0)),
            state,
            tree_map(
                lambda new, old: ops.where(done, old, ops.stop_gradient(new)), memory_new, memory
            ),
        ) + extra

    out = loop(running, body, carry0, int(max_steps), ops)
    t, y, _, idx, saved, n_acc, n_rej, bad, _, _ = out[:10]
    record = None
    if ev is None:
        status = ops.where(bad > 0.5, 2.0, ops.where(idx >= m, 0.0, 1.0))
    else:
        if deferred:
            t, y, fields = _deferred_event(out, ev_step, evs, dense, p, ops)
        else:
            fields = out[10][1:]
        _, count, times_ev, which, term, t_ev, y_ev, code, index = fields
        ended = term > 0.5
        saved = ops.where(ended & (slots >= idx)[:, None], y_ev[None, :], saved)
        status = ops.where(bad > 0.5, 2.0, ops.where(code > 0.5, code, ops.where(
            (idx >= m) | ended, 0.0, 1.0)))  # fmt: skip
        if evs.require:
            status = ops.where((status == 0.0) & ~ended, 5.0, status)
        poison = ops.where(status == 0.0, 1.0, float("nan"))
        record = EventRecord(t=t_ev * poison, y=y_ev * poison, fired=term, index=index,
                             times=times_ev * poison, which=which, count=count)  # fmt: skip
    ok = status == 0.0
    # NaN-poisoning: under jit a failure cannot raise, so the output (and, through
    # the factor, every derivative of it) says it; on success the factor is exactly 1.
    # (``0 * sum(y)`` ties the poison to the inputs even when no row was saved, and
    # ``0 * sum(p)`` to the parameters even when no step was accepted: the steps of a
    # solve that failed are all rejected, and a rejected step passes no derivative on.)
    tie = 0.0 * ops.sum(y) + (0.0 if p is None else 0.0 * _sum_leaves(p, ops))
    ys = (saved + tie) * ops.where(ok, 1.0, float("nan"))
    return ys, SolveInfo(status=status, t=t, y=y, n_accepted=n_acc, n_rejected=n_rej, events=record)


def _deferred_event(out: tuple, step: Step, evs: Any, dense: Any, p: Any, ops: Any) -> tuple:
    """The terminal event of a loop that stopped at the start of the step in which it fired.

    ``out`` is the final carry of :func:`_traced_loop` with terminal events
    only: ``(t, y, state)`` the start of that step and ``out[10]`` the
    conditions there, the step's length and the events that fired in it.  The
    step is taken again and the event located in it
    (:meth:`~simdiff.ode.events.EventSet.locate`, the arithmetic of the
    in-loop and eager paths); where none fired the step is 0 and the values
    are computed and discarded.  Returns ``(t, y, fields)``: the time and
    state at the event (where one fired) and the event fields of the in-loop
    carry after its conditions (last firing times, count, times, events,
    terminal flag, time, state, failure code, index).
    """
    t, y, state = out[0], out[1], out[8]
    g_prev, h_ev, trig = out[10]
    sg = ops.stop_gradient
    y_new = sg(step(sg(t), sg(y), h_ev, tree_map(sg, state))[0])  # for the dense output only
    roots = evs.bracket(t, h_ev, y, state, y_new, g_prev, p, dense, ops)
    _, k, te, ye, _, _ = evs.locate(t, h_ev, y, state, trig, roots, p, ops, step)
    fired = ops.sum(ops.where(trig, 1.0, 0.0)) > 0.5
    n_rec = int(evs.max_events)
    first = (ops.arange(float(n_rec)) == 0.0) & fired
    one = ops.where(fired, 1.0, 0.0)
    nan = ops.asarray(float("nan"))
    fields = (
        ops.where(trig, sg(te), -float("inf")), one, ops.where(first, te, nan),
        ops.where(first, k, -1.0), one, ops.where(fired, te, nan),
        ops.where(fired, ye, nan), ops.asarray(0.0), ops.where(fired, k, -1.0),
    )  # fmt: skip
    return ops.where(fired, te, t), ops.where(fired, ye, y), fields


def _compiled_loop(
    stepper: Callable[[Any], Step],
    p: Any,
    state0: Any,
    y0: Any,
    t0: float,
    save_at: np.ndarray,
    ops: Any,
    *,
    h0: Any,
    controller: Any,
    max_steps: int,
    key: Any,
) -> tuple[Any, SolveInfo]:
    """:func:`drive`'s traced loop as one compiled part (``ops.compile_part``).

    In a context that compiles parts (``Derivatives(..., compile=True |
    "auto")`` on torch, for the derivatives whose transforms run at the top
    level: value, gradient, VJP) the whole step loop -- method, controller
    on ``stop_gradient`` values, saving, masked as in JAX's loop, so the same
    arithmetic -- is one graph, forward and backward, built once per
    ``key`` (solver and right-hand side), controller, save times and step
    bound.  Inside it ``ops.while_loop`` is the backend's graph loop (torch:
    the ``while_loop`` higher-order op).  ``y0``, the method's first state,
    the first step and ``p`` are explicit inputs of the part (a closed-over
    tensor would be a guard checked on every call); the save times are
    constants of the graph.  Where the part runs eagerly (inside a
    transform, under vmap) the same function runs as a Python loop.
    """
    t0 = float(t0)
    times = tuple(float(s) for s in save_at)

    def make() -> Callable[..., Any]:
        def pure(y: Any, state: Any, h: Any, q: Any) -> tuple[Any, tuple[Any, ...]]:
            ys, info = _traced_loop(
                stepper(q), state, y, t0, times, ops, h0=h, controller=controller,
                max_steps=max_steps, loop=_while_loop,
            )  # fmt: skip
            return ys, (info.status, info.t, info.y, info.n_accepted, info.n_rejected)

        return pure

    # a callable differentiates with respect to the same inputs on every call (one
    # graph), and an untracked y0 enters the loop tied to the anchor like every leaf
    part = ops.compile_part(("ode loop", key, controller, t0, times, int(max_steps)), make)
    ys, fields = part(y0, state0, ops.stop_gradient(h0), p)
    return ys, SolveInfo(*fields)


def _compiled_step(
    stepper: Callable[[Any], Step], p: Any, ops: Any, key: Any, controller: Any,
    remat: bool = False,
) -> tuple[Step, Callable[..., tuple[Any, Any, Any, Any]]]:  # fmt: skip
    """The method's step as one compiled part (``ops.compile_part``); the loop stays on the host.

    For solvers whose loop cannot be one graph (``solver.step_compiles``: the
    Rosenbrock methods, whose ``jacfwd`` and linear solves fail in the
    backward of torch 2.13's ``while_loop`` op), under ``Derivatives(...,
    compile=True | "auto")`` on torch, for value, gradient and VJP: the
    step's Jacobian, factorisation, stages and error estimate, and the
    controller's measure of it (``controller.measure``: the error norm), are
    one graph, forward and backward, built once per ``key`` (solver and
    right-hand side) and controller; :func:`~simdiff.ode.solvers.eager.drive_eager` runs the rest of
    the controller on the host between calls, on the one number it reads per
    step, so an autograd tape holds one node per accepted step.  ``t``,
    ``h`` (as 0-d arrays, so a new step size is not a new graph), ``y``, the
    method's state and ``p`` are the part's inputs.  Where the part runs
    eagerly (inside a transform, under vmap) this is the plain step.

    Returns ``(step, measured)``: the step, and the step that also returns
    the measure, ``(y_new, err, state_new, measure)``.
    """

    def make() -> Callable[..., Any]:
        def pure(t: Any, y: Any, h: Any, state: Any, q: Any) -> tuple[Any, Any, Any, Any]:
            y_new, err, state_new = stepper(q)(t, y, h, state)
            return y_new, err, state_new, controller.measure(y, y_new, err, ops)

        return pure

    part = ops.compile_part(("ode step", key, controller), make, remat=remat)

    def measured(t: Any, y: Any, h: Any, state: Any) -> tuple[Any, Any, Any, Any]:
        return part(ops.asarray(t), y, ops.asarray(h), state, p)  # type: ignore[no-any-return]

    def step(t: Any, y: Any, h: Any, state: Any) -> tuple[Any, Any, Any]:
        return measured(t, y, h, state)[:3]

    return step, measured


def _sum_leaves(p: Any, ops: Any) -> Any:
    """The sum of every entry of every array leaf of ``p`` (0.0 if it has none)."""
    total: Any = 0.0
    for leaf in tree_flatten(p)[0]:
        if hasattr(leaf, "shape"):
            total = total + ops.sum(leaf)
    return total


def _while_loop(cond: Any, body: Any, carry: Any, max_steps: int, ops: Any) -> Any:
    return ops.while_loop(cond, body, carry, max_steps)
