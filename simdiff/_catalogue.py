"""Where the reference catalogue and the validation package come from.

The repository keeps ``problems/`` and ``validation/`` at its top level; the
distribution ships them inside simdiff as ``simdiff.problems`` and
``simdiff.validation`` (a setuptools ``package-dir`` mapping, which an
editable install maps too).  Code inside simdiff imports them through
:func:`catalogue` and :func:`validation`, which take the installed names and,
in a checkout that is not installed, the top-level packages that pytest's
``pythonpath`` (or ``python -m`` from the repository root) makes importable.
Nothing here edits ``sys.path``.
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from types import ModuleType

from .errors import SimdiffError

__all__ = ["CatalogueUnavailable", "catalogue", "catalogue_digest", "validation"]


class CatalogueUnavailable(SimdiffError, ImportError):
    """Neither ``simdiff.<name>`` nor the checkout's top-level ``<name>`` package imports."""


def _package(name: str, submodule: str | None) -> ModuleType:
    for top in (f"simdiff.{name}", name):
        try:
            pkg = importlib.import_module(top)
        except ModuleNotFoundError as exc:
            if exc.name != top:
                raise  # the package is there but one of its imports is missing
            continue
        return importlib.import_module(f"{pkg.__name__}.{submodule}") if submodule else pkg
    raise CatalogueUnavailable(
        f"the {name!r} package of simdiff is not importable as 'simdiff.{name}' (an "
        f"installed simdiff) nor as '{name}' (a checkout, run from its root); reinstall "
        "simdiff (`pip install .`, or `pip install -e .` for a checkout)"
    )


def catalogue(submodule: str | None = None) -> ModuleType:
    """The reference catalogue package (``problems/``), or one of its modules.

    Examples
    --------
    >>> from simdiff._catalogue import catalogue
    >>> "rosenbrock4" in catalogue().names()
    True
    >>> catalogue("basic").rosenbrock(4).n
    4
    """
    return _package("problems", submodule)


def validation(submodule: str | None = None) -> ModuleType:
    """The validation package (``validation/``: catalogue runs, claims), or one of its modules."""
    return _package("validation", submodule)


def catalogue_digest() -> str:
    """SHA-256 of the catalogue's source files: a resumed report must see the same catalogue."""
    h = hashlib.sha256()
    for path in sorted(Path(p) for d in catalogue().__path__ for p in Path(d).glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()
