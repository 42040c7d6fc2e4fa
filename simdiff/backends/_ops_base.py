"""The shared implementation of the ``ops`` namespaces: :class:`OpsBase` and :class:`LoopOps`.

:class:`OpsBase` holds what every context has in common (constants, the
capabilities' defaults, ``safe_where``); :class:`LoopOps` adds the Python-loop
``scan``, ``while_loop`` and ``cond`` of the eager contexts (numpy, torch,
Taylor).  The protocol they satisfy is :class:`simdiff.backends.Ops`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from simdiff.backends._base import Array
from simdiff.backends._tree import tree_flatten, tree_map, tree_unflatten
from simdiff.errors import InputError, UnsupportedError

__all__ = ["LoopOps", "OpsBase"]


class OpsBase:
    """Base class of the ``ops`` namespaces (each satisfies the :class:`Ops` protocol).

    Attributes
    ----------
    name : str
        The context: ``"numpy"``, ``"jax"``, ``"torch"`` or ``"taylor"``.
    dtype : object
        The floating dtype new arrays get (float64 unless asked otherwise).
    eager : bool
        True where Python control flow runs on concrete values (numpy, torch,
        and the Taylor context over them), so a loop can stop as soon as its
        condition fails; False where functions are traced and compiled (JAX),
        so loops need ``ops.scan`` and static bounds.
    compile_part : callable or None
        ``compile_part(key, make) -> fn``: where set (a context from
        :meth:`Backend.ops_compiling_parts`), a part of the computation (an
        ODE's step loop: ``make()``, a pure function of arrays, built once per
        ``key``) may run under the backend's optional compiler; ``fn`` runs it
        eagerly where the compiler does not apply.  ``None`` (the default):
        nothing is compiled.
    """

    name: str = "base"
    dtype: Any = None
    eager: bool = False
    compile_part: Any = None
    pi = 3.141592653589793
    e = 2.718281828459045
    inf = float("inf")

    def concrete(self, x: Array) -> Any:
        """``x`` as a numpy array, or ``None`` where it has no value now."""
        raise UnsupportedError(f"ops.concrete is not available in the {self.name!r} context")

    def errstate(self) -> AbstractContextManager[Any]:
        """Silence floating-point warnings for a block (numpy emits them; the others do not)."""
        return contextlib.nullcontext()

    def checkpoint_saving(
        self, fn: Callable[..., Any], names: tuple[str, ...]
    ) -> Callable[..., Any]:
        """``checkpoint(fn)``, storing (not recomputing) the values tagged with one of ``names``.

        Where a context rematerialises (JAX), the backward pass recomputes
        ``fn`` from its inputs and from the stored tagged values, so a
        recomputation reuses those values exactly instead of re-deriving them
        (a recomputation compiled apart from the forward may round
        differently).  Default: ``checkpoint(fn)``, the tags being the identity.
        """
        return self.checkpoint(fn)  # type: ignore[attr-defined,no-any-return]

    def checkpoint_name(self, x: Array, name: str) -> Array:
        """``x``, tagged ``name`` for :meth:`checkpoint_saving` (the identity by default)."""
        return x

    def traced_once(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, for a function called several times inside one traced program.

        Where a context traces (JAX), each call with the same argument shapes
        reuses one trace of ``fn`` and the derivatives built from it (a
        solver's right-hand side, called once per stage).  Default: ``fn``.
        """
        return fn

    def jacfwd(self, fn: Callable[..., Array]) -> Callable[..., Array]:
        """Forward-mode Jacobian ``d fn(z, *consts) / dz`` inside a solver (the context's own
        transform); ``consts`` are passed through undifferentiated."""
        raise UnsupportedError(
            f"ops.jacfwd is not available in the {self.name!r} context; pass an analytic "
            "Jacobian instead"
        )

    def lu_factor(self, a: Array) -> Any:
        """The pivoted LU factorisation of a square ``a`` (an opaque value for :meth:`lu_solve`).

        Differentiable to every order where the context has AD (a stiff
        solver factorises ``W = I - h gamma J`` once a step and solves each
        stage with it).  A singular ``a`` gives non-finite solutions (JAX,
        torch) or raises (numpy: ``LinAlgError``-type ``ValueError``).
        """
        raise UnsupportedError(f"ops.lu_factor is not available in the {self.name!r} context")

    def lu_solve(self, lu: Any, b: Array) -> Array:
        """``a^-1 b`` from ``lu = lu_factor(a)``; ``b`` of shape ``(n,)`` or ``(n, k)``."""
        raise UnsupportedError(f"ops.lu_solve is not available in the {self.name!r} context")

    def gated(self, fn: Callable[..., Any], keep: Callable[[Any], Any]) -> Callable[..., Any]:
        """``fn``, whose derivatives are exactly 0 (not NaN) wherever ``keep(fn(*args))`` is false.

        Reverse mode selects the cotangents of ``fn``'s inputs *after* ``fn``'s
        own backward pass, so a discarded evaluation whose intermediates
        overflowed (a rejected ODE step) contributes zeros instead of the NaN
        of ``0 * inf``; forward mode selects the tangents likewise.  Values are
        ``fn``'s.  Here (no reverse mode, or no evaluation on the tape that is
        not used) ``fn`` itself.
        """
        return fn

    def forward_only(self, x: Array, message: str) -> Array:
        """``x``, marked so that reverse mode through it raises ``UnsupportedError(message)``.

        Values and forward-mode derivatives (JVPs, nested JVPs, Taylor) pass
        through unchanged.  Here (numpy, Taylor: no reverse mode) the identity;
        JAX and torch refuse their reverse pass with ``message``.
        """
        return x

    def split_leaves(
        self,
        flat: Array,
        bounds: tuple[tuple[int, int], ...],
        shapes: tuple[tuple[int, ...], ...],
    ) -> list[Array]:
        """The leaves of one flat point ``flat`` (shape ``(n,)``): ``flat[a:b]`` reshaped to
        ``shape`` for each ``(a, b)`` of ``bounds`` (a scalar leaf, shape ``()``, is
        ``flat[a]``).

        What rebuilds structured parameters inside a problem's function
        (:meth:`simdiff.ParamSpec.unflatten` with ``ops``), differentiable in
        the context.  Here one slice (and a reshape) per leaf; a context whose
        every operation is a recorded node (torch's eager autograd) makes it
        fewer.
        """
        return [flat[a] if s == () else flat[a:b] if len(s) == 1
                else self.reshape(flat[a:b], s)
                for (a, b), s in zip(bounds, shapes, strict=True)]  # fmt: skip

    def __getattr__(self, item: str) -> Any:
        # Only reached for names the context lacks.
        raise UnsupportedError(
            f"operation ops.{item} is not available in the {self.name!r} context"
        )

    def __repr__(self) -> str:
        return f"<simdiff ops: {self.name}, dtype={self.dtype}>"

    def safe_where(
        self,
        condition: Any,
        x: Any,
        if_true: Any,
        if_false: Any = 0.0,
        *,
        fill_true: Any = 1.0,
        fill_false: Any = 1.0,
    ) -> Any:
        """``where(condition, if_true(x), if_false(x))`` with finite derivatives in every context.

        The "double where": ``ops.where(x > 0, ops.sqrt(x), 0.0)`` has the
        right value at ``x = -1`` but a NaN derivative, because the branch
        not taken is still differentiated (``0 * sqrt'(-1) = 0 * nan``).
        Here each callable branch is evaluated only at points where it is
        selected; elsewhere its argument is replaced by ``fill_true`` /
        ``fill_false`` (a point where the branch is smooth), so the
        derivative of the result is that of the selected branch.

        Parameters
        ----------
        condition : boolean array
            Where to take ``if_true``; it must not depend on derivatives
            (comparisons of arrays are fine).
        x : array
            The argument of the branches.
        if_true, if_false : callable or array_like
            A function of one array (applied to ``x``), or a value.
        fill_true, fill_false : float
            Stand-in arguments for the branch where it is not selected; the
            default 1.0 suits ``sqrt``, ``log`` and ``1 / x``.

        Returns
        -------
        array
            The broadcast shape of ``condition``, ``x`` and the branches.

        Examples
        --------
        >>> import numpy as np, simdiff
        >>> p = simdiff.Problem(
        ...     lambda x, ops: ops.sum(ops.safe_where(x > 0, x, ops.sqrt, 0.0)),
        ...     x0=np.array([-1.0, 4.0]))
        >>> simdiff.grad(p)            # sqrt'(4) = 0.25, and 0 (not nan) at x = -1
        array([0.  , 0.25])
        """
        t = if_true(self.where(condition, x, fill_true)) if callable(if_true) else if_true
        f = if_false(self.where(condition, fill_false, x)) if callable(if_false) else if_false
        return self.where(condition, t, f)


