"""Compiler caches that outlive a process: torch Inductor's directory, JAX's persistent cache.

Timings of first calls (compiles) depend on them; :func:`cold_compiler_caches`
gives a block, and the processes it starts, empty ones.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["cold_compiler_caches", "compiler_caches"]


def compiler_caches() -> dict[str, Any]:
    """Where compiled programs are kept between processes: torch Inductor's cache directory
    and JAX's persistent compilation cache (``None``: off, or JAX not imported).

    Examples
    --------
    >>> sorted(compiler_caches())
    ['jax_persistent_cache', 'torch_inductor_cache']
    """
    jax_dir = None
    if "jax" in sys.modules:
        values = sys.modules["jax"].config.values
        if values["jax_enable_compilation_cache"]:
            jax_dir = values["jax_compilation_cache_dir"] or None
    return {
        "torch_inductor_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR", "torch's default"),
        "jax_persistent_cache": jax_dir,
    }


@contextmanager
def cold_compiler_caches() -> Iterator[None]:
    """Compile from cold caches inside the block, in this process and the ones it starts.

    torch Inductor keeps compiled graphs and kernels on disk between processes
    (``/tmp/torchinductor_<user>`` by default), and JAX does when a persistent
    cache is configured (``JAX_COMPILATION_CACHE_DIR``; ``import sella`` sets
    one).  A second report on the same machine would then time loads where the
    first timed compiles, and the compile times behind claims C1, C3, C5 and C8
    would depend on what ran before.  Inside the block Inductor's cache is a new
    empty directory (removed after) and JAX's persistent cache is off: used
    before JAX's first compile in the process (JAX decides once per process
    whether to use its cache), as ``simdiff report`` and ``simdiff compare`` do.

    Examples
    --------
    >>> with cold_compiler_caches():
    ...     compiler_caches()["jax_persistent_cache"] is None
    True
    """
    keys = ("TORCHINDUCTOR_CACHE_DIR", "JAX_ENABLE_COMPILATION_CACHE")
    saved = {k: os.environ.get(k) for k in keys}
    jax_before = None
    if "jax" in sys.modules:
        jax_before = sys.modules["jax"].config.values["jax_enable_compilation_cache"]
    with tempfile.TemporaryDirectory(prefix="simdiff-inductor-cache-") as fresh:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = fresh
        os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"  # read when jax is imported
        if jax_before is not None:
            sys.modules["jax"].config.update("jax_enable_compilation_cache", False)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if jax_before is not None:
                sys.modules["jax"].config.update("jax_enable_compilation_cache", jax_before)
