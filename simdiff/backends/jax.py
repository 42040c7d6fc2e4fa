"""The JAX context: ``jax.grad / jvp / vjp / jacfwd / jacrev / vmap / jit``.

Importing this module switches on JAX's 64-bit mode (``jax_enable_x64``):
simdiff computes in float64 by default, and JAX otherwise silently truncates
to float32.  float32 stays available on request (``dtype="float32"``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._base import Backend
from ._xp import XPOps

jax.config.update("jax_enable_x64", True)

__all__ = ["JaxBackend", "JaxOps"]


class JaxOps(XPOps):
    """``ops`` over ``jax.numpy``; ``scan`` is ``lax.scan`` (one compile for any length)."""

    name = "jax"

    def __init__(self, dtype: Any = jnp.float64) -> None:
        super().__init__(jnp, dtype)

    @staticmethod
    def scan(step: Callable[..., Any], carry: Any, xs: Any = None, length: int | None = None):
        """``jax.lax.scan``: returns ``(final_carry, stacked_ys)``."""
        return jax.lax.scan(step, carry, xs, length=length)

    @staticmethod
    def while_loop(cond: Callable[..., Any], body: Callable[..., Any], carry: Any, max_steps: int):
        """``jax.lax.while_loop`` with an iteration bound (forward-mode differentiable only)."""

        def go(state: tuple[Any, Any]) -> Any:
            return (state[0] < max_steps) & cond(state[1])

        def step(state: tuple[Any, Any]) -> tuple[Any, Any]:
            return state[0] + 1, body(state[1])

        return jax.lax.while_loop(go, step, (0, carry))[1]

    @staticmethod
    def cond(pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any):
        """``jax.lax.cond``: one branch runs (both under ``vmap``, selected)."""
        return jax.lax.cond(pred, true_fn, false_fn, *operands)

    @staticmethod
    def jacfwd(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``jax.jacfwd``: forward-mode Jacobian, nests under every outer transform."""
        return jax.jacfwd(fn)

    @staticmethod
    def concrete(x: Any) -> Any:
        """``x`` as numpy, or ``None`` when it is traced (under ``jit``/``vmap``/``grad``)."""
        if isinstance(x, jax.core.Tracer):
            return None
        return np.asarray(x)

    @staticmethod
    def checkpoint(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``jax.checkpoint``: recompute ``fn``'s intermediates in the backward pass."""
        return jax.checkpoint(fn)

    @staticmethod
    def stop_gradient(x: Any) -> Any:
        """``jax.lax.stop_gradient``."""
        return jax.lax.stop_gradient(x)


class JaxBackend(Backend):
    name = "jax"
    grad = staticmethod(jax.grad)
    jvp = staticmethod(jax.jvp)
    vjp = staticmethod(jax.vjp)
    jacfwd = staticmethod(jax.jacfwd)
    jacrev = staticmethod(jax.jacrev)
    jit = staticmethod(jax.jit)
    block_until_ready = staticmethod(jax.block_until_ready)

    def ops(self, dtype: Any = None, device: Any = None) -> JaxOps:
        return JaxOps(jnp.float64 if dtype is None else dtype)

    @staticmethod
    def vmap(fn: Callable[..., Any], in_axes: Any = 0) -> Callable[..., Any]:
        return jax.vmap(fn, in_axes=in_axes)

    def is_native(self, x: Any) -> bool:
        return isinstance(x, jax.Array)

    def from_numpy(self, a: Any, dtype: Any, device: Any = None) -> Any:
        return jnp.asarray(a, dtype=dtype)

    def to_numpy(self, x: Any) -> Any:
        return np.asarray(x)
