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

import difflib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from simdiff.backends import backend_of
from simdiff.backends._pytrees import register_node
from simdiff.core import trees
from simdiff.core.labelled import Labelled
from simdiff.core.trees import is_tree
from simdiff.errors import (
    InputError,
    NotFoundError,
    StructureError,
)

__all__ = ["ParamSpec", "TreeFunction", "TreeRhs", "is_tree"]

#: per_scalar's "no default": every scalar needs an entry.
_REQUIRED = object()


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
        flat_dict = treedef[0] == "dict" and all(c == trees.LEAF for c in treedef[2])
        self._scalar_keys = treedef[1] if flat_dict and self._scalars else None
        #: ``(key, (..., i))`` of a flat dict of scalars: its results are split by these indices.
        self._scalar_items = tuple(
            (k, (Ellipsis, i)) for i, k in enumerate(self._scalar_keys or ())
        )
        #: The keys of a dict whose values are the leaves (scalars or arrays), else None.
        self._dict_keys = treedef[1] if flat_dict else None
        self._whole = 0 if len(shapes) == 1 and len(shapes[0]) == 1 else None
        self._vectors = all(len(shape) == 1 for shape in shapes)
        self.key = trees.describe(treedef) + repr(tuple(zip(paths, shapes, strict=True)))

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
        treedef = trees.walk(tree, "", leaves)
        values = [trees.leaf_values(p, leaf, what) for p, leaf in leaves]
        floats = [v for v in values if v.dtype.kind == "f"]  # integers: exact in float64
        paths = tuple(p for (p, _), v in zip(leaves, values, strict=True) if v.dtype.kind == "f")
        if floats:
            trees.common_precision(floats, paths, None, what, stacklevel=4)
        values = [v.astype(np.float64) for v in values]
        spec = cls(treedef, tuple(p for p, _ in leaves), tuple(v.shape for v in values))
        if spec.n == 0:
            raise StructureError(
                f"{what} must hold at least one parameter; got an empty {trees.kind(tree)} "
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
        if kind is np.ndarray or kind in trees.ARRAY_TYPES:
            return False
        if self.treedef[0] in ("list", "tuple") and kind in (list, tuple):
            return True
        if trees.is_array(a):  # a framework's array: its type is remembered (read by type)
            trees.ARRAY_TYPES.add(kind)
            return False
        return is_tree(a)

    def leaves(self, tree: Any) -> list[Any]:
        """The leaves of ``tree`` in flat order (any structure; nothing is checked)."""
        fast: list[Any] = []
        if trees.fast_leaves(tree, self.treedef, fast):
            return fast
        found: list[tuple[str, Any]] = []
        trees.walk(tree, "", found)
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
        return found if trees.fast_leaves(tree, self.treedef, found) else None

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
            if values and self._scalars and trees.HOST_SCALARS.issuperset(map(type, values)):
                return np.array(values, dtype=np.float64)
            if values and all(
                type(v) is np.ndarray and v.shape == s and v.dtype.char == "d"
                for v, s in zip(values, self.shapes, strict=True)
            ):  # float64 numpy leaves of their shapes, unbatched: one concatenation
                return np.concatenate(values if self._vectors else [v.reshape(-1) for v in values])
        fast: list[Any] = []
        if trees.fast_leaves(tree, self.treedef, fast):
            if self._scalars and trees.HOST_SCALARS.issuperset(map(type, fast)):
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
            treedef = trees.walk(tree, "", leaves)
            got_paths = tuple(p for p, _ in leaves)
            if got_paths != self.paths or trees.describe(treedef) != trees.describe(self.treedef):
                raise StructureError(
                    f"{what} must have the structure of the problem's parameters: leaves "
                    f"{list(self.paths)}; got a {trees.kind(tree)} with leaves {list(got_paths)}"
                )
        src = trees.framework(leaves)
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
        parts = trees.common_precision(parts, self.paths, src, what)
        if src is None:
            return np.concatenate([np.reshape(p, (*lead, -1)) for p in parts], axis=-1)
        return src.join(parts, lead)

    def host_vector(self, leaves: list[Any]) -> np.ndarray | None:
        """The float64 numpy vector of ``leaves`` (flat order) where each is a number of a
        scalar leaf or a float64 numpy array of its leaf's shape (unbatched): one
        ``np.array`` or one concatenation; None otherwise (:meth:`flatten` checks and names
        what differs)."""
        if self._scalars and trees.HOST_SCALARS.issuperset(map(type, leaves)):
            return np.array(leaves, dtype=np.float64)
        for v, shape in zip(leaves, self.shapes, strict=True):
            if type(v) is not np.ndarray or v.shape != shape or v.dtype.char != "d":
                if shape != () or type(v) not in trees.HOST_SCALARS:
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
        if (
            kind in trees.HOST_SCALARS
            or kind is np.ndarray
            or any(type(v) is not kind for v in leaves)
        ):
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
        return trees.build(self.treedef, iter(parts))

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
        return self.fn(_named(self.spec.unflatten(x, ops), self.__name__), ops)

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
        return self.rhs(t, y, _named(self.spec.unflatten(p, ops), self.__name__), ops)


class ParamDict(dict):
    """The parameters a problem's function receives when given as a dict: a plain dict whose
    missing keys raise :class:`~simdiff.errors.NotFoundError` (a ``KeyError`` too) naming the
    key, the function that read it, a close name where there is one and all the names; a
    pytree node like ``dict`` for JAX and torch."""

    __slots__ = ("reader",)
    reader: str

    def __missing__(self, key: Any) -> Any:
        close = [k for k in self if isinstance(k, str) and isinstance(key, str) and _close(k, key)]
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise NotFoundError(
            f"{self.reader} reads the parameter {key!r}, which the problem's parameters do "
            f"not have{hint}; they are {list(self)}"
        )


def _close(a: str, b: str) -> bool:
    """Whether two names are alike (one edit or a swap of neighbours: "detla", "delta")."""
    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.75


def _named(tree: Any, reader: str) -> Any:
    """``tree`` as a :class:`ParamDict` where it is a dict (registered as a pytree node)."""
    if type(tree) is not dict:
        return tree
    register_node(
        ParamDict,
        lambda d: (tuple(d[k] for k in sorted(d)), (tuple(sorted(d)), d.reader)),
        _param_dict,
    )
    out = ParamDict(tree)
    out.reader = reader
    return out


def _param_dict(aux: tuple[tuple[Any, ...], str], children: Any) -> ParamDict:
    out = ParamDict(zip(aux[0], children, strict=True))
    out.reader = aux[1]
    return out

    def __fingerprint__(self) -> dict[str, Any]:
        return {"rhs": self.rhs, "spec": self.spec.key}
