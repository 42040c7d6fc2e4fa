"""Collapsed Taylor mode: sums of ``K``-th directional derivatives in one pass.

Many operators need only a weighted *sum* of ``K``-th directional derivatives,
``sum_d w_d D^K f(x)[v_d, ..., v_d]`` (the Laplacian: ``K = 2``, ``v_d = e_d``).
Propagating ``D`` separate Taylor series stores and pushes ``D (K+1)``
coefficient vectors through every operation; *collapsed* Taylor mode (Dangel
et al. 2025) shares the primal ``c_0``, keeps the coefficients ``c_1 .. c_{K-1}``
per direction, and propagates only the weighted sum of the highest ones,
``C_K = sum_d w_d c_{K,d}``: ``1 + (K-1) D + 1`` vectors.  For ``K = 2`` this is
the forward Laplacian of folx (Li et al. 2024).

Why the sum can be propagated: for every rule the highest output coefficient is
``y_K = A(x_0) x_K + N(x_0, x_1, ..., x_{K-1})``, linear in the highest input
coefficient with a factor that depends on the primal only, plus a polynomial
``N`` of the lower coefficients in which every term has at least two factors
of positive order.  So ``sum_d w_d y_{K,d} = A(x_0) C_K + sum_d w_d N_d``.

Layout.  A collapsed array is a :class:`~simdiff.backends.taylor.TaylorArray`
whose coefficient array has ``R = 1 + (K-1) D + G`` rows: the primal, then
``c_k`` of direction ``d`` at row ``1 + (k-1) D + d``, then ``G`` summed top
coefficients (``G`` groups, weights ``W`` of shape ``(G, D)``; ``G = 1`` for an
operator, ``G`` = number of samples when a stochastic estimator wants
per-sample values).  Every operation that acts row by row (sums, reshapes,
indexing, FFTs, products with plain arrays, selection on the primal) is the
Taylor rule unchanged; the nonlinear rules go through the *expanded* form
``(K+1, D+G, ...)``: direction ``d < D`` carries ``c_0, c_{1,d} .. c_{K-1,d}, 0``
and direction ``D + g`` carries ``c_0, 0, .., 0, C_{K,g}``.  The ordinary Taylor
rule runs on it (the directions are a batch axis), and the result collapses
back: the top coefficients of the first ``D`` directions are the ``N_d``, that
of direction ``D + g`` is ``A(x_0) C_{K,g}``.

Orders 1 and 2 have hand-written rules instead (the forward Laplacian of
folx): with ``x_0`` the primal, ``x_{1,d}`` the first coefficients and
``X_{2,g}`` the summed second ones, an elementwise ``f`` gives
``y_0 = f(x_0)``, ``y_{1,d} = f'(x_0) x_{1,d}`` and
``Y_{2,g} = f'(x_0) X_{2,g} + f''(x_0)/2 sum_d W_{gd} x_{1,d}^2`` (the
coefficients are ``c_k = f^{(k)}/k!``, hence the 1/2), and a product
``Z_{2,g} = a_0 B_{2,g} + A_{2,g} b_0 + sum_d W_{gd} a_{1,d} b_{1,d}``.  The
primal is computed once and nothing of size ``(K+1)(D+G)`` is built.  Every
rule has such a form (``atan2`` and ``linalg.solve`` included); the expanded
form is the rule of the nonlinear operations at orders ``K >= 3``.

A plain matrix times the variable itself (the first layer of a network) maps
the variable's rows after the primal apart from the primal: they are the
directions, the same at every point, so under ``vmap`` over points their
product is computed once (folx does the same with the identity Jacobian).

References
----------
F. Dangel, T. Siebert, M. Zeinhofer, A. Walther, "Collapsing Taylor mode
automatic differentiation", NeurIPS 2025.
R. Li, H. Ye, D. Jiang, X. Wen, C. Wang, Z. Li, X. Li, D. He, J. Chen, W. Ren,
L. Wang, "A computational framework for neural network-based variational Monte
Carlo with Forward Laplacian", Nature Machine Intelligence 6 (2024) 209.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

from simdiff.backends.taylor.array import TaylorArray
from simdiff.backends.taylor.ops import TaylorOps
from simdiff.backends.taylor.series import Series
from simdiff.errors import InputError, UnsupportedError

__all__ = ["CollapsedOps", "CollapsedSeries", "collapsed_function"]


class CollapsedSeries:
    """The rules of :class:`Series` on the collapsed layout (see the module notes).

    Parameters
    ----------
    b : Ops
        Base context.
    order : int
        ``K >= 1``.
    directions : int
        ``D``, the number of directions.
    weights : native array of shape (G, D), or None
        Group weights; ``None`` means one group with unit weights.
    """

    def __init__(self, b: Any, order: int, directions: int, weights: Any = None) -> None:
        self.b = b
        self.K = int(order)
        self.std = Series(b, self.K)
        self.W = weights
        self.G = 1 if weights is None else int(weights.shape[0])
        # With K = 1 no per-direction coefficient is kept: the top is sum_d w_d v_d.
        self.D = int(directions) if self.K >= 2 else 0
        self.rows = 1 + (self.K - 1) * self.D + self.G

    # ------------------------------------------------------------------ layout
    def lift(self, p: Any) -> Any:
        """Rows of a constant: ``p`` then zeros."""
        b = self.b
        p = p if hasattr(p, "shape") and hasattr(p, "dtype") else b.asarray(p)
        zeros = b.broadcast_to(b.zeros_like(p)[None], (self.rows - 1, *p.shape))
        return b.concat([p[None], zeros])

    def align(self, c: Any, nd: int) -> Any:
        return self.std.align(c, nd)

    def contract(self, top: Any) -> Any:
        """``sum_d W[g, d] top[d]`` for the per-direction tops ``(D, ...)``: shape ``(G, ...)``."""
        b, n = self.b, int(top.shape[0])
        if self.W is None:
            return b.sum(top, axis=0, keepdims=True)
        # one matrix product (G, D) @ (D, size): no weighted copy of ``top``
        W = self.W if self.W.dtype == top.dtype else b.asarray(self.W, dtype=top.dtype)
        out = b.matmul(W, b.reshape(top, (n, -1)))
        return b.reshape(out, (self.G, *top.shape[1:]))

    def expand(self, c: Any) -> Any:
        """Collapsed rows ``(R, *S)`` to the series of ``D + G`` directions ``(K+1, D+G, *S)``."""
        b, K, D, G = self.b, self.K, self.D, self.G
        shape = tuple(c.shape[1:])
        n_dir = D + G
        rows = [b.broadcast_to(c[0][None], (n_dir, *shape))]
        zero = b.zeros_like(c[:1])
        if K >= 2:
            mid = b.reshape(c[1 : 1 + (K - 1) * D], (K - 1, D, *shape))
            pad = b.broadcast_to(zero[None], (K - 1, G, *shape))
            mid = b.concat([mid, pad], axis=1)
            rows.extend(mid[k] for k in range(K - 1))
        top = c[1 + (K - 1) * D :]
        if D:
            top = b.concat([b.broadcast_to(zero, (D, *shape)), top])
        rows.append(top)
        return b.stack(rows)

    def collapse(self, e: Any) -> Any:
        """Inverse of :meth:`expand` after a rule: sum the tops of the ``D`` directions."""
        b, K, D = self.b, self.K, self.D
        shape = tuple(e.shape[2:])
        parts = [e[0, :1]]
        if K >= 2:
            parts.append(b.reshape(e[1:K, :D], ((K - 1) * D, *shape)))
        top = e[K, D:]
        parts.append(self.contract(e[K, :D]) + top if D else top)
        return b.concat(parts)

    def _via(self, rule: Callable[..., Any], *series: Any, **kw: Any) -> Any:
        return self.collapse(rule(*[self.expand(c) for c in series], **kw))

    def _primal(self, y0: Any) -> Any:
        """A primal override broadcast over the expanded direction axis."""
        return None if y0 is None else self.b.broadcast_to(y0[None], (self.D + self.G, *y0.shape))

    # ------------------------------------------------------------------ orders 1 and 2
    # Rules written out for K <= 2 (module notes): ``x1`` are the D per-direction
    # first coefficients (none for K = 1), ``top`` the G summed top coefficients.
    def _parts(self, c: Any) -> tuple[Any, Any, Any]:
        D = self.D
        return c[0], (c[1 : 1 + D] if D else None), c[1 + D :]

    def _pack(self, y0: Any, y1: Any, top: Any) -> Any:
        b = self.b
        y0 = b.broadcast_to(y0, tuple(top.shape[1:]))
        if y1 is None:
            return b.concat([y0[None], top])
        return b.concat([y0[None], b.broadcast_to(y1, (self.D, *top.shape[1:])), top])

    def _chain(self, c: Any, y0: Any, d1: Any, d2half: Any) -> Any:
        """``f(c)`` from ``y0 = f(x0)``, ``d1 = f'(x0)`` and ``d2half = f''(x0) / 2``."""
        _, x1, top = self._parts(c)
        if x1 is None:
            return self._pack(y0, None, d1 * top)
        top = d1 * top + d2half * self.contract(x1 * x1)  # before y1: one temporary at a time
        return self._pack(y0, d1 * x1, top)

    def _fast(self) -> bool:
        return self.K <= 2

    # ------------------------------------------------------------------ rules
    def cauchy(self, x: Any, y: Any) -> Any:
        if not self._fast():
            return self._via(self.std.cauchy, x, y)
        a0, a1, at = self._parts(x)
        b0, b1, bt = self._parts(y)
        top = a0 * bt + at * b0
        if a1 is None:
            return self._pack(a0 * b0, None, top)
        top = top + self.contract(a1 * b1)
        return self._pack(a0 * b0, a0 * b1 + a1 * b0, top)

    def bilinear(self, x: Any, y: Any, fn: Any, batched: Any = None) -> Any:
        if batched is None:
            raise UnsupportedError(
                "a bilinear Taylor rule without a batched form cannot run in the collapsed "
                "Taylor context"
            )
        if not self._fast():
            return self._via(lambda u, v: self.std.bilinear(u, v, batched), x, y)
        b = self.b
        a0, a1, at = self._parts(x)
        b0, b1, bt = self._parts(y)
        G = self.G

        def rows(u: Any, n: int) -> Any:  # a primal repeated along the batched axis
            return b.broadcast_to(u[None], (n, *u.shape))

        y0 = fn(a0, b0)
        top = batched(rows(a0, G), bt) + batched(at, rows(b0, G))
        if a1 is None:
            return self._pack(y0, None, top)
        D = self.D
        y1 = batched(rows(a0, D), b1) + batched(a1, rows(b0, D))
        return self._pack(y0, y1, top + self.contract(batched(a1, b1)))

    def divide(self, x: Any, y: Any) -> Any:
        if not self._fast():
            return self._via(self.std.divide, x, y)
        a0, a1, at = self._parts(x)
        b0, b1, bt = self._parts(y)
        q0 = a0 / b0
        if a1 is None:
            return self._pack(q0, None, (at - bt * q0) / b0)
        q1 = (a1 - b1 * q0) / b0
        return self._pack(q0, q1, (at - bt * q0 - self.contract(b1 * q1)) / b0)

    def exp(self, u: Any, y0: Any = None) -> Any:
        if not self._fast():
            return self._via(lambda e: self.std.exp(e, self._primal(y0)), u)
        e0 = self.b.exp(u[0])
        return self._chain(u, e0 if y0 is None else y0, e0, 0.5 * e0)

    def log(self, u: Any, y0: Any = None) -> Any:
        if not self._fast():
            return self._via(lambda e: self.std.log(e, self._primal(y0)), u)
        inv = 1.0 / u[0]
        return self._chain(u, self.b.log(u[0]) if y0 is None else y0, inv, -0.5 * inv * inv)

    def sqrt(self, u: Any) -> Any:
        if not self._fast():
            return self._via(self.std.sqrt, u)
        u0, u1, ut = self._parts(u)
        y0 = self.b.sqrt(u0)
        half = 0.5 / y0
        if u1 is None:
            return self._pack(y0, None, ut * half)
        y1 = u1 * half  # y_2 = (u_2 - y_1^2) / (2 y_0), as Series.sqrt
        return self._pack(y0, y1, (ut - self.contract(y1 * y1)) * half)

    def pow_real(self, u: Any, r: Any) -> Any:
        if not self._fast():
            return self._via(lambda e: self.std.pow_real(e, r), u)
        u0, u1, ut = self._parts(u)
        y0 = u0**r
        ry0 = r * y0
        if u1 is None:
            return self._pack(y0, None, ry0 * ut / u0)
        y1 = ry0 * u1 / u0  # y_2 = ((r-1) u_1 y_1 + 2 r u_2 y_0) / (2 u_0), as Series.pow_real
        top = ((r - 1.0) * self.contract(u1 * y1) + 2.0 * ry0 * ut) / (2.0 * u0)
        return self._pack(y0, y1, top)

    def pow_int(self, u: Any, n: int) -> Any:
        if not self._fast():
            return self._via(lambda e: self.std.pow_int(e, n), u)
        return Series.pow_int(cast(Any, self), u, n)  # repeated squaring by the rules above

    def sincos(self, u: Any, hyperbolic: bool = False) -> tuple[Any, Any]:
        if not self._fast():
            s, c = self.std.sincos(self.expand(u), hyperbolic)
            return self.collapse(s), self.collapse(c)
        b = self.b
        x0 = u[0]
        s0, c0 = (b.sinh(x0), b.cosh(x0)) if hyperbolic else (b.sin(x0), b.cos(x0))
        sgn = 1.0 if hyperbolic else -1.0
        _, u1, ut = self._parts(u)
        if u1 is None:
            return self._pack(s0, None, c0 * ut), self._pack(c0, None, (sgn * s0) * ut)
        q = 0.5 * self.contract(u1 * u1)
        s = self._pack(s0, c0 * u1, c0 * ut + (sgn * s0) * q)
        c = self._pack(c0, (sgn * s0) * u1, (sgn * s0) * ut + (sgn * c0) * q)
        return s, c

    def tan(self, u: Any, hyperbolic: bool = False) -> Any:
        if not self._fast():
            return self._via(lambda e: self.std.tan(e, hyperbolic), u)
        b = self.b
        sgn = -1.0 if hyperbolic else 1.0
        y0 = b.tanh(u[0]) if hyperbolic else b.tan(u[0])
        g0 = 1.0 + sgn * y0 * y0  # y' = u' (1 + sgn y^2): f'' / 2 = sgn y0 g0
        return self._chain(u, y0, g0, (sgn * y0) * g0)

    def atan2(self, cy: Any, cx: Any) -> Any:
        """Order 2 (``a = cy``, ``x = cx``, ``r^2 = a_0^2 + x_0^2``; Series.atan2 written out):
        ``y_1 = (x_0 a_1 - a_0 x_1) / r^2``,
        ``y_2 = (x_0 a_2 - a_0 x_2 - (a_0 a_1 + x_0 x_1) y_1) / r^2``."""
        if not self._fast():
            return self._via(self.std.atan2, cy, cx)
        a0, a1, at = self._parts(cy)
        x0, x1, xt = self._parts(cx)
        inv = 1.0 / (a0 * a0 + x0 * x0)
        y0 = self.b.atan2(a0, x0)
        top = (x0 * at - a0 * xt) * inv
        if a1 is None:
            return self._pack(y0, None, top)
        y1 = (x0 * a1 - a0 * x1) * inv
        return self._pack(y0, y1, top - self.contract((a0 * a1 + x0 * x1) * y1) * inv)

    def solve(self, a: Any, rhs: Any) -> Any:
        """Order 2: ``A_0 X_1 = B_1 - A_1 X_0`` per direction and
        ``A_0 X_2 = B_2 - A_2 X_0 - sum_d w_d A_{1,d} X_{1,d}`` (Series.solve written out)."""
        if not self._fast():
            return self._via(self.std.solve, a, rhs)
        b = self.b
        a0, a1, at = self._parts(a)
        b0, b1, bt = self._parts(rhs)

        def solve(r: Any) -> Any:  # A_0 against a leading axis of right-hand sides
            return b.linalg.solve(b.broadcast_to(a0[None], (int(r.shape[0]), *a0.shape)), r)

        x0 = b.linalg.solve(a0, b0)
        rt = bt - b.matmul(at, x0)
        if a1 is None:
            return self._pack(x0, None, solve(rt))
        x1 = solve(b1 - b.matmul(a1, x0))
        return self._pack(x0, x1, solve(rt - self.contract(b.matmul(a1, x1))))

    def compose(self, u: Any, y0: Any, g: Any) -> Any:
        """``y' = u' g`` (``g``'s top coefficient is not used, so its collapsed form serves).

        Order 2: ``y_1 = g_0 u_1``, ``y_2 = g_0 u_2 + g_1 u_1 / 2``.
        """
        if not self._fast():
            return self._via(lambda eu, eg: self.std.compose(eu, self._primal(y0), eg), u, g)
        _, u1, ut = self._parts(u)
        g0, g1, _ = self._parts(g)
        if u1 is None:
            return self._pack(y0, None, g0 * ut)
        return self._pack(y0, g0 * u1, g0 * ut + 0.5 * self.contract(u1 * g1))

    def deriv(self, c: Any) -> Any:
        raise UnsupportedError(
            "d/dt of a collapsed Taylor series is not representable (its top coefficient is "
            "summed over directions); write the rule as a whole series rule"
        )

    integral = deriv


