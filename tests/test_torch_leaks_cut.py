"""Graph cuts inside a torch problem (``.detach()``, ``.data``, ``torch.tensor(x)``) are a
LeakError at the leaking op, at every point, never a zero or partial derivative.

Every problem here is clean at x0 (``x[0] < 1``) and cuts the graph behind a branch on a
value elsewhere, so the first-call probe passes and only the guard can see the cut.
True derivatives of ``x0 x1 + x1^2`` at ``(2, 3)``: gradient ``[3, 8]``, Hessian
``[[0, 1], [1, 2]]``; the cut ``x0 * stop(x1) + x1^2`` gives ``[3, 6]`` and ``[[0, 0], [0, 2]]``.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

import simdiff
from simdiff.backends import get_backend

X0 = np.array([0.5, 2.0])
FAR = np.array([2.0, 3.0])


def _no_grad_copy(v):
    with torch.no_grad():
        return 1.0 * v


def _inference_copy(v):
    with torch.inference_mode():
        return 1.0 * v


def _grad_disabled_copy(v):
    with torch.set_grad_enabled(False):
        return 1.0 * v


@torch.no_grad()
def _no_grad_decorated(v):
    return 1.0 * v


@torch.no_grad
def _no_grad_bare_decorated(v):  # the decorator without parentheses
    return 1.0 * v


@torch.inference_mode()
def _inference_decorated(v):
    return 1.0 * v


@torch.set_grad_enabled(False)
def _grad_disabled_decorated(v):
    return 1.0 * v


CUTS = {
    "no_grad_decorated": (_no_grad_decorated, r"torch\.no_grad\(\)"),
    "no_grad_bare_decorated": (_no_grad_bare_decorated, r"torch\.no_grad\(\)"),
    "inference_decorated": (_inference_decorated, r"torch\.no_grad\(\)"),
    "set_grad_enabled_decorated": (_grad_disabled_decorated, r"torch\.no_grad\(\)"),
    "no_grad": (_no_grad_copy, r"torch\.no_grad\(\)"),
    "inference_mode": (_inference_copy, r"torch\.no_grad\(\)"),
    "set_grad_enabled": (_grad_disabled_copy, r"torch\.no_grad\(\)"),
    "torch_detach": (lambda v: torch.detach(v), r"x\.detach\(\)"),
    "detach": (lambda v: v.detach(), r"x\.detach\(\)"),
    "detach_numpy": (lambda v: torch.from_numpy(v.detach().numpy()), r"x\.detach\(\)"),
    "detach_": (lambda v: (1.0 * v).detach_(), r"x\.detach_\(\)"),
    "data": (lambda v: v.data, r"x\.data"),
    "tensor": (lambda v: torch.tensor(v), r"torch\.tensor\(x\)"),
    "tensor_of_list": (lambda v: torch.tensor([v, v])[0], r"torch\.tensor\(x\)"),
    "new_tensor": (lambda v: v.new_tensor(v), r"new_tensor\(x\)"),
}


def _problem(cut, name):
    def fn(x, ops):
        if float(ops.stop_gradient(x[0])) > 1.0:  # a constant branch: not a leak by itself
            return x[0] * cut(x[1]) + x[1] ** 2
        return x[0] * x[1] + x[1] ** 2

    return simdiff.Problem(fn, x0=X0, name=name, backends=("torch",))


def _calls(d):
    return {
        "grad": d.grad,
        "hessian": d.hessian,
        "hvp": lambda x: d.hvp(np.array([1.0, 0.0]), x),
    }


@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
@pytest.mark.parametrize("leak", sorted(CUTS))
def test_cut_away_from_x0_is_a_leak_error(leak, kind):
    cut, names_op = CUTS[leak]
    d = simdiff.Derivatives(_problem(cut, leak), backend="torch")
    call = _calls(d)[kind]
    at_x0 = call(X0)  # clean here: the probe agrees
    want = {"grad": [2.0, 4.5], "hessian": [[0.0, 1.0], [1.0, 2.0]], "hvp": [0.0, 1.0]}[kind]
    np.testing.assert_allclose(at_x0, want, rtol=1e-14)
    assert d.probe_result["status"] == "agree"
    with pytest.raises(simdiff.LeakError, match=names_op) as info:
        call(FAR)
    message = str(info.value)
    assert f"'{leak}'" in message and "cut from the graph" in message
    assert isinstance(info.value, simdiff.SimdiffError)
    with pytest.raises(simdiff.LeakError):  # and again: every call, not the first one only
        call(FAR)


@pytest.mark.parametrize("leak", ["detach", "no_grad_decorated"])
def test_without_the_guard_the_cut_is_a_wrong_gradient(monkeypatch, leak):
    """What the guard prevents: d/dx1 misses x0 = 2 (true [3, 8])."""
    monkeypatch.setattr(type(get_backend("torch")), "leak_guard",
                        lambda self, *args: contextlib.nullcontext())  # fmt: skip
    d = simdiff.Derivatives(_problem(CUTS[leak][0], "unguarded"), backend="torch")
    d.grad(X0)
    np.testing.assert_allclose(d.grad(FAR), [3.0, 6.0], rtol=1e-14)


@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
def test_a_decorated_problem_function_is_a_leak_error_on_every_call(kind):
    """``@torch.no_grad()`` on ``fn`` itself: torch's decorator is called from simdiff's
    builder, but the decorated function is the problem's."""

    @torch.no_grad()
    def fn(x, ops):
        return x[0] * x[1] + x[1] ** 2

    d = simdiff.Derivatives(simdiff.Problem(fn, x0=X0, backends=("torch",)), backend="torch")
    for _ in range(2):
        with pytest.raises(simdiff.LeakError, match=r"torch\.no_grad\(\)"):
            _calls(d)[kind](FAR)


