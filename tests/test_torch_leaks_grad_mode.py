"""Gradients switched off by torch's C switch itself (``torch._C._set_grad_enabled``), not
by ``torch.no_grad()``: a LeakError under the default guard at the call, or where the
problem returns with gradients still off, on every call; never a zero or partial derivative.

As in tests/test_torch_leaks_cut.py: each problem is clean at x0 and cuts behind a branch
taken at FAR = (2, 3), where the true gradient of ``x0 x1 + x1^2`` is ``[3, 8]``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _leak_cases import FAR, X0, call, leaking_problem

import simdiff

#: torch's own switch, as a module holds it that ran ``from torch._C import
#: _set_grad_enabled`` before simdiff's first guard
_SWITCH = getattr(torch._C._set_grad_enabled, "__wrapped__", torch._C._set_grad_enabled)


def _switched_off(v):
    torch._C._set_grad_enabled(False)
    try:
        return 1.0 * v
    finally:
        torch._C._set_grad_enabled(True)


def _left_off(v):
    _SWITCH(False)  # and never back on: the rest of fn runs without a graph too
    return 1.0 * v


def _bound_and_restored(v):
    _SWITCH(False)
    try:
        return 1.0 * v
    finally:
        _SWITCH(True)


CUTS = {
    "c_switch": (_switched_off, r"_set_grad_enabled\(False\)"),
    # strict sees the first operation after the switch; the default guard, fn returning
    "bound_switch_left_off": (_left_off, r"gradients (were )?switched off"),
}


@pytest.mark.parametrize("probe", [True, "strict"])
@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
@pytest.mark.parametrize("leak", sorted(CUTS))
def test_grad_switched_off_is_a_leak_error_on_everycall(leak, kind, probe):
    cut, names_op = CUTS[leak]
    d = simdiff.Derivatives(leaking_problem(cut, leak), backend="torch", probe=probe)
    want = {"grad": [2.0, 4.5], "hessian": [[0.0, 1.0], [1.0, 2.0]], "hvp": [0.0, 1.0]}[kind]
    np.testing.assert_allclose(call(d, kind, X0), want, rtol=1e-14)
    for _ in range(2):  # every call, and grad mode is back on after each
        with pytest.raises(simdiff.LeakError, match=names_op) as info:
            call(d, kind, FAR)
        assert f"'{leak}'" in str(info.value) and "cut from the graph" in str(info.value)
        assert torch.is_grad_enabled()


def test_switching_gradients_on_and_torchs_own_switches_pass():
    def fn(x, ops):
        torch._C._set_grad_enabled(True)  # on: no cut
        with torch.enable_grad():
            y = x[0] * x[1] + x[1] ** 2
        return y

    d = simdiff.Derivatives(simdiff.Problem(fn, x0=X0, backends=("torch",)), backend="torch")
    np.testing.assert_allclose(d.grad(FAR), [3.0, 8.0], rtol=1e-14)
    np.testing.assert_allclose(d.hessian(FAR), [[0.0, 1.0], [1.0, 2.0]], rtol=1e-14)


def test_outside_a_call_the_switch_is_torchs():
    torch._C._set_grad_enabled(False)
    try:
        assert not torch.is_grad_enabled()
    finally:
        torch._C._set_grad_enabled(True)
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("kind", ["grad", "hvp"])
def test_a_bound_switch_restored_inside_fn_stays_a_wrong_derivative_by_default(kind):
    """What the default guard does not see: torch's C switch by a reference bound before
    the guard, switched back on before fn returns (true gradient [3, 8], true HVP along
    e0 [0, 1]); probe="strict" sees it (below)."""
    d = simdiff.Derivatives(leaking_problem(_bound_and_restored, "restored"), backend="torch")
    call(d, kind, X0)
    wrong = {"grad": [3.0, 6.0], "hvp": [0.0, 0.0]}[kind]
    np.testing.assert_allclose(call(d, kind, FAR), wrong, rtol=1e-14)


@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
def test_strict_sees_an_operation_run_while_a_bound_switch_has_gradients_off(kind):
    """probe="strict": every torch operation of the problem passes the guard's mode, which
    raises for one on an array that requires grad while gradients are off and were on when
    fn was called, whatever switched them off; on every call, with gradients back on after."""
    d = simdiff.Derivatives(
        leaking_problem(_bound_and_restored, "restored"), backend="torch", probe="strict"
    )
    want = {"grad": [2.0, 4.5], "hessian": [[0.0, 1.0], [1.0, 2.0]], "hvp": [0.0, 1.0]}[kind]
    np.testing.assert_allclose(call(d, kind, X0), want, rtol=1e-14)
    for _ in range(2):
        with pytest.raises(simdiff.LeakError, match="gradients were switched off") as info:
            call(d, kind, FAR)
        assert "'restored'" in str(info.value)
        assert torch.is_grad_enabled()


def test_strict_leaves_a_problem_alone_that_the_caller_runs_without_gradients():
    """Gradients off around the whole call (the caller's choice, not the problem's): the
    problem's operations are not cuts; torch.func's transforms differentiate all the same."""
    d = simdiff.Derivatives(
        simdiff.Problem(lambda x, ops: ops.sum(x**3), x0=X0, backends=("torch",)),
        backend="torch",
        probe="strict",
    )
    with torch.no_grad():
        np.testing.assert_allclose(d.hessian(FAR), np.diag(6.0 * FAR), rtol=1e-14)


def test_a_nested_ad_operator_of_a_problem_left_switched_off_is_a_leak_error():
    """The differential operators call the problem through the same check (true
    Laplacian 2; the Taylor methods do not use torch's autograd, so no grad mode)."""
    p = leaking_problem(_left_off, "operator")
    np.testing.assert_allclose(simdiff.laplacian(p, X0, method="nested", backend="torch"), 2.0)
    with pytest.raises(simdiff.LeakError, match=r"returned with gradients switched off"):
        simdiff.laplacian(p, FAR, method="nested", backend="torch")
