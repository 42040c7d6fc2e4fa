"""Rodas3: an adaptive, stiffly accurate Rosenbrock method of order 3 (embedded order 2).

A Rosenbrock method replaces the Newton iterations of an implicit method by
one linear solve per stage with ``W = I - h gamma J``, ``J = df/dy``.  Here
``J`` (and ``df/dt``) come from the backend's own forward-mode transform applied
to the right-hand side inside the problem function (``jax.jacfwd`` on JAX,
``torch.func.jacfwd`` on torch; both nest under the outer derivative
transforms), or from a user-supplied ``jac``.  The numpy context, which has no
AD, uses central differences (step ``eps^(1/3) max(1, |z|)``, error about
``1e-11`` relative): its values are a reference, not differentiated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InputTypeError, UnsupportedError
from ._adaptive import EmbeddedPair, check_tolerances
from ._base import Rhs

__all__ = ["Rodas3", "rhs_jacobian"]

# Rodas3 in the Hairer–Wanner form (Solving ODEs II, IV.7; coefficients as in
# Sandu et al. 1997 / KPP):  (I/(h g) - J) K_i = f(t + alpha_i h, y + sum_j A_ij K_j)
#   + sum_j C_ij K_j / h + g_i h f_t;   y1 = y + sum M_j K_j;  err = sum E_j K_j.
_GAMMA = 0.5
_A = ((), (0.0,), (2.0, 0.0), (2.0, 0.0, 1.0))
_C = ((), (4.0,), (1.0, -1.0), (1.0, -1.0, -8.0 / 3.0))
_ALPHA = (0.0, 0.0, 1.0, 1.0)
_GAMMAS = (0.5, 1.5, 0.0, 0.0)
_M = (2.0, 0.0, 1.0, 1.0)
_E = (0.0, 0.0, 0.0, 1.0)

Jac = Callable[[Any, Any, Any, Any], Any]


def rhs_jacobian(rhs: Rhs, t: Any, y: Any, p: Any, ops: Any) -> tuple[Any, Any]:
    """``(df/dy, df/dt)`` at ``(t, y)`` by the context's forward-mode Jacobian ``ops.jacfwd``.

    Shapes ``(dim, dim)`` and ``(dim,)``.  JAX: ``jax.jacfwd``; torch:
    ``torch.func.jacfwd``; numpy: central differences.  Contexts without it
    (the Taylor context) need an analytic ``jac``.
    """
    z = ops.concat([ops.reshape(t, (1,)), y])

    def g(zz: Any) -> Any:
        return rhs(zz[0], zz[1:], p, ops)

    try:
        jz = ops.jacfwd(g)(z)
    except UnsupportedError as exc:
        raise UnsupportedError(
            f"Rodas3 computes df/dy by forward-mode AD, which the {ops.name!r} context lacks; "
            "pass an analytic jac=jac(t, y, p, ops) to Rodas3"
        ) from exc
    return jz[:, 1:], jz[:, 0]


@dataclass(frozen=True)
class Rodas3(EmbeddedPair):
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

    Notes
    -----
    Each step evaluates ``J`` once (one ``jacfwd`` of the right-hand side) and
    solves four linear systems with ``W = I - h J / 2`` by ``ops.linalg.solve``.
    The stage equations are multiplied by ``h gamma`` so that a masked step
    (``h = 0``) is the identity.  Derivatives with respect to parameters
    differentiate through ``J`` too (second derivatives of the right-hand side
    appear): they are the exact derivatives of the discrete solution for the
    accepted step sequence, as for :class:`~simdiff.ode.Dopri5`, whose Notes on
    step-size decisions under ``stop_gradient`` and on failures apply here.

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
    name = "rodas3"
    order = 3
    error_order = 2
    stiff = True

    def __post_init__(self) -> None:
        check_tolerances(self.rtol, self.atol, self.max_steps, self.h0)
        for what, f in (("jac", self.jac), ("dfdt", self.dfdt)):
            if f is not None and not callable(f):
                raise InputTypeError(f"{what} must be callable {what}(t, y, p, ops); got {f!r}")

    def _jacobians(self, rhs: Rhs, t: Any, y: Any, p: Any, ops: Any) -> tuple[Any, Any]:
        if self.jac is None:
            return rhs_jacobian(rhs, t, y, p, ops)
        ft = ops.zeros_like(y) if self.dfdt is None else self.dfdt(t, y, p, ops)
        return self.jac(t, y, p, ops), ft

    def step(
        self, rhs: Rhs, t: Any, y: Any, h: Any, p: Any, state: Any, ops: Any
    ) -> tuple[Any, Any, Any]:
        """One step: ``(y_new, err, ())``, the 3rd-order solution and its error estimate."""
        J, ft = self._jacobians(rhs, t, y, p, ops)
        hg = h * _GAMMA
        W = ops.eye(int(y.shape[0])) - hg * J
        ks: list[Any] = []
        f_prev = None
        for i in range(4):
            yi = y
            for aij, kj in zip(_A[i], ks, strict=False):
                if aij != 0.0:
                    yi = yi + aij * kj
            if i == 1:  # A_2j = 0 and alpha_2 = alpha_1: stage 2 reuses f of stage 1
                fi = f_prev
            else:
                fi = rhs(t + _ALPHA[i] * h, yi, p, ops)
            f_prev = fi
            b = hg * fi
            for cij, kj in zip(_C[i], ks, strict=False):
                b = b + (_GAMMA * cij) * kj
            if _GAMMAS[i] != 0.0:
                b = b + (_GAMMA * _GAMMAS[i]) * (h * h) * ft
            ks.append(ops.linalg.solve(W, b))
        y_new = y
        for mj, kj in zip(_M, ks, strict=True):
            if mj != 0.0:
                y_new = y_new + mj * kj
        return y_new, ks[3], state  # E = (0, 0, 0, 1)
