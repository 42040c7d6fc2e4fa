"""Trees of parameters: walking, describing and rebuilding the nested containers of leaves.

The helpers below :class:`~simdiff.core.params.ParamSpec`: a tree (dicts,
lists, tuples, named tuples, dataclasses, ``None`` and registered framework
pytree nodes) is walked once into its structure and its leaves (:func:`walk`,
in the order of ``jax.tree_util``), rebuilt from leaves (:func:`build`),
described for error messages (:func:`describe`, :func:`kind`), and its leaves
read and checked (:func:`leaf_values`, :func:`common_precision`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from simdiff.backends import backend_of
from simdiff.backends._pytrees import describe_node, node_children, unflatten_node
from simdiff.errors import DTypeError, InputTypeError, PrecisionWarning

__all__ = [
    "ARRAY_TYPES",
    "HOST_SCALARS",
    "LEAF",
    "NUMBER",
    "build",
    "common_precision",
    "describe",
    "fast_leaves",
    "is_array",
    "is_tree",
    "kind",
    "leaf_values",
    "walk",
]

NUMBER = (int, float, np.integer, np.floating)
#: Leaf types read as one float without a check (a bool is refused elsewhere: not here).
HOST_SCALARS = frozenset({float, int, np.float64, np.int64, np.int32})


def registered_node(node: Any) -> tuple[list[tuple[str, Any]], Any] | None:
    """``node``'s children and structure if a framework registers it as a pytree node."""
    return node_children(node, key_text)


def key_text(key: Any) -> str:
    """A JAX key path entry as simdiff names it: ``.name`` for attributes and string keys,
    ``[i]`` for positions (sequence indices, flattened indices, integer keys)."""
    for attr in ("name", "key", "idx"):
        if hasattr(key, attr):
            value = getattr(key, attr)
            return f".{value}" if isinstance(value, str) else f"[{value}]"
    return str(key)


def walk(node: Any, path: str, leaves: list[tuple[str, Any]]) -> Any:
    """The structure of ``node`` (hashable), appending ``(path, leaf)`` to ``leaves``."""
    if isinstance(node, NUMBER) or isinstance(node, (str, bool)):
        leaves.append((path, node))  # a number (or a bad leaf, refused later)
        return LEAF
    if isinstance(node, Mapping):
        keys = tuple(sorted(node))
        kids = tuple(walk(node[k], join(path, str(k)), leaves) for k in keys)
        return ("dict", keys, kids)
    if isinstance(node, tuple) and hasattr(node, "_fields"):  # a named tuple
        kids = tuple(
            walk(c, join(path, f), leaves) for f, c in zip(node._fields, node, strict=True)
        )
        return ("namedtuple", type(node), kids)
    if isinstance(node, (tuple, list)):  # inside a tree, as in JAX: a container
        kids = tuple(walk(c, f"{path}[{i}]", leaves) for i, c in enumerate(node))
        return (type(node).__name__, kids)
    if node is None:
        return ("none",)
    if is_array(node):
        leaves.append((path, node))
        return LEAF
    registered = registered_node(node)
    if registered is not None:
        pairs, treedef = registered
        kids = tuple(walk(c, (path + p).removeprefix("."), leaves) for p, c in pairs)
        return ("registered", treedef, kids)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        names = tuple(f.name for f in dataclasses.fields(node))
        kids = tuple(walk(getattr(node, f), join(path, f), leaves) for f in names)
        return ("dataclass", type(node), names, kids)
    leaves.append((path, node))
    return LEAF


LEAF = ("leaf",)
#: Types of differentiable frameworks' arrays seen by :meth:`ParamSpec.is_input` (what
#: :func:`is_array` says depends on the type only): a flat point of them is known at once.
ARRAY_TYPES: set[type] = set()


