"""How the solver's step loop is differentiated: the ``adjoint=`` of :class:`ODEProblem`.

All three strategies differentiate the *discrete* solver (the same numbers on
every backend); they differ in the loop the driver runs, hence in which
derivative modes work and what they cost.  With ``n`` the attempted steps,
``N = max_steps`` and ``K`` the block length:

======================  ==============  ==================  =========================
adjoint                 modes           time                reverse-mode memory (JAX)
======================  ==============  ==================  =========================
``CheckpointAdjoint``   all (default)   ~ n (+1 recompute)  ``N/K`` carries + ``K`` steps
                                                            + ``N`` step decisions
``DirectAdjoint``       all             ~ N                 every step of ``N``
``ForwardAdjoint``      forward only    ~ n                 (no reverse mode)
======================  ==============  ==================  =========================

On the eager contexts (numpy, torch, taylor over them) every strategy runs
the same Python loop, which stops at the last step taken; the strategies
matter on JAX, where loops are compiled with static bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.backends._tree import tree_map
from simdiff.errors import InputError, UnsupportedError

__all__ = [
    "DECISION",
    "Adjoint",
    "CheckpointAdjoint",
    "DirectAdjoint",
    "ForwardAdjoint",
    "blocked_loop",
    "make_adjoint",
]

Cond = Callable[[Any], Any]
Body = Callable[[Any], Any]
#: ``rhs(t, y, p, ops) -> dy/dt``, as in :mod:`simdiff.ode.solvers._base`.
Rhs = Callable[[Any, Any, Any, Any], Any]


def _positive_int(value: Any, what: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{what} must be a positive integer or None; got {value!r}")


#: Steps per guarded group of :class:`CheckpointAdjoint` (``group=None``): in a loop of
#: plain steps, and in a loop whose steps locate events (:meth:`Adjoint.loop`, ``events``).
GROUP, EVENT_GROUP = 16, 4

#: The tag (``ops.checkpoint_name(x, DECISION)``) of the values on which a loop's step
#: sequence turns (the step tried, whether it is accepted): :func:`blocked_loop` stores
#: them per step, so that the recomputation of a block replays the forward's steps.
DECISION = "simdiff.ode.decision"

#: Above this many blocks, :func:`blocked_loop` guards runs of about ``sqrt(blocks)``
#: blocks with one more ``cond`` (a skipped block is not free in reverse mode).
SKIP_TREE_MIN = 8


def blocked_loop(
    cond: Cond,
    body: Body,
    carry: Any,
    max_steps: int,
    block: int,
    ops: Any,
    remat: bool,
    group: int = 1,
) -> Any:
    """A bounded while loop as a scan over blocks of ``block`` guarded steps.

    ``ceil(max_steps / block)`` outer iterations each run ``ops.cond(cond,
    block_fn, identity)``: once ``cond`` fails the remaining blocks are skipped
    (one predicate each), and inside the last block the remaining steps are
    skipped group by group, so the cost follows the steps taken.  With
    ``remat=True`` each block is wrapped in ``ops.checkpoint``: reverse mode
    stores the carry at each block boundary and recomputes one block at a time.
    ``cond`` must include the iteration bound (the driver counts steps).

    The values ``body`` tags ``ops.checkpoint_name(x, DECISION)`` (the
    adaptive controller's step tried and accept flag, the events triggered in
    a step) are stored per step in reverse mode (``ops.checkpoint_saving``),
    not recomputed.  The recomputation of a block is compiled apart from the
    forward and may round an error estimate differently; deciding again from
    it would take other steps than the forward, end the block at another
    time than the boundary the next block starts from, and differentiate
    neither step sequence (HIRES at rtol 1e-11: 4e-5 relative off forward
    mode).  Cost: one float and one flag per step of ``max_steps`` (about
    12 bytes per step in XLA's temporaries), none for fixed steps, whose
    controller tags nothing.

    Inside a block the steps run in groups of ``group`` under one ``ops.cond``
    each; within a group every step runs and its result is kept where ``cond``
    held (``ops.where``), so a group wastes at most ``group - 1`` step
    evaluations at the end of the loop.  ``group=1`` is one ``cond`` per step.
    Why groups: a ``cond`` per step is costly in reverse mode on JAX (each is
    linearised and transposed on its own): ``ceil(steps / group)`` of them
    instead of ``steps``, for at most ``group - 1`` wasted step evaluations
    (see docs/performance.md).

    Examples
    --------
    >>> import simdiff
    >>> from simdiff.ode.adjoint import blocked_loop
    >>> ops = simdiff.get_ops("jax")
    >>> float(blocked_loop(lambda c: c < 100.0, lambda c: 2.0 * c, ops.asarray(1.0),
    ...                    64, 8, ops, remat=True))
    128.0
    """

    group = max(1, min(int(group), int(block)))

    def masked(c: Any, _: Any) -> tuple[Any, None]:
        pred = cond(c)
        return tree_map(lambda new, old: ops.where(pred, new, old), body(c), c), None

    def run_group(c: Any) -> Any:
        return body(c) if group == 1 else ops.scan(masked, c, None, length=group)[0]

    def guarded(c: Any, _: Any) -> tuple[Any, None]:
        return ops.cond(cond(c), run_group, _identity, c), None

    def run_block(c: Any) -> Any:
        return ops.scan(guarded, c, None, length=-(-int(block) // group))[0]

    if remat:
        run_block = ops.checkpoint_saving(run_block, (DECISION,))

    def outer(c: Any, _: Any) -> tuple[Any, None]:
        return ops.cond(cond(c), run_block, _identity, c), None

    n_blocks = -(-int(max_steps) // int(block))
    if n_blocks <= SKIP_TREE_MIN:
        return ops.scan(outer, carry, None, length=n_blocks)[0]
    # Blocks in runs of ``per`` under one more guard: a finished solve skips the
    # remaining runs, not every remaining block one by one.
    per = math.isqrt(n_blocks - 1) + 1

    def run_blocks(c: Any) -> Any:
        return ops.scan(outer, c, None, length=per)[0]

    def top(c: Any, _: Any) -> tuple[Any, None]:
        return ops.cond(cond(c), run_blocks, _identity, c), None

    return ops.scan(top, carry, None, length=-(-n_blocks // per))[0]


def _identity(c: Any) -> Any:
    return c


class Adjoint:
    """Base class: a derivative strategy runs the driver's bounded step loop.

    ``loop(cond, body, carry, max_steps, ops)`` returns the final carry of
    ``carry = body(carry)`` while ``cond(carry)``, at most ``max_steps``
    times.  ``body`` must leave a finished carry unchanged (it is evaluated
    and discarded under ``vmap``).
    """

    name: str = "adjoint"
    #: Whether reverse mode recomputes a step from its inputs where the step is one
    #: compiled part with the loop on the host (torch ``compile=True``, Rosenbrock).
    remat_steps: bool = False

    def loop(
        self, cond: Cond, body: Body, carry: Any, max_steps: int, ops: Any, *, events: bool = False
    ) -> Any:
        """Run the loop; ``events``: its steps locate events (:mod:`simdiff.ode.events`)."""
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")

    def event_branch(self, fire: Callable[..., Any], ops: Any) -> Callable[..., Any]:
        """The function that locates an event inside a step, as this strategy runs it.

        Unchanged here; :class:`CheckpointAdjoint` rematerialises it on traced
        contexts.  The driver calls it once per solve, for the differentiable
        part of the branch of the loop's body that runs where an event fired
        (the Newton corrections, the state at the event, the restart); the
        root search on values (:meth:`~simdiff.ode.events.EventSet.bracket`)
        runs outside it.
        """
        return fire

    def event_rhs(self, rhs: Rhs, ops: Any) -> Rhs:
        """The right-hand side that the location of an event evaluates.

        The shortened steps of the Newton corrections, the state at the event
        and the method's restart there (:mod:`simdiff.ode.events`).  Here
        :meth:`step_rhs`'s.
        """
        return self.step_rhs(rhs, ops)

    def check(self, max_steps: int) -> None:
        """Refuse, before any step runs, a configuration that cannot cover ``max_steps``.

        The driver calls it on every path (the eager loop of torch and numpy
        too, which does not run :meth:`loop`).
        """

    def outputs(self, tree: Any, ops: Any) -> Any:
        """The loop's results as this strategy lets them be differentiated (unchanged here).

        The driver applies it to what the eager loop returns, as :meth:`loop`
        does on the traced path.
        """
        return tree

    def step_rhs(self, rhs: Rhs, ops: Any) -> Rhs:
        """The right-hand side a solver's step evaluates inside this strategy's loop.

        Here ``rhs`` itself on eager contexts, and on traced ones ``rhs``
        through ``ops.traced_once``: the stages of a step share one trace of it
        and of its derivatives (:class:`CheckpointAdjoint` also rematerialises
        it).  The solvers call it once per solve (``integrate``), for the
        stages inside the loop only.
        """
        return _traced_once(rhs, ops)


def _traced_once(rhs: Rhs, ops: Any) -> Rhs:
    """``rhs`` through ``ops.traced_once`` where it is called with ``ops`` itself (the
    solver's stages); a call with another context (a Taylor context over ``ops``) runs it
    as it is."""
    if ops.eager:
        return rhs
    once = ops.traced_once(lambda t, y, p: rhs(t, y, p, ops))

    def stage_rhs(t: Any, y: Any, p: Any, ops_: Any) -> Any:
        return once(t, y, p) if ops_ is ops else rhs(t, y, p, ops_)

    return stage_rhs


@dataclass(frozen=True)
class CheckpointAdjoint(Adjoint):
    """Discrete reverse mode with checkpointed blocks of steps (the default).

    The steps run in blocks of ``block`` (default ``ceil(sqrt(max_steps))``);
    reverse mode stores the loop state at each block boundary and recomputes
    one block's steps when it reaches it.  A finished solve skips the
    remaining blocks, so every mode costs about the steps taken: a gradient
    is one forward solve plus one recomputation plus the reverse sweep
    (about 3-4 solves), forward-over-reverse (Hessian, HVP) the same times
    the tangent width.

    Parameters
    ----------
    block : int, optional
        Steps per block.  Memory ``~ (N/block) * |state| + block * |step|``
        with ``N = max_steps``; the default ``block = ceil(sqrt(N))`` balances
        the two (``O(sqrt N)``).  An adaptive solver adds its decisions, the
        step tried and the accept flag of each of the ``N`` steps, which the
        recomputation replays (:func:`blocked_loop`).
    checkpoints : int, optional
        Number of stored block boundaries (the checkpoint budget); with
        ``block`` unset the block is ``ceil(N / checkpoints)``.  With both
        set, ``block * checkpoints`` must reach ``max_steps``, else a
        ``ValueError`` names both numbers.
    group : int, optional
        Steps per guarded group inside a block (at most ``block``): a
        finished solve skips the rest of its block group by group, and a
        group runs (and discards) at most ``group - 1`` steps past the end.
        One ``cond`` per group instead of per step makes the reverse pass
        about 30% cheaper on JAX (:func:`blocked_loop`).  Default
        (``None``): 16 (:data:`GROUP`), or 4 (:data:`EVENT_GROUP`) where the
        steps locate events (a non-terminal :class:`~simdiff.ode.Event`),
        whose steps are heavier, so that fewer run past the end (the
        bouncing ball of docs/ode.md: about 25% off the gradient).
    remat_events : bool, optional
        Rematerialise the location of an event inside the loop in reverse
        mode (default True; traced contexts only).  A step's reverse pass then
        stores the inputs of the differentiable Newton corrections (and the
        root found on values, :meth:`~simdiff.ode.events.EventSet.bracket`,
        which is not recomputed), not their intermediates (shortened steps),
        and recomputes them only at the steps where an event fired: every
        other step stops carrying (and zero-filling) that branch's residuals.
        Inside it the right-hand side is not checkpointed again
        (:meth:`event_rhs`).
    remat_rhs : bool, optional
        Rematerialise each right-hand-side evaluation in reverse mode (default
        True; traced contexts, i.e. JAX, only).  The recomputed block then
        stores each stage's input ``(t_i, y_i)`` instead of every intermediate
        of the right-hand side, and the reverse sweep evaluates the stage again
        next to its transpose.  On small systems, where a step's cost is the
        number of kernels it launches, the recomputation launches the stage
        evaluations only, not every intermediate's store and load (see
        docs/performance.md); on a right-hand side whose arithmetic
        dominates (large fields) it costs one more evaluation per stage in
        reverse: ``remat_rhs=False`` then stores the intermediates instead.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.ode import CheckpointAdjoint, ODEProblem
    >>> p = ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
    ...                observable=lambda ys, ops: ys[-1, 0], rtol=1e-10, atol=1e-12,
    ...                adjoint=CheckpointAdjoint(block=16))
    >>> bool(abs(simdiff.grad(p)[0] + np.exp(-2.0)) < 1e-8)
    True
    """

    block: int | None = None
    checkpoints: int | None = None
    group: int | None = None
    remat_rhs: bool = True
    remat_events: bool = True
    name = "checkpoint"
    remat_steps = True

    def __post_init__(self) -> None:
        _positive_int(self.block, "block")
        _positive_int(self.checkpoints, "checkpoints")
        _positive_int(self.group, "group")
        if not isinstance(self.remat_rhs, bool):
            raise InputError(f"remat_rhs must be True or False; got {self.remat_rhs!r}")
        if not isinstance(self.remat_events, bool):
            raise InputError(f"remat_events must be True or False; got {self.remat_events!r}")

    def block_size(self, max_steps: int) -> int:
        """Steps per block for a loop bounded by ``max_steps``."""
        n = int(max_steps)
        if self.block is not None and self.checkpoints is not None:
            if self.block * self.checkpoints < n:
                raise InputError(
                    f"checkpoint budget too small: checkpoints={self.checkpoints} blocks of "
                    f"block={self.block} steps cover {self.block * self.checkpoints} steps, "
                    f"fewer than max_steps={n}; raise checkpoints or block, or lower max_steps"
                )
            return int(self.block)
        if self.block is not None:
            return int(self.block)
        if self.checkpoints is not None:
            return -(-n // int(self.checkpoints))
        return max(1, math.isqrt(n - 1) + 1)

    def check(self, max_steps: int) -> None:
        self.block_size(max_steps)

    def step_rhs(self, rhs: Rhs, ops: Any) -> Rhs:
        """``rhs`` under ``ops.checkpoint`` on traced contexts with ``remat_rhs``, through
        ``ops.traced_once`` on every traced context (eager contexts: ``rhs``)."""
        if ops.eager or not self.remat_rhs:
            return _traced_once(rhs, ops)

        def rematerialised(t: Any, y: Any, p: Any, ops_: Any) -> Any:
            return ops.checkpoint(lambda t_, y_, p_: rhs(t_, y_, p_, ops_))(t, y, p)

        return _traced_once(rematerialised, ops)

    def event_rhs(self, rhs: Rhs, ops: Any) -> Rhs:
        """``rhs`` (through ``ops.traced_once``) where :meth:`event_branch` rematerialises
        the location as a whole.

        Its reverse pass recomputes the evaluations already: a checkpoint around
        each of them inside it would only be traced, differentiated and
        compiled again.  Else :meth:`step_rhs`'s.
        """
        if self.remat_events:
            return _traced_once(rhs, ops)
        return self.step_rhs(rhs, ops)

    def event_branch(self, fire: Callable[..., Any], ops: Any) -> Callable[..., Any]:
        """``fire`` under ``ops.checkpoint`` on traced contexts with ``remat_events``."""
        if ops.eager or not self.remat_events:
            return fire
        return ops.checkpoint(fire)

    def group_size(self, events: bool = False) -> int:
        """Steps per guarded group: ``group``, else :data:`GROUP` or :data:`EVENT_GROUP`."""
        if self.group is not None:
            return int(self.group)
        return EVENT_GROUP if events else GROUP

    def loop(
        self, cond: Cond, body: Body, carry: Any, max_steps: int, ops: Any, *, events: bool = False
    ) -> Any:
        block = self.block_size(max_steps)
        if ops.eager:
            return ops.while_loop(cond, body, carry, max_steps)
        return blocked_loop(cond, body, carry, max_steps, block, ops, remat=True,
                            group=self.group_size(events))  # fmt: skip


@dataclass(frozen=True)
class DirectAdjoint(Adjoint):
    """Reverse mode through every stored iteration: no recomputation, no skipping.

    On JAX the loop is a scan of exactly ``max_steps`` iterations (those after
    the end do nothing), so time and reverse-mode memory are ``O(max_steps)``
    whatever the solve needs: the fastest choice when ``max_steps`` is close
    to the steps taken (fixed-step solvers, whose ``max_steps`` is exact, or
    a tuned budget), the slowest when it is not.  Eager contexts stop at the
    last step as with every strategy.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.ode import DirectAdjoint, ODEProblem
    >>> p = ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
    ...                observable=lambda ys, ops: ys[-1, 0], rtol=1e-10, atol=1e-12,
    ...                max_steps=64, adjoint=DirectAdjoint())
    >>> bool(abs(simdiff.hessian(p)[0, 0] - np.exp(-2.0)) < 1e-7)
    True
    """

    name = "direct"

    def loop(
        self, cond: Cond, body: Body, carry: Any, max_steps: int, ops: Any, *, events: bool = False
    ) -> Any:
        if ops.eager:
            return ops.while_loop(cond, body, carry, max_steps)

        def masked(c: Any, _: Any) -> tuple[Any, None]:
            return body(c), None  # a finished carry passes through unchanged

        return ops.scan(masked, carry, None, length=int(max_steps))[0]


@dataclass(frozen=True)
class ForwardAdjoint(Adjoint):
    """Forward sensitivities only: a plain while loop (``lax.while_loop`` on JAX).

    Values, JVPs, forward Jacobians (``jacobian(mode="fwd")``), forward-over-
    forward Hessians (``hessian(method="fwd-fwd")``) and Taylor coefficients
    cost about the steps taken, with no per-block overhead and no stored
    states.  Reverse mode (``grad``, ``vjp``, reverse Jacobians, Hessians
    over reverse) raises :class:`~simdiff.errors.UnsupportedError` naming
    :class:`CheckpointAdjoint` and :class:`DirectAdjoint`, on every backend
    (torch could run it; it is refused alike, so a problem behaves the same
    on JAX and torch).

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.ode import ForwardAdjoint, ODEProblem
    >>> p = ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
    ...                rtol=1e-10, atol=1e-12, adjoint=ForwardAdjoint())
    >>> J = simdiff.jacobian(p, mode="fwd")
    >>> bool(abs(J[0, 0] + np.exp(-2.0)) < 1e-8)
    True
    """

    name = "forward"

    #: Why reverse mode is refused, and what to use instead (on every backend alike).
    REVERSE_REFUSED = (
        "ODEProblem(adjoint=ForwardAdjoint()) computes forward sensitivities only (values, "
        "jvp, jacobian(mode='fwd'), hessian(method='fwd-fwd'), derivative, taylor); reverse "
        "mode (grad, vjp, reverse Jacobians, Hessians and HVPs over reverse) needs "
        "adjoint=CheckpointAdjoint() (the default; memory O(sqrt(max_steps))) or "
        "adjoint=DirectAdjoint() (stores every step)"
    )

    def loop(
        self, cond: Cond, body: Body, carry: Any, max_steps: int, ops: Any, *, events: bool = False
    ) -> Any:
        return self.outputs(ops.while_loop(cond, body, carry, max_steps), ops)

    def outputs(self, tree: Any, ops: Any) -> Any:
        return tree_map(lambda a: ops.forward_only(a, self.REVERSE_REFUSED), tree)


#: Names accepted by ``adjoint=`` in place of an object.
ADJOINT_NAMES = {"checkpoint": CheckpointAdjoint, "direct": DirectAdjoint,
                 "forward": ForwardAdjoint}  # fmt: skip


def make_adjoint(adjoint: Adjoint | str | None) -> Adjoint:
    """An :class:`Adjoint` from an object, a name in ``ADJOINT_NAMES`` or ``None`` (default).

    Examples
    --------
    >>> from simdiff.ode.adjoint import make_adjoint
    >>> make_adjoint("direct")
    DirectAdjoint()
    """
    if adjoint is None:
        return CheckpointAdjoint()
    if isinstance(adjoint, Adjoint):
        return adjoint
    if isinstance(adjoint, str) and adjoint in ADJOINT_NAMES:
        return ADJOINT_NAMES[adjoint]()
    raise InputError(
        f"adjoint must be an Adjoint object or one of {sorted(ADJOINT_NAMES)}; got {adjoint!r}"
    )
