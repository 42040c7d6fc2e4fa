"""XLA's optimisation setting for the programs compiled inside a block (see tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import jax


@contextmanager
def most_optimisations_off(off: bool) -> Iterator[None]:
    """``jax_disable_most_optimizations`` set to ``off`` inside the block, restored after.

    The option is read when XLA compiles, and is not part of jit's cache key: a program
    compiled earlier in the process keeps the options it was compiled with.
    """
    before = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", off)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)
