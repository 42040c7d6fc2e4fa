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
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from simdiff.core.problem import Problem
from simdiff.errors import CatalogueUnavailable, ProblemNotFound

__all__ = [
    "CatalogueUnavailable",
    "ProblemNotFound",
    "catalogue",
    "code_digest",
    "import_module",
    "resolve",
    "validation",
]


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
    >>> from simdiff.core.catalogue import catalogue
    >>> "rosenbrock4" in catalogue().names()
    True
    >>> catalogue("basic").rosenbrock(4).n
    4
    """
    return _package("problems", submodule)


def validation(submodule: str | None = None) -> ModuleType:
    """The validation package (``validation/``: catalogue runs, claims), or one of its modules."""
    return _package("validation", submodule)


def code_digest() -> str:
    """SHA-256 of the Python sources of simdiff, the catalogue and the validation package.

    A resumed ``simdiff report`` run must have been made by the same code: a
    changed catalogue entry, solver or claim starts a new run.
    """
    roots = [
        ("simdiff", Path(__file__).resolve().parent),
        ("problems", Path(catalogue().__path__[0]).resolve()),
        ("validation", Path(validation().__path__[0]).resolve()),
    ]
    seen: dict[Path, str] = {}
    for label, root in roots:
        for path in sorted(root.rglob("*.py")):
            seen.setdefault(path, f"{label}/{path.relative_to(root).as_posix()}")
    h = hashlib.sha256()
    for path, name in sorted(seen.items(), key=lambda kv: kv[1]):
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


# --------------------------------------------------------------------------- problem specs


def import_module(module: str) -> ModuleType:
    """Import ``module`` from the Python path, else from the current directory.

    The fallback finds ``module.py`` or ``module/`` in the working directory as
    ``python -m`` would, by loading it from its file; ``sys.path`` is not edited.
    """
    top = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name not in (top, module):
            raise ProblemNotFound(f"cannot import {module!r}: {exc}") from exc
    cwd = Path.cwd()
    for path, search in ((cwd / top / "__init__.py", [str(cwd / top)]), (cwd / f"{top}.py", None)):
        if path.is_file():
            spec = importlib.util.spec_from_file_location(
                top, path, submodule_search_locations=search
            )
            assert spec is not None and spec.loader is not None
            mod = importlib.util.module_from_spec(spec)
            sys.modules[top] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                sys.modules.pop(top, None)
                raise
            return importlib.import_module(module)
    raise ProblemNotFound(
        f"cannot import {module!r}: it is not on the Python path and there is no {top}.py "
        f"or {top}/ in the current directory {cwd}"
    )


def resolve(spec: str) -> tuple[str, Callable[[], Problem]]:
    """``(label, factory)`` for a catalogue name or a ``"module:attribute"`` string.

    The attribute may be a Problem or a zero-argument function returning one.
    Nothing is built until ``factory()`` is called; every way the spec can fail
    raises :class:`ProblemNotFound` naming it.

    Examples
    --------
    >>> from simdiff.core.catalogue import resolve
    >>> label, factory = resolve("rosenbrock4")
    >>> factory().n
    4
    >>> resolve("rosenbrock5")
    Traceback (most recent call last):
    ...
    simdiff.errors.ProblemNotFound: unknown problem 'rosenbrock5'; valid catalogue names: ...
    """
    if ":" not in spec:
        reg = catalogue().registry()
        if spec not in reg:
            raise ProblemNotFound(
                f"unknown problem {spec!r}; valid catalogue names: "
                f"{', '.join(sorted(reg))} (or module:attribute)"
            )
        return spec, reg[spec]
    module, _, attr = spec.partition(":")
    try:
        mod = import_module(module)
    except ProblemNotFound:
        raise
    except Exception as exc:  # the user's module raised while it was imported
        raise ProblemNotFound(f"cannot load {spec!r}: {type(exc).__name__}: {exc}") from exc
    if not hasattr(mod, attr):
        public = sorted(a for a in vars(mod) if not a.startswith("_"))
        raise ProblemNotFound(
            f"module {module!r} has no attribute {attr!r}; it defines {', '.join(public)}"
        )
    obj = getattr(mod, attr)

    def factory() -> Problem:
        p = obj
        if callable(obj) and not isinstance(obj, Problem):
            try:
                p = obj()
            except TypeError as exc:
                raise ProblemNotFound(
                    f"{spec!r} is neither a simdiff.Problem nor a zero-argument function "
                    f"returning one (calling it raised TypeError: {exc})"
                ) from exc
        if not isinstance(p, Problem):
            raise ProblemNotFound(
                f"{spec!r} is not a simdiff.Problem nor a function returning one; "
                f"got {type(p).__name__}"
            )
        return p

    return spec, factory
