"""Compiler caches that outlive a process: torch Inductor's directory, JAX's persistent cache.

simdiff keeps both in one directory of its own (:func:`cache_dir`:
``$SIMDIFF_CACHE_DIR``, else ``$XDG_CACHE_HOME/simdiff``, else
``~/.cache/simdiff``), switched on when a backend is first imported
(:func:`enable_persistent_caches`), so a second process loads the programs the
first one compiled instead of compiling them again.  ``SIMDIFF_COMPILE_CACHE=0``
switches this off; a ``JAX_COMPILATION_CACHE_DIR`` or ``TORCHINDUCTOR_CACHE_DIR``
of the user's (set in the environment before simdiff is imported, even to the
empty string) is left as it is; :func:`clear_persistent_caches` (``simdiff
cache clear``) empties the directory.  A directory that cannot be written is
not used, with one :class:`~simdiff.errors.CacheWarning`.  A damaged entry is
recompiled: JAX checks each entry it reads and compiles again, with a warning,
where the entry cannot be read (tests/test_compile_cache.py truncates one).

Timings of first calls (compiles) depend on these caches; :func:`cold_compiler_caches`
gives a block, and the processes it starts, empty ones.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from simdiff.errors import CacheWarning

__all__ = [
    "cache_dir",
    "clear_persistent_caches",
    "cold_compiler_caches",
    "compiler_caches",
    "enable_persistent_caches",
]

#: Programs that compile faster than this many seconds are not written to JAX's cache
#: (JAX's own threshold leaves out most of a derivative task's programs; reading an entry
#: costs a file read and a deserialisation, so the smallest programs are not worth it).
JAX_MIN_COMPILE_S = 0.05

#: What :func:`enable_persistent_caches` did in this process, by framework:
#: the directory in use, or why none is.
STATE: dict[str, str] = {}


def cache_dir() -> Path:
    """simdiff's cache directory: ``$SIMDIFF_CACHE_DIR``, ``$XDG_CACHE_HOME/simdiff`` or
    ``~/.cache/simdiff``.

    Examples
    --------
    >>> cache_dir().name in ("simdiff",) or "SIMDIFF_CACHE_DIR" in __import__("os").environ
    True
    """
    given = os.environ.get("SIMDIFF_CACHE_DIR")
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "simdiff"


def _off() -> bool:
    return os.environ.get("SIMDIFF_COMPILE_CACHE", "1").strip().lower() in (
        "0",
        "false",
        "off",
        "no",
    )


def _writable(path: Path) -> str | None:
    """None if ``path`` (created if missing) takes a file; else why not."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-") as f:
            f.write(b"0")
            f.flush()
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _refuse(what: str, path: Path, why: str) -> None:
    STATE[what] = f"off: {path} is not writable ({why})"
    warnings.warn(
        f"simdiff's {what} compilation cache {path} cannot be written ({why}); compiling "
        "without it. Set SIMDIFF_CACHE_DIR to a writable directory, or SIMDIFF_COMPILE_CACHE=0 "
        "to silence this",
        CacheWarning,
        stacklevel=3,
    )


def enable_persistent_caches(framework: str) -> str:
    """Switch on the persistent compilation cache of ``framework`` ("jax" or "torch") in
    :func:`cache_dir`, unless switched off or set by the user; return what was done.

    Called once per framework when simdiff's backend for it is imported.
    """
    if framework in STATE:
        return STATE[framework]
    if _off():
        STATE[framework] = "off: SIMDIFF_COMPILE_CACHE=0"
        return STATE[framework]
    env = "JAX_COMPILATION_CACHE_DIR" if framework == "jax" else "TORCHINDUCTOR_CACHE_DIR"
    if env in os.environ:
        STATE[framework] = f"the user's: {env}={os.environ[env]!r}"
        return STATE[framework]
    path = cache_dir() / ("jax" if framework == "jax" else "inductor")
    why = _writable(path)
    if why is not None:
        _refuse(framework, path, why)
        return STATE[framework]
    if framework == "jax":
        import jax

        if jax.config.values.get("jax_compilation_cache_dir"):
            STATE[framework] = "the user's: jax_compilation_cache_dir"
            return STATE[framework]
        from jax._src import compilation_cache

        jax.config.update("jax_compilation_cache_dir", str(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", JAX_MIN_COMPILE_S)
        # JAX decides at its first compile whether a cache is in use; where something
        # compiled before simdiff was imported, let it decide again.
        if compilation_cache.is_initialized():
            compilation_cache.reset_cache()
    else:
        os.environ[env] = str(path)
    STATE[framework] = str(path)
    return STATE[framework]


def clear_persistent_caches() -> list[str]:
    """Delete simdiff's compilation caches (:func:`cache_dir`); return the paths removed.

    Entries written by processes running now are removed too; they recompile
    what they miss.
    """
    removed = []
    for name in ("jax", "inductor"):
        path = cache_dir() / name
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


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
