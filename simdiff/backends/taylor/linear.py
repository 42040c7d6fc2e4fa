"""Taylor rules for the linear and bilinear operations, and ``scan`` on JAX.

* ``matmul`` and ``einsum`` are bilinear: the product of two series is their
  Cauchy product, ``C_k = sum_{j=0}^k A_j B_{k-j}`` (base calls on single
  coefficients); with one plain operand they act on each coefficient.
* ``linalg.solve(A, B)`` uses ``A_0 X_k = B_k - sum_{j=1}^k A_j X_{k-j}``.
* the FFTs are linear: they act on each coefficient.
* ``scan`` on a jax base is ``lax.scan`` with Taylor arrays as pytrees.

The functions take the :class:`~simdiff.backends.taylor.TaylorOps` as first argument.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from simdiff.backends.taylor.array import TaylorArray
from simdiff.errors import InputError, UnsupportedError

__all__ = ["einsum", "fft", "jax_scan", "matmul", "solve"]


def _is(x: Any) -> bool:
    return isinstance(x, TaylorArray)


# --------------------------------------------------------------------------- matmul


def matmul(T: Any, x1: Any, x2: Any) -> Any:
    """``x1 @ x2`` with Array-API semantics for 1-D operands."""
    b = T.base
    if not (_is(x1) or _is(x2)):
        return b.matmul(x1, x2)
    v1, v2 = x1.ndim == 1, x2.ndim == 1
    a = T.expand_dims(x1, 0) if v1 else x1  # (n,) -> (1, n)
    c = T.expand_dims(x2, -1) if v2 else x2  # (n,) -> (n, 1)
    nd = max(a.ndim, c.ndim)
    if _is(a) and _is(c):
        out = T.s.bilinear(T.coeffs(a, nd), T.coeffs(c, nd), b.matmul, batched=b.matmul)
    elif _is(a):
        out = b.matmul(T.coeffs(a, nd), c)
    elif a.ndim == 2:
        # (A C_k^T)^T for every row k: the rows fold into one matrix product with a
        # fixed right operand, where A @ C_k would be a batch of small products (torch: bmm)
        cc = T.coeffs(c, nd)
        out = _swap(b, b.matmul(_swap(b, cc), b.permute_dims(a, (1, 0))))
    else:
        out = b.matmul(a, T.coeffs(c, nd))
    res = T.wrap(out)
    if v2:
        res = T.squeeze(res, -1)
    if v1:
        res = T.squeeze(res, -2 if not v2 else -1)
    return res


def _swap(b: Any, c: Any) -> Any:
    """The last two axes of ``c`` exchanged."""
    n = c.ndim
    return b.permute_dims(c, (*range(n - 2), n - 1, n - 2))


# --------------------------------------------------------------------------- einsum


def _explicit(subscripts: str) -> tuple[list[str], str]:
    subs = subscripts.replace(" ", "")
    if "->" in subs:
        lhs, out = subs.split("->")
    else:
        lhs = subs
        letters = lhs.replace("...", "").replace(",", "")
        out = ("..." if "..." in lhs else "") + "".join(
            sorted(ch for ch in set(letters) if letters.count(ch) == 1)
        )
    return lhs.split(","), out


def einsum(T: Any, subscripts: str, *operands: Any) -> Any:
    """``einsum`` with at least one Taylor operand: pairwise contractions, each bilinear."""
    b = T.base
    if not any(_is(o) for o in operands):
        return b.einsum(subscripts, *operands)
    ins, out = _explicit(subscripts)
    if len(ins) != len(operands):
        raise InputError(f"einsum: {len(ins)} subscripts for {len(operands)} operands")
    used = set("".join(ins) + out)
    k = next(ch for ch in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if ch not in used)  # the order axis
    cur_sub, cur = ins[0], operands[0]
    for i in range(1, len(operands)):
        later = set("".join(ins[i + 1 :]) + out)
        nxt_sub, nxt = ins[i], operands[i]
        ell = "..." if "..." in cur_sub + nxt_sub else ""
        letters = dict.fromkeys((cur_sub + nxt_sub).replace("...", ""))
        keep = ell + "".join(ch for ch in letters if ch in later)
        cur = _einsum2(T, cur_sub, cur, nxt_sub, nxt, keep, k)
        cur_sub = keep
    if cur_sub != out:
        cur = _einsum1(T, cur_sub, cur, out, k)
    return cur


def _einsum1(T: Any, sub: str, x: Any, out: str, k: str) -> Any:
    if not _is(x):
        return T.base.einsum(f"{sub}->{out}", x)
    return T.wrap(T.base.einsum(f"{k}{sub}->{k}{out}", x.coeffs))


def _einsum2(T: Any, sa: str, a: Any, sb: str, c: Any, out: str, k: str) -> Any:
    b = T.base
    if not (_is(a) or _is(c)):
        return b.einsum(f"{sa},{sb}->{out}", a, c)
    if _is(a) and _is(c):
        spec = f"{sa},{sb}->{out}"
        d = next(ch for ch in "zyxwvutsrqponmlkjihgfedcba" if ch not in spec + k)
        batched = f"{d}{sa},{d}{sb}->{d}{out}"  # a leading direction axis on both operands
        return T.wrap(
            T.s.bilinear(
                a.coeffs,
                c.coeffs,
                lambda u, v: b.einsum(spec, u, v),
                batched=lambda u, v: b.einsum(batched, u, v),
            )
        )
    if _is(a):
        return T.wrap(b.einsum(f"{k}{sa},{sb}->{k}{out}", a.coeffs, c))
    return T.wrap(b.einsum(f"{sa},{k}{sb}->{k}{out}", a, c.coeffs))


# --------------------------------------------------------------------------- solve


def solve(T: Any, a: Any, rhs: Any) -> Any:
    """``linalg.solve(a, rhs)``: ``a`` (..., n, n); ``rhs`` (n,) or (..., n, m)."""
    b = T.base
    if not (_is(a) or _is(rhs)):
        return b.linalg.solve(a, rhs)
    vec = rhs.ndim == 1
    B = T.coeffs(T.expand_dims(rhs, -1) if vec else rhs)
    if not _is(a):
        # one system with K+1 right-hand sides: solve(a, B_k) for every k
        X = _solve_rows(b, a, B)
    else:
        X = T.s.solve(a.coeffs, B)
    out = T.wrap(X)
    return T.squeeze(out, -1) if vec else out


def _solve_rows(b: Any, a: Any, B: Any) -> Any:
    """``solve(a, B_r)`` for every row ``r`` of ``B`` (rows, ..., n, m) and a plain ``a``.

    A single matrix ``a`` (n, n) factors once: the rows become columns of one
    right-hand side (torch.func.vmap also rejects a batched ``B`` with more
    batch axes than an unbatched ``a``).
    """
    if a.ndim != 2 or B.ndim != 3:
        return b.linalg.solve(a, B)
    rows, n, m = (int(s) for s in B.shape)
    flat = b.reshape(b.permute_dims(B, (1, 0, 2)), (n, rows * m))
    return b.permute_dims(b.reshape(b.linalg.solve(a, flat), (n, rows, m)), (1, 0, 2))


# --------------------------------------------------------------------------- fft


def fft(T: Any, name: str, x: Any, n: Any, axis: int, norm: Any) -> Any:
    """The FFTs are linear: transform every coefficient along the mapped axis."""
    fn = getattr(T.base.fft, name)
    if not _is(x):
        return fn(x, n=n, axis=axis, norm=norm)
    if x.ndim == 0:
        raise InputError(f"ops.fft.{name} needs an array with at least one axis; got a 0-d array")
    return T.wrap(fn(x.coeffs, n=n, axis=int(axis) % x.ndim + 1, norm=norm))


# --------------------------------------------------------------------------- scan (jax)


def _floating(leaf: Any) -> bool:
    if isinstance(leaf, float):
        return True
    kind = getattr(getattr(leaf, "dtype", None), "kind", None)
    return kind in ("f", "c")


def jax_scan(T: Any, step: Callable, carry: Any, xs: Any, length: Any) -> tuple[Any, Any]:
    """``lax.scan`` carrying Taylor arrays (registered as pytrees).

    Floating carry leaves are lifted to Taylor arrays (before the loop and
    after each step) so that the carry keeps one structure even where a
    step turns a constant into a series.  Taylor leaves of ``xs`` and ``ys``
    are scanned along their first trailing axis: their coefficient axis is
    moved behind the loop axis for ``lax.scan`` and back afterwards.
    """
    jax = sys.modules["jax"]
    tu = jax.tree_util
    b = T.base

    def lift(tree: Any) -> Any:
        def one(leaf: Any) -> Any:
            if _is(leaf) or not _floating(leaf):
                return leaf
            return T.wrap(T.s.lift(b.asarray(leaf)))

        return tu.tree_map(one, tree, is_leaf=_is)

    def swap(c: Any) -> Any:
        return b.permute_dims(c, (1, 0, *range(2, c.ndim)))

    carry = lift(carry)
    x_leaves, x_def = tu.tree_flatten(xs, is_leaf=_is)
    x_taylor = [_is(leaf) for leaf in x_leaves]
    for leaf in x_leaves:
        if _is(leaf) and leaf.ndim == 0:
            raise InputError(
                "ops.scan: xs leaves need a leading axis to scan over; got a 0-d TaylorArray"
            )
    x_arrays = [
        swap(leaf.coeffs) if t else leaf for leaf, t in zip(x_leaves, x_taylor, strict=True)
    ]
    y_meta: dict[str, Any] = {}

    def body(c: Any, xa: Any) -> tuple[Any, Any]:
        x = None
        if xs is not None:
            x = tu.tree_unflatten(
                x_def, [T.wrap(a) if t else a for a, t in zip(xa, x_taylor, strict=True)]
            )
        c_new, y = step(c, x)
        y_leaves, y_meta["def"] = tu.tree_flatten(y, is_leaf=_is)
        y_meta["taylor"] = [_is(leaf) for leaf in y_leaves]
        return lift(c_new), [leaf.coeffs if _is(leaf) else leaf for leaf in y_leaves]

    try:
        carry, ys = jax.lax.scan(body, carry, None if xs is None else x_arrays, length=length)
    except TypeError as exc:
        raise UnsupportedError(f"ops.scan in the 'taylor' context over jax: {exc}") from exc
    y_leaves = [T.wrap(swap(a)) if t else a for a, t in zip(ys, y_meta["taylor"], strict=True)]
    return carry, tu.tree_unflatten(y_meta["def"], y_leaves)


def _jax_lift(T: Any) -> Callable[[Any], Any]:
    tu = sys.modules["jax"].tree_util

    def lift(tree: Any) -> Any:
        def one(leaf: Any) -> Any:
            if _is(leaf) or not _floating(leaf):
                return leaf
            return T.wrap(T.s.lift(T.base.asarray(leaf)))

        return tu.tree_map(one, tree, is_leaf=_is)

    return lift


def _primal_pred(pred: Any) -> Any:
    return pred.coeffs[0] if _is(pred) else pred


def jax_while_loop(T: Any, cond: Callable, body: Callable, carry: Any, max_steps: int) -> Any:
    """``lax.while_loop`` over Taylor carries (floating leaves lifted, as in :func:`jax_scan`)."""
    jax = sys.modules["jax"]
    lift = _jax_lift(T)

    def go(state: Any) -> Any:
        return (state[0] < max_steps) & _primal_pred(cond(state[1]))

    def step(state: Any) -> Any:
        return state[0] + 1, lift(body(state[1]))

    return jax.lax.while_loop(go, step, (0, lift(carry)))[1]


def jax_cond(T: Any, pred: Any, true_fn: Callable, false_fn: Callable, *operands: Any) -> Any:
    """``lax.cond`` whose branches return Taylor arrays (floating leaves lifted)."""
    jax = sys.modules["jax"]
    lift = _jax_lift(T)
    return jax.lax.cond(
        _primal_pred(pred),
        lambda *a: lift(true_fn(*a)),
        lambda *a: lift(false_fn(*a)),
        *lift(operands),
    )
