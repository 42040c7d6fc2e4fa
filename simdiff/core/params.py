"""Structured parameters: a tree of float arrays, flattened once with its names and shapes.

A :class:`ParamSpec` is made once, where a problem receives its parameters
(``Problem(fn, x0={...})``, ``ODEProblem(..., params={...})``).  It records the
tree's structure (dicts, lists, tuples, named tuples, dataclasses, ``None``
and, once jax is imported, any registered JAX pytree node), the path, shape
and offset of every leaf, and one name per scalar (``"alpha"``, ``"k[0]"``,
``"w.b[1,2]"``).  The problem works on the flat float64 vector; the spec turns
a flat vector back into the tree (:meth:`ParamSpec.unflatten`, also inside a
traced function, by slicing) and a tree into the flat vector
(:meth:`ParamSpec.flatten`, in the leaves' own framework, so traced leaves
stay traced).  :class:`~simdiff.Labelled` (simdiff/core/labelled.py) is an array
whose last axes are indexed by those names (a Hessian: ``H["alpha", "beta"]``).

Leaves are flattened in the order of ``jax.tree_util``: dict keys sorted,
sequences and dataclass fields in order.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from simdiff.backends import backend_of
from simdiff.backends._pytrees import describe_node, node_children, unflatten_node
from simdiff.core.labelled import Labelled
from simdiff.errors import (
    DTypeError,
    InputError,
    InputTypeError,
    NotFoundError,
    PrecisionWarning,
    StructureError,
)

__all__ = ["ParamSpec", "TreeFunction", "TreeRhs", "is_tree"]

_NUMBER = (int, float, np.integer, np.floating)
#: Leaf types read as one float without a check (a bool is refused elsewhere: not here).
_HOST_SCALARS = frozenset({float, int, np.float64, np.int64, np.int32})


def _registered_node(node: Any) -> tuple[list[tuple[str, Any]], Any] | None:
    """``node``'s children and structure if a framework registers it as a pytree node."""
    return node_children(node, _key_text)


def _key_text(key: Any) -> str:
    """A JAX key path entry as simdiff names it: ``.name`` for attributes and string keys,
    ``[i]`` for positions (sequence indices, flattened indices, integer keys)."""
    for attr in ("name", "key", "idx"):
        if hasattr(key, attr):
            value = getattr(key, attr)
            return f".{value}" if isinstance(value, str) else f"[{value}]"
    return str(key)


def _walk(node: Any, path: str, leaves: list[tuple[str, Any]]) -> Any:
    """The structure of ``node`` (hashable), appending ``(path, leaf)`` to ``leaves``."""
    if isinstance(node, _NUMBER) or isinstance(node, (str, bool)):
        leaves.append((path, node))  # a number (or a bad leaf, refused later)
        return _LEAF
    if isinstance(node, Mapping):
        keys = tuple(sorted(node))
        kids = tuple(_walk(node[k], _join(path, str(k)), leaves) for k in keys)
        return ("dict", keys, kids)
    if isinstance(node, tuple) and hasattr(node, "_fields"):  # a named tuple
        kids = tuple(
            _walk(c, _join(path, f), leaves) for f, c in zip(node._fields, node, strict=True)
        )
        return ("namedtuple", type(node), kids)
    if isinstance(node, (tuple, list)):  # inside a tree, as in JAX: a container
        kids = tuple(_walk(c, f"{path}[{i}]", leaves) for i, c in enumerate(node))
        return (type(node).__name__, kids)
    if node is None:
        return ("none",)
    if _is_array(node):
        leaves.append((path, node))
        return _LEAF
    registered = _registered_node(node)
    if registered is not None:
        pairs, treedef = registered
        kids = tuple(_walk(c, (path + p).removeprefix("."), leaves) for p, c in pairs)
        return ("registered", treedef, kids)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        names = tuple(f.name for f in dataclasses.fields(node))
        kids = tuple(_walk(getattr(node, f), _join(path, f), leaves) for f in names)
        return ("dataclass", type(node), names, kids)
    leaves.append((path, node))
    return _LEAF


