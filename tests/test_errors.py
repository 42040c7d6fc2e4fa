"""Every error path of the core: the message names what was expected and what was got."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import problems
import simdiff
from simdiff import backends


@pytest.fixture(scope="module")
def rosen():
    return problems.get("rosenbrock4")


@pytest.fixture(scope="module")
def sph():
    return problems.get("spherical")


@pytest.mark.parametrize(
    ("x", "got"),
    [
        (np.zeros(3), r"\(3,\)"),
        (np.zeros((2, 3)), r"\(2, 3\)"),
        (np.zeros((1, 2, 4)), r"\(1, 2, 4\)"),
        (np.float64(1.0), r"\(\)"),
    ],
)
def test_wrong_shape(rosen, backend, x, got):
    with pytest.raises(
        simdiff.ShapeError,
        match=rf"x for problem 'rosenbrock4' must have shape \(4,\) or \(batch, 4\); got {got}",
    ):
        simdiff.grad(rosen, x, backend=backend)


def test_wrong_dtype(rosen, backend):
    with pytest.raises(
        simdiff.DTypeError, match="x must be a real floating-point array; got dtype complex128"
    ):
        simdiff.grad(rosen, np.zeros(4, dtype=complex), backend=backend)
    with pytest.raises(simdiff.DTypeError, match="got dtype torch.bool"):
        simdiff.grad(rosen, torch.zeros(4, dtype=torch.bool), backend=backend)
    with pytest.raises(
        simdiff.DTypeError, match="dtype must be 'float64' or 'float32'; got 'float16'"
    ):
        simdiff.grad(rosen, backend=backend, dtype="float16")


def test_non_finite_input_names_first_bad_index(rosen, backend):
    x = np.zeros(4)
    x[2] = np.nan
    with pytest.raises(ValueError, match=r"x must be finite; x\[2\] = nan"):
        simdiff.grad(rosen, x, backend=backend)
    X = np.zeros((3, 4))
    X[1, 3] = np.inf
    with pytest.raises(ValueError, match=r"x\[1, 3\] = inf"):
        simdiff.hessian(rosen, X, backend=backend)
    with pytest.raises(ValueError, match=r"v must be finite; v\[0\] = nan"):
        simdiff.hvp(rosen, np.array([np.nan, 0, 0, 0]), backend=backend)


def test_non_finite_derivative_is_reported(backend):
    p = simdiff.Problem(lambda x, ops: ops.sum(ops.sqrt(x)), x0=np.array([1.0, 4.0]))
    with pytest.raises(simdiff.NonFiniteError, match=r"simdiff.grad is not finite: entry \(1,\)"):
        simdiff.grad(p, np.array([1.0, 0.0]), backend=backend)
    d = simdiff.Derivatives(p, backend=backend, check_finite=False)
    assert np.isinf(d.grad(np.array([1.0, 0.0]))[1])


def test_scalar_only_derivative_of_vector_problem(sph, backend):
    for fn, args in ((simdiff.grad, ()), (simdiff.hvp, (np.ones(3),))):
        with pytest.raises(
            simdiff.ShapeError,
            match=r"needs a scalar-valued problem; 'spherical' returns shape \(3,\) "
            r"\(use jacobian, jvp or vjp\)",
        ):
            fn(sph, *args, backend=backend)


def test_wrong_direction_and_cotangent_shapes(rosen, sph, backend):
    with pytest.raises(
        simdiff.ShapeError,
        match=r"v for problem 'rosenbrock4' must have shape "
        r"\(4,\) or \(batch, 4\); got \(3,\)",
    ):
        simdiff.hvp(rosen, np.ones(3), backend=backend)
    with pytest.raises(
        simdiff.ShapeError,
        match=r"u for problem 'spherical' must have shape "
        r"\(3,\) or \(batch, 3\); got \(2,\)",
    ):
        simdiff.vjp(sph, np.ones(2), backend=backend)
    with pytest.raises(
        simdiff.ShapeError,
        match=r"u for problem 'rosenbrock4' must have shape "
        r"\(\) or \(batch,\); got \(2, 2\)",
    ):
        simdiff.vjp(rosen, np.ones((2, 2)), backend=backend)
    with pytest.raises(simdiff.ShapeError, match=r"batch sizes of x and \['v'\] differ: \[2, 3\]"):
        simdiff.hvp(rosen, np.ones((3, 4)), np.ones((2, 4)), backend=backend)


@pytest.mark.parametrize("order", [-1, 2.5, True, "3"])
def test_bad_order(rosen, backend, order):
    with pytest.raises(ValueError, match=r"order must be a non-negative integer; got "):
        simdiff.derivative(rosen, order, np.ones(4), backend=backend, method="nested")
    with pytest.raises(ValueError, match=r"order must be a non-negative integer"):
        simdiff.derivative_tensor(rosen, order, backend=backend)


def test_unknown_method_mode_backend(rosen, sph):
    with pytest.raises(ValueError, match=r"unknown Hessian method 'fwd'; expected one of \['auto'"):
        simdiff.hessian(rosen, method="fwd")
    with pytest.raises(ValueError, match=r"unknown Jacobian mode 'forward'; expected one of"):
        simdiff.jacobian(sph, mode="forward")
    with pytest.raises(ValueError, match=r"unknown derivative method 'jet'"):
        simdiff.derivative(rosen, 2, np.ones(4), method="jet")
    with pytest.raises(ValueError, match=r"unknown backend 'tf'; expected one of"):
        simdiff.grad(rosen, backend="tf")
    with pytest.raises(ValueError, match="compile=True means torch.compile"):
        simdiff.Derivatives(rosen, backend="jax", compile=True)


def test_not_a_problem():
    with pytest.raises(TypeError, match="expected a simdiff.Problem; got function"):
        simdiff.grad(lambda x: x)


@pytest.mark.parametrize(
    ("x0", "exc", "msg"),
    [
        (
            np.zeros((2, 2)),
            simdiff.ShapeError,
            r"x0 must have shape \(n,\) with n >= 1; got shape \(2, 2\)",
        ),
        (np.zeros(0), simdiff.ShapeError, r"got shape \(0,\)"),
        (np.array([0.0, np.nan]), ValueError, r"x0 must be finite; x0\[1\] = nan"),
        (np.zeros(2, dtype=complex), simdiff.DTypeError, "real float array; got dtype complex128"),
    ],
)
def test_bad_problem_definition(x0, exc, msg):
    with pytest.raises(exc, match=msg):
        simdiff.Problem(lambda x, ops: ops.sum(x), x0=x0)


def test_problem_must_return_scalar_or_vector():
    p = simdiff.Problem(lambda x, ops: ops.reshape(x, (2, 2)), x0=np.zeros(4), name="mat")
    with pytest.raises(
        simdiff.ShapeError,
        match=r"'mat' must return a scalar or a 1-D array; "
        r"got shape \(2, 2\)",
    ):
        simdiff.jacobian(p)
    with pytest.raises(TypeError, match="needs a callable fn"):
        simdiff.Problem("f", x0=np.zeros(1))
    with pytest.raises(ValueError, match=r"unknown backends \['mxnet'\]"):
        simdiff.Problem(lambda x, ops: x, x0=np.zeros(1), backends=("mxnet",))


def test_backend_unavailable_says_how_to_install(monkeypatch):
    real = importlib.import_module

    def fake(name, *args):
        if name == "simdiff.backends.torch":
            raise ImportError("No module named 'torch'")
        return real(name, *args)

    monkeypatch.setattr(backends.importlib, "import_module", fake)
    monkeypatch.setattr(backends, "_cache", {})
    with pytest.raises(
        simdiff.BackendUnavailable, match=r"install it with: pip install torch==2.13.0"
    ):
        backends.get_backend("torch")


def test_error_hierarchy():
    for exc in (
        simdiff.ShapeError,
        simdiff.DTypeError,
        simdiff.NonFiniteError,
        simdiff.UnsupportedError,
        simdiff.BackendUnavailable,
        simdiff.SolverError,
    ):
        assert issubclass(exc, simdiff.SimdiffError)
    assert issubclass(simdiff.ShapeError, ValueError)
    assert issubclass(simdiff.BackendUnavailable, ImportError)