def fast_leaves(node: Any, d: Any, out: list[Any]) -> bool:
    """Append ``node``'s leaves following the known structure ``d``; False where ``node``
    does not have it (then :func:`walk` finds and names the difference)."""
    tag = d[0]
    if tag == "leaf":
        kind = type(node)
        if (
            kind not in HOST_SCALARS
            and kind is not np.ndarray
            and (node is None or isinstance(node, (dict, list, tuple, Mapping)))
        ):
            return False
        out.append(node)
        return True
    if tag == "dict":
        if not (type(node) is dict or isinstance(node, Mapping)) or len(node) != len(d[1]):
            return False
        for k, c in zip(d[1], d[2], strict=True):
            if k not in node or not fast_leaves(node[k], c, out):
                return False
        return True
    if tag == "namedtuple" or tag == "tuple" or tag == "list":
        kids = d[2] if tag == "namedtuple" else d[1]
        ok = type(node) is d[1] if tag == "namedtuple" else type(node).__name__ == tag
        if not ok or len(node) != len(kids):
            return False
        for v, c in zip(node, kids, strict=True):
            if not fast_leaves(v, c, out):
                return False
        return True
    if tag == "dataclass":
        if type(node) is not d[1]:
            return False
        for f, c in zip(d[2], d[3], strict=True):
            if not fast_leaves(getattr(node, f), c, out):
                return False
        return True
    if tag == "none":
        return node is None
    return False  # a JAX pytree node: the full walk


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def numbers(seq: Any) -> bool:
    """Whether a list/tuple holds only numbers or such lists: an array literal, one leaf."""
    return len(seq) > 0 and all(
        (isinstance(c, NUMBER) and not isinstance(c, bool))
        or (isinstance(c, (list, tuple)) and not hasattr(c, "_fields") and numbers(c))
        for c in seq
    )


def is_array(a: Any) -> bool:
    if isinstance(a, (np.ndarray, np.generic)):
        return True
    src = backend_of(a)
    return src.differentiable and src.is_native(a)


def framework(leaves: list[tuple[str, Any]]) -> Any:
    """The differentiable backend of the first leaf that is one of its arrays, or None (numpy
    and numbers only)."""
    for _, v in leaves:
        if type(v) in HOST_SCALARS or isinstance(v, (NUMBER, np.ndarray, np.generic)):
            continue
        src = backend_of(v)
        if src.differentiable and src.is_native(v):
            return src
    return None


def build(d: Any, leaves: Any) -> Any:
    tag = d[0]
    if tag == "none":
        return None
    if tag == "leaf":
        return next(leaves)
    if tag == "namedtuple":
        return d[1](*[build(c, leaves) for c in d[2]])
    if tag in ("tuple", "list"):
        kids = [build(c, leaves) for c in d[1]]
        return kids if tag == "list" else tuple(kids)
    if tag == "dict":
        return {k: build(c, leaves) for k, c in zip(d[1], d[2], strict=True)}
    if tag == "registered":
        return unflatten_node(d[1], [build(c, leaves) for c in d[2]])
    obj = object.__new__(d[1])  # a dataclass: its fields set, its __init__ not rerun
    for name, c in zip(d[2], d[3], strict=True):
        object.__setattr__(obj, name, build(c, leaves))
    return obj


def describe(d: Any) -> str:
    """A text form of a structure: what fingerprints and compares it (no live objects)."""
    tag = d[0]
    if tag in ("none", "leaf"):
        return tag
    if tag == "namedtuple":
        kids = ",".join(describe(c) for c in d[2])
        return f"{d[1].__module__}.{d[1].__qualname__}({kids})"
    if tag in ("tuple", "list"):
        return f"{tag}({','.join(describe(c) for c in d[1])})"
    if tag == "dict":
        return (
            "dict("
            + ",".join(f"{k!r}:{describe(c)}" for k, c in zip(d[1], d[2], strict=True))
            + ")"
        )
    if tag == "registered":
        return describe_node(d[1]) + "(" + ",".join(describe(c) for c in d[2]) + ")"
    fields = ",".join(f"{n}={describe(c)}" for n, c in zip(d[2], d[3], strict=True))
    return f"{d[1].__module__}.{d[1].__qualname__}({fields})"


def kind(tree: Any) -> str:
    if isinstance(tree, Mapping):
        return "dict"
    if hasattr(tree, "_fields"):
        return f"named tuple {type(tree).__name__}"
    if dataclasses.is_dataclass(tree):
        return f"dataclass {type(tree).__name__}"
    return type(tree).__name__