_LEAF = ("leaf",)
#: Types of differentiable frameworks' arrays seen by :meth:`ParamSpec.is_input` (what
#: :func:`_is_array` says depends on the type only): a flat point of them is known at once.
_ARRAY_TYPES: set[type] = set()
_REQUIRED = object()  # per_scalar's "no default": every scalar needs an entry


def _fast_leaves(node: Any, d: Any, out: list[Any]) -> bool:
    """Append ``node``'s leaves following the known structure ``d``; False where ``node``
    does not have it (then :func:`_walk` finds and names the difference)."""
    tag = d[0]
    if tag == "leaf":
        kind = type(node)
        if (
            kind not in _HOST_SCALARS
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
            if k not in node or not _fast_leaves(node[k], c, out):
                return False
        return True
    if tag == "namedtuple" or tag == "tuple" or tag == "list":
        kids = d[2] if tag == "namedtuple" else d[1]
        ok = type(node) is d[1] if tag == "namedtuple" else type(node).__name__ == tag
        if not ok or len(node) != len(kids):
            return False
        for v, c in zip(node, kids, strict=True):
            if not _fast_leaves(v, c, out):
                return False
        return True
    if tag == "dataclass":
        if type(node) is not d[1]:
            return False
        for f, c in zip(d[2], d[3], strict=True):
            if not _fast_leaves(getattr(node, f), c, out):
                return False
        return True
    if tag == "none":
        return node is None
    return False  # a JAX pytree node: the full walk


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _numbers(seq: Any) -> bool:
    """Whether a list/tuple holds only numbers or such lists: an array literal, one leaf."""
    return len(seq) > 0 and all(
        (isinstance(c, _NUMBER) and not isinstance(c, bool))
        or (isinstance(c, (list, tuple)) and not hasattr(c, "_fields") and _numbers(c))
        for c in seq
    )


def _is_array(a: Any) -> bool:
    if isinstance(a, (np.ndarray, np.generic)):
        return True
    src = backend_of(a)
    return src.differentiable and src.is_native(a)


def _framework(leaves: list[tuple[str, Any]]) -> Any:
    """The differentiable backend of the first leaf that is one of its arrays, or None (numpy
    and numbers only)."""
    for _, v in leaves:
        if type(v) in _HOST_SCALARS or isinstance(v, (_NUMBER, np.ndarray, np.generic)):
            continue
        src = backend_of(v)
        if src.differentiable and src.is_native(v):
            return src
    return None


def _build(d: Any, leaves: Any) -> Any:
    tag = d[0]
    if tag == "none":
        return None
    if tag == "leaf":
        return next(leaves)
    if tag == "namedtuple":
        return d[1](*[_build(c, leaves) for c in d[2]])
    if tag in ("tuple", "list"):
        kids = [_build(c, leaves) for c in d[1]]
        return kids if tag == "list" else tuple(kids)
    if tag == "dict":
        return {k: _build(c, leaves) for k, c in zip(d[1], d[2], strict=True)}
    if tag == "registered":
        return unflatten_node(d[1], [_build(c, leaves) for c in d[2]])
    obj = object.__new__(d[1])  # a dataclass: its fields set, its __init__ not rerun
    for name, c in zip(d[2], d[3], strict=True):
        object.__setattr__(obj, name, _build(c, leaves))
    return obj


def _describe(d: Any) -> str:
    """A text form of a structure: what fingerprints and compares it (no live objects)."""
    tag = d[0]
    if tag in ("none", "leaf"):
        return tag
    if tag == "namedtuple":
        kids = ",".join(_describe(c) for c in d[2])
        return f"{d[1].__module__}.{d[1].__qualname__}({kids})"
    if tag in ("tuple", "list"):
        return f"{tag}({','.join(_describe(c) for c in d[1])})"
    if tag == "dict":
        return (
            "dict("
            + ",".join(f"{k!r}:{_describe(c)}" for k, c in zip(d[1], d[2], strict=True))
            + ")"
        )
    if tag == "registered":
        return describe_node(d[1]) + "(" + ",".join(_describe(c) for c in d[2]) + ")"
    fields = ",".join(f"{n}={_describe(c)}" for n, c in zip(d[2], d[3], strict=True))
    return f"{d[1].__module__}.{d[1].__qualname__}({fields})"


def _kind(tree: Any) -> str:
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
    if a is None or isinstance(a, (_NUMBER, bool)) or _is_array(a):
        return False
    if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
        if len(a) == 0 or _numbers(a):
            return False
        try:
            return np.asarray(a).dtype.kind not in "fiub"
        except (ValueError, TypeError):  # ragged: not one array
            return True
    if isinstance(a, Mapping) or hasattr(a, "_fields"):
        return True
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return True
    return _registered_node(a) is not None


def _leaf_values(path: str, leaf: Any, what: str) -> np.ndarray:
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


def _precision(dtype_name: str) -> int:
    """Bits of a float dtype's name (``"float32"``: 32; float64 and anything else: 64)."""
    return {"float16": 16, "bfloat16": 16, "float32": 32}.get(dtype_name, 64)


def _common_precision(
    parts: list[Any], paths: tuple[str, ...], src: Any, what: str, stacklevel: int = 5
) -> list[Any]:
    """``parts`` (the leaves, native arrays of ``src`` or numpy) as they are when they share
    one float precision; where float32 (or float16) leaves meet float64 ones, a
    :class:`~simdiff.PrecisionWarning` naming the lower-precision leaves, and every part
    cast to float64 (the promotion, made explicit)."""
    if len({p.dtype for p in parts}) == 1:
        return parts  # one dtype (the common case: a set of a few attribute reads)
    names = [(src.dtype_name(p) if src is not None else p.dtype.name) for p in parts]
    bits = [_precision(n) for n in names if n.startswith(("float", "bfloat"))]
    if not bits or min(bits) == max(bits) or max(bits) < 64:
        return parts  # one float precision (integers are exact in either)
    low = [f"{p or 'x'!r} ({n})" for p, n in zip(paths, names, strict=True) if _precision(n) < 64]
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


class ParamSpec:
    """The structure of a tree of parameters: its leaves' paths, shapes and scalar names.

    Made by :meth:`from_tree`; a :class:`simdiff.Problem` built from
    structured ``x0`` keeps one as ``problem.param_spec``.

    Attributes
    ----------
    n : int
        Number of scalars (the length of the flat vector).
    paths : tuple of str
        One per leaf, e.g. ``("alpha", "k", "w.b")``.
    shapes : tuple of tuple of int
        The leaves' shapes (``()`` for a scalar).
    names : tuple of str
        One per scalar, in flat order: ``"alpha"``, ``"k[0]"``, ``"w.b[1,2]"``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> spec, flat = simdiff.ParamSpec.from_tree({"b": np.ones((1, 2)), "a": 3.0})
    >>> spec.names, flat
    (('a', 'b[0,0]', 'b[0,1]'), array([3., 1., 1.]))
    >>> spec.unflatten(np.arange(3.0))["b"]
    array([[1., 2.]])
    """

    def __init__(self, treedef: Any, paths: tuple[str, ...], shapes: tuple[tuple[int, ...], ...]):
        self.treedef = treedef
        self.paths = paths
        self.shapes = shapes
        sizes = [math.prod(s) for s in shapes]
        self.offsets = tuple(int(o) for o in np.cumsum([0, *sizes]))
        self.n = self.offsets[-1]
        names: list[str] = []
        for path, shape in zip(paths, shapes, strict=True):
            if shape == ():
                names.append(path or "x")
            else:
                names += [f"{path}[{','.join(map(str, i))}]" for i in np.ndindex(*shape)]
        self.names = tuple(names)
        self._index = {name: i for i, name in enumerate(self.names)}
        self._leaf = {path: k for k, path in enumerate(paths)}
        self._scalars = all(shape == () for shape in shapes)
        self._bounds = tuple(zip(self.offsets[:-1], self.offsets[1:], strict=True))
        #: The keys of a flat dict of scalars (the common case of named parameters): its
        #: points are read in one step.
        flat_dict = treedef[0] == "dict" and all(c == _LEAF for c in treedef[2])
        self._scalar_keys = treedef[1] if flat_dict and self._scalars else None
        #: ``(key, (..., i))`` of a flat dict of scalars: its results are split by these indices.
        self._scalar_items = tuple(
            (k, (Ellipsis, i)) for i, k in enumerate(self._scalar_keys or ())
        )
        #: The keys of a dict whose values are the leaves (scalars or arrays), else None.
        self._dict_keys = treedef[1] if flat_dict else None
        self._whole = 0 if len(shapes) == 1 and len(shapes[0]) == 1 else None
        self._vectors = all(len(shape) == 1 for shape in shapes)
        self.key = _describe(treedef) + repr(tuple(zip(paths, shapes, strict=True)))

    @classmethod
    def named(cls, names: Any) -> ParamSpec:
        """A flat spec whose scalars are called ``names`` (a tuple of scalar leaves): what
        labels the results of a problem with a flat ``x0`` (``problem.param_names``)."""
        names = tuple(str(v) for v in names)
        return cls(("tuple", (("leaf",),) * len(names)), names, ((),) * len(names))

    @classmethod
    def from_tree(cls, tree: Any, what: str = "x0") -> tuple[ParamSpec, np.ndarray]:
        """The spec of ``tree`` and its leaves as one flat float64 vector.

        Raises :class:`~simdiff.errors.DTypeError` for a leaf that is not a
        real number or array (a string, a bool, a complex array), naming it,
        and :class:`~simdiff.errors.StructureError` for a tree without any
        scalar (an empty dict).
        """
        leaves: list[tuple[str, Any]] = []
        treedef = _walk(tree, "", leaves)
        values = [_leaf_values(p, leaf, what) for p, leaf in leaves]
        floats = [v for v in values if v.dtype.kind == "f"]  # integers: exact in float64
        paths = tuple(p for (p, _), v in zip(leaves, values, strict=True) if v.dtype.kind == "f")
        if floats:
            _common_precision(floats, paths, None, what, stacklevel=4)
        values = [v.astype(np.float64) for v in values]
        spec = cls(treedef, tuple(p for p, _ in leaves), tuple(v.shape for v in values))
        if spec.n == 0:
            raise StructureError(
                f"{what} must hold at least one parameter; got an empty {_kind(tree)} "
                f"({str(tree)[:40]})"
            )
        flat = np.concatenate([v.reshape(-1) for v in values])
        return spec, flat

    # ------------------------------------------------------------------ in and out
    def is_input(self, a: Any) -> bool:
        """Whether ``a``, given for a point or direction, is a tree of this structure's kind
        (:func:`is_tree`; for a structure whose root is a list or tuple, any such list)."""
        kind = type(a)
        if kind is dict:
            return True
        if kind is np.ndarray or kind in _ARRAY_TYPES:
            return False
        if self.treedef[0] in ("list", "tuple") and kind in (list, tuple):
            return True
        if _is_array(a):  # a framework's array: its type is remembered (read by type)
            _ARRAY_TYPES.add(kind)
            return False
        return is_tree(a)

    def leaves(self, tree: Any) -> list[Any]:
        """The leaves of ``tree`` in flat order (any structure; nothing is checked)."""
        fast: list[Any] = []
        if _fast_leaves(tree, self.treedef, fast):
            return fast
        found: list[tuple[str, Any]] = []
        _walk(tree, "", found)
        return [leaf for _, leaf in found]

    def matching_leaves(self, tree: Any) -> list[Any] | None:
        """The leaves of ``tree`` in flat order where it has this structure (containers of
        the same kinds and keys; the leaves are not checked), else None."""
        keys = self._dict_keys
        if keys is not None and type(tree) is dict and len(tree) == len(keys):
            try:
                return [tree[k] for k in keys]
            except KeyError:
                return None
        found: list[Any] = []
        return found if _fast_leaves(tree, self.treedef, found) else None

    def flatten(self, tree: Any, what: str = "x") -> Any:
        """``tree`` (this structure; each leaf of its shape, or all with one leading batch
        axis) as a flat vector ``(n,)`` or ``(batch, n)`` in the leaves' framework.

        Leaves of jax or torch stay in their framework (traced leaves stay
        traced); numpy leaves and numbers give numpy.  A tree of another
        structure raises :class:`~simdiff.errors.StructureError` naming the
        difference.
        """
        keys = self._dict_keys
        if keys is not None and type(tree) is dict and len(tree) == len(keys):
            if self._whole is not None:  # {"w": vector}: a float64 numpy vector is copied
                v = tree.get(keys[0])
                if type(v) is np.ndarray and v.shape == self.shapes[0] and v.dtype.char == "d":
                    return v.copy()
            try:
                values = [tree[k] for k in keys]
            except KeyError:
                values = []
            if values and self._scalars and _HOST_SCALARS.issuperset(map(type, values)):
                return np.array(values, dtype=np.float64)
            if values and all(
                type(v) is np.ndarray and v.shape == s and v.dtype.char == "d"
                for v, s in zip(values, self.shapes, strict=True)
            ):  # float64 numpy leaves of their shapes, unbatched: one concatenation
                return np.concatenate(values if self._vectors else [v.reshape(-1) for v in values])
        fast: list[Any] = []
        if _fast_leaves(tree, self.treedef, fast):
            if self._scalars and _HOST_SCALARS.issuperset(map(type, fast)):
                return np.array(fast, dtype=np.float64)  # numbers only: one array, no checks
            if all(
                type(v) is np.ndarray and v.shape == s and v.dtype.char == "d"
                for v, s in zip(fast, self.shapes, strict=True)
            ):
                return np.concatenate([v.reshape(-1) for v in fast])  # numpy, unbatched
            joined = self._join_native(fast)
            if joined is not None:
                return joined
            leaves = list(zip(self.paths, fast, strict=True))
        else:
            leaves = []
            treedef = _walk(tree, "", leaves)
            got_paths = tuple(p for p, _ in leaves)
            if got_paths != self.paths or _describe(treedef) != _describe(self.treedef):
                raise StructureError(
                    f"{what} must have the structure of the problem's parameters: leaves "
                    f"{list(self.paths)}; got a {_kind(tree)} with leaves {list(got_paths)}"
                )
        src = _framework(leaves)
        batch: int | None = None
        parts: list[Any] = []
        for (path, leaf), shape in zip(leaves, self.shapes, strict=True):
            if src is None or not src.is_native(leaf):
                leaf = np.asarray(leaf) if src is None else src.from_numpy(np.asarray(leaf), None)
            lshape = tuple(leaf.shape)  # ints (torch.Size is a tuple of ints)
            if lshape == shape:
                b = None
            elif len(lshape) == len(shape) + 1 and lshape[1:] == shape:
                b = lshape[0]
            else:
                raise StructureError(
                    f"{what}[{path!r}] must have shape {shape} (or (batch, *{shape})); got {lshape}"
                )
            if parts and b != batch:
                raise StructureError(
                    f"{what}: every leaf needs the same leading batch axis, or none; "
                    f"{path!r} has shape {lshape}"
                )
            batch = b
            parts.append(leaf)
        lead = () if batch is None else (batch,)
        parts = _common_precision(parts, self.paths, src, what)
        if src is None:
            return np.concatenate([np.reshape(p, (*lead, -1)) for p in parts], axis=-1)
        return src.join(parts, lead)

    def host_vector(self, leaves: list[Any]) -> np.ndarray | None:
        """The float64 numpy vector of ``leaves`` (flat order) where each is a number of a
        scalar leaf or a float64 numpy array of its leaf's shape (unbatched): one
        ``np.array`` or one concatenation; None otherwise (:meth:`flatten` checks and names
        what differs)."""
        if self._scalars and _HOST_SCALARS.issuperset(map(type, leaves)):
            return np.array(leaves, dtype=np.float64)
        for v, shape in zip(leaves, self.shapes, strict=True):
            if type(v) is not np.ndarray or v.shape != shape or v.dtype.char != "d":
                if shape != () or type(v) not in _HOST_SCALARS:
                    return None
        if self._vectors:
            return np.concatenate(leaves)
        return np.concatenate([np.reshape(v, -1) for v in leaves])

    def _join_native(self, leaves: list[Any]) -> Any:
        """The flat vector of ``leaves`` where all are arrays of one differentiable framework
        of one type and dtype, each of its leaf's shape (unbatched): the vector itself for a
        one-vector structure, else one join; None otherwise (the general path checks and
        names what differs)."""
        first = leaves[0]
        kind = type(first)
        if kind in _HOST_SCALARS or kind is np.ndarray or any(type(v) is not kind for v in leaves):
            return None
        src = backend_of(first)
        if not (src.differentiable and src.is_native(first)):
            return None
        dtype = first.dtype
        for v, shape in zip(leaves, self.shapes, strict=True):
            if v.dtype != dtype or v.shape != shape:  # torch.Size is a tuple
                return None
        if self._whole is not None:
            return first  # as a flat vector of the framework is taken: no copy
        return src.join(leaves, ())

    def _assemble(self, parts: list[Any]) -> Any:
        """The tree of the leaves ``parts`` (flat order): a dict of leaves in one step."""
        keys = self._dict_keys
        if keys is not None:
            return dict(zip(keys, parts, strict=True))
        return _build(self.treedef, iter(parts))

    def unflatten(self, flat: Any, ops: Any = None) -> Any:
        """The tree of ``flat`` (shape ``(..., n)``: the last axis is split into the leaves).

        With ``ops`` (inside a problem's function, one point ``(n,)``), by the
        context's :meth:`~simdiff.backends.OpsBase.split_leaves`: slices
        (scalars ``x[i]``, arrays ``ops.reshape(x[i:j], shape)``), on torch one
        ``unbind`` or ``split`` of views; differentiable on every backend.
        """
        if self._whole is not None:  # one leaf of shape (n,): the vector itself, no slice
            keys = self._dict_keys
            return {keys[0]: flat} if keys is not None else self._assemble([flat])
        if ops is not None:  # inside the function: as the context splits best
            return self._assemble(ops.split_leaves(flat, self._bounds, self.shapes))
        if type(flat) is not np.ndarray:
            src = backend_of(flat)
            if src.differentiable and src.is_native(flat):  # one call, not one op per leaf
                return self._assemble(src.split(flat, self._bounds, self.shapes))
        keys = self._scalar_keys
        if keys is not None:  # a flat dict of scalars: one comprehension
            return {k: flat[i] for k, i in self._scalar_items}  # 0-d (with ...), or batched
        leaves = []
        lead = tuple(flat.shape[:-1])
        for (a, b), shape in zip(self._bounds, self.shapes, strict=True):
            if shape == ():
                leaves.append(flat[..., a])  # a 0-d array (with ..., not a scalar)
            elif len(shape) == 1:
                leaves.append(flat[..., a:b])
            else:
                leaves.append(flat[..., a:b].reshape((*lead, *shape)))
        return self._assemble(leaves)

    def unflatten_tree(self, out: Any, kind: str, order: int = 0) -> Any:
        """A derivative result in the parameters' structure, by what it is (``kind``).

        ``grad``, ``hvp``, ``vjp``, ``jacobian``: the last axis (``n``) is split
        into the tree (leaves ``(..., *shape)``); ``value_and_grad``: its
        gradient; ``hessian``: a :class:`Labelled` with two named axes;
        ``derivative_tensor`` of order ``d >= 2``: ``d`` named axes.  Other
        kinds (values, JVPs, directional derivatives) are not indexed by the
        parameters and are returned as they are.
        """
        if kind in ("grad", "hvp", "vjp", "jacobian"):
            return self.unflatten(out)
        if kind == "value_and_grad":
            return out[0], self.unflatten(out[1])
        if kind == "hessian":
            return Labelled(out, self, 2)
        if kind == "derivative_tensor" and order == 1:
            return self.unflatten(out)
        if kind == "derivative_tensor" and order >= 2:
            return Labelled(out, self, order)
        return out

    # ------------------------------------------------------------------ lookup
    def index(self, name: str) -> int:
        """Flat position of the scalar ``name``; :class:`~simdiff.errors.NotFoundError` if none."""
        try:
            return self._index[name]
        except KeyError:
            raise NotFoundError(
                f"no parameter named {name!r}; the names are {list(self.names)[:12]}"
                + (" ..." if self.n > 12 else "")
            ) from None

    def block(self, name: str) -> tuple[slice | int, tuple[int, ...]]:
        """``(position, shape)`` of ``name``: a leaf path (a slice and the leaf's shape) or a
        scalar name (its index and ``()``)."""
        k = self._leaf.get(name)
        if k is not None and self.shapes[k] != ():
            return slice(self.offsets[k], self.offsets[k + 1]), self.shapes[k]
        return self.index(name), ()

    def per_scalar(self, values: Mapping[str, Any], what: str, default: Any = _REQUIRED) -> list:
        """One entry per scalar, in flat order, from ``values`` keyed by name.

        A key is a scalar name (``"alpha"``, ``"k[1]"``) or the path of an
        array-valued leaf (``"k"``: its value applies to every scalar of the
        leaf); a scalar name overrides its leaf's entry.  Scalars without an
        entry get ``default``; without a default they raise
        :class:`~simdiff.errors.InputError` naming them.  An unknown key raises
        :class:`~simdiff.errors.NotFoundError` listing the names.

        Examples
        --------
        >>> import numpy as np, simdiff
        >>> spec, _ = simdiff.ParamSpec.from_tree({"a": 1.0, "k": np.zeros(2)})
        >>> spec.per_scalar({"k": (0, 1), "k[1]": (0, 2)}, "bounds", default=None)
        [None, (0, 1), (0, 2)]
        """
        out = [default] * self.n
        leaf_keys = [
            k for k in values if self._leaf.get(k) is not None and self.shapes[self._leaf[k]] != ()
        ]
        for key in leaf_keys:  # leaves first: a scalar name then overrides its leaf
            k = self._leaf[key]
            out[self.offsets[k] : self.offsets[k + 1]] = [values[key]] * (
                self.offsets[k + 1] - self.offsets[k]
            )
        unknown = []
        for key, value in values.items():
            if key in leaf_keys:
                continue
            i = self._index.get(key)
            if i is None:
                unknown.append(key)
            else:
                out[i] = value
        if unknown:
            raise NotFoundError(
                f"{what}: no parameter named {', '.join(map(repr, unknown))}; the names are "
                f"{list(self.names)[:12]}"
                + (" ..." if self.n > 12 else "")
                + (f" and the leaves {list(self.paths)}" if not self._scalars else "")
            )
        missing = [name for name, v in zip(self.names, out, strict=True) if v is _REQUIRED]
        if missing:
            raise InputError(
                f"{what} given by name need one per input {list(self.names)}; missing {missing}"
            )
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParamSpec) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the structure: a text of its kinds, keys, paths and shapes."""
        return {"structure": self.key}

    def __repr__(self) -> str:
        leaves = ", ".join(
            f"{p or 'x'}{list(s) if s else ''}"
            for p, s in zip(self.paths, self.shapes, strict=True)
        )
        return f"ParamSpec(n={self.n}: {leaves})"


class TreeFunction:
    """``fn(tree, ops)`` as a function of the flat vector: the tree rebuilt by slicing.

    What :class:`simdiff.Problem` keeps as ``problem.fn`` for structured
    ``x0``; ``fn`` is the user's function, ``spec`` the structure.
    """

    __slots__ = ("__name__", "fn", "spec")  # no __dict__: the fingerprint's watch stays small

    def __init__(self, fn: Any, spec: ParamSpec) -> None:
        self.fn = fn
        self.spec = spec
        self.__name__ = str(getattr(fn, "__name__", "fn"))

    def __call__(self, x: Any, ops: Any) -> Any:
        return self.fn(self.spec.unflatten(x, ops), ops)

    def __fingerprint__(self) -> dict[str, Any]:
        return {"fn": self.fn, "spec": self.spec.key}


class TreeRhs:
    """An ODE right-hand side ``rhs(t, y, p, ops)`` of structured ``p``, called with flat ``p``."""

    __slots__ = ("__name__", "rhs", "spec")  # no __dict__: the fingerprint's watch stays small

    def __init__(self, rhs: Any, spec: ParamSpec) -> None:
        self.rhs = rhs
        self.spec = spec
        self.__name__ = str(getattr(rhs, "__name__", "rhs"))

    def __call__(self, t: Any, y: Any, p: Any, ops: Any) -> Any:
        return self.rhs(t, y, self.spec.unflatten(p, ops), ops)

    def __fingerprint__(self) -> dict[str, Any]:
        return {"rhs": self.rhs, "spec": self.spec.key}
