"""A problem that leaves the traced computation gets a LeakError, never a wrong derivative."""

from __future__ import annotations

import numpy as np
import pytest

import problems
import simdiff
from simdiff.backends import get_backend
from simdiff.core.probe import probe

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


def _leaks_beyond_one(x, ops):
    """Clean at x0 (x[0] < 1), a leak behind a branch on a value elsewhere."""
    if float(ops.stop_gradient(x[0])) > 1.0:  # a constant branch: not a leak by itself
        return x[0] * x[1].item() + x[1] ** 2
    return x[0] * x[1] + x[1] ** 2


@pytest.mark.parametrize("kind", ["grad", "value_and_grad", "vjp", "hessian"])
def test_leak_away_from_x0_is_an_error_at_that_point(kind):
    """The probe passes at x0 (no leak there); at a later point the leak raises at the leaking
    op, on every derivative kind, instead of returning a gradient that misses d/dx1."""
    p = simdiff.Problem(_leaks_beyond_one, x0=np.array([0.5, 2.0]), name="branchy")
    d = simdiff.Derivatives(p, backend="torch")
    calls = {"grad": d.grad, "value_and_grad": lambda x: d.value_and_grad(x)[1],
             "vjp": lambda x: d.vjp(np.ones(()), x), "hessian": d.hessian}  # fmt: skip
    at_x0 = calls[kind](p.x0)
    want = [[0.0, 1.0], [1.0, 2.0]] if kind == "hessian" else [2.0, 4.5]
    np.testing.assert_allclose(at_x0, want, rtol=1e-14)
    assert d.probe_result is not None and d.probe_result["status"] == "agree"
    far = np.array([2.0, 3.0])
    with pytest.raises(simdiff.LeakError, match=r"x\.item\(\)") as info:
        calls[kind](far)
    assert "'branchy'" in str(info.value)


@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("kind", ["value", "grad", "hessian"])
def test_a_leak_away_from_x0_gives_the_right_number_or_a_leak_error(backend, kind):
    """The leak path of issue 25 on both backends and for value, gradient and Hessian: at a
    point past the branch, the value is right (a number read out is still the number) or a
    LeakError (JAX's tracer refuses the branch on a value); a derivative is a LeakError,
    never the gradient [3, 6] or Hessian that miss d/dx1 (true [3, 8], [[0, 1], [1, 2]])."""
    p = simdiff.Problem(_leaks_beyond_one, x0=np.array([0.5, 2.0]), name="branchy")
    d = simdiff.Derivatives(p, backend=backend)
    far = np.array([2.0, 3.0])
    for x in (p.x0, far):  # the first call at x0, then past the branch
        try:
            got = getattr(d, kind)(x)
        except simdiff.LeakError as exc:
            assert "'branchy'" in str(exc)
            assert kind == "value" or backend == "jax" or x is far
            continue
        assert kind == "value" or x is p.x0, "a derivative past the branch must not return"
        want = {"value": x[0] * x[1] + x[1] ** 2, "grad": [x[1], x[0] + 2 * x[1]],
                "hessian": [[0.0, 1.0], [1.0, 2.0]]}[kind]  # fmt: skip
        np.testing.assert_allclose(got, want, rtol=1e-14)


def test_without_the_guard_the_later_leak_is_a_wrong_gradient(monkeypatch):
    """What the guard prevents: the same calls with it replaced by a no-op return a gradient
    that misses the leaked dependence (true gradient at (2, 3): [3, 8])."""
    import contextlib

    monkeypatch.setattr(type(get_backend("torch")), "leak_guard",
                        lambda self, *args: contextlib.nullcontext())  # fmt: skip
    p = simdiff.Problem(_leaks_beyond_one, x0=np.array([0.5, 2.0]))
    d = simdiff.Derivatives(p, backend="torch")
    d.grad(p.x0)
    got = d.grad(np.array([2.0, 3.0]))
    np.testing.assert_allclose(got, [3.0, 6.0], rtol=1e-14)  # wrong: d/dx1 misses x0 = 2


@pytest.mark.parametrize("leak", ["float", "int", "tolist"])
def test_guard_catches_each_conversion_at_later_calls(leak):
    ops_leak = {
        "float": lambda v: float(v),
        "int": lambda v: int(v),
        "tolist": lambda v: v.tolist(),
    }[leak]

    def fn(x, ops):
        if float(ops.stop_gradient(x[0])) > 1.0:
            return x[0] * ops_leak(x[1]) + x[1] ** 2
        return x[0] * x[1] + x[1] ** 2

    p = simdiff.Problem(fn, x0=np.array([0.5, 2.0]), name=leak)
    d = simdiff.Derivatives(p, backend="torch")
    d.grad(p.x0)
    with pytest.raises(simdiff.LeakError, match=r"float\(x\[i\]\)|x\.item\(\)"):
        d.grad(np.array([2.0, 3.0]))


def test_guard_leaves_detached_values_and_other_code_alone():
    """Reading a value that has no derivative is allowed inside the guard, and outside a call
    the methods do what torch does."""
    import torch

    from simdiff.backends.torch.leaks import GUARDED

    def fn(x, ops):
        scale = float(ops.stop_gradient(x[0]).item()) + int(ops.stop_gradient(x[1]))
        return scale * ops.sum(x**2)

    p = simdiff.Problem(fn, x0=np.array([0.5, 2.0]))
    d = simdiff.Derivatives(p, backend="torch")
    for x in (p.x0, np.array([1.5, 3.0])):
        s = x[0] + int(x[1])
        np.testing.assert_allclose(d.grad(x), 2 * s * x, rtol=1e-14)
    t = torch.ones(2, dtype=torch.float64, requires_grad=True)
    # outside simdiff's calls: torch as it is
    assert (t[0].item(), t.tolist(), int(t[0])) == (1.0, [1.0, 1.0], 1)
    assert all(name in GUARDED for name in ("item", "tolist", "__float__", "__int__"))
