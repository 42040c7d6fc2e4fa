"""Derivatives at kinks and ties follow one convention on every backend and method.

The conventions (docs/errors.md): ``d|x|/dx = sign(x)`` (0 at 0); ``sign``,
``floor`` and ``round`` have derivative 0 everywhere; ``maximum``/``minimum``
and the ``max``/``min`` reductions split the derivative equally at a tie;
``clip`` has derivative 1 on the closed interval ``[min, max]``; ``where``
differentiates the selected branch.  Each case below sits exactly on a kink
or tie; its expected derivatives are worked out by hand from the convention
(the chain rule with the kink's derivative held at its conventional value).
Every differentiating backend and every method must give them: ``grad``,
the three Hessian methods, ``jvp``, nested ``derivative`` and Taylor
``derivative`` of orders 1-3 (the latter also over numpy).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import simdiff

E = math.e


def _stack(ops, *xs):
    return ops.stack(list(xs))


# name: (fn, x0, v, grad, hessian, (d1, d2, d3) along v)
CASES = {
    "abs at 0": (lambda x, o: o.abs(x[0]), [0.0], [1.0], [0.0], [[0.0]], (0.0, 0.0, 0.0)),
    "abs(sin) at 0": (
        lambda x, o: o.abs(o.sin(x[0])) + x[0] ** 2,
        [0.0], [1.0], [0.0], [[2.0]], (0.0, 2.0, 0.0),
    ),
    "sign * x^2 at 0": (
        lambda x, o: o.sign(x[0]) * x[0] ** 2 + x[0],
        [0.0], [1.0], [1.0], [[0.0]], (1.0, 0.0, 0.0),
    ),
    "maximum(x, 0) at 0": (
        lambda x, o: o.maximum(x[0], 0.0), [0.0], [1.0], [0.5], [[0.0]], (0.5, 0.0, 0.0),
    ),
    "maximum(x, x^2) tie at 1": (
        lambda x, o: o.maximum(x[0], x[0] ** 2), [1.0], [1.0], [1.5], [[1.0]], (1.5, 1.0, 0.0),
    ),
    "minimum(x, x^2) tie at 1": (
        lambda x, o: o.minimum(x[0] ** 2, x[0]), [1.0], [1.0], [1.5], [[1.0]], (1.5, 1.0, 0.0),
    ),
    "maximum(x0, x1) tie": (
        lambda x, o: o.maximum(x[0], x[1]),
        [1.0, 1.0], [1.0, 2.0], [0.5, 0.5], [[0.0, 0.0], [0.0, 0.0]], (1.5, 0.0, 0.0),
    ),
    "clip at min": (
        lambda x, o: o.clip(x[0] ** 2 + x[0], 0.0, 1.0), [0.0], [1.0], [1.0], [[2.0]],
        (1.0, 2.0, 0.0),
    ),
    "clip at max": (
        lambda x, o: o.clip(x[0] ** 3, -1.0, 1.0), [1.0], [1.0], [3.0], [[6.0]],
        (3.0, 6.0, 6.0),
    ),
    "where at the boundary": (
        lambda x, o: o.where(x[0] >= 0.0, x[0] ** 2, -x[0]), [0.0], [1.0], [0.0], [[2.0]],
        (0.0, 2.0, 0.0),
    ),
    "floor at a jump": (
        lambda x, o: o.floor(x[0]) * o.exp(x[0]), [1.0], [1.0], [E], [[E]], (E, E, E),
    ),
    "round at a half": (
        lambda x, o: o.round(x[0]) * o.exp(x[0] - 1.5), [1.5], [1.0], [2.0], [[2.0]],
        (2.0, 2.0, 2.0),
    ),
    "max reduction tie": (
        lambda x, o: o.max(_stack(o, x[0], x[0] ** 2)), [1.0], [1.0], [1.5], [[1.0]],
        (1.5, 1.0, 0.0),
    ),
    "min reduction tie": (
        lambda x, o: o.min(_stack(o, x[0], 2.0 - x[0] ** 2)), [1.0], [1.0], [-0.5], [[-1.0]],
        (-0.5, -1.0, 0.0),
    ),
    "safe_where, branch not taken": (
        lambda x, o: o.safe_where(x[0] > 0.0, x[0], o.sqrt, 0.0), [-1.0], [1.0], [0.0],
        [[0.0]], (0.0, 0.0, 0.0),
    ),
    "safe_where, branch taken": (
        lambda x, o: o.safe_where(x[0] > 0.0, x[0], o.sqrt, o.exp), [4.0], [1.0], [0.25],
        [[-1.0 / 32.0]], (0.25, -1.0 / 32.0, 3.0 / 256.0),
    ),
}  # fmt: skip


def _problem(name):
    fn, x0, *_ = CASES[name]
    return simdiff.Problem(fn, x0=np.array(x0), name=name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_first_and_second_derivatives(name, backend):
    _, _, v, g, h, d = CASES[name]
    p = _problem(name)
    v = np.array(v)
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), g, atol=1e-14, err_msg="grad")
    np.testing.assert_allclose(simdiff.jvp(p, v, backend=backend), d[0], atol=1e-14)
    for method in ("fwd-rev", "rev-rev", "fwd-fwd"):
        np.testing.assert_allclose(
            simdiff.hessian(p, backend=backend, method=method), h, atol=1e-14, err_msg=method
        )


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize(
    ("backend_", "method"),
    [("jax", "nested"), ("torch", "nested"), ("jax", "taylor"), ("torch", "taylor"),
     ("numpy", "taylor")],
)  # fmt: skip
def test_directional_derivatives(name, backend_, method):
    _, _, v, _, _, d = CASES[name]
    p = _problem(name)
    for k in (1, 2, 3):
        got = simdiff.derivative(p, k, np.array(v), backend=backend_, method=method)
        np.testing.assert_allclose(got, d[k - 1], atol=1e-13, err_msg=f"order {k}")


def test_plain_where_of_a_singular_branch_is_reported(backend):
    """``where(x > 0, sqrt(x), 0)`` at -1: the value is 0, the derivative NaN (reported)."""
    p = simdiff.Problem(
        lambda x, ops: ops.where(x[0] > 0.0, ops.sqrt(x[0]), 0.0),
        x0=np.array([1.0]),
    )
    with pytest.raises(simdiff.NonFiniteError, match="simdiff.grad is not finite"):
        simdiff.grad(p, np.array([-1.0]), backend=backend)