class LoopOps(OpsBase):
    """Shared Python-loop implementations of ``scan``, ``while_loop`` and ``cond`` (eager contexts).

    ``while_loop`` and ``cond`` read their predicate as a Python bool.  Where
    it has no value (a batched tensor under ``torch.func.vmap``) they fall back
    to what ``jax.vmap`` does with ``lax.while_loop``/``lax.cond``: run both
    sides and select elementwise with ``where``.
    """

    def _select(self, pred: Any, new: Any, old: Any) -> Any:
        return tree_map(lambda a, b: self.where(pred, a, b), new, old)

    def while_loop(
        self,
        cond: Callable[[Any], Any],
        body: Callable[[Any], Any],
        carry: Any,
        max_steps: int,
    ) -> Any:
        """``carry = body(carry)`` while ``cond(carry)``, at most ``max_steps`` times.

        Same contract as ``jax.lax.while_loop`` with an iteration bound.  Here a
        Python loop that stops as soon as ``cond`` is false; when ``cond`` has no
        one value (batched under ``torch.func.vmap``) the carry is updated only
        where ``cond`` holds, and the loop stops once it holds in no lane
        (:meth:`_holds_anywhere`; what ``jax.vmap`` of ``lax.while_loop`` does),
        or after ``max_steps`` where the lanes cannot be read.
        """
        for _ in range(int(max_steps)):
            pred = cond(carry)
            try:
                go = bool(pred)
            except RuntimeError:  # batched under torch.func.vmap: no Python value
                if not self._holds_anywhere(pred):
                    break  # every lane is done: the rest would keep every carry as it is
                carry = self._select(pred, body(carry), carry)
                continue
            if not go:
                break
            carry = body(carry)
        return carry

    def _holds_anywhere(self, pred: Any) -> bool:
        """Whether a batched predicate holds in any lane (True where that cannot be read)."""
        return True

    def cond(
        self,
        pred: Any,
        true_fn: Callable[..., Any],
        false_fn: Callable[..., Any],
        *operands: Any,
    ) -> Any:
        """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (``jax.lax.cond``).

        A Python ``if``; when ``pred`` has no Python value (under
        ``torch.func.vmap``) both branches run and ``where`` selects.
        """
        try:
            take = bool(pred)
        except RuntimeError:  # batched under torch.func.vmap
            return self._select(pred, true_fn(*operands), false_fn(*operands))
        return true_fn(*operands) if take else false_fn(*operands)

    eager = True

    def scan(
        self,
        step: Callable[[Any, Any], tuple[Any, Any]],
        carry: Any,
        xs: Any = None,
        length: int | None = None,
    ) -> tuple[Any, Any]:
        """Loop ``carry, y = step(carry, x)`` over the leading axis of ``xs``.

        Same contract as ``jax.lax.scan``: returns the final carry and the
        ``y`` values stacked on a new leading axis (``None`` if ``step``
        returns ``None``).  Here it runs as a Python loop.
        """
        n = _scan_length(xs, length)
        ys = []
        for i in range(n):
            x = None if xs is None else tree_map(lambda a, i=i: a[i], xs)
            carry, y = step(carry, x)
            ys.append(y)
        if n == 0:
            raise InputError("ops.scan: length 0 loops are not supported outside JAX")
        leaves0, treedef = tree_flatten(ys[0])
        if not leaves0:
            return carry, tree_unflatten(treedef, [])
        columns = zip(*(tree_flatten(y)[0] for y in ys), strict=True)
        return carry, tree_unflatten(treedef, [self.stack(list(col)) for col in columns])


def _scan_length(xs: Any, length: int | None) -> int:
    if xs is None:
        if length is None:
            raise InputError("ops.scan needs xs or length; got neither")
        return int(length)
    leaves, _ = tree_flatten(xs)
    lengths = {int(leaf.shape[0]) for leaf in leaves}
    if len(lengths) != 1:
        raise InputError(f"ops.scan: xs leaves have different leading lengths {sorted(lengths)}")
    (n,) = lengths
    if length is not None and int(length) != n:
        raise InputError(f"ops.scan: length={length} but xs has leading length {n}")
    return n
