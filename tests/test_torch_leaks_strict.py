"""``Derivatives(probe="strict")`` on torch: graph cuts by references the leak guard's
wrappers cannot reach (the C type's own methods, ``torch.tensor`` bound before the wrappers
existed) are a LeakError at the op, on every call.  The default guard sees all but the C
type's ``data`` descriptor too, at dispatch (tests/test_torch_leaks_bound.py); under it that
one stays a wrong gradient and HVP.

As in tests/test_torch_leaks_cut.py: each problem is clean at x0 and cuts behind a branch
taken at FAR = (2, 3), where the true gradient of ``x0 x1 + x1^2`` is ``[3, 8]`` and the cut
``x0 stop(x1) + x1^2`` gives ``[3, 6]``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _leak_cases import FAR, X0, call, leaking_problem

import simdiff

#: torch's own functions, whatever the guard has replaced on ``torch`` and ``torch.Tensor``
#: (what a module that ran ``from torch import tensor`` before simdiff holds)
_TENSOR = torch._C._VariableFunctions.tensor
_BASE = torch._C.TensorBase

CUTS = {
    "base_detach": (lambda v: _BASE.detach(v), r"x\.detach\(\)"),
    "base_detach_": (lambda v: _BASE.detach_(1.0 * v), r"x\.detach_\(\)"),
    "base_data": (lambda v: _BASE.__dict__["data"].__get__(v), r"x\.data"),
    "bound_tensor": (lambda v: _TENSOR(v), r"torch\.tensor\(x\)"),
    "bound_tensor_of_list": (lambda v: _TENSOR([v, v])[0], r"torch\.tensor\(x\)"),
    "base_item": (lambda v: _BASE.item(v) + 0.0 * v, r"x\.item\(\)"),
}


@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
@pytest.mark.parametrize("leak", sorted(CUTS))
def test_strict_catches_what_no_wrapper_sees(leak, kind):
    cut, names_op = CUTS[leak]
    d = simdiff.Derivatives(leaking_problem(cut, leak), backend="torch", probe="strict")
    want = {"grad": [2.0, 4.5], "hessian": [[0.0, 1.0], [1.0, 2.0]], "hvp": [0.0, 1.0]}[kind]
    np.testing.assert_allclose(call(d, kind, X0), want, rtol=1e-14)
    for _ in range(2):  # every call
        with pytest.raises(simdiff.LeakError, match=names_op):
            call(d, kind, FAR)


@pytest.mark.parametrize("kind", ["grad", "hvp"])
def test_under_the_default_guard_the_data_descriptor_is_a_wrong_derivative(kind):
    """What strict adds: the default guard does not see the C type's ``data`` descriptor
    (no dispatched operation; true gradient [3, 8], true HVP along e0 [0, 1])."""
    d = simdiff.Derivatives(leaking_problem(CUTS["base_data"][0], "base_data"), backend="torch")
    call(d, kind, X0)
    wrong = {"grad": [3.0, 6.0], "hvp": [0.0, 0.0]}[kind]
    np.testing.assert_allclose(call(d, kind, FAR), wrong, rtol=1e-14)


def test_the_data_descriptor_reaches_a_dispatch_mode_only():
    """Why the default guard misses the C type's ``data`` descriptor (docs/errors.md): torch's
    shallow copy dispatches no operation, so the guard's kernel on ``aten::detach`` never
    runs (``detach`` by the same C type raises); only with a ``TorchDispatchMode`` active
    does torch hand the copy to the mode as ``aten.detach``, and a mode is handed every aten
    operation (a Python call each: strict's cost class)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from simdiff.backends.torch.leaks import LeakGuard

    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    # code of a module outside torch and simdiff (the problem's), holding torch's own C methods
    user = {"__name__": "user_code", "x": x, "get": _BASE.__dict__["data"].__get__}
    with LeakGuard():
        exec("copy = get(x)", user)  # passes: a cut the default guard does not see
        with pytest.raises(RuntimeError, match="aten::detach"):
            exec("detach(x)", {**user, "detach": _BASE.detach})
    seen = []

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Seen():
        _BASE.__dict__["data"].__get__(x)
        x + 1.0
    assert seen == ["aten.detach.default", "aten.add.Tensor"]


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")  # torch's, printed
@pytest.mark.parametrize("kind", ["grad", "hvp"])
@pytest.mark.parametrize("leak", sorted(set(CUTS) - {"base_data"}))
def test_the_default_guard_sees_the_others_at_dispatch(leak, kind):
    d = simdiff.Derivatives(leaking_problem(CUTS[leak][0], leak), backend="torch")
    call(d, kind, X0)
    with pytest.raises(simdiff.LeakError, match=r"x\.(item|detach)|float\(x\[i\]\)"):
        call(d, kind, FAR)


@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
def test_a_bound_tensor_of_a_list_is_seen_by_the_default_guard(kind):
    """torch reads the list's elements by ``float(x[i])``, which the guard watches."""
    d = simdiff.Derivatives(
        leaking_problem(CUTS["bound_tensor_of_list"][0], "list"), backend="torch"
    )
    call(d, kind, X0)
    with pytest.raises(simdiff.LeakError, match=r"float\(x\[i\]\)"):
        call(d, kind, FAR)


@pytest.mark.parametrize("name", ["lj13", "ode_rk4_decay", "rosenbrock4"])
def test_strict_is_silent_on_catalogue_problems(name):
    """simdiff's own detaches (ops.stop_gradient, the ODE's step control) are exempt."""
    import problems

    p = problems.get(name)
    d = simdiff.Derivatives(p, backend="torch", probe="strict")
    plain = simdiff.Derivatives(p, backend="torch")
    x1 = np.asarray(p.x0, dtype=float) * (1 + 1e-3)
    for x in (p.x0, x1):
        np.testing.assert_allclose(d.grad(x), plain.grad(x), rtol=1e-12, atol=0)


def test_strict_needs_eager_torch_and_a_known_value():
    p = leaking_problem(CUTS["base_detach"][0], "opts")
    with pytest.raises(simdiff.OptionError, match="compile=False"):
        simdiff.Derivatives(p, backend="torch", compile=True, probe="strict")
    with pytest.raises(simdiff.OptionError, match="True, False or 'strict'"):
        simdiff.Derivatives(p, backend="torch", probe="yes")
