"""ODE events on JAX: second derivatives of a terminal event time in the forward modes.

y' = -k y, y(0) = 1, terminal event y = 1/2: t = ln 2 / k, d2t/dk2 = 2 ln 2 / k^3.
The forward-only adjoint (a plain while loop) keeps the compiles short; the
reverse modes run the same event arithmetic (tests/test_ode_events.py: the
gradient on JAX, the Hessian on torch).
"""

import numpy as np
import pytest

import simdiff
from simdiff.ode import Event, ForwardAdjoint, ODEProblem

K = 2.0
D2 = 2 * np.log(2) / K**3  # d^2 t / dk^2


@pytest.fixture(scope="module")
def decay_forward():
    return ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 5.0), [K],
                      events=[Event(lambda t, y, p, ops: y[0] - 0.5)],
                      observable=lambda ys, ops, ev: ev.t, rtol=1e-12, atol=1e-14,
                      adjoint=ForwardAdjoint())  # fmt: skip


def test_event_hessian_fwd_fwd_jax(decay_forward):
    # the same discrete solver as torch's 1.2e-11 at rtol 1e-12; target 1e-10
    H = simdiff.hessian(decay_forward, backend="jax", method="fwd-fwd")
    assert H.shape == (1, 1)
    assert H[0, 0] == pytest.approx(D2, abs=1e-10)


def test_event_taylor_jax(decay_forward):
    # Taylor coefficients through the event: 0th = t, 1st = dt/dk, 2nd = d2t/dk2 / 2
    c = simdiff.taylor(decay_forward, 2, np.array([1.0]), backend="jax")
    assert c[0] == pytest.approx(np.log(2) / K, abs=1e-12)
    assert c[1] == pytest.approx(-np.log(2) / K**2, abs=1e-10)
    assert 2 * c[2] == pytest.approx(D2, abs=1e-10)


def test_event_jvp_matches_closed_form_jax(decay_forward):
    v = np.array([0.5])
    assert simdiff.jvp(decay_forward, v, backend="jax")[()] == pytest.approx(
        -0.5 * np.log(2) / K**2, abs=1e-10
    )


def test_terminal_event_record_jax_matches_eager():
    """JAX's loop stops before the step with the event and locates it after the loop;
    the record and the saved rows after the event are those of the eager (numpy) loop.
    Two terminal events: the second (y = 0.6) fires first."""

    def observable(ys, ops, ev):
        return ops.stack([ev.t, ev.y[0], ev.fired, ev.index, ev.count, ev.times[0],
                          ev.which[0], ev.times[1], ys[1, 0], ys[-1, 0]])  # fmt: skip

    prob = ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 5.0), [K],
                      events=[Event(lambda t, y, p, ops: y[0] - 0.5),
                              Event(lambda t, y, p, ops: y[0] - 0.6, direction=-1)],
                      save_at=[0.0, 0.1, 1.0, 5.0], observable=observable,
                      rtol=1e-10, atol=1e-12, max_events=4)  # fmt: skip
    got = np.asarray(simdiff.Derivatives(prob, "jax", check_finite=False).value())
    want = np.asarray(prob.evaluate())
    t6 = np.log(1 / 0.6) / K
    assert want[0] == pytest.approx(t6, abs=1e-9)
    assert want[1] == pytest.approx(0.6, abs=1e-9)
    assert list(want[2:5]) == [1.0, 1.0, 1.0] and want[6] == 1.0 and np.isnan(want[7])
    assert want[8] == pytest.approx(np.exp(-K * 0.1), rel=1e-9)  # saved before the event
    assert want[9] == pytest.approx(0.6, abs=1e-9)  # after the event: the state at it
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=1e-12, atol=1e-14)
    assert np.isnan(got[7])
