"""The reference catalogue: named problems with what is known about them from outside.

Each module in this package defines ``ENTRIES``: a mapping from a catalogue
name to a zero-argument factory returning a :class:`simdiff.Problem`.  The
problem's ``exact`` mapping carries analytic derivatives where they exist, and
``meta`` carries literature values (with ``meta["citation"]``), tags
(``meta["tags"]``) and tolerances.  Modules are discovered automatically, so a
new entry needs only a new module (or a line in an existing one).

In the repository this package is ``problems`` (pytest's ``pythonpath``); the
distribution ships it as ``simdiff.problems`` (so ``simdiff list`` and
``simdiff report`` work from an installed wheel).  Code inside simdiff reaches
it through ``simdiff.core.catalogue.catalogue()``.  It is reference material, not
part of simdiff's public API.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

import simdiff

__all__ = ["get", "names", "registry"]


def registry() -> dict[str, Callable[[], simdiff.Problem]]:
    """All catalogue entries, name -> factory, from every module of this package."""
    entries: dict[str, Callable[[], simdiff.Problem]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for name, factory in getattr(module, "ENTRIES", {}).items():
            if name in entries:
                raise RuntimeError(f"catalogue name {name!r} is defined twice ({info.name})")
            entries[name] = factory
    return entries


def names(tag: str | None = None) -> list[str]:
    """Catalogue names, optionally only those whose ``meta["tags"]`` include ``tag``."""
    reg = registry()
    if tag is None:
        return sorted(reg)
    return sorted(n for n, f in reg.items() if tag in f().meta.get("tags", ()))


def get(name: str) -> simdiff.Problem:
    """Build the catalogue problem ``name``; an unknown name lists the valid ones."""
    reg = registry()
    if name not in reg:
        raise simdiff.NotFoundError(
            f"unknown catalogue problem {name!r}; valid names: {', '.join(sorted(reg))}"
        )
    return reg[name]()