def test_torchs_own_decorated_functions_stay_exempt():
    """A function of a torch module decorated with ``@torch.no_grad()`` (torch's own
    bookkeeping) passes: the decorated function's module decides, and it is torch's."""
    scope = {"__name__": "torch._simdiff_test_helper", "torch": torch}
    exec("@torch.no_grad()\ndef size(v):\n    return v.shape[0]\n", scope)

    def fn(x, ops):
        return x[0] * x[1] * scope["size"](x) / 2 + x[1] ** 2

    d = simdiff.Derivatives(simdiff.Problem(fn, x0=X0, backends=("torch",)), backend="torch")
    d.grad(X0)
    np.testing.assert_allclose(d.grad(FAR), [3.0, 8.0], rtol=1e-14)


def test_stop_gradient_and_values_without_a_derivative_pass():
    """ops.stop_gradient is x.detach() on purpose (simdiff's own module); detaching or
    re-wrapping a tensor that has no derivative is no cut."""

    def fn(x, ops):
        c = torch.tensor(ops.stop_gradient(x).detach().tolist()).data  # constants
        return ops.sum(x**2 * ops.stop_gradient(x)) + ops.sum(c)

    p = simdiff.Problem(fn, x0=X0, backends=("torch",))
    d = simdiff.Derivatives(p, backend="torch")
    for x in (X0, FAR):
        np.testing.assert_allclose(d.grad(x), 2 * x * x, rtol=1e-14)
        np.testing.assert_allclose(d.hessian(x), np.diag(2 * x), rtol=1e-14)


def test_outside_a_call_torch_is_untouched():
    t = torch.ones(2, dtype=torch.float64, requires_grad=True)
    with simdiff.backends.torch.leaks.LeakGuard():
        pass  # the wrappers are installed now
    assert not t.detach().requires_grad and not t.data.requires_grad
    s = torch.zeros(2, dtype=torch.float64)
    s.data = torch.full((2,), 3.0, dtype=torch.float64)  # the setter is torch's
    np.testing.assert_array_equal(s.numpy(), [3.0, 3.0])
    with pytest.warns(UserWarning, match="copy construct"):
        assert not torch.tensor(t).requires_grad


@pytest.mark.parametrize("mode", [True, "auto"])
def test_compiled_paths_raise_the_same_error(mode):
    """compile=True: the first call runs the eager callable once under the guard, and a
    branch first taken later falls back to eager torch (a graph break under torch.func), where
    the guard sees it; "auto": its eager calls are guarded, and one whole graph has no branch
    on a value (fullgraph)."""
    d = simdiff.Derivatives(_problem(CUTS["detach"][0], "compiled"), backend="torch", compile=mode)
    d.expect_calls(10**6)  # "auto": compiling pays
    for _ in range(3):
        np.testing.assert_allclose(d.grad(X0), [2.0, 4.5], rtol=1e-14)
    info = d.cache_info()[-1]
    # True compiles it (a graph break at the branch); "auto" tries one whole graph, which
    # the branch on a value refuses, and runs eagerly, saying why
    assert info["path"] == ("compiled" if mode is True else "eager")
    assert mode is True or "compile_error" in info
    with pytest.raises(simdiff.LeakError, match=r"x\.detach\(\)"):
        d.grad(FAR)


