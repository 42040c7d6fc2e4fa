"""Sparse Jacobians for stiff solvers: a pattern, its column colouring, compressed forward mode.

A method-of-lines right-hand side couples each state to a few neighbours, so
``J = df/dy`` has a handful of nonzeros a row.  Columns whose nonzero rows
are disjoint can share one forward-mode product: with the columns split into
``k`` such groups (a *colouring*, Curtis, Powell & Reid 1974), ``J`` follows
from ``k`` Jacobian-vector products instead of ``dim``, and each entry is read
back from the product of its column's group ("decompression").  The
products are the context's own ``ops.jacfwd`` of the right-hand side in the
``k`` group directions, so the result differentiates to every order as the
dense ``jacfwd`` does.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.backends import get_ops
from simdiff.errors import InputError, InputTypeError, ShapeError, UnsupportedError

__all__ = [
    "JacobianSparsity",
    "colour_columns",
    "compressed_rhs_jacobian",
    "detect_sparsity",
    "sparse_rhs_jacobian",
]

#: ``rhs(t, y, p, ops) -> dy/dt``, as :data:`simdiff.ode.solvers.Rhs` (this module sits below
#: the solvers, which import it).
Rhs = Callable[[Any, Any, Any, Any], Any]


def colour_columns(mask: np.ndarray) -> np.ndarray:
    """A greedy column colouring of a boolean ``(m, n)`` pattern: ``(n,)`` integer groups.

    Two columns get different colours whenever some row has a nonzero in
    both, so the columns of one colour have pairwise disjoint rows.  Columns
    are visited in decreasing order of their number of conflicts (largest
    first, as in Curtis-Powell-Reid and SciPy's ``group_columns``); each takes
    the smallest colour none of its already coloured neighbours holds.  A
    banded pattern of total bandwidth ``w`` needs at most ``w`` colours; the
    5-point Laplacian of a 2-D grid with two interleaved species needs about 10.

    Examples
    --------
    >>> import numpy as np
    >>> c = colour_columns(np.eye(3, dtype=bool) | np.eye(3, k=1, dtype=bool))
    >>> int(c.max()) + 1, bool(c[0] == c[2] != c[1])  # two colours; columns 0 and 2 share one
    (2, True)
    """
    import scipy.sparse

    s = scipy.sparse.csc_matrix(np.asarray(mask, dtype=bool), dtype=np.int8)
    conflict = (s.T @ s).tocsr()  # columns j, k conflict iff they share a row
    n = conflict.shape[0]
    degree = np.diff(conflict.indptr)
    colours = np.full(n, -1, dtype=np.int64)
    for j in np.argsort(-degree, kind="stable"):
        nb = conflict.indices[conflict.indptr[j] : conflict.indptr[j + 1]]
        taken = set(colours[nb][colours[nb] >= 0].tolist())
        c = 0
        while c in taken:
            c += 1
        colours[j] = c
    return colours


def _as_mask(pattern: Any, n: int | None = None) -> np.ndarray:
    """A boolean ``(n, n)`` numpy mask from an array-like or a scipy.sparse pattern."""
    import scipy.sparse

    if scipy.sparse.issparse(pattern):
        a = np.asarray(pattern.toarray()) != 0
    elif isinstance(pattern, (np.ndarray, list, tuple)):
        a = np.asarray(pattern)
        if a.dtype.kind not in "biuf":
            raise InputTypeError(
                f"jac_sparsity must be a boolean (dim, dim) array or a scipy.sparse matrix; "
                f"got an array of dtype {a.dtype}"
            )
        a = a != 0
    else:
        raise InputTypeError(
            "jac_sparsity must be a boolean (dim, dim) array, a scipy.sparse matrix or "
            f"'detect'; got {type(pattern).__name__}"
        )
    if a.ndim != 2 or a.shape[0] != a.shape[1] or (n is not None and a.shape[0] != n):
        want = "(dim, dim)" if n is None else f"({n}, {n})"
        raise ShapeError(f"jac_sparsity must have shape {want}; got shape {a.shape}")
    return a


@dataclass(frozen=True, eq=False)
class JacobianSparsity:
    """The nonzero pattern of ``df/dy`` and the column colouring that compresses it.

    Build one with :meth:`from_pattern` (or :func:`detect_sparsity`); the
    stiff solvers take it, or the raw pattern, as ``jac_sparsity``.

    Attributes
    ----------
    dim : int
        The number of states.
    rows, cols : (nnz,) int arrays
        The nonzeros (row-major order), read-only.
    colours : (dim,) int array
        The group of each column (:func:`colour_columns`).
    n_colours : int
        The number of forward-mode products a Jacobian costs (plus one for
        ``df/dt``).
    lower, upper : int
        The lower and upper bandwidths (``J[i, j] = 0`` for ``i - j > lower``
        or ``j - i > upper``).
    """

    dim: int
    rows: np.ndarray
    cols: np.ndarray
    colours: np.ndarray
    n_colours: int

    @classmethod
    def from_pattern(cls, pattern: Any, dim: int | None = None) -> JacobianSparsity:
        """From a boolean ``(dim, dim)`` array-like or a scipy.sparse matrix (nonzero = coupled).

        The diagonal is always included (``W = I - h gamma J`` has it anyway).
        """
        if isinstance(pattern, JacobianSparsity):
            if dim is not None and pattern.dim != dim:
                raise ShapeError(
                    f"jac_sparsity must have shape ({dim}, {dim}); got shape "
                    f"({pattern.dim}, {pattern.dim})"
                )
            return pattern
        mask = _as_mask(pattern, dim)
        mask = mask | np.eye(mask.shape[0], dtype=bool)
        rows, cols = np.nonzero(mask)
        colours = colour_columns(mask)
        for a in (rows, cols, colours):
            a.setflags(write=False)
        return cls(int(mask.shape[0]), rows, cols, colours, int(colours.max()) + 1)

    @property
    def nnz(self) -> int:
        """The number of structural nonzeros."""
        return int(self.rows.size)

    @property
    def lower(self) -> int:
        return int(max(0, (self.rows - self.cols).max()))

    @property
    def upper(self) -> int:
        return int(max(0, (self.cols - self.rows).max()))

    def mask(self) -> np.ndarray:
        """The boolean ``(dim, dim)`` pattern."""
        m = np.zeros((self.dim, self.dim), dtype=bool)
        m[self.rows, self.cols] = True
        return m

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, JacobianSparsity)
            and self.dim == other.dim
            and np.array_equal(self.rows, other.rows)
            and np.array_equal(self.cols, other.cols)
        )

    def __hash__(self) -> int:
        return hash((self.dim, self.rows.tobytes(), self.cols.tobytes()))

    def __repr__(self) -> str:
        return (
            f"JacobianSparsity(dim={self.dim}, nnz={self.nnz}, n_colours={self.n_colours}, "
            f"lower={self.lower}, upper={self.upper})"
        )

    def __fingerprint__(self) -> dict[str, Any]:
        """What defines the pattern: its size and nonzeros (the colouring follows from them)."""
        return {"dim": self.dim, "rows": self.rows, "cols": self.cols}


def compressed_rhs_jacobian(
    rhs: Rhs, t: Any, y: Any, p: Any, ops: Any, sp: JacobianSparsity, solver: str = "Rodas5P"
) -> tuple[Any, Any]:
    """``(B, df/dt)``: the compressed Jacobian ``B = J S`` at ``(t, y)`` over the pattern ``sp``.

    One ``ops.jacfwd`` of ``c -> rhs(t, y + c[colours])`` over ``(t, c)``, ``c``
    of length ``sp.n_colours``: ``n_colours + 1`` forward-mode products against
    ``dim + 1`` for the dense Jacobian (``S`` is the 0/1 seed matrix of the
    colouring).  ``J[i, j] = B[i, colours[j]]`` on the pattern.  Shapes
    ``(dim, n_colours)`` and ``(dim,)``.
    """
    colours = np.array(sp.colours)  # writable: torch warns on read-only numpy indices
    z = ops.concat([ops.reshape(t, (1,)), ops.zeros((sp.n_colours,))])

    def g(zz: Any, yy: Any, pp: Any) -> Any:
        return rhs(zz[0], yy + ops.take(zz[1:], colours), pp, ops)

    try:
        jz = ops.jacfwd(g)(z, y, p)
    except UnsupportedError as exc:
        raise UnsupportedError(
            f"{solver} computes df/dy by forward-mode AD, which the {ops.name!r} context lacks; "
            f"pass an analytic jac=jac(t, y, p, ops) to {solver}"
        ) from exc
    return jz[:, 1:], jz[:, 0]


def sparse_rhs_jacobian(
    rhs: Rhs, t: Any, y: Any, p: Any, ops: Any, sp: JacobianSparsity, solver: str = "Rodas5P"
) -> tuple[Any, Any]:
    """``(df/dy, df/dt)`` at ``(t, y)`` by compressed forward mode over the pattern ``sp``.

    :func:`compressed_rhs_jacobian`, decompressed by ``J[i, j] = B[i, colours[j]]``
    on the pattern and zero off it; entries of the true Jacobian off the
    pattern are silently wrong, which is why the solvers check a given
    pattern at construction.  Shapes ``(dim, dim)`` and ``(dim,)``.
    """
    B, ft = compressed_rhs_jacobian(rhs, t, y, p, ops, sp, solver)
    dense = ops.take(B, np.array(sp.colours), axis=1)
    J = ops.where(ops.asarray(sp.mask()), dense, ops.zeros_like(dense))
    return J, ft


def _fd_jacobian(rhs: Rhs, t: float, y: np.ndarray, p: np.ndarray, ops: Any) -> np.ndarray:
    """The numpy context's central-difference ``df/dy`` (structural zeros stay exact zeros)."""
    return np.asarray(ops.jacfwd(lambda yy, pp: rhs(t, yy, pp, ops))(y, p))


def detect_sparsity(
    rhs: Rhs,
    y0: Any,
    params: Any = (),
    t: float = 0.0,
    *,
    n_points: int = 3,
    seed: int = 0,
) -> JacobianSparsity:
    """The pattern of ``df/dy`` seen at ``(t, y0, params)`` and at ``n_points`` points nearby.

    A heuristic: the union of the nonzeros of the numpy context's
    central-difference Jacobian (an entry ``f_i`` that does not read ``y_j``
    is an exact zero) at ``y0`` and at ``y0 + 0.1 (|y0| + 0.1) u`` with
    ``params (1 + 0.1 u')``, ``u, u'`` standard normal.  An entry that
    vanishes at every sampled point (``u * v`` at ``u = 0`` for every
    sample) is missed; where a nonzero can appear later in the solve, give
    the pattern instead.  Costs ``2 dim (n_points + 1)`` right-hand sides.

    Examples
    --------
    >>> import numpy as np
    >>> def rhs(t, y, p, ops):  # a chain: y_i couples to y_{i-1}
    ...     return ops.concat([-y[:1], y[:-1] - y[1:] ** 2])
    >>> sp = detect_sparsity(rhs, np.ones(4))
    >>> (sp.nnz, sp.n_colours, sp.lower, sp.upper)
    (7, 2, 1, 0)
    """
    ops = get_ops("numpy")
    y0 = np.asarray(y0, dtype=np.float64)
    p = np.asarray(params, dtype=np.float64)
    rng = np.random.default_rng(seed)
    mask = np.zeros((y0.size, y0.size), dtype=bool)
    for k in range(n_points + 1):
        y, q = y0, p
        if k > 0:
            y = y0 + 0.1 * (np.abs(y0) + 0.1) * rng.standard_normal(y0.shape)
            q = p * (1.0 + 0.1 * rng.standard_normal(p.shape))
        with np.errstate(all="ignore"):
            jac = _fd_jacobian(rhs, t, y, q, ops)
        mask |= np.isfinite(jac) & (jac != 0)
        mask |= ~np.isfinite(jac)  # a non-finite entry depends on y_j: keep it
    return JacobianSparsity.from_pattern(mask)


def check_pattern(
    rhs: Rhs, t: float, y: np.ndarray, p: np.ndarray, sp: JacobianSparsity, solver: str
) -> None:
    """Raise :class:`~simdiff.errors.InputError` if ``sp`` visibly misses a nonzero of ``df/dy``.

    Compares one central-difference Jacobian-vector product ``J v`` (``v``
    random) with the product of the pattern's compressed-difference Jacobian
    (``2 (n_colours + 1)`` right-hand sides).  A nonzero off the pattern is
    folded into another column of its colour group (or dropped), which
    changes the product; the check fails when the difference exceeds
    ``1e-6`` of the largest row of ``|J_S| |v|``, far above the differences'
    own error (about ``eps^(2/3)`` relative).  Smaller missed entries go
    unseen.
    """
    ops = get_ops("numpy")
    v = np.random.default_rng(1).standard_normal(y.shape)
    eps = np.finfo(np.float64).eps ** (1 / 3)
    with np.errstate(all="ignore"):
        js, _ = sparse_rhs_jacobian(rhs, t, y, p, ops, sp, solver)
        js = np.asarray(js)
        hv = eps * max(1.0, float(np.max(np.abs(y)))) / max(1.0, float(np.max(np.abs(v))))
        up = np.asarray(rhs(t, y + hv * v, p, ops))
        down = np.asarray(rhs(t, y - hv * v, p, ops))
    jv = (up - down) / (2 * hv)
    if not (np.all(np.isfinite(js)) and np.all(np.isfinite(jv))):
        return  # nothing to compare at this point; the solve reports non-finite values
    scale = float(np.max(np.abs(js) @ np.abs(v)))
    resid = np.abs(jv - js @ v)
    i = int(np.argmax(resid))
    if resid[i] > 1e-6 * max(scale, np.finfo(np.float64).tiny):
        raise InputError(
            f"{solver}: jac_sparsity misses nonzeros of df/dy: at t={t:.6g}, y0 the product "
            f"J v differs from the pattern's in row {i} by {resid[i]:.3g} (scale {scale:.3g}); "
            "add the missing couplings to jac_sparsity or pass jac_sparsity='detect'"
        )


# rhs -> pattern detected at construction (ODEProblem calls solver.check with numpy values);
# weak, so that a problem's patterns go with its right-hand side.
_DETECTED: weakref.WeakKeyDictionary[Any, JacobianSparsity] = weakref.WeakKeyDictionary()


# rhs -> the given patterns that passed check_pattern with it: a pattern is structural,
# so it is checked once (at construction), not again at every derivative call's point
# (each check costs 2 (n_colours + 1) right-hand sides).
_CHECKED: weakref.WeakKeyDictionary[Any, set[JacobianSparsity]] = weakref.WeakKeyDictionary()


def resolve(
    spec: Any, rhs: Rhs, t: float, y: np.ndarray, p: np.ndarray, solver: str
) -> JacobianSparsity | None:
    """The pattern for ``jac_sparsity=spec`` at construction: detected, or given and checked.

    A given pattern is checked (:func:`check_pattern`) once per right-hand
    side: later calls with the same ``rhs`` and pattern (a derivative call's
    ``solver.check`` at its point) reuse the verdict.  A failed check is not
    remembered, so it raises again.
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        sp = detect_sparsity(rhs, y, p, t)
        try:
            _DETECTED[rhs] = sp
        except TypeError as exc:
            raise InputTypeError(
                f"{solver}: jac_sparsity='detect' keeps the pattern with the right-hand side, "
                f"which must allow weak references; got {type(rhs).__name__}: pass "
                "jac_sparsity=simdiff.ode.detect_sparsity(rhs, y0, params) instead"
            ) from exc
        return sp
    sp = JacobianSparsity.from_pattern(spec, y.size)
    try:
        checked = _CHECKED.setdefault(rhs, set())
    except TypeError:  # a right-hand side without weak references: checked every time
        checked = set()
    if sp not in checked:
        check_pattern(rhs, t, y, p, sp, solver)
        checked.add(sp)
    return sp


def detected(rhs: Rhs, solver: str) -> JacobianSparsity:
    """The pattern :func:`resolve` detected for ``rhs`` (``jac_sparsity='detect'``)."""
    try:
        return _DETECTED[rhs]
    except (KeyError, TypeError):
        raise InputError(
            f"{solver}: jac_sparsity='detect' detects the pattern when the problem is built "
            "(ODEProblem or simdiff.ode.solve call solver.check); this right-hand side was "
            "not checked: pass jac_sparsity=simdiff.ode.detect_sparsity(rhs, y0, params)"
        ) from None
