"""Planted errors: the detection power simdiff.check states, on both backends.

An error is planted in the AD result only, with the ``x - stop_gradient(x)``
trick: the term is zero in value (so the numpy function SciPy differences is
unchanged) and adds ``delta`` to one element of the gradient or the Hessian.

Stated power (docstring of ``simdiff.check``): against exact references a
relative error of 1e-8 in any element >= 1e-3 of the array's largest is
caught; against finite differences, 1e-5; a near-zero gradient wrong by 100%
is caught.  Each test also checks the unplanted problem passes, so it can fail.
"""

from __future__ import annotations

import numpy as np
import pytest

import simdiff
from simdiff._check import check

A = np.array([1.0, 1e-1, 1e-2, 1.2e-3])  # element scales: the last is ~1e-3 of the first
B = np.array([1.0, 0.5, 2.0, 1.5])
X0 = np.array([0.3, -0.2, 0.1, 0.25])


def _g(x: np.ndarray) -> np.ndarray:
    return A * B * np.exp(B * x)


def _h(x: np.ndarray) -> np.ndarray:
    return np.diag(A * B**2 * np.exp(B * x))


def planted(kind: str, k: int, rel: float) -> simdiff.Problem:
    """sum A exp(B x), with element k of the gradient or Hessian off by ``rel`` (relative)."""
    size = _g(X0)[k] if kind == "grad" else _h(X0)[k, k]

    def fn(x, ops):
        f = ops.sum(ops.asarray(A) * ops.exp(ops.asarray(B) * x))
        d = x[k] - ops.stop_gradient(x[k])
        plant = d if kind == "grad" else 0.5 * d * d
        return f + rel * size * plant

    exact = {"value": lambda x: np.sum(A * np.exp(B * x)), "grad": _g, "hessian": _h}
    return simdiff.Problem(fn, x0=X0, name=f"planted-{kind}{k}", exact=exact)


def _verdict(res, kind: str, reference: str) -> str:
    (e,) = [e for e in res.entries if e.derivative == kind and e.reference == reference]
    return e.verdict


@pytest.mark.parametrize("kind", ["grad", "hessian"])
@pytest.mark.parametrize("k", [0, 3])
def test_exact_reference_catches_1e_8(backend: str, kind: str, k: int) -> None:
    assert np.abs(_g(X0)[3]) >= 1e-3 * np.max(np.abs(_g(X0)))
    clean = check(planted(kind, k, 0.0), derivatives=(kind,), backends=(backend,))
    assert _verdict(clean, kind, "exact") == "pass", str(clean)
    res = check(planted(kind, k, 1e-8), derivatives=(kind,), backends=(backend,))
    assert _verdict(res, kind, "exact") == "fail", str(res)
    assert res.verdict == "fail"


@pytest.mark.parametrize("kind", ["grad", "hessian"])
@pytest.mark.parametrize("k", [0, 3])
def test_finite_differences_catch_1e_5(backend: str, kind: str, k: int) -> None:
    clean = check(planted(kind, k, 0.0), derivatives=(kind,), backends=(backend,))
    assert _verdict(clean, kind, "scipy-fd") == "pass", str(clean)
    p = planted(kind, k, 1e-5)
    p.exact.clear()  # finite differences alone
    res = check(p, derivatives=(kind,), backends=(backend,))
    assert _verdict(res, kind, "scipy-fd") == "fail", str(res)


@pytest.mark.parametrize("reference", ["scipy-fd", "exact"])
def test_near_zero_gradient_wrong_by_100_percent_is_caught(backend: str, reference: str) -> None:
    # f = 1 + |x - c|^2 near its minimum: the gradient is ~1e-9, far below 1.
    c = np.array([0.7, -0.4, 0.2])
    x0 = c + 1e-9 * np.array([1.0, -2.0, 1.5])

    def make(factor: float) -> simdiff.Problem:
        def fn(x, ops):
            r = x - ops.asarray(c)
            d = x - ops.stop_gradient(x)
            return 1.0 + ops.sum(r * r) + factor * ops.sum(ops.stop_gradient(2.0 * r) * d)

        return simdiff.Problem(fn, x0=x0, exact={"grad": lambda x: 2.0 * (x - c)})

    clean = check(make(0.0), derivatives=("grad",), backends=(backend,))
    assert _verdict(clean, "grad", reference) == "pass", str(clean)
    res = check(make(1.0), derivatives=("grad",), backends=(backend,))  # AD gives 2x the gradient
    assert _verdict(res, "grad", reference) == "fail", str(res)
