"""Arrays labelled by parameter names: :class:`Labelled` (a labelled Hessian) and text tables.

A :class:`Labelled` holds a plain array whose last axes are indexed by the
scalar names of a :class:`~simdiff.ParamSpec` (``H["alpha", "beta"]``, a leaf's
block ``H["k", "alpha"]``); the sensitivity results print their per-parameter
columns with :func:`columns_table`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from simdiff.backends import backend_of
from simdiff.backends._pytrees import register_node
from simdiff.errors import StructureError

__all__ = ["Labelled", "Labels", "columns_table", "labelled_table"]


class Labels(Protocol):
    """What a :class:`Labelled` reads of its labels (a :class:`~simdiff.ParamSpec`)."""

    @property
    def names(self) -> tuple[str, ...]:
        """The scalar names, in flat order."""
        ...

    def block(self, name: str) -> tuple[slice | int, tuple[int, ...]]:
        """The flat index (or slice) of ``name`` and the shape of its block."""
        ...


def _register() -> None:
    """Make :class:`Labelled` a pytree (its array a child) of JAX and of torch once they are
    imported, so a labelled Hessian can leave ``jax.jit`` and cross ``jax.vmap`` and the
    ``torch.func`` transforms (``vmap``, ``jacrev``, ...)."""
    register_node(
        Labelled,
        lambda m: ((m.data,), (m.spec, m.axes)),
        lambda aux, kids: Labelled(kids[0], aux[0], aux[1]),
    )


class Labelled:
    """An array whose last ``axes`` axes are indexed by parameter names (a labelled Hessian).

    ``H["alpha", "beta"]`` is one entry (``data[..., i, j]``); a leaf path of
    an array-valued leaf gives its block, reshaped to the leaves' shapes
    (``H["k", "alpha"]`` has shape ``(3,)`` for ``k`` of shape ``(3,)``);
    integer and slice keys index ``data`` as an array.  ``np.asarray(H)``,
    ``H.to_numpy()`` and ``H.data`` give the plain array in the flat order of
    ``H.names``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda q, ops: q["a"] ** 2 * q["b"], x0={"a": 1.0, "b": 2.0})
    >>> H = simdiff.hessian(p)
    >>> float(H["a", "b"]), H.names
    (2.0, ('a', 'b'))
    >>> print(H)
         a    b
    a  4.0  2.0
    b  2.0  0.0
    """

    def __init__(self, data: Any, spec: Labels, axes: int = 2) -> None:
        self.data = data
        self.spec = spec
        self.axes = int(axes)
        _register()

    @property
    def names(self) -> tuple[str, ...]:
        """The scalar names of each labelled axis, in flat order."""
        return self.spec.names

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.data.shape)

    def to_numpy(self) -> np.ndarray:
        """The plain array (numpy; a torch or jax result is converted)."""
        return np.asarray(backend_of(self.data).to_numpy(self.data))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.to_numpy()
        return a if dtype is None else a.astype(dtype)

    def __getitem__(self, key: Any) -> Any:
        keys = key if isinstance(key, tuple) else (key,)
        if not keys or not all(isinstance(k, str) for k in keys):
            return self.data[key]
        if len(keys) != self.axes:
            raise StructureError(
                f"a labelled array with {self.axes} named axes takes {self.axes} names; "
                f"got {len(keys)} ({keys})"
            )
        blocks = [self.spec.block(k) for k in keys]
        lead = tuple(self.data.shape[: self.data.ndim - self.axes])
        index = (Ellipsis, *(b for b, _ in blocks))
        out = self.data[index]
        shape = (*lead, *(d for _, s in blocks for d in s))
        return out.reshape(shape) if tuple(out.shape) != shape else out

    def table(self, digits: int = 6) -> str:
        """The matrix as a text table with the names on both sides (two named axes, no batch)."""
        a = self.to_numpy()
        if a.ndim != 2 or self.axes != 2:
            return repr(a)
        return labelled_table(a, self.names, self.names, digits)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"Labelled(shape={self.shape}, names={list(self.names)})\n{self.table()}"


def _cell(v: float, digits: int) -> str:
    s = f"{v:.{digits}g}"
    return s + ".0" if s.lstrip("-").isdigit() else s


def labelled_table(a: np.ndarray, rows: Any, columns: Any, digits: int = 6) -> str:
    """A 2-D array as an aligned text table with row and column labels."""
    cells = [[_cell(float(v), digits) for v in row] for row in np.asarray(a)]
    rows = [str(r) for r in rows]
    columns = [str(c) for c in columns]
    w0 = max(len(r) for r in rows)
    widths = [max(len(c), *(len(r[j]) for r in cells)) for j, c in enumerate(columns)]
    head = " " * w0 + "".join("  " + c.rjust(w) for c, w in zip(columns, widths, strict=True))
    body = [r.ljust(w0) + "".join("  " + v.rjust(w) for v, w in zip(cells[i], widths, strict=True))
            for i, r in enumerate(rows)]  # fmt: skip
    return "\n".join([head, *body])


def columns_table(columns: Mapping[str, Any], rows: Any, digits: int = 6) -> str:
    """Named 1-D columns (each of length ``len(rows)``) as a table with one row per name."""
    a = np.stack([np.asarray(v, dtype=np.float64) for v in columns.values()], axis=1)
    return labelled_table(a, rows, list(columns), digits)