class CollapsedOps(TaylorOps):
    """``ops`` namespace of collapsed Taylor arrays over ``base``: ``sum_d w_d c_{K,d}``.

    Parameters
    ----------
    base : Ops
        Numpy, jax or torch ops.
    order : int
        ``K >= 1``, the order of the summed derivatives.
    directions : int
        Number ``D`` of directions.
    weights : native array (G, D), optional
        Group weights; default one group with unit weights.

    Notes
    -----
    Every op of :data:`simdiff.backends.OP_NAMES` has a rule: the collapsed
    context is the Taylor context with its coefficient rows laid out as in the
    module notes, and the series rules replaced by :class:`CollapsedSeries`.

    Examples
    --------
    The Laplacian of ``sum(x**3)`` at ``x = (1, 2)``: ``6 (1 + 2) = 18``.

    >>> import numpy as np
    >>> from simdiff.backends.numpy import NumpyOps
    >>> ops = CollapsedOps(NumpyOps(), order=2, directions=2)
    >>> x = ops.variable(np.array([1.0, 2.0]), np.eye(2))
    >>> y = ops.sum(x ** 3)
    >>> 2.0 * y.coeffs[-1]
    np.float64(18.0)
    """

    name = "taylor"

    def __init__(self, base: Any, order: int, directions: int, weights: Any = None) -> None:
        if isinstance(order, bool) or not isinstance(order, int) or order < 1:
            raise InputError(f"collapsed Taylor order must be an integer >= 1; got {order!r}")
        super().__init__(base, order)
        self.s = CollapsedSeries(base, order, directions, weights)
        self.rows = self.s.rows
        self.directions = int(directions)
        self._seed: tuple[Any, Any] | None = None  # the variable and its rows after the primal

    def __getattr__(self, item: str) -> Any:
        raise UnsupportedError(
            f"operation ops.{item} has no rule in the 'collapsed taylor' context"
        )

    def __repr__(self) -> str:
        return (
            f"<simdiff ops: collapsed taylor(order={self.order}, directions={self.directions}, "
            f"groups={self.s.G}) over {self.base.name}, dtype={self.dtype}>"
        )

    def variable(self, x: Any, v: Any) -> TaylorArray:
        """The collapsed series of ``x + t v_d`` for the rows ``v_d`` of ``v`` (shape (D, n))."""
        b, s = self.base, self.s
        if s.D:
            zeros = b.zeros(((self.order - 2) * s.D + s.G, *x.shape), dtype=x.dtype)
            rest = b.concat([v, zeros])
        else:  # K = 1: the top is sum_d w_d v_d
            rest = s.contract(v if self.order == 1 else b.zeros_like(v))
        out = self.wrap(b.concat([x[None], rest]))
        self._seed = (out, rest)
        return out

    def matmul(self, x1: Any, x2: Any) -> Any:
        """As the Taylor rule; a plain matrix times the variable itself maps its rows apart.

        Every row of the variable but the primal comes from the directions,
        which are the same at every point: under ``vmap`` over points the
        product of the matrix with them is computed once, not once per point
        (for an MLP, the first layer's per-direction product).
        """
        x1, x2 = self._plain(x1, x2)
        seed = self._seed
        b = self.base
        if seed is not None and x2 is seed[0] and x2.ndim == 1 and _plain_matrix(x1):
            y0 = b.matmul(x1, x2.coeffs[0])
            rest = b.matmul(seed[1], b.permute_dims(x1, (1, 0)))
        elif seed is not None and x1 is seed[0] and x1.ndim == 1 and _plain_matrix(x2):
            y0 = b.matmul(x1.coeffs[0], x2)
            rest = b.matmul(seed[1], x2)
        else:
            return super().matmul(x1, x2)
        return self.wrap(b.concat([y0[None], b.broadcast_to(rest, (self.rows - 1, *y0.shape))]))


