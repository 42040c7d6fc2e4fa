"""The frameworks' own pytree registries, for structured parameters (simdiff.core.params).

JAX keeps a registry of pytree node types (``jax.tree_util``); a parameter
object of such a type is flattened by JAX's rules, and simdiff's own result
types register there so they can leave ``jax.jit``.  simdiff never imports
JAX for this: with JAX not imported, no object can be a JAX pytree node, and
registration waits until JAX is there.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["describe_node", "node_children", "register_node", "unflatten_node"]

_REGISTERED: set[tuple[type, str]] = set()


def _tree_util() -> Any:
    return getattr(sys.modules.get("jax"), "tree_util", None)


def node_children(
    node: Any, key_text: Callable[[Any], str]
) -> tuple[list[tuple[str, Any]], Any] | None:
    """``node``'s children ``(path, child)`` and one-level structure if a framework registers
    ``node``'s type as a pytree node, else None.  ``key_text`` names a one-entry key path."""
    jtu = _tree_util()
    if jtu is None:
        return None
    kids, treedef = jtu.tree_flatten_with_path(node, is_leaf=lambda c: c is not node)
    if jtu.treedef_is_leaf(treedef):
        return None
    return [(key_text(path[0]) if len(path) == 1 else jtu.keystr(path), child)
            for path, child in kids], treedef  # fmt: skip


def unflatten_node(structure: Any, children: list[Any]) -> Any:
    """The node :func:`node_children` described, rebuilt from ``children``."""
    return _tree_util().tree_unflatten(structure, children)


def describe_node(structure: Any) -> str:
    """A text form of a registered node's structure (for fingerprints and comparisons)."""
    return f"registered[{structure}]"


def register_node(cls: type, flatten: Callable, unflatten: Callable) -> None:
    """Register ``cls`` as a pytree node with each imported framework that has a registry
    (JAX's ``jax.tree_util``, torch's ``torch.utils._pytree``, which ``torch.func``
    transforms read their outputs with); a no-op for a framework where it is done, and
    for one not imported yet (call again later).

    ``flatten(obj) -> (children, aux)`` and ``unflatten(aux, children) -> obj``, JAX's
    convention (torch's order of arguments is adapted here).
    """
    if (cls, "jax") in _REGISTERED and (cls, "torch") in _REGISTERED:
        return  # the common case: one set lookup each
    jtu = _tree_util()
    if jtu is not None and (cls, "jax") not in _REGISTERED:
        jtu.register_pytree_node(cls, flatten, unflatten)
        _REGISTERED.add((cls, "jax"))
    tpt = getattr(getattr(sys.modules.get("torch"), "utils", None), "_pytree", None)
    if tpt is None and "torch" in sys.modules:
        import torch.utils._pytree as tpt  # a submodule torch imports itself; loaded here
    if tpt is not None and (cls, "torch") not in _REGISTERED:
        tpt.register_pytree_node(
            cls,
            lambda obj: (list(flatten(obj)[0]), flatten(obj)[1]),
            lambda children, aux: unflatten(aux, children),
            serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
        )
        _REGISTERED.add((cls, "torch"))
