"""Every public function, given a bad argument, raises a SimdiffError that names the argument.

Each case is a call with one bad argument, the built-in base the error must
also have (so ``except ValueError`` keeps working), and a pattern the message
must contain: the argument's name (or the value the user typed).
"""

from __future__ import annotations

import numpy as np
import pytest

import problems
import simdiff
from simdiff import ode, pde, pes, sensitivity
from simdiff.errors import InputError, InputTypeError, NotFoundError, SimdiffError

P = simdiff.Problem(lambda x, ops: ops.sum(x**2), x0=np.array([1.0, 2.0]), name="quad")
X = np.array([1.0, 2.0])
NAN_X = np.array([1.0, np.nan])


def _rhs(t, y, p, ops):
    return -p[0] * y


CASES = {
    # the derivative API
    "grad non-finite x": (lambda: simdiff.grad(P, NAN_X), ValueError, r"x must be finite; x\[1\]"),
    "hvp non-finite v": (lambda: simdiff.hvp(P, NAN_X), ValueError, r"v must be finite"),
    "grad unknown backend": (lambda: simdiff.grad(P, backend="jaxx"), ValueError, "'jaxx'"),
    "hessian unknown method": (
        lambda: simdiff.hessian(P, method="fwd"), ValueError, "Hessian method 'fwd'",
    ),
    "jacobian unknown mode": (
        lambda: simdiff.jacobian(P, mode="sideways"), ValueError, "Jacobian mode 'sideways'",
    ),
    "derivative negative order": (
        lambda: simdiff.derivative(P, -1, X), ValueError, "order must be a non-negative",
    ),
    "derivative unknown method": (
        lambda: simdiff.derivative(P, 2, X, method="magic"), ValueError, "method 'magic'",
    ),
    "taylor float order": (lambda: simdiff.taylor(P, 2.5, X, X), ValueError, "order"),
    "derivative_tensor bad order": (
        lambda: simdiff.derivative_tensor(P, "2"), ValueError, "order",
    ),
    "Derivatives of a function": (
        lambda: simdiff.Derivatives(lambda x, ops: x, backend="jax"), TypeError,
        "expected a simdiff.Problem",
    ),
    "Derivatives compile on jax": (
        lambda: simdiff.Derivatives(P, backend="jax", compile=True), ValueError, "compile=True",
    ),
    "grad dtype": (lambda: simdiff.grad(P, dtype="float16"), TypeError, "dtype"),
    "grad wrong shape": (lambda: simdiff.grad(P, np.ones(3)), ValueError, "x for problem"),
    # Problem and backends
    "Problem fn not callable": (lambda: simdiff.Problem(3, x0=X), TypeError, "fn"),
    "Problem non-finite x0": (lambda: simdiff.Problem(P.fn, x0=NAN_X), ValueError, "x0"),
    "Problem unknown backends": (
        lambda: simdiff.Problem(P.fn, x0=X, backends=("jax", "tensorflow")), ValueError,
        "tensorflow",
    ),
    "get_ops unknown": (lambda: simdiff.get_ops("cupy"), ValueError, "'cupy'"),
    "scan without xs or length": (
        lambda: simdiff.get_ops("numpy").scan(lambda c, x: (c, None), 0.0), ValueError,
        "xs or length",
    ),
    # catalogue
    "catalogue unknown name": (lambda: problems.get("rosenbrok"), KeyError, "'rosenbrok'"),
    # sensitivity
    "dgsm not a problem": (
        lambda: sensitivity.dgsm("quad", [("uniform", 0, 1)] * 2), TypeError, "simdiff.Problem",
    ),
    "dgsm bad distribution": (
        lambda: sensitivity.dgsm(P, [("triangular", 0, 1)] * 2, 8), ValueError, "triangular",
    ),
    "dgsm bad method": (
        lambda: sensitivity.dgsm(P, [("uniform", 0, 1)] * 2, 8, method="grid"), ValueError,
        "grid",
    ),
    "sample bad n": (
        lambda: sensitivity.sample(sensitivity.as_distributions([("uniform", 0, 1)], 1), 0),
        ValueError, "n_samples",
    ),
    "local_sensitivity mode": (
        lambda: sensitivity.local_sensitivity(P, mode="both"), ValueError, "'both'",
    ),
    "laplace level": (lambda: sensitivity.laplace(P, level=1.5), ValueError, "level"),
    # ODE, PDE, PES
    "ODEProblem rhs not callable": (
        lambda: ode.ODEProblem(3, np.ones(1), (0.0, 1.0), [1.0]), TypeError, "rhs",
    ),
    "ODEProblem bad t_span": (
        lambda: ode.ODEProblem(_rhs, np.ones(1), (1.0, 0.0), [1.0]), ValueError, "t_span",
    ),
    "ODE unknown solver": (
        lambda: ode.solve(_rhs, np.ones(1), (0.0, 1.0), [1.0], solver="rk99"), ValueError,
        "rk99",
    ),
    "Grid bad boundary": (lambda: pde.Grid(16, 1.0, boundary="sticky"), NotImplementedError, "sticky"),
    "cluster_problem bad positions": (
        lambda: pes.cluster_problem(pes.lennard_jones, np.ones(4)), ValueError,
        "positions|x",
    ),
    "find_minimum unknown method": (
        lambda: pes.find_minimum(problems.get("lj-dimer"), method="simplex"), ValueError,
        "simplex",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_argument_raises_a_simdiff_error_naming_it(name):
    call, builtin, pattern = CASES[name]
    with pytest.raises(SimdiffError, match=pattern) as info:
        call()
    assert isinstance(info.value, builtin), type(info.value).__mro__


def test_not_found_error_message_has_no_added_quotes():
    with pytest.raises(NotFoundError) as info:
        problems.get("nope")
    assert str(info.value).startswith("unknown catalogue problem 'nope'")


def test_error_classes_keep_their_builtin_bases():
    assert issubclass(InputError, ValueError) and issubclass(InputTypeError, TypeError)
    assert issubclass(NotFoundError, KeyError) and issubclass(simdiff.LeakError, RuntimeError)
    for cls in (InputError, InputTypeError, NotFoundError, simdiff.OutOfRangeError):
        assert issubclass(cls, SimdiffError)
