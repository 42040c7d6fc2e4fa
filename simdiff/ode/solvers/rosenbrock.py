"""Rosenbrock methods for stiff systems: the stage machinery, and Rodas3 (order 3, embedded 2).

A Rosenbrock method replaces the Newton iterations of an implicit method by
one linear solve per stage with ``W = I - h gamma J``, ``J = df/dy``.  Here
``J`` (and ``df/dt``) come from the backend's own forward-mode transform applied
to the right-hand side inside the problem function (``jax.jacfwd`` on JAX,
``torch.func.jacfwd`` on torch; both nest under the outer derivative
transforms), or from a user-supplied ``jac``.  The numpy context, which has no
AD, uses central differences (step ``eps^(1/3) max(1, |z|)``, error about
``1e-11`` relative): its values are a reference, not differentiated.

``J`` is evaluated once per step, at the step's start, and every stage of the
step reuses it (a Rosenbrock method's order conditions assume one ``J`` per
step); a rejected step's ``J`` is recomputed at the same point, since the
step is a pure function of ``(t, y, h)``.  ``W`` is likewise factorised once
per step: ``W^-1 = ops.linalg.solve(W, I)``, and each stage is one matrix
product with it (a dense inverse costs about three LU factorisations, against
the one factorisation per stage a solve per stage would make).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdiff.errors import InputError, InputTypeError, UnsupportedError
from simdiff.ode._banded import BlockLayout, banded_w_solver, block_layout
from simdiff.ode._sparsity import (
    JacobianSparsity,
    compressed_rhs_jacobian,
    detected,
    resolve,
    sparse_rhs_jacobian,
)
from simdiff.ode.solvers._base import Rhs, SolveInfo
from simdiff.ode.solvers.adaptive import EmbeddedPair, check_tolerances

__all__ = ["Rodas3", "RosenbrockMethod", "RosenbrockTableau", "rhs_jacobian"]

Jac = Callable[[Any, Any, Any, Any], Any]


@dataclass(frozen=True)
class RosenbrockTableau:
    """The coefficients of a Rosenbrock method in the Hairer–Wanner form.

    Stage ``i`` solves ``(I/(h gamma) - J) K_i = f(t + c_i h, y + sum_j a_ij K_j)
    + sum_j C_ij K_j / h + d_i h f_t``; the solution is ``y + sum_j m_j K_j``
    and the error estimate ``sum_j e_j K_j`` (Hairer & Wanner, *Solving ODEs
    II*, IV.7, formula (7.4'); OrdinaryDiffEq.jl writes its tableaus the same
    way).  ``a`` and ``C`` are the strictly lower rows (row ``i`` has ``i``
    entries), ``m`` and ``e`` have one entry per stage.
    """

    name: str
    gamma: float
    a: tuple[tuple[float, ...], ...]
    C: tuple[tuple[float, ...], ...]
    c: tuple[float, ...]
    d: tuple[float, ...]
    m: tuple[float, ...]
    e: tuple[float, ...]

    def __post_init__(self) -> None:
        s = len(self.c)
        rows_ok = all(len(r) == i for i, r in enumerate(self.a)) and all(
            len(r) == i for i, r in enumerate(self.C)
        )
        if not (rows_ok and len(self.a) == len(self.C) == len(self.d) == s):
            raise InputError(f"tableau {self.name!r}: row lengths do not match {s} stages")
        if len(self.m) != s or len(self.e) != s:
            raise InputError(f"tableau {self.name!r}: m and e need {s} entries")

    @property
    def stages(self) -> int:
        return len(self.c)

    def increments(self, i: int) -> bool:
        """Whether stage ``i``'s input is stage ``i-1``'s input plus ``K_{i-1}``."""
        if i == 0:
            return False
        prev = (*self.a[i - 1], 1.0)
        return tuple(self.a[i]) == prev

    def reuses_f(self, i: int) -> bool:
        """Whether stage ``i`` evaluates ``f`` at the same point as stage ``i-1``."""
        return i > 0 and self.c[i] == self.c[i - 1] and tuple(self.a[i]) == (*self.a[i - 1], 0.0)

    def solution_increments(self) -> bool:
        """Whether ``m`` is the last stage's input row plus ``K_last`` (stiffly accurate)."""
        return tuple(self.m) == (*self.a[-1], 1.0)


def rhs_jacobian(
    rhs: Rhs, t: Any, y: Any, p: Any, ops: Any, solver: str = "Rodas3"
) -> tuple[Any, Any]:
    """``(df/dy, df/dt)`` at ``(t, y)`` by the context's forward-mode Jacobian ``ops.jacfwd``.

    Shapes ``(dim, dim)`` and ``(dim,)``.  JAX: ``jax.jacfwd``; torch:
    ``torch.func.jacfwd``; numpy: central differences.  Contexts without it
    (the Taylor context) need an analytic ``jac``.
    """
    z = ops.concat([ops.reshape(t, (1,)), y])

    def g(zz: Any, pp: Any) -> Any:
        return rhs(zz[0], zz[1:], pp, ops)

    try:
        jz = ops.jacfwd(g)(z, p)
    except UnsupportedError as exc:
        raise UnsupportedError(
            f"{solver} computes df/dy by forward-mode AD, which the {ops.name!r} context lacks; "
            f"pass an analytic jac=jac(t, y, p, ops) to {solver}"
        ) from exc
    return jz[:, 1:], jz[:, 0]


#: From this many states up, ``linsolve="auto"`` factorises ``W`` by LU instead of inverting it.
LU_FROM_DIM = 128

LINSOLVES = ("auto", "inverse", "lu", "banded")


def _factor(
    W: Any, t: Any, h: Any, ops: Any, solver: str, lu: str, banded: Any = None
) -> Callable[[Any], Any]:
    """``b -> W^-1 b`` from one factorisation of ``W``, reused by every stage of the step.

    ``lu="inverse"``: the inverse ``ops.linalg.solve(W, I)``, each stage one
    matrix product.  ``lu="lu"``: ``ops.lu_factor(W)``, each stage one
    ``ops.lu_solve`` (a third of the inverse's flops for the factorisation);
    ``"auto-lu"``: the same, or the inverse in a context without
    ``lu_factor`` (the Taylor context).  ``lu="banded"``: the block Thomas
    algorithm, ``banded()`` building it (``W`` is then ``None``: its blocks
    come from the compressed Jacobian, :func:`~simdiff.ode._banded.banded_w_solver`).
    A singular ``W`` gives a non-finite operator in every context: JAX's and
    torch's solvers return one (torch's without raising, so a compiled step's
    graph holds no error check), numpy's raises and the operator is then NaN.
    The step's error estimate is then not finite and the controller rejects
    it and retries with a shorter step (``W -> I`` as ``h -> 0``), as
    Hairer's RODAS does on a singular matrix, so every
    backend takes the same steps.  A ``W`` that stays singular or non-finite
    down to a step of ``1e-12`` of the interval (a non-finite ``df/dy``) fails
    the solve with status 2: :class:`SolverError` naming the time and the
    steps taken (``t`` and ``h`` are the step's, unused here).
    """
    try:
        if lu == "banded":
            return banded()  # type: ignore[no-any-return]
        if lu != "inverse":
            try:
                factors = ops.lu_factor(W)
                return lambda b: ops.lu_solve(factors, b)
            except UnsupportedError:
                if lu == "lu":
                    raise
        W_inv = ops.linalg.solve(W, ops.eye(int(W.shape[0])))
        return lambda b: ops.matmul(W_inv, b)
    except UnsupportedError:  # lu="lu" where the context has no LU factorisation
        raise
    except (RuntimeError, ValueError):  # numpy's LinAlgError, torch's _LinAlgError
        return lambda b: b * float("nan")


@functools.lru_cache(maxsize=16)
def _layout(sp: JacobianSparsity, bandwidth: int) -> BlockLayout:
    """The block layout of ``sp``'s pattern (built once per pattern and bandwidth)."""
    return block_layout(sp.mask(), bandwidth)


class RosenbrockMethod(EmbeddedPair):
    """An adaptive Rosenbrock method given by a :class:`RosenbrockTableau`.

    Subclasses are frozen dataclasses with the fields ``rtol``, ``atol``,
    ``max_steps``, ``h0``, ``jac``, ``dfdt``, ``jac_sparsity``, ``linsolve``
    and set ``tableau``, ``name``, ``order`` and ``error_order``.
    """

    tableau: RosenbrockTableau
    jac: Jac | None
    dfdt: Jac | None
    jac_sparsity: Any
    linsolve: str
    stiff = True
    step_compiles = True

    def __post_init__(self) -> None:
        check_tolerances(self.rtol, self.atol, self.max_steps, self.h0)
        for what, f in (("jac", self.jac), ("dfdt", self.dfdt)):
            if f is not None and not callable(f):
                raise InputTypeError(f"{what} must be callable {what}(t, y, p, ops); got {f!r}")
        if self.linsolve not in LINSOLVES:
            raise InputError(f"linsolve must be one of {LINSOLVES}; got {self.linsolve!r}")
        spec = self.jac_sparsity
        if spec is None and self.linsolve == "banded":
            raise InputError(
                "linsolve='banded' needs the bandwidth from jac_sparsity (a pattern or "
                "'detect'); got jac_sparsity=None"
            )
        if spec is None:
            return
        if self.jac is not None:
            raise InputError(
                "jac_sparsity compresses the AD Jacobian; it cannot be combined with an "
                "analytic jac= (give one of them)"
            )
        if isinstance(spec, str):
            if spec != "detect":
                raise InputError(
                    f"jac_sparsity must be a (dim, dim) pattern or 'detect'; got {spec!r}"
                )
            return
        object.__setattr__(self, "jac_sparsity", JacobianSparsity.from_pattern(spec))

    def check(self, rhs: Rhs, y0: np.ndarray, t0: float, save_at: np.ndarray, p: Any) -> None:
        """With ``jac_sparsity``: detect the pattern, or check the given one at ``(t0, y0)``.

        A given pattern must have shape ``(dim, dim)`` and must not visibly
        miss a nonzero of ``df/dy`` (:func:`~simdiff.ode._sparsity.check_pattern`,
        ``2 (n_colours + 1)`` right-hand sides); either failure raises naming
        ``jac_sparsity``.
        """
        if self.jac_sparsity is not None:
            resolve(
                self.jac_sparsity, rhs, float(t0), np.asarray(y0, dtype=np.float64),
                np.asarray(p, dtype=np.float64), type(self).__name__,
            )  # fmt: skip

    def integrate(
        self,
        rhs: Rhs,
        y0: Any,
        t0: float,
        save_at: np.ndarray,
        p: Any,
        ops: Any,
        adjoint: Any = None,
        events: Any = None,
    ) -> tuple[Any, SolveInfo]:
        """As :meth:`EmbeddedPair.integrate`; ``jac_sparsity="detect"`` reads the pattern found."""
        if isinstance(self.jac_sparsity, str):
            sp = detected(rhs, type(self).__name__)
            found = dataclasses.replace(self, jac_sparsity=sp)  # type: ignore[type-var]
            return found.integrate(rhs, y0, t0, save_at, p, ops, adjoint=adjoint, events=events)
        return super().integrate(rhs, y0, t0, save_at, p, ops, adjoint=adjoint, events=events)

    def _check_sparsity_dim(self, n: int) -> None:
        assert isinstance(self.jac_sparsity, JacobianSparsity)
        if self.jac_sparsity.dim != n:
            raise InputError(
                f"jac_sparsity must have shape ({n}, {n}) for this {n}-state problem; got "
                f"shape ({self.jac_sparsity.dim}, {self.jac_sparsity.dim})"
            )

    def _jacobians(self, rhs: Rhs, t: Any, y: Any, p: Any, ops: Any) -> tuple[Any, Any]:
        if isinstance(self.jac_sparsity, JacobianSparsity):
            self._check_sparsity_dim(int(y.shape[0]))
            return sparse_rhs_jacobian(
                rhs, t, y, p, ops, self.jac_sparsity, solver=type(self).__name__
            )
        if self.jac is None:
            return rhs_jacobian(rhs, t, y, p, ops, solver=type(self).__name__)
        ft = ops.zeros_like(y) if self.dfdt is None else self.dfdt(t, y, p, ops)
        return self.jac(t, y, p, ops), ft

    def _linsolve(self, dim: int) -> tuple[str, int]:
        """``("inverse" | "lu" | "auto-lu" | "banded", bandwidth)`` for ``dim`` states.

        ``"auto"``: LU from :data:`LU_FROM_DIM` states (where the context has
        it), else the inverse.  It never picks ``"banded"``: the block
        elimination does not pivot between blocks, which is stable for the
        block diagonally dominant ``W`` of a diffusion problem but not in
        general, so it is the user's call.
        """
        sp = self.jac_sparsity
        band = max(sp.lower, sp.upper) if isinstance(sp, JacobianSparsity) else 0
        if self.linsolve == "auto":
            return ("auto-lu" if dim >= LU_FROM_DIM else "inverse"), band
        return self.linsolve, band

    def stages(self, rhs: Rhs, t: Any, y: Any, h: Any, p: Any, ops: Any) -> tuple[Any, list[Any]]:
        """``(y_new, [K_1, ..., K_s])`` of one step.

        The stage equations are multiplied by ``h gamma`` (``W = I - h gamma
        J``, right-hand side ``h gamma f_i + gamma sum_j C_ij K_j + gamma d_i
        h^2 f_t``) so that a masked step (``h = 0``) is the identity.
        """
        tab = self.tableau
        g = tab.gamma
        hg = h * g
        dim = int(y.shape[0])
        how, band = self._linsolve(dim)
        sp = self.jac_sparsity
        if how == "banded" and isinstance(sp, JacobianSparsity):
            self._check_sparsity_dim(dim)
            Bc, ft = compressed_rhs_jacobian(rhs, t, y, p, ops, sp, solver=type(self).__name__)
            lay = _layout(sp, band)
            solve_w = _factor(
                None, t, h, ops, self.name, how,
                lambda: banded_w_solver(Bc, hg, np.array(sp.colours), lay, ops),
            )  # fmt: skip
        else:
            J, ft = self._jacobians(rhs, t, y, p, ops)
            solve_w = _factor(ops.eye(dim) - hg * J, t, h, ops, self.name, how)
        ks: list[Any] = []
        yi = y
        fi = None
        for i in range(tab.stages):
            if tab.increments(i):
                yi = yi + ks[i - 1]
            elif i > 0:
                yi = y
                for aij, kj in zip(tab.a[i], ks, strict=True):
                    if aij != 0.0:
                        yi = yi + aij * kj
            if fi is None or not tab.reuses_f(i):
                fi = rhs(t + tab.c[i] * h, yi, p, ops)
            b = hg * fi
            for cij, kj in zip(tab.C[i], ks, strict=True):
                if cij != 0.0:
                    b = b + (g * cij) * kj
            if tab.d[i] != 0.0:
                b = b + (g * tab.d[i]) * (h * h) * ft
            ks.append(solve_w(b))
        if tab.solution_increments():
            y_new = yi + ks[-1]
        else:
            y_new = y
            for mj, kj in zip(tab.m, ks, strict=True):
                if mj != 0.0:
                    y_new = y_new + mj * kj
        return y_new, ks

    def step(
        self, rhs: Rhs, t: Any, y: Any, h: Any, p: Any, state: Any, ops: Any
    ) -> tuple[Any, Any, Any]:
        """One step: ``(y_new, err, ())``, the solution and its embedded error estimate."""
        y_new, ks = self.stages(rhs, t, y, h, p, ops)
        err = None
        for ej, kj in zip(self.tableau.e, ks, strict=True):
            if ej != 0.0:
                err = ej * kj if err is None else err + ej * kj
        return y_new, err, state


#: Rodas3 (Sandu et al. 1997 / KPP, in the Hairer–Wanner form): stiffly accurate,
#: L-stable, order 3; the error estimate is ``K_4`` (embedded order 2).
RODAS3 = RosenbrockTableau(
    "rodas3",
    gamma=0.5,
    a=((), (0.0,), (2.0, 0.0), (2.0, 0.0, 1.0)),
    C=((), (4.0,), (1.0, -1.0), (1.0, -1.0, -8.0 / 3.0)),
    c=(0.0, 0.0, 1.0, 1.0),
    d=(0.5, 1.5, 0.0, 0.0),
    m=(2.0, 0.0, 1.0, 1.0),
    e=(0.0, 0.0, 0.0, 1.0),
)


@dataclass(frozen=True)
class Rodas3(RosenbrockMethod):
    """Adaptive Rodas3 (Rosenbrock, stiffly accurate, L-stable), order 3, for stiff systems.

    Parameters
    ----------
    rtol, atol, max_steps, h0
        As for :class:`~simdiff.ode.Dopri5` (the controller exponent is
        ``-1/3``, from the embedded order 2).
    jac : callable, optional
        ``jac(t, y, p, ops) -> (dim, dim)`` array ``df/dy``; default: forward-mode
        AD of ``rhs`` (:func:`rhs_jacobian`).  With an analytic ``jac`` the
        right-hand side is taken to be autonomous unless ``dfdt`` is given.
    dfdt : callable, optional
        ``dfdt(t, y, p, ops) -> (dim,)`` array, used with ``jac``.
    jac_sparsity : (dim, dim) bool array, scipy.sparse matrix or "detect", optional
        The nonzero pattern of ``df/dy``, as SciPy's ``solve_ivp(jac_sparsity=)``:
        ``J`` is then computed by compressed forward mode, one product per
        column colour (:mod:`simdiff.ode._sparsity`), and is exact on the
        pattern.  A given pattern is checked at construction against a
        finite-difference product; ``"detect"`` finds it from
        finite-difference Jacobians at ``y0`` and three random nearby points
        (a heuristic: :func:`~simdiff.ode.detect_sparsity`).  Not with ``jac``.
    linsolve : {"auto", "inverse", "lu", "banded"}
        How ``W = I - h gamma J`` is solved each step: ``"inverse"``, one
        inverse applied to every stage by a matrix product; ``"lu"``, one LU
        factorisation and a triangular solve per stage (``ops.lu_factor``);
        ``"banded"`` (needs ``jac_sparsity``), block-tridiagonal elimination
        in blocks of the pattern's bandwidth (:mod:`simdiff.ode._banded`, no
        pivoting between blocks; ``W``'s three block diagonals are read from
        the compressed Jacobian, never a dense ``(dim, dim)`` array);
        ``"auto"`` (default): the inverse below 128 states and LU from there.

    Notes
    -----
    Each step evaluates ``J`` once (one ``jacfwd`` of the right-hand side),
    reused by the four stages, and factorises ``W = I - h J / 2`` once: its
    inverse, ``ops.linalg.solve(W, I)``, is applied to each stage's right-hand
    side by a matrix product.  Derivatives with respect to parameters
    differentiate through ``J`` too (second derivatives of the right-hand side
    appear): they are the exact derivatives of the discrete solution for the
    accepted step sequence, as for :class:`~simdiff.ode.Dopri5`, whose Notes on
    step-size decisions under ``stop_gradient`` and on failures apply here.
    For tight tolerances :class:`~simdiff.ode.Rodas5P` (order 5) takes far
    fewer steps.  Under ``Derivatives(..., compile=True | "auto")`` on torch
    each step is one compiled graph (``step_compiles``; the loop runs on the
    host): value, gradient and VJP.

    References
    ----------
    E. Hairer, G. Wanner, *Solving Ordinary Differential Equations II*, 2nd ed.,
    Springer (1996), IV.7.  A. Sandu et al., "Benchmarking stiff ODE solvers for
    atmospheric chemistry problems II: Rosenbrock solvers", Atmos. Environ. 31
    (1997) 3459–3472.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.ode import Rodas3, solve
    >>> ys = solve(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [1000.0],
    ...            save_at=[1.0], solver=Rodas3(), backend="jax")
    >>> bool(abs(ys[0, 0]) < 1e-8)
    True
    """

    rtol: float = 1e-6
    atol: float = 1e-9
    max_steps: int = 4096
    h0: float | None = None
    jac: Jac | None = None
    dfdt: Jac | None = None
    jac_sparsity: Any = None
    linsolve: str = "auto"
    name = "rodas3"
    order = 3
    error_order = 2
    tableau = RODAS3
