"""A griffe extension: read the function faces ``simdiff.jax`` and ``simdiff.torch`` by import.

Their functions are built by :func:`simdiff.core.functions.namespace` (one definition,
docstrings in each framework's words), so static analysis sees only assignments;
the reference renders the imported functions instead.
"""

from __future__ import annotations

from typing import Any

import griffe

FACES = ("simdiff.jax", "simdiff.torch")


class FunctionFaces(griffe.Extension):
    """Replace the statically read face modules with their inspected versions."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != "simdiff":
            return
        for path in FACES:
            name = path.rsplit(".", 1)[1]
            pkg.set_member(name, griffe.inspect(name, parent=pkg))
