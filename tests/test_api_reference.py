"""The API reference (docs/api/*.md) documents every public name of simdiff and its subpackages."""

from __future__ import annotations

import importlib
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simdiff", "simdiff.backends", "simdiff.errors", "simdiff.evidence", "simdiff.ode",
            "simdiff.pde", "simdiff.pes", "simdiff.sensitivity", "simdiff.store", "simdiff.jax",
            "simdiff.torch")  # fmt: skip


def _resolve(path: str) -> object:
    """The object a ``::: dotted.path`` directive renders (a module or a member of one)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise AssertionError(f"docs/api names {path!r}, which does not import")


def _documented() -> tuple[set[int], set[str]]:
    """Ids of the objects the reference renders, and the modules it renders whole."""
    text = "\n".join(p.read_text() for p in sorted((ROOT / "docs" / "api").glob("*.md")))
    objects = [_resolve(p) for p in re.findall(r"^:::\s*([\w.]+)", text, re.M)]
    modules = {o.__name__ for o in objects if isinstance(o, types.ModuleType)}
    return {id(o) for o in objects}, modules


def _public(package: str) -> list[tuple[str, object]]:
    module = importlib.import_module(package)
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    found = [(n, getattr(module, n)) for n in names]
    # Names the package defines (not modules, not imports such as typing.Any).
    return [(n, o) for n, o in found if not isinstance(o, types.ModuleType)
            and getattr(o, "__module__", "").startswith("simdiff")]  # fmt: skip


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_is_in_the_reference(package: str) -> None:
    ids, modules = _documented()
    missing = [f"{package}.{n}" for n, o in _public(package)
               if id(o) not in ids and o.__module__ not in modules]  # fmt: skip
    assert missing == [], f"add a '::: name' line to docs/api/ for {missing}"


def test_the_reference_knows_the_operators() -> None:
    ids, _ = _documented()
    import simdiff

    for name in ("laplacian", "biharmonic", "derivative_sum", "stochastic_laplacian"):
        assert id(getattr(simdiff, name)) in ids, name
