"""XLA's optimisation setting for the programs compiled inside a block (see tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import jax
from jax._src import compiler

# XLA:CPU's code generation for the programs compiled with most optimisations off: its
# older elemental emitters in place of the fusion emitters, and one LLVM module per program
# in place of a split compiled by a thread pool (two test processes already fill two
# cores).  Half the XLA compile time of the whole suite (347 s of CPU, 180 s).  The emitters
# may round differently in the last bits (a dask worker's sweep, compiled with the fusion
# emitters, differed from this process's by 3e-16 relative); tests/test_xla_optimisation.py
# holds the suite's programs to optimised ones compiled as users compile.
CHEAP_CODEGEN = (
    ("xla_cpu_use_fusion_emitters", False),
    ("xla_cpu_parallel_codegen_split_count", 1),
)

#: The same as ``XLA_FLAGS``, for processes a test starts and compares bit for bit with its
#: own (dask's workers): they inherit JAX_DISABLE_MOST_OPTIMIZATIONS, not this file.
CHEAP_CODEGEN_XLA_FLAGS = " ".join(
    f"--{name}={str(value).lower()}" for name, value in CHEAP_CODEGEN
)


def install_cheap_codegen() -> None:
    """Add :data:`CHEAP_CODEGEN` to the options of every compile made with most optimisations off."""
    real = compiler.get_compile_options
    if getattr(real, "_simdiff_cheap_codegen", False):
        return

    def get_compile_options(*args, **kwargs):  # type: ignore[no-untyped-def]
        options = real(*args, **kwargs)
        if jax.config.values["jax_disable_most_optimizations"]:
            options.env_option_overrides = [*options.env_option_overrides, *CHEAP_CODEGEN]
        return options

    get_compile_options._simdiff_cheap_codegen = True  # type: ignore[attr-defined]
    compiler.get_compile_options = get_compile_options


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
