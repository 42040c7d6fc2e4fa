"""Named parameters read by a key the parameters lack: an error naming the key and the names."""

from __future__ import annotations

import numpy as np
import pytest

import simdiff
from simdiff.ode import ODEProblem


def lv(t, y, p, ops):
    return ops.stack(
        [p["alpha"] * y[0] - p["beta"] * y[0] * y[1], p["delta"] * y[0] * y[1] - p["gamma"] * y[1]]
    )


MISSPELT = {"alpha": 1.0, "beta": 0.1, "gamma": 1.5, "detla": 0.075}


def test_an_ode_rhs_reading_a_missing_key_names_it_and_the_names() -> None:
    """ODEProblem evaluates the right-hand side once when it is built: the error comes there."""
    with pytest.raises(simdiff.NotFoundError) as info:
        ODEProblem(lv, [10.0, 5.0], (0.0, 1.0), MISSPELT, save_at=[1.0], solver="rk4", n_steps=10)
    msg = str(info.value)
    assert "'delta'" in msg and "did you mean 'detla'" in msg
    assert "['alpha', 'beta', 'detla', 'gamma']" in msg
    assert isinstance(info.value, KeyError)  # still a KeyError for code that catches one


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_problem_function_reading_a_missing_key(backend) -> None:
    p = simdiff.Problem(lambda q, ops: q["a"] * q["alpah"] ** 2, x0={"a": 1.0, "alpha": 2.0})
    with pytest.raises(
        simdiff.NotFoundError, match=r"'alpah'.*did you mean 'alpha'.*\['a', 'alpha'\]"
    ):
        simdiff.grad(p, backend=backend)


def test_a_keyerror_of_the_users_own_dict_is_left_alone() -> None:
    table = {"x": 1.0}
    p = simdiff.Problem(lambda q, ops: q["a"] * table["y"], x0={"a": 1.0})
    with pytest.raises(KeyError) as info:
        p.evaluate(np.array([1.0]))
    assert not isinstance(info.value, simdiff.NotFoundError)
