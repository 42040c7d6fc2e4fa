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
from ._threads import xla_threads
from ._xp import XPOps

jax.config.update("jax_enable_x64", True)

__all__ = ["JaxBackend", "JaxOps"]


class JaxOps(XPOps):
    """``ops`` over ``jax.numpy``; ``scan`` is ``lax.scan`` (one compile for any length)."""

    name = "jax"
    traced = True

    def __init__(self, dtype: Any = jnp.float64) -> None:
        super().__init__(jnp, dtype)

    @staticmethod
    def scan(step: Callable[..., Any], carry: Any, xs: Any = None, length: int | None = None):
        """``jax.lax.scan``: returns ``(final_carry, stacked_ys)``."""
        return jax.lax.scan(step, carry, xs, length=length)

    @staticmethod
    def checkpoint(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``jax.checkpoint``: recompute ``fn``'s intermediates in the backward pass."""
        return jax.checkpoint(fn)

    @staticmethod
    def stop_gradient(x: Any) -> Any:
        """``jax.lax.stop_gradient``."""
        return jax.lax.stop_gradient(x)

    @staticmethod
    def jacfwd(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``jax.jacfwd``: forward-mode Jacobian, usable inside a solver."""
        return jax.jacfwd(fn)


class JaxBackend(Backend):
    name = "jax"
    plain_path = "jit"
    ops_class = JaxOps
    precision_hint = (
        " (JAX makes float32 arrays until x64 is on: import simdiff.backends.jax, or call "
        "jax.config.update('jax_enable_x64', True), before creating them)"
    )
    grad = staticmethod(jax.grad)
    jvp = staticmethod(jax.jvp)
    vjp = staticmethod(jax.vjp)
    jacfwd = staticmethod(jax.jacfwd)
    jacrev = staticmethod(jax.jacrev)
    block_until_ready = staticmethod(jax.block_until_ready)

    def ops(self, dtype: Any = None, device: Any = None) -> JaxOps:
        return JaxOps(jnp.float64 if dtype is None else dtype)

    def vmap(self, fn: Callable[..., Any], in_axes: Any = 0) -> Callable[..., Any]:
        return jax.vmap(fn, in_axes=in_axes)

    def jit(self, fn: Callable[..., Any], on_compile: Callable[[], None] | None = None):
        """``jax.jit``; ``on_compile()`` runs each time JAX traces ``fn`` (once per compilation)."""
        if on_compile is None:
            return jax.jit(fn)
        notify = on_compile

        def counted(*args: Any) -> Any:
            notify()  # runs only while JAX traces, i.e. once per compilation
            return fn(*args)

        return jax.jit(counted)

    def warm_up(self) -> None:
        jax.block_until_ready(jax.jit(jax.grad(lambda y: jnp.sin(y).sum()))(jnp.ones(1)))

    def is_native(self, x: Any) -> bool:
        return isinstance(x, jax.Array)

    def from_numpy(self, a: Any, dtype: Any, device: Any = None) -> Any:
        return jnp.asarray(a, dtype=dtype)

    def to_numpy(self, x: Any) -> Any:
        return np.asarray(x)

    def dtype_name(self, x: Any) -> str:
        return np.dtype(x.dtype).name

    def concrete(self, x: Any) -> Any:
        if isinstance(x, jax.core.Tracer):
            return None
        return np.asarray(x)

    def threads(self) -> dict[str, Any]:
        """XLA's CPU threads: 1 if ``XLA_FLAGS`` made it single-threaded, else the affinity."""
        return {"xla": xla_threads()}
