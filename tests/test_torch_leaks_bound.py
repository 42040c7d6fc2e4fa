"""References to torch's own functions bound before simdiff's wrappers existed (``item =
torch.Tensor.item`` at a module's import, ``torch._C.TensorBase.item``, ``from torch import
tensor``): under the default guard a LeakError naming the operation, at a later point, on
every call, for gradient, Hessian and HVP; never a zero or partial derivative.

The guard's dispatch-level watch sees them: ``aten::detach``, ``aten::detach_`` and
``aten::_local_scalar_dense`` meet a kernel of the guard whatever Python reference reached
them.  As in tests/test_torch_leaks_cut.py: each problem is clean at x0 and cuts behind a
branch taken at FAR = (2, 3), where the true gradient of ``x0 x1 + x1^2`` is ``[3, 8]``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.utils.checkpoint
from _leak_cases import FAR, X0, call, leaking_problem

import simdiff
from simdiff.backends.torch import leaks as _torch_leaks

WANT = {"grad": [3.0, 8.0], "hessian": [[0.0, 1.0], [1.0, 2.0]], "hvp": [0.0, 1.0]}

#: torch's own methods and functions, as a module holds them that bound them before
#: simdiff's first guard (the C type's methods are what ``torch.Tensor.item`` was then)
_BASE = torch._C.TensorBase
_ITEM = _BASE.item
_DETACH = _BASE.detach
_NUMPY = _BASE.numpy
_FLOAT = _BASE.__float__
_INT = _BASE.__int__
_TENSOR = torch._C._VariableFunctions.tensor
_TORCH_DETACH = torch._C._VariableFunctions.detach
_SWITCH = getattr(torch._C._set_grad_enabled, "__wrapped__", torch._C._set_grad_enabled)


def _left_off(v):
    _SWITCH(False)  # never back on: caught where fn returns
    return 1.0 * v


_DETACHED = r"x\.detach\(\), torch\.tensor\(x\)"
_READ = r"x\.item\(\), float\(x\) or int\(x\)"
CUTS = {
    "item": (lambda v: _ITEM(v) + 0.0 * v, _READ),
    "float": (lambda v: _FLOAT(v) + 0.0 * v, _READ),
    "int": (lambda v: _INT(v) + 0.0 * v, _READ),
    "detach": (lambda v: _DETACH(v), _DETACHED),
    "torch_detach": (lambda v: _TORCH_DETACH(v), _DETACHED),
    "detach_numpy": (lambda v: torch.from_numpy(_NUMPY(_DETACH(v))), _DETACHED),
    "numpy_force": (lambda v: torch.from_numpy(_NUMPY(v, force=True)), _DETACHED),
    "tensor": (lambda v: _TENSOR(v), _DETACHED),
    "set_grad_enabled_left_off": (_left_off, r"returned with gradients switched off"),
}


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")
@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True")
@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
@pytest.mark.parametrize("leak", sorted(CUTS))
def test_a_bound_reference_is_a_leak_error_at_a_later_point(leak, kind):
    cut, names_op = CUTS[leak]
    d = simdiff.Derivatives(leaking_problem(cut, leak), backend="torch")
    want = {"grad": [2.0, 4.5], "hessian": [[0.0, 1.0], [1.0, 2.0]], "hvp": [0.0, 1.0]}[kind]
    np.testing.assert_allclose(call(d, kind, X0), want, rtol=1e-14)
    for _ in range(2):  # every call, and the watch is off again after each
        with pytest.raises(simdiff.LeakError, match=names_op) as info:
            call(d, kind, FAR)
        assert f"'{leak}'" in str(info.value)
        assert not torch._C._dispatch_tls_is_dispatch_key_included(_torch_leaks._KEY)
        assert torch.is_grad_enabled()
    np.testing.assert_allclose(call(d, kind, X0), want, rtol=1e-14)  # and back at x0


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")
@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True")
@pytest.mark.parametrize("leak", sorted(set(CUTS) - {"set_grad_enabled_left_off"}))
def test_the_value_is_the_true_one(leak):
    """A value carries no derivative: nothing leaks from it, and it is right (15).  (Gradients
    left off where fn returns raise for a value too, tests/test_torch_leaks_grad_mode.py.)"""
    d = simdiff.Derivatives(leaking_problem(CUTS[leak][0], leak), backend="torch")
    assert d.value(X0) == pytest.approx(0.5 * 2.0 + 4.0, rel=1e-14)
    for _ in range(2):
        assert d.value(FAR) == pytest.approx(15.0, rel=1e-14)


def _inner_grad(v):
    """A torch.func transform inside fn: torch detaches and reads values in its own code."""
    return torch.func.grad(lambda u: (u**3).sum() / 3.0)(v)  # v**2


def _checkpointed(v):
    return torch.utils.checkpoint.checkpoint(lambda u: u * u, v, use_reentrant=False)


def _printed(v):
    str(v)  # torch's formatting reads the values into a string
    return v * v


CLEAN = {
    "torch_func_grad": _inner_grad,
    "checkpoint": _checkpointed,
    "print": _printed,
    "stop_gradient_square": None,  # ops.stop_gradient inside the branch: simdiff's detach
}


@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
@pytest.mark.parametrize("name", sorted(CLEAN))
def test_torch_and_simdiffs_own_detaches_and_reads_pass(name, kind):
    """True derivatives of ``x0 x1 + x1^2`` at FAR, where the branch is taken (torch.func's
    Hessian does not take checkpoint's saved-tensor hooks: torch refuses it, guard or not)."""
    if name == "checkpoint" and kind == "hessian":
        pytest.skip("torch.func.hessian does not support saved tensor hooks")
    square = CLEAN[name]

    def fn(x, ops):
        if float(ops.stop_gradient(x[0])) > 1.0:
            if square is None:
                return x[0] * x[1] + x[1] ** 2 + 0.0 * ops.stop_gradient(x[1])
            return x[0] * x[1] + square(x[1])
        return x[0] * x[1] + x[1] ** 2

    d = simdiff.Derivatives(simdiff.Problem(fn, x0=X0, name=name, backends=("torch",)),
                            backend="torch")  # fmt: skip
    call(d, kind, X0)
    for _ in range(2):
        np.testing.assert_allclose(call(d, kind, FAR), WANT[kind], rtol=1e-14)


@pytest.mark.filterwarnings("ignore:`torch._prims_common.check` is deprecated:FutureWarning")
@pytest.mark.parametrize("mode", [True, "auto"])
def test_compiled_callables_pass(mode, aot_eager):
    """compile=True and "auto" (torch.compile, whose tracing runs with the dispatch-level
    watch off) give the true gradient and Hessian of a clean problem on every call.  The
    watch is about Dynamo's and AOTAutograd's tracing, not Inductor's code: ``aot_eager``."""

    def fn(x, ops):
        return x[0] * x[1] + x[1] ** 2 + 0.0 * ops.stop_gradient(x[0])

    p = simdiff.Problem(fn, x0=X0, name="compiled", backends=("torch",))
    d = simdiff.Derivatives(p, backend="torch", compile=mode).expect_calls(10**6)
    for _ in range(3):
        np.testing.assert_allclose(d.grad(FAR), WANT["grad"], rtol=1e-14)
        np.testing.assert_allclose(d.hessian(FAR), WANT["hessian"], rtol=1e-14)
    assert not torch._C._dispatch_tls_is_dispatch_key_included(_torch_leaks._KEY)


def test_outside_a_guard_the_bound_references_are_torchs():
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    assert _ITEM(x[0]) == 1.0
    assert not _DETACH(x).requires_grad
    with _torch_leaks.LeakGuard():
        with pytest.raises(RuntimeError, match=r"aten::_local_scalar_dense\(\)"):
            _ITEM(x[0])
        assert _ITEM(torch.ones(1)[0]) == 1.0  # no derivative: a number
    assert _ITEM(x[0]) == 1.0
