"""Pair potentials and the C2 switch: values, derivatives against closed forms, NaN guards."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from _numerics import path_rtol

import simdiff
from simdiff.pes import lennard_jones, morse, smooth_cutoff, switch_c2


def _separable(pair, r):
    """Problem sum_i pair(r_i): its Hessian is diag(pair''(r_i)), its gradient pair'(r_i)."""
    return simdiff.Problem(lambda x, ops: ops.sum(pair(x, ops)), x0=np.asarray(r, dtype=float))


R = np.array([0.95, 1.12, 1.4, 2.3])


def _lj_d(r, k):
    return [4 * (r**-12 - r**-6), 4 * (-12 * r**-13 + 6 * r**-7),
            4 * (156 * r**-14 - 42 * r**-8), 4 * (-2184 * r**-15 + 336 * r**-9)][k]  # fmt: skip


def _morse_d(r, k, D=0.7, a=1.6, r0=1.1):
    u = np.exp(-a * (r - r0))
    return [D * (u * u - 2 * u), 2 * a * D * (u - u * u), 2 * a * a * D * (2 * u * u - u),
            2 * a**3 * D * (u - 4 * u * u)][k]  # fmt: skip


@pytest.mark.parametrize(
    ("pair", "ref"),
    [(lennard_jones, _lj_d), (functools.partial(morse, D=0.7, a=1.6, r0=1.1), _morse_d)],
    ids=["lj", "morse"],
)
def test_pair_derivatives_match_closed_forms(backend, pair, ref):
    p = _separable(pair, R)
    np.testing.assert_allclose(p.evaluate(), ref(R, 0).sum(), rtol=1e-13)
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), ref(R, 1), rtol=1e-12)
    np.testing.assert_allclose(simdiff.hessian(p, backend=backend), np.diag(ref(R, 2)),
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    third = simdiff.derivative(p, 3, np.ones(4), backend=backend, method="nested")
    np.testing.assert_allclose(third, ref(R, 3).sum(), rtol=1e-11)


def test_lj_parameters_scale():
    ops = simdiff.get_ops("numpy")
    r = np.array([1.3, 2.0])
    np.testing.assert_allclose(lennard_jones(r * 1.7, ops, epsilon=2.5, sigma=1.7),
                               2.5 * lennard_jones(r, ops), rtol=1e-14)  # fmt: skip


def test_switch_values_and_ends():
    ops = simdiff.get_ops("numpy")
    r = np.array([0.5, 1.0, 1.25, 1.5, 1.75, 2.0, 3.0])
    s = switch_c2(r, ops, r_on=1.0, r_cut=2.0)
    t = np.clip(r - 1.0, 0, 1)
    # 6 operations on terms bounded by the coefficients' sum (1 + 10 + 15 + 6 = 32)
    np.testing.assert_allclose(s, 1 - 10 * t**3 + 15 * t**4 - 6 * t**5, atol=32 * path_rtol(6))
    assert s[0] == 1.0 and s[-1] == 0.0 and s[3] == 0.5


@pytest.mark.parametrize("where", ["r_on", "r_cut"])
def test_switched_potential_is_c2(backend, where):
    """First and second derivatives agree on both sides of r_on and r_cut (to O(h))."""
    r_on, r_cut = 2.0, 2.5
    pair = smooth_cutoff(lennard_jones, r_on=r_on, r_cut=r_cut)
    r0 = r_on if where == "r_on" else r_cut
    h = 1e-7
    p = _separable(pair, np.array([r0 - h, r0 + h]))
    g = simdiff.grad(p, backend=backend)
    hd = np.diag(simdiff.hessian(p, backend=backend))
    assert abs(g[0] - g[1]) < 1e-5 and abs(hd[0] - hd[1]) < 1e-4
    if where == "r_cut":
        assert g[1] == 0.0 and hd[1] == 0.0
    # a C1-only switch would show a jump of order one in the second derivative
    assert np.all(np.isfinite(hd))


def test_smooth_cutoff_matches_product_inside(backend):
    pair = smooth_cutoff(lennard_jones, r_on=1.5, r_cut=2.5)
    r = np.array([1.0, 1.7, 2.2, 2.49])
    ops = simdiff.get_ops("numpy")
    expected = lennard_jones(r, ops) * switch_c2(r, ops, r_on=1.5, r_cut=2.5)
    np.testing.assert_allclose(_separable(pair, r).evaluate(), expected.sum(), rtol=1e-14)


def test_double_where_keeps_hessian_finite_beyond_cutoff(backend):
    """A potential undefined beyond the cutoff (log of a negative) must not leak NaN."""

    def nasty(r, ops):
        return ops.log(2.6 - r)  # NaN for r > 2.6

    pair = smooth_cutoff(nasty, r_on=2.0, r_cut=2.5)
    p = _separable(pair, np.array([2.2, 3.0, 4.0]))
    h = simdiff.hessian(p, backend=backend)  # check_finite: a NaN would raise
    assert h[1, 1] == 0.0 and h[2, 2] == 0.0 and h[0, 0] != 0.0
    assert float(p.evaluate()) == pytest.approx(float(np.log(0.4) * switch_c2(
        np.asarray(2.2), simdiff.get_ops("numpy"), r_on=2.0, r_cut=2.5)))  # fmt: skip


@pytest.mark.parametrize(("r_on", "r_cut"), [(2.0, 2.0), (-1.0, 1.0), (3.0, 2.5)])
def test_bad_cutoffs(r_on, r_cut):
    with pytest.raises(ValueError, match="0 < r_on < r_cut"):
        smooth_cutoff(lennard_jones, r_on=r_on, r_cut=r_cut)
