"""The public surface: ``simdiff.__all__`` and ``dir(simdiff)`` name the product and nothing else."""

from __future__ import annotations

import types

import simdiff
import simdiff.errors

#: Names of the top-level namespace that are not part of the product.
NOT_PRODUCT = {"Any", "annotations", "importlib", "typing"}


def test_all_names_resolve_and_are_unique() -> None:
    assert len(simdiff.__all__) == len(set(simdiff.__all__))
    assert simdiff.__all__ == sorted(simdiff.__all__)
    missing = [n for n in simdiff.__all__ if not hasattr(simdiff, n)]
    assert missing == []


def test_dir_is_the_product() -> None:
    names = dir(simdiff)
    assert names == sorted([*simdiff.__all__, "__version__"])
    assert not NOT_PRODUCT & set(names)
    assert all(not n.startswith("_") for n in names if n != "__version__")
    for name in ("grad", "hessian", "Problem", "check", "ode", "SimdiffError", "jax", "torch"):
        assert name in names


def test_no_public_attribute_outside_all() -> None:
    """Every public non-module attribute of the package is listed (submodules that other code
    imported, such as ``simdiff.cli``, become attributes of the package and are not)."""
    stray = [
        n
        for n, o in vars(simdiff).items()
        if not n.startswith("_")
        and n not in simdiff.__all__
        and not isinstance(o, types.ModuleType)
    ]
    assert stray == []
    assert not NOT_PRODUCT & set(vars(simdiff))


def test_star_import_gives_all() -> None:
    ns: dict[str, object] = {}
    exec("from simdiff import *", ns)
    assert sorted(n for n in ns if n != "__builtins__") == simdiff.__all__


def test_every_error_is_at_the_top_level() -> None:
    for name in simdiff.errors.__all__:
        assert name in simdiff.__all__, name
        assert getattr(simdiff, name) is getattr(simdiff.errors, name)