def is_tree(a: Any) -> bool:
    """Whether ``a`` is structured parameters rather than a flat array.

    Arrays of every framework, numbers, and lists or plain tuples that NumPy
    reads as a numeric array (``[1.0, 2.0]``, as ``x0`` has always been) are
    flat; dicts, named tuples, dataclasses, lists/tuples NumPy cannot read as
    one array (``[np.zeros(2), 1.0]``, a list of dicts), and registered JAX
    pytree nodes are trees.  Inside a tree, lists and tuples are containers,
    as in JAX (``{"s": (1.0, 2.0)}`` has leaves ``s[0]``, ``s[1]``).

    Examples
    --------
    >>> import numpy as np
    >>> is_tree({"a": 1.0}), is_tree([1.0, 2.0]), is_tree(np.zeros(2)), is_tree([np.zeros(2), 1.0])
    (True, False, False, True)
    """
    if a is None or isinstance(a, (NUMBER, bool)) or is_array(a):
        return False
    if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
        if len(a) == 0 or numbers(a):
            return False
        try:
            return np.asarray(a).dtype.kind not in "fiub"
        except (ValueError, TypeError):  # ragged: not one array
            return True
    if isinstance(a, Mapping) or hasattr(a, "_fields"):
        return True
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return True
    return registered_node(a) is not None


def leaf_values(path: str, leaf: Any, what: str) -> np.ndarray:
    """A leaf of the parameters at construction, as numpy of its own dtype (refused: non-real
    leaves)."""
    name = f"{what}[{path!r}]" if path else what
    if isinstance(leaf, bool) or isinstance(leaf, np.bool_):
        raise DTypeError(f"{name} must be a real float array or number; got a bool ({leaf!r})")
    src = backend_of(leaf)
    if src.differentiable and src.is_native(leaf):
        if src.is_traced(leaf):
            raise InputTypeError(f"{name} is traced (inside a framework transform): parameters "
                                 "given at construction need values")  # fmt: skip
        leaf = src.to_numpy(leaf)
    try:
        a = np.asarray(leaf)
    except Exception:  # an object numpy cannot read: named below
        a = np.asarray(None)
    if a.dtype.kind not in "fiu":
        got = f"dtype {a.dtype}" if a.dtype.kind != "O" else type(leaf).__name__
        raise DTypeError(f"{name} must be a real float array or number; got {got}")
    return a


def precision(dtype_name: str) -> int:
    """Bits of a float dtype's name (``"float32"``: 32; float64 and anything else: 64)."""
    return {"float16": 16, "bfloat16": 16, "float32": 32}.get(dtype_name, 64)


def common_precision(
    parts: list[Any], paths: tuple[str, ...], src: Any, what: str, stacklevel: int = 5
) -> list[Any]:
    """``parts`` (the leaves, native arrays of ``src`` or numpy) as they are when they share
    one float precision; where float32 (or float16) leaves meet float64 ones, a
    :class:`~simdiff.PrecisionWarning` naming the lower-precision leaves, and every part
    cast to float64 (the promotion, made explicit)."""
    if len({p.dtype for p in parts}) == 1:
        return parts  # one dtype (the common case: a set of a few attribute reads)
    names = [(src.dtype_name(p) if src is not None else p.dtype.name) for p in parts]
    bits = [precision(n) for n in names if n.startswith(("float", "bfloat"))]
    if not bits or min(bits) == max(bits) or max(bits) < 64:
        return parts  # one float precision (integers are exact in either)
    low = [f"{p or 'x'!r} ({n})" for p, n in zip(paths, names, strict=True) if precision(n) < 64]
    warnings.warn(
        f"{what} mixes float precisions: leaves {', '.join(low)} meet float64 leaves and are "
        "promoted to float64, so the result carries their lower input precision; give every "
        "leaf float64 (or all float32, with dtype='float32')",
        PrecisionWarning,
        stacklevel=stacklevel,  # the caller of simdiff.grad & co. (of Problem for x0)
    )
    if src is None:
        return [np.asarray(p, dtype=np.float64) for p in parts]
    ops = src.ops()  # float64: its asarray casts floats to it, differentiably
    return [ops.asarray(p) for p in parts]
