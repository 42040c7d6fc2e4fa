"""Time marching in the ODE driver's loop, with optional two-level checkpointing."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from simdiff.errors import InputError
from simdiff.ode.adjoint import Adjoint, CheckpointAdjoint, DirectAdjoint

__all__ = ["block_size", "march"]


def block_size(checkpoint: bool | int, n_steps: int) -> int:
    """Steps per checkpointed block: ``ceil(sqrt(n_steps))`` for ``True``, else ``checkpoint``."""
    if checkpoint is True:
        return max(1, math.isqrt(n_steps - 1) + 1)  # ceil(sqrt(n_steps))
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, int) or checkpoint < 1:
        raise InputError(
            f"checkpoint must be False, True or a positive block size (int); got {checkpoint!r}"
        )
    return checkpoint


def march(
    step: Callable[[Any], Any],
    state: Any,
    n_steps: int,
    ops: Any,
    checkpoint: bool | int = False,
) -> Any:
    """Apply ``state = step(state)`` ``n_steps`` times; return the final state.

    The loop is the ODE solvers' (:mod:`simdiff.ode.adjoint`): one mechanism
    for checkpointed time stepping.

    Parameters
    ----------
    step : callable
        One time step (a pure function of the state pytree).
    checkpoint : bool or int
        ``False``: reverse mode stores every intermediate of every step.
        An int ``B``: the steps run in blocks of ``B`` inside ``ops.checkpoint``;
        reverse mode stores one state per block and recomputes a block's
        intermediates when it reaches it (memory ~ ``n_steps/B`` states plus
        one block's intermediates, at the cost of one extra forward pass).
        ``True``: ``B = ceil(sqrt(n_steps))``, the two-level scheme that
        minimises that memory.  ``B = 1`` checkpoints each step.  (These are
        :class:`~simdiff.ode.DirectAdjoint` and
        :class:`~simdiff.ode.CheckpointAdjoint` with ``block=B``.)

    Notes
    -----
    On torch, ``ops.checkpoint`` is the identity under ``torch.func``
    transforms (they reject the saved-tensor hooks ``torch.utils.checkpoint``
    relies on), so checkpointing bounds memory on JAX and, on torch, only in
    top-level gradients and VJPs (taken by plain ``torch.autograd``).

    Examples
    --------
    >>> import simdiff
    >>> from simdiff.pde.marching import march
    >>> ops = simdiff.get_ops("numpy")
    >>> float(march(lambda s: 2.0 * s, ops.asarray(1.0), 10, ops, checkpoint=True))
    1024.0
    """
    n_steps = int(n_steps)
    if n_steps < 1:
        raise InputError(f"n_steps must be a positive integer; got {n_steps!r}")
    if checkpoint is False:
        adjoint: Adjoint = DirectAdjoint()
    else:
        adjoint = CheckpointAdjoint(block=block_size(checkpoint, n_steps))

    def running(c: tuple[Any, Any]) -> Any:
        return c[0] < n_steps

    def body(c: tuple[Any, Any]) -> tuple[Any, Any]:
        return c[0] + 1, step(c[1])

    return adjoint.loop(running, body, (0, state), n_steps, ops)[1]
