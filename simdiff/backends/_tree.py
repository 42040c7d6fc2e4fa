"""A minimal pytree utility for the loop contexts (numpy, torch, taylor).

JAX has ``jax.tree_util``; simdiff's own loops must not import JAX, so they use
this: containers are ``None``, tuples (named tuples included), lists and dicts;
everything else is a leaf.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["tree_flatten", "tree_map", "tree_unflatten"]


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    """Return the leaves of ``tree`` (depth first) and a description of its structure."""
    leaves: list[Any] = []

    def walk(node: Any) -> Any:
        if node is None:
            return ("none",)
        if isinstance(node, tuple):
            kind = type(node) if hasattr(node, "_fields") else tuple
            return ("tuple", kind, [walk(c) for c in node])
        if isinstance(node, list):
            return ("list", [walk(c) for c in node])
        if isinstance(node, dict):
            keys = sorted(node)
            return ("dict", keys, [walk(node[k]) for k in keys])
        leaves.append(node)
        return ("leaf",)

    return leaves, walk(tree)


def tree_unflatten(treedef: Any, leaves: list[Any]) -> Any:
    """Inverse of :func:`tree_flatten`."""
    it = iter(leaves)

    def build(d: Any) -> Any:
        tag = d[0]
        if tag == "none":
            return None
        if tag == "leaf":
            return next(it)
        if tag == "tuple":
            kids = [build(c) for c in d[2]]
            return d[1](*kids) if d[1] is not tuple else tuple(kids)
        if tag == "list":
            return [build(c) for c in d[1]]
        return {k: build(c) for k, c in zip(d[1], d[2], strict=True)}

    return build(treedef)


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``fn`` leaf-wise over ``tree`` and trees of the same structure."""
    if not rest and tree is not None and not isinstance(tree, (tuple, list, dict)):
        return fn(tree)  # a leaf: no structure to walk
    leaves, treedef = tree_flatten(tree)
    others = [tree_flatten(r)[0] for r in rest]
    return tree_unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others, strict=True)])
