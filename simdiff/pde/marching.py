"""Time marching with ``ops.scan`` and optional two-level checkpointing."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import InputError

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
    """Apply ``state = step(state)`` ``n_steps`` times with ``ops.scan``; return the final state.

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
        minimises that memory.  ``B = 1`` checkpoints each step.

    Notes
    -----
    On torch, ``ops.checkpoint`` is the identity under ``torch.func``
    transforms (they reject the saved-tensor hooks ``torch.utils.checkpoint``
    relies on), so checkpointing bounds memory on JAX only.

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

    def body(s: Any, _: Any) -> tuple[Any, None]:
        return step(s), None

    if checkpoint is False:
        return ops.scan(body, state, None, length=n_steps)[0]
    size = block_size(checkpoint, n_steps)
    n_blocks, rest = divmod(n_steps, size)

    def block(s: Any, _: Any) -> tuple[Any, None]:
        return ops.scan(body, s, None, length=size)[0], None

    if n_blocks:
        state = ops.scan(ops.checkpoint(block), state, None, length=n_blocks)[0]
    if rest:
        state = ops.scan(body, state, None, length=rest)[0]
    return state
