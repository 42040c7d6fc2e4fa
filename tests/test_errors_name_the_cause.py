"""Inputs that used to raise raw Python or framework exceptions raise SimdiffErrors naming them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import simdiff
from simdiff.errors import InputError, InputTypeError, StoreError
from simdiff.store import Store

BACKENDS = ("jax", "torch")


def evaluate(p: simdiff.Problem, kind: str, backend: str, *args: object) -> object:
    """``simdiff.<kind>``; the value (no top-level function) from ``Derivatives.value``."""
    if kind == "value":
        return simdiff.Derivatives(p, backend=backend).value()
    return getattr(simdiff, kind)(p, *args, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("output", "got"), [(None, "NoneType"), ("a", "str"), (1j, "complex")])
@pytest.mark.parametrize("kind", ["value", "grad", "hessian"])
def test_fn_returning_a_non_real_python_value_is_named(backend, output, got, kind) -> None:
    p = simdiff.Problem(lambda x, ops: output, x0=np.ones(2), name="bad")
    with pytest.raises(InputTypeError, match=rf"problem 'bad': fn must return a real .*got {got}"):
        evaluate(p, kind, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fn_returning_a_python_constant_has_zero_derivatives(backend) -> None:
    p = simdiff.Problem(lambda x, ops: 3.0, x0=np.ones(2))
    assert float(evaluate(p, "value", backend)) == 3.0
    np.testing.assert_array_equal(simdiff.grad(p, backend=backend), np.zeros(2))
    np.testing.assert_array_equal(simdiff.hessian(p, backend=backend), np.zeros((2, 2)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["value", "hessian", "hvp", "jacobian"])
def test_a_python_constant_as_the_first_call_has_zero_derivatives(backend, kind) -> None:
    """The first call of a kind other than grad runs the leak probe's VJP on the constant."""
    p = simdiff.Problem(lambda x, ops: 3.0, x0=np.ones(2))
    args = (np.ones(2),) if kind == "hvp" else ()
    got = evaluate(p, kind, backend, *args)
    want = {"value": np.array(3.0), "hessian": np.zeros((2, 2)), "hvp": np.zeros(2)}
    np.testing.assert_array_equal(got, want.get(kind, np.zeros(2)))


def test_fn_with_the_wrong_number_of_arguments_is_refused_at_construction() -> None:
    with pytest.raises(InputTypeError, match=r"fn\(x, ops\).*<lambda>\(x\) is not"):
        simdiff.Problem(lambda x: x.sum(), x0=np.ones(2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_derivative_order_beyond_float64_factorials_is_named(backend) -> None:
    p = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x)), x0=np.ones(1))
    with pytest.raises(InputError, match="order must be at most 170.*got 171"):
        simdiff.derivative(p, 171, np.ones(1), backend=backend)


def test_a_store_path_under_a_file_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match=r"file is a file, so no directory can be created"):
        Store(tmp_path / "file" / "s").start_run("x")


def test_out_pointing_at_a_file_exits_with_the_store_error(tmp_path: Path, capsys) -> None:
    from simdiff.cli import main

    (tmp_path / "file").write_text("x")
    code = main(["check", "seed", "--derivatives", "grad", "--out", str(tmp_path / "file")])
    assert code == 2 and "is a file, so no directory can be created" in capsys.readouterr().err


def test_an_unknown_option_before_the_command_is_named(capsys) -> None:
    from simdiff.cli import main

    assert main(["--bogus"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized option '--bogus' before the command" in err and "--threads" in err
    assert main(["--threads", "1", "--bogus", "list"]) == 2
    assert "'--bogus'" in capsys.readouterr().err
