"""A problem that leaves the traced computation gets a LeakError, never a wrong derivative."""

from __future__ import annotations

import numpy as np
import pytest

import problems
import simdiff
from simdiff._probe import probe
from simdiff.backends import get_backend

X0 = np.array([2.0, 3.0])
TRUE_GRAD = np.array([21.0, 12.0])  # of 3 x0^2 + x1^2 x0 at (2, 3)


def _float_leak(x, ops):
    return 3.0 * x[0] * float(x[0]) + x[1] ** 2 * x[0]


def _item_leak(x, ops):
    return 3.0 * x[0] * x[0].item() + x[1] ** 2 * x[0]


def _numpy_leak(x, ops):
    return 3.0 * x[0] * ops.asarray(np.asarray(x)[0]) + x[1] ** 2 * x[0]


def _clean(x, ops):
    return 3.0 * x[0] ** 2 + x[1] ** 2 * x[0]


LEAKS = {
    "float": (_float_leak, r"float\(x\[i\]\)"),
    "item": (_item_leak, r"\.item\(\)"),
    "numpy": (_numpy_leak, "numpy"),
}


@pytest.mark.parametrize("leak", sorted(LEAKS))
def test_leak_is_an_error_on_every_backend(leak, backend):
    fn, cause = LEAKS[leak]
    p = simdiff.Problem(fn, x0=X0, name=leak)
    with pytest.raises(simdiff.LeakError, match=cause) as info:
        simdiff.grad(p, backend=backend)
    assert isinstance(info.value, simdiff.SimdiffError) and isinstance(info.value, RuntimeError)


@pytest.mark.parametrize("leak", sorted(LEAKS))
def test_leak_found_when_the_first_call_is_second_order(leak):
    """A Hessian first: the probe computes a VJP of its own (torch, whose tracer runs on)."""
    fn, _ = LEAKS[leak]
    d = simdiff.Derivatives(simdiff.Problem(fn, x0=X0, name=leak), backend="torch")
    with pytest.raises(simdiff.LeakError, match="leaves the traced computation"):
        d.hessian()


def test_probe_off_returns_what_torch_computes():
    """The opt-out is explicit, and shows what the probe protects against."""
    d = simdiff.Derivatives(simdiff.Problem(_item_leak, x0=X0), backend="torch", probe=False)
    got = d.grad()
    assert not np.allclose(got, TRUE_GRAD) and d.probe_result is None
    # benchmarks switch the checks off, and with them the probe
    assert simdiff.Derivatives(d.problem, backend="torch", check_finite=False).probe is False


def test_clean_problem_passes_and_records_the_probe(backend):
    d = simdiff.Derivatives(simdiff.Problem(_clean, x0=X0), backend=backend)
    np.testing.assert_allclose(d.grad(), TRUE_GRAD, rtol=1e-14)
    if get_backend(backend).catches_leaks:
        assert d.probe_result["status"].startswith("not needed")
    else:
        assert d.probe_result["status"] == "agree" and d.probe_result["seconds"] >= 0


def test_probe_honours_stop_gradient():
    """Values under ops.stop_gradient are held fixed in the difference quotient too."""
    p = simdiff.Problem(lambda x, ops: ops.sum(x * ops.stop_gradient(x) ** 2), x0=X0)
    d = simdiff.Derivatives(p, backend="torch")
    np.testing.assert_allclose(d.hvp(np.ones(2)), [0.0, 0.0])
    assert d.probe_result["status"] == "agree"


@pytest.mark.parametrize("name", ["rosenbrock4", "lj13", "ishigami", "muller-brown", "spherical"])
def test_probe_is_silent_on_catalogue_problems(name):
    """Both forms (reused gradient, own VJP); validation/benchmarks/probe_catalogue.py runs all of them."""
    p = problems.get(name)
    T = get_backend("torch")
    assert probe(p, T, T.ops(), np.asarray(p.x0), np.float64)["status"] == "agree"
    d = simdiff.Derivatives(p, backend="torch")
    d.grad() if p.is_scalar else d.jacobian()
    assert d.probe_result["status"] == "agree"