def _plain_matrix(a: Any) -> bool:
    return not isinstance(a, TaylorArray) and getattr(a, "ndim", 0) == 2


def collapsed_function(
    problem: Any, ops: Any, order: int, *, grouped: bool = False, unit: bool = False
) -> Callable[[Any, Any, Any], Any]:
    """``g(x, V, w)``: ``sum_d w_d D^K f(x)[v_d, ..., v_d]`` in one collapsed pass.

    Parameters
    ----------
    problem : simdiff.Problem
    ops : Ops
        The base context.
    order : int
        ``K >= 1``.
    grouped : bool
        If False, ``w`` has shape ``(D,)`` and ``g`` returns shape ``out``; if
        True, ``w`` has shape ``(G, D)`` and ``g`` returns ``(G, *out)``, the
        weighted sum of each group.
    unit : bool
        The weights are all ones (``w`` is not read; ``grouped`` must be
        False): the sums over directions skip the multiplication.

    Returns
    -------
    callable
        ``g(x, V, w)`` for native arrays ``x`` (n,), ``V`` (D, n); it traces under
        ``jax.jit``/``jax.vmap`` and runs under ``torch.func.vmap``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.backends.numpy import NumpyOps
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x)), x0=np.zeros(2))
    >>> g = collapsed_function(p, NumpyOps(), 2)
    >>> g(np.array([0.5, 1.0]), np.eye(2), np.ones(2))       # -sin(0.5) - sin(1)
    np.float64(-1.32089652...)
    """
    scale = float(math.factorial(order))

    def g(x: Any, V: Any, w: Any) -> Any:
        W = None if unit else w if grouped else ops.reshape(w, (1, -1))
        cops = CollapsedOps(ops, order, int(V.shape[0]), W)
        y = problem.fn(cops.variable(x, V), cops)
        if isinstance(y, TaylorArray):
            top = y.coeffs[cops.rows - cops.s.G :]
        elif isinstance(y, (tuple, list, dict)):
            raise UnsupportedError(
                f"collapsed taylor: problem {problem.name!r} returned a {type(y).__name__}; "
                "expected an array"
            )
        else:  # a constant: every derivative is zero
            y = ops.asarray(y)
            top = ops.zeros((cops.s.G, *y.shape), dtype=y.dtype)
        top = top * scale
        return top if grouped else top[0]

    return g
