"""Rodas5P: an adaptive, stiffly accurate, L-stable Rosenbrock method of order 5 (embedded order 4).

Eight stages, one Jacobian per step (reused by every stage), one inverse of
``W = I - h gamma J`` per step applied to the eight stages.  The coefficients are those of
Steinebach (2023), as tabulated in OrdinaryDiffEq.jl
(``src/tableaus/rosenbrock_tableaus.jl``, ``Rodas5PTableau``), written here in
the same Hairer–Wanner form (:class:`~simdiff.ode.solvers.rosenbrock.RosenbrockTableau`):
stages 6-8 evaluate at ``t + h`` from the previous stage's input plus its
increment, the solution is the last stage's input plus ``K_8`` and the error
estimate is ``K_8``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simdiff.errors import InputError
from simdiff.ode.solvers._base import Rhs
from simdiff.ode.solvers.adaptive import AdaptiveController
from simdiff.ode.solvers.rosenbrock import Jac, RosenbrockMethod, RosenbrockTableau

__all__ = ["RODAS5P", "RODAS5P_DENSE", "Rodas5P", "rodas5p_dense"]

# fmt: off
_A6 = (-7.502846399306121, 2.561846144803919, -11.627539656261098, -0.18268767659942256,
       0.030198172008377946)

#: Rodas5P (Steinebach 2023) in the Hairer–Wanner form of :class:`RosenbrockTableau`.
RODAS5P = RosenbrockTableau(
    "rodas5p",
    gamma=0.21193756319429014,
    a=(
        (),
        (3.0,),
        (2.849394379747939, 0.45842242204463923),
        (-6.954028509809101, 2.489845061869568, -10.358996098473584),
        (2.8029986275628964, 0.5072464736228206, -0.3988312541770524, -0.04721187230404641),
        _A6,
        (*_A6, 1.0),
        (*_A6, 1.0, 1.0),
    ),
    C=(
        (),
        (-14.155112264123755,),
        (-17.97296035885952, -2.859693295451294),
        (147.12150275711716, -1.41221402718213, 71.68940251302358),
        (165.43517024871676, -0.4592823456491126, 42.90938336958603, -5.961986721573306),
        (24.854864614690072, -3.0009227002832186, 47.4931110020768, 5.5814197821558125,
         -0.6610691825249471),
        (30.91273214028599, -3.1208243349937974, 77.79954646070892, 34.28646028294783,
         -19.097331116725623, -28.087943162872662),
        (37.80277123390563, -3.2571969029072276, 112.26918849496327, 66.9347231244047,
         -40.06618937091002, -54.66780262877968, -9.48861652309627),
    ),
    c=(0.0, 0.6358126895828704, 0.4095798393397535, 0.9769306725060716, 0.4288403609558664,
       1.0, 1.0, 1.0),
    d=(0.21193756319429014, -0.42387512638858027, -0.3384627126235924, 1.8046452872882734,
       2.325825639765069, 0.0, 0.0, 0.0),
    m=(*_A6, 1.0, 1.0, 1.0),
    e=(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0),
)

#: Dense-output coefficients of Rodas5P (OrdinaryDiffEq.jl's ``h21 ... h48``):
#: ``D_r = sum_j H_rj K_j`` for ``r = 1, 2, 3``.
RODAS5P_DENSE = (
    (25.948786856663858, -2.5579724845846235, 10.433815404888879, -2.3679251022685204,
     0.524948541321073, 1.1241088310450404, 0.4272876194431874, -0.17202221070155493),
    (-9.91568850695171, -0.9689944594115154, 3.0438037242978453, -24.495224566215796,
     20.176138334709044, 15.98066361424651, -6.789040303419874, -6.710236069923372),
    (11.419903575922262, 2.8879645146136994, 72.92137995996029, 80.12511834622643,
     -52.072871366152654, -59.78993625266729, -0.15582684282751913, 4.883087185713722),
)
# fmt: on


def rodas5p_dense(theta: float, y0: Any, y1: Any, ks: list[Any]) -> Any:
    """The step's dense output at ``t + theta h``, ``0 <= theta <= 1``.

    ``(1 - theta) y0 + theta (y1 + (1 - theta) (D_1 + theta (D_2 + theta D_3)))``
    with ``D_r = sum_j H_rj K_j`` (:data:`RODAS5P_DENSE`), the form of
    OrdinaryDiffEq.jl's Rosenbrock interpolants; it matches ``y0`` at 0 and
    ``y1`` at 1.
    """
    d: list[Any] = []
    for row in RODAS5P_DENSE:
        acc: Any = 0.0
        for hj, kj in zip(row, ks, strict=True):
            acc = acc + hj * kj
        d.append(acc)
    s = 1.0 - theta
    return s * y0 + theta * (y1 + s * (d[0] + theta * (d[1] + theta * d[2])))


@dataclass(frozen=True)
class Rodas5P(RosenbrockMethod):
    """Adaptive Rodas5P (Rosenbrock, stiffly accurate, L-stable), order 5, for stiff systems.

    Parameters
    ----------
    rtol, atol, max_steps, h0
        As for :class:`~simdiff.ode.Dopri5`.
    jac, dfdt : callable, optional
        As for :class:`~simdiff.ode.Rodas3`: ``df/dy`` (and ``df/dt``) by hand;
        default forward-mode AD of ``rhs``.
    jac_sparsity, linsolve
        As for :class:`~simdiff.ode.Rodas3`: the pattern of ``df/dy`` (compressed
        forward mode, one product per column colour) and how ``W`` is solved
        (``"auto"``: its inverse below 128 states, an LU factorisation from there;
        ``"banded"``: block-tridiagonal elimination in blocks of the bandwidth).
    controller : {"pi", "i"}
        The step controller (:class:`~simdiff.ode.solvers.adaptive.AdaptiveController`):
        ``"pi"`` (default), Gustafsson's PI controller with exponents ``0.7/5``
        and ``0.4/5``; ``"i"``, the integral controller ``err^(-1/5)`` of the
        other adaptive solvers.

    Notes
    -----
    A step evaluates ``J = df/dy`` and ``df/dt`` once (one ``jacfwd`` of the
    right-hand side over ``(t, y)``: ``dim + 1`` forward-mode products), which
    all eight stages reuse, then eight right-hand sides, and one inversion of
    ``W = I - h gamma J`` (``gamma = 0.2119``, ``ops.linalg.solve(W, I)``)
    applied to each stage by a matrix product.  Cost per step, dense
    Jacobian: one Jacobian, about ``2 dim^3`` flops for the inverse and ``8
    dim^2`` for the stages, eight right-hand sides.  The error estimate is the last
    stage's increment ``K_8`` (embedded order 4).  Save times are reached
    exactly (the step is shortened to land on them, as for every simdiff
    solver); :func:`rodas5p_dense` is the method's interpolant inside a step.
    Derivatives are those of the discrete solution for the accepted step
    sequence (see :class:`~simdiff.ode.Dopri5`); they differentiate through
    ``J`` too, so reverse mode evaluates second derivatives of ``rhs``.

    References
    ----------
    G. Steinebach, "Construction of Rosenbrock–Wanner method Rodas5P and
    numerical benchmarks within the Julia Differential Equations package",
    BIT Numer. Math. 63 (2023) 27.  E. Hairer, G. Wanner, *Solving Ordinary
    Differential Equations II*, 2nd ed., Springer (1996), IV.7-IV.8.
    OrdinaryDiffEq.jl, ``Rodas5PTableau``.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.ode import Rodas5P, solve
    >>> ys = solve(lambda t, y, p, ops: -p[0] * (y - ops.cos(t)), [0.0], (0.0, 1.0), [1e4],
    ...            save_at=[1.0], solver=Rodas5P(rtol=1e-8, atol=1e-10), backend="jax")
    >>> bool(abs(ys[0, 0] - np.cos(1.0)) < 1e-4)
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
    controller: str = "pi"
    name = "rodas5p"
    order = 5
    error_order = 4
    tableau = RODAS5P

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.controller not in ("pi", "i"):
            raise InputError(f"controller must be 'pi' or 'i'; got {self.controller!r}")

    def make_controller(self, span: float) -> AdaptiveController:
        """The PI controller (``controller="pi"``) or the I controller."""
        if self.controller == "pi":
            return AdaptiveController.pi(self.rtol, self.atol, self.error_order, abs(span))
        return super().make_controller(span)

    def dense_at(self, rhs: Rhs, t: Any, y: Any, h: Any, p: Any, theta: float, ops: Any) -> Any:
        """The state at ``t + theta h`` from one step of length ``h`` (dense output)."""
        y1, ks = self.stages(rhs, t, y, h, p, ops)
        return rodas5p_dense(theta, y, y1, ks)

    def dense(self, rhs: Rhs, p: Any, ops: Any) -> Any:
        """Rodas5P's own interpolant (:func:`rodas5p_dense`); the step's stages are recomputed."""

        def interp(theta: Any, data: tuple[Any, Any, list[Any]]) -> Any:
            y0, y1, ks = data
            return rodas5p_dense(theta, y0, y1, ks)

        def make(t: Any, y: Any, h: Any, state: Any, y_new: Any) -> tuple[Any, Any]:
            y1, ks = self.stages(rhs, t, y, h, p, ops)
            return (y, y1, list(ks)), interp

        return make
