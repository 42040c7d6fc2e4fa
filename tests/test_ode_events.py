"""ODE events: terminal event time of y' = -k y at y = 1/2 and its derivatives (closed forms)."""

import numpy as np
import pytest

import simdiff
from simdiff.errors import InputError
from simdiff.ode import Event, ODEProblem

K = 2.0


def decay_event(**kw):
    return ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 5.0), [K],
                      events=[Event(lambda t, y, p, ops: y[0] - 0.5)],
                      observable=lambda ys, ops, ev: ev.t, rtol=1e-12, atol=1e-14, **kw)  # fmt: skip


def test_event_time_value():
    assert float(decay_event().evaluate()) == pytest.approx(np.log(2) / K, abs=1e-12)


@pytest.mark.parametrize("backend", ["torch", pytest.param("jax", marks=pytest.mark.slow)])
def test_event_time_derivatives(backend):
    prob = decay_event()
    g = simdiff.grad(prob, backend=backend)
    assert g[0] == pytest.approx(-np.log(2) / K**2, abs=1e-10)
    # on JAX the default adjoint's Hessian (over the checkpointed loop, the event located
    # after it) compiles for ~15 s (slow); tests/test_ode_events_jax.py checks the
    # forward-mode Hessian and Taylor coefficients
    H = simdiff.hessian(prob, backend=backend)
    # measured 1.2e-11 at rtol=1e-12 (the shortened step; 7.4e-10 through the quartic
    # dense output): the target is 1e-10
    assert H[0, 0] == pytest.approx(2 * np.log(2) / K**3, abs=1e-10)


def test_condition_zero_at_t0_refused():
    with pytest.raises(InputError, match="is 0 at t0"):
        ODEProblem(lambda t, y, p, ops: -p[0] * y, [0.5], (0.0, 5.0), [K],
                   events=[Event(lambda t, y, p, ops: y[0] - 0.5)])  # fmt: skip
