"""Every exception class of simdiff lives in simdiff.errors and derives from its base classes.

Errors derive from :class:`simdiff.SimdiffError`, warnings from
:class:`simdiff.SimdiffWarning`; the old import paths of the classes that moved
here keep working.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import problems
import simdiff
import simdiff.errors
import validation

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("simdiff", "problems", "validation")


def _modules() -> list[str]:
    """Every module of simdiff, the catalogue and the validation package.

    The benchmark scripts (``validation.benchmarks``) are not imported (seconds of framework
    and peer-library imports); the source scan below covers them.
    """
    names = []
    for pkg in (simdiff, problems, validation):
        names.append(pkg.__name__)
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
                  if not m.name.startswith("validation.benchmarks")]  # fmt: skip
    return names


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.partition(".")[0] in SOURCES
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


#: Exception classes defined outside errors.py, and why (each still derives from SimdiffError).
OUTSIDE = {
    "simdiff.pes.ase_interface.PropertyUnavailable": "also ASE's PropertyNotImplementedError, "
    "which errors.py cannot name without importing ase with every simdiff import",
}


def test_every_exception_class_is_in_errors() -> None:
    classes = _exception_classes()
    assert "simdiff.errors.SimdiffError" in classes  # the walk found the errors module
    outside = sorted(name for name, cls in classes.items()
                     if cls.__module__ != "simdiff.errors" and name not in OUTSIDE)  # fmt: skip
    assert outside == [], f"move {outside} into simdiff/errors.py"
    assert set(OUTSIDE) <= set(classes), "a listed class is gone: shrink OUTSIDE"
    for name, cls in classes.items():
        base = simdiff.SimdiffWarning if issubclass(cls, Warning) else simdiff.SimdiffError
        assert issubclass(cls, base), f"{name} does not derive from {base.__name__}"


def test_no_exception_class_is_defined_outside_errors_in_the_source() -> None:
    """A class statement anywhere (also inside a function) whose base is an exception."""
    exception_names = {n for n, o in vars(builtins).items()
                       if inspect.isclass(o) and issubclass(o, BaseException)}  # fmt: skip
    exception_names |= set(simdiff.errors.__all__) | {"_Opaque"}
    errors_py = ROOT / "simdiff" / "errors.py"
    outside = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == errors_py:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef):
                    bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                             for b in node.bases}  # fmt: skip
                    qual = ".".join((*path.relative_to(ROOT).with_suffix("").parts, node.name))
                    if bases & exception_names and qual not in OUTSIDE:
                        outside.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert outside == []


def test_all_lists_every_public_class_of_errors() -> None:
    public = sorted(
        n
        for n, o in vars(simdiff.errors).items()
        if inspect.isclass(o) and issubclass(o, BaseException) and not n.startswith("_")
    )
    assert public == sorted(simdiff.errors.__all__)


@pytest.mark.parametrize(
    ("old_path", "name"),
    [
        ("simdiff.cli", "UsageError"),
        ("simdiff.core.catalogue", "CatalogueUnavailable"),
        ("simdiff.core.catalogue", "ProblemNotFound"),
        ("simdiff.sensitivity", "MomentWarning"),
    ],
)
def test_moved_classes_keep_their_old_import_path(old_path: str, name: str) -> None:
    cls = getattr(importlib.import_module(old_path), name)
    assert cls is getattr(simdiff.errors, name) is getattr(simdiff, name)


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("UsageError", ValueError),
        ("CatalogueUnavailable", ImportError),
        ("ProblemNotFound", LookupError),
        ("ArgumentOrderError", TypeError),
        ("PrecisionWarning", UserWarning),
        ("StationarityWarning", UserWarning),
        ("MomentWarning", UserWarning),
    ],
)
def test_builtin_bases_are_kept(name: str, builtin: type[BaseException]) -> None:
    assert issubclass(getattr(simdiff.errors, name), builtin)


def test_an_unknown_problem_raises_problem_not_found() -> None:
    from simdiff.core.catalogue import resolve

    with pytest.raises(simdiff.ProblemNotFound, match="unknown problem 'no-such'; valid"):
        resolve("no-such")
    with pytest.raises(simdiff.SimdiffError):
        resolve("no_such_module_anywhere:thing")
