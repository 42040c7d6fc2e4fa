"""Small simulators the claims experiments time: Lotka–Volterra by fixed-step RK4, op chains."""

from __future__ import annotations

from typing import Any

import numpy as np

import simdiff
from simdiff.ode.solvers.rk import rk_integrate, rk_step

#: Lotka–Volterra parameters (a, b, c, d) of the default point and the initial state.
LV_PARAMS = np.array([1.1, 0.4, 0.1, 0.4])
LV_Y0 = (10.0, 5.0)
LV_T1 = 5.0


def lv_rhs(t: Any, y: Any, p: Any, ops: Any) -> Any:
    """Lotka–Volterra: prey' = a prey - b prey pred, pred' = c prey pred - d pred."""
    prey, pred = y[0], y[1]
    return ops.stack([p[0] * prey - p[1] * prey * pred, p[2] * prey * pred - p[3] * pred])


def lotka_volterra(n_steps: int = 100, *, unrolled: bool = False) -> simdiff.Problem:
    """Loss of a Lotka–Volterra RK4 rollout as a function of its 4 parameters.

    ``unrolled=True`` writes the time loop as a Python loop (one traced step per
    iteration on JAX) instead of ``ops.scan`` (one traced step in total).
    """

    def fn(x: Any, ops: Any) -> Any:
        y0 = ops.asarray(LV_Y0)
        if unrolled:
            h = LV_T1 / n_steps
            y, acc = y0, 0.0
            for i in range(n_steps):
                y = rk_step(lv_rhs, i * h, y, h, x, ops)
                acc = acc + ops.sum(y**2)
            return ops.sum(y**2) + 1e-3 * acc
        y, ys = rk_integrate(lv_rhs, y0, 0.0, LV_T1, n_steps, x, ops)
        return ops.sum(y**2) + 1e-3 * ops.sum(ys**2)

    kind = "unrolled" if unrolled else "scan"
    return simdiff.Problem(
        fn,
        x0=LV_PARAMS.copy(),
        name=f"lotka_volterra_{kind}{n_steps}",
        meta={"tags": ("ode", "validation")},
    )


def lotka_volterra_broadcast(n_steps: int, x: np.ndarray) -> simdiff.Problem:
    """The sum of :func:`lotka_volterra`'s losses over a batch, hand-batched by broadcasting.

    ``x`` has one row of 4 parameters per rollout; the problem's input is
    ``x.T`` flattened (parameter-major), and every RK4 step advances all the
    rollouts at once as arrays of length ``batch``.  Its gradient, reshaped
    to ``(4, batch)`` and transposed, is the batch of per-rollout gradients:
    what ``vmap(grad(loss))`` computes, written by hand.
    """
    x = np.asarray(x, dtype=np.float64)
    batch = x.shape[0]

    def fn(z: Any, ops: Any) -> Any:
        p = [z[i * batch : (i + 1) * batch] for i in range(4)]
        y0 = ops.stack([LV_Y0[0] + 0.0 * p[0], LV_Y0[1] + 0.0 * p[0]])
        y, ys = rk_integrate(lv_rhs, y0, 0.0, LV_T1, n_steps, p, ops)
        return ops.sum(y**2) + 1e-3 * ops.sum(ys**2)

    return simdiff.Problem(
        fn,
        x0=x.T.ravel().copy(),
        name=f"lotka_volterra_broadcast{n_steps}x{batch}",
        meta={"tags": ("ode", "validation")},
    )


def op_chain(k: int) -> simdiff.Problem:
    """``k`` chained elementwise ops on 4 numbers: time per op = slope in ``k``."""

    def fn(x: Any, ops: Any) -> Any:
        y = x
        for _ in range(k):
            y = ops.sin(y)
        return ops.sum(y)

    return simdiff.Problem(fn, x0=np.linspace(0.1, 0.4, 4), name=f"sin_chain{k}")