@pytest.mark.parametrize("mode", [True, "auto"])
def test_compiled_cut_present_at_every_point_is_caught_before_the_trace(mode):
    """A cut in the graph at every point, invisible to the probe at x0 (x0[0] = 0: the cut
    term's derivative is zero there): the guarded eager run before the first trace raises."""

    def fn(x, ops):
        return x[0] * x[1].detach() + x[1] ** 2

    p = simdiff.Problem(fn, x0=np.array([0.0, 2.0]), name="everywhere", backends=("torch",))
    d = simdiff.Derivatives(p, backend="torch", compile=mode).expect_calls(10**6)
    with pytest.raises(simdiff.LeakError, match=r"x\.detach\(\)"):
        d.grad(p.x0)


def test_grad_modes_switched_on_stay_allowed():
    """``torch.enable_grad()``, ``set_grad_enabled(True)`` and ``inference_mode(False)`` cut
    nothing: the guard lets them pass, and the derivative is right ([3, 8])."""

    def fn(x, ops):
        with torch.enable_grad(), torch.set_grad_enabled(True), torch.inference_mode(False):
            return x[0] * x[1] + x[1] ** 2

    d = simdiff.Derivatives(simdiff.Problem(fn, x0=X0, backends=("torch",)), backend="torch")
    d.grad(X0)
    np.testing.assert_allclose(d.grad(FAR), [3.0, 8.0], rtol=1e-14)


def test_no_grad_outside_a_derivative_call_is_torchs():
    with torch.no_grad():
        y = 2.0 * torch.ones(2, requires_grad=True)
    assert not y.requires_grad
    with torch.set_grad_enabled(False):
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("name", ["rosenbrock4", "lj13", "ishigami", "ode_rk4_decay", "heat_modes"])
def test_guard_is_silent_on_catalogue_problems_at_later_points(name):
    """simdiff's own detaches (ODE step control, the autograd path's input, ops.stop_gradient)
    are not the problem's: grad/VJP and an HVP at a second point pass the guard.
    """
    import problems

    p = problems.get(name)
    d = simdiff.Derivatives(p, backend="torch")
    x1 = np.asarray(p.x0, dtype=float) * (1 + 1e-3)
    for x in (p.x0, x1):
        got = d.grad(x) if p.is_scalar else d.vjp(np.ones(p.output_shape), x)
        assert np.all(np.isfinite(got))
    if p.is_scalar:
        assert np.all(np.isfinite(d.hvp(np.ones(p.n), x1)))


@pytest.mark.parametrize("module", ["simdiff_examples", "torchdiffeq_like", "__main__"])
def test_only_torch_and_simdiff_packages_are_exempt(module):
    """The exemption is by package (``torch``, ``simdiff``), not by name prefix: a problem in
    a module called ``simdiff_examples`` is watched like any other."""
    scope = {"__name__": module}
    exec("def cut(v):\n    return v.detach()\n", scope)  # a helper defined in that module
    d = simdiff.Derivatives(_problem(scope["cut"], module), backend="torch")
    d.grad(X0)
    with pytest.raises(simdiff.LeakError, match=r"x\.detach\(\)"):
        d.grad(FAR)


@pytest.mark.parametrize("probe", [True, "strict"])
@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
def test_printing_a_tensor_is_no_leak(probe, kind, capsys):
    """``print(x)`` reads the values into a string (torch's formatting calls ``tolist``),
    which carries nothing back into the computation: the guard lets it pass."""

    def fn(x, ops):
        print("x =", x, f"{x[0]:.3f}", repr(x[1]))
        return x[0] * x[1] + x[1] ** 2

    p = simdiff.Problem(fn, x0=X0, backends=("torch",))
    d = simdiff.Derivatives(p, backend="torch", probe=probe)
    call = _calls(d)[kind]
    call(X0)
    want = {"grad": [3.0, 8.0], "hessian": [[0.0, 1.0], [1.0, 2.0]], "hvp": [0.0, 1.0]}[kind]
    np.testing.assert_allclose(call(FAR), want, rtol=1e-14)
    assert "x = " in capsys.readouterr().out
