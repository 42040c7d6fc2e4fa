"""Problem identity: the fingerprint is what defines a problem; sweeps and caches never mix problems."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdiff
from simdiff.ode import ODEProblem
from simdiff.store import fingerprint

BACKENDS = ("jax", "torch")


def quadratic(c: float, shift: np.ndarray) -> simdiff.Problem:
    """A factory: every problem it makes has the same source text."""
    return simdiff.Problem(lambda x, ops: ops.sum(c * (x - ops.asarray(shift)) ** 2), x0=np.ones(2))


def quadratic_exact(c: float, shift: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 2.0 * c * (x - shift)


def quadratic_value(c: float, shift: np.ndarray, x: np.ndarray) -> np.ndarray:
    return c * np.sum((x - shift) ** 2, axis=-1)


def quadratic_hessian(c: float, n_points: int) -> np.ndarray:
    return np.broadcast_to(2.0 * c * np.eye(2), (n_points, 2, 2))


# near neighbours (1 and 1 + 2^-40, a shift of 1e-12) and random values: two problems whose
# values agree to many digits near x0, and equal pairs often enough to see them resumed
closure = st.tuples(
    st.one_of(st.sampled_from([0.5, 1.0, 1.0 + 2**-40, 3.0]), st.floats(0.25, 4.0)),
    st.one_of(
        st.sampled_from([(0.0, 0.0), (0.0, 1e-12), (1.0, -1.0)]),
        st.tuples(st.floats(-2.0, 2.0), st.floats(-2.0, 2.0)),
    ),
)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=closure, second=closure)
def test_sweeps_and_caches_never_mix_factory_problems(
    backend, first, second, tmp_path_factory
) -> None:
    store = tmp_path_factory.mktemp("store") / "s"
    points = np.array([[0.3, -0.2], [1.5, 2.0], [-1.0, 0.25]])
    a, b = (quadratic(c, np.array(s)) for c, s in (first, second))
    assert (fingerprint(a) == fingerprint(b)) == (first == second)
    kinds = ("value", "grad", "hessian")
    ra = simdiff.sweep(a, points, kinds, store=store, chunk_size=2, backend=backend)
    rb = simdiff.sweep(b, points, kinds, store=store, chunk_size=2, backend=backend)
    assert rb.chunks_resumed == (ra.n_chunks if first == second else 0)
    for (c, shift), r in ((first, ra), (second, rb)):  # each sweep holds its own problem's numbers
        s = np.array(shift)
        # a few roundings of c (x - s)^2 summed over two entries: 1e-13 relative, and
        # absolute where the value or gradient vanishes by cancellation (x near s)
        scale = c * (1.0 + np.abs(points).max() + np.abs(s).max()) ** 2
        np.testing.assert_allclose(
            r["value"], quadratic_value(c, s, points), rtol=1e-13, atol=1e-14 * scale
        )
        np.testing.assert_allclose(
            r["grad"], quadratic_exact(c, s, points), rtol=1e-13, atol=1e-14 * scale
        )
        np.testing.assert_allclose(r["hessian"], quadratic_hessian(c, len(points)), rtol=1e-13)
    for other in BACKENDS:  # each problem's cache holds its own derivatives, on every backend
        for (cv, sv), p in ((first, a), (second, b)):
            s, x = np.array(sv), points[1]
            scale = cv * (1.0 + np.abs(x).max() + np.abs(s).max()) ** 2
            v = simdiff.Derivatives(p, other).value(x)  # through the problem's cache
            np.testing.assert_allclose(v, quadratic_value(cv, s, x), rtol=1e-13, atol=1e-14 * scale)
            g = simdiff.grad(p, x, backend=other)
            np.testing.assert_allclose(g, quadratic_exact(cv, s, x), rtol=1e-13, atol=1e-14 * scale)
            h = simdiff.hessian(p, x, backend=other)
            np.testing.assert_allclose(h, quadratic_hessian(cv, 1)[0], rtol=1e-13)


def test_factory_problems_differ_by_closure_value_not_by_source() -> None:
    shift = np.zeros(2)
    assert fingerprint(quadratic(1.0, shift)) == fingerprint(quadratic(1.0, shift.copy()))
    assert fingerprint(quadratic(1.0, shift)) != fingerprint(quadratic(1.0 + 2**-52, shift))
    assert fingerprint(quadratic(1.0, shift)) != fingerprint(quadratic(1.0, np.array([0.0, -0.0])))


def test_defaults_globals_and_x0_are_part_of_the_identity() -> None:
    def with_default(x, ops, k=2.0):
        return ops.sum(k * x)

    def with_other_default(x, ops, k=3.0):
        return ops.sum(k * x)

    with_other_default.__code__ = with_default.__code__
    p = simdiff.Problem(with_default, x0=np.ones(2))
    assert fingerprint(p) != fingerprint(simdiff.Problem(with_other_default, x0=np.ones(2)))
    assert fingerprint(p) != fingerprint(simdiff.Problem(with_default, x0=np.zeros(2)))
    assert fingerprint(p) == fingerprint(simdiff.Problem(with_default, x0=np.ones(2), name="other"))


def _decay(t, y, p, ops):
    return -p[0] * y


def _ode(**options) -> ODEProblem:
    return ODEProblem(
        _decay, [1.0], (0.0, 1.0), [2.0], observable=lambda ys, ops: ys[-1, 0], **options
    )


def test_ode_settings_that_change_results_change_the_fingerprint() -> None:
    base = fingerprint(_ode(solver="dopri5", rtol=1e-6, atol=1e-9, max_steps=50))
    assert base == fingerprint(_ode(solver="dopri5", rtol=1e-6, atol=1e-9, max_steps=50))
    for other in (
        {"solver": "dopri5", "rtol": 1e-6, "atol": 1e-9, "max_steps": 5000},
        {"solver": "dopri5", "rtol": 1e-7, "atol": 1e-9, "max_steps": 50},
        {"solver": "rk4", "n_steps": 50},
    ):
        assert fingerprint(_ode(**other)) != base, other


def test_an_ode_rerun_with_more_steps_does_not_get_the_old_failures(tmp_path: Path) -> None:
    """Long solves, on torch (whose eager loop compiles nothing; the test below runs the
    same on each backend)."""
    points = np.array([[20.0], [30.0]])  # x0 = 2 needs 55 steps; these need about 250
    store = tmp_path / "s"
    few = simdiff.sweep(_ode(rtol=1e-10, atol=1e-12, max_steps=100), points, store=store,
                        backend="torch")  # fmt: skip
    assert (few.status == 2).all() and "max_steps" in few.messages[0]
    more = simdiff.sweep(_ode(rtol=1e-10, atol=1e-12, max_steps=5000), points, store=store,
                         backend="torch")  # fmt: skip
    assert more.chunks_resumed == 0 and more.ok.all()
    # the local tolerances (rtol 1e-10, atol 1e-12) summed over ~250 steps
    np.testing.assert_allclose(more["value"], np.exp(-points[:, 0]), rtol=1e-7, atol=250 * 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_ode_rerun_with_more_steps_on_each_backend_and_derivative(tmp_path, backend) -> None:
    """The same on jax and torch for value, gradient and Hessian: the failures of the first
    run (status 2, a message naming max_steps) are not resumed by the second, whose numbers
    are those of y(1) = exp(-k): value e^-k, gradient -e^-k, Hessian e^-k."""
    # rtol 1e-4: x0 = 2 takes 6 to 8 steps, k = 8 more than 8; a few dozen allowed
    kinds = ("value", "grad", "hessian")
    store = tmp_path / "s"
    points = np.array([[8.0]])
    few = simdiff.sweep(_ode(rtol=1e-4, atol=1e-6, max_steps=8), points, kinds,
                        store=store, backend=backend)  # fmt: skip
    assert (few.status == 2).all() and "max_steps" in few.messages[0]
    more = simdiff.sweep(_ode(rtol=1e-4, atol=1e-6, max_steps=40), points, kinds,
                         store=store, backend=backend)  # fmt: skip
    assert more.chunks_resumed == 0 and more.ok.all()
    e = np.exp(-points[:, 0])
    # the local tolerance, atol 1e-6 against a value of 3.4e-4, summed over about 10 steps:
    # 3e-2 relative; the derivatives (of the discrete solution, step sizes held fixed) as close
    np.testing.assert_allclose(more["value"], e, rtol=3e-2)
    np.testing.assert_allclose(more["grad"][:, 0], -e, rtol=3e-2)
    np.testing.assert_allclose(more["hessian"][:, 0, 0], e, rtol=3e-2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_changed_after_the_first_call_is_seen_by_every_derivative(backend: str) -> None:
    namespace: dict = {"C": 1.0}
    exec("def f(x, ops):\n    return ops.sum(C * x ** 3)", namespace)
    p = simdiff.Problem(namespace["f"], x0=np.ones(2))
    x = np.array([1.0, 2.0])
    d = simdiff.Derivatives(p, backend)  # a Derivatives the caller keeps
    np.testing.assert_allclose(simdiff.grad(p, x, backend=backend), 3.0 * x**2, rtol=1e-14)
    np.testing.assert_allclose(d.hessian(x), np.diag(6.0 * x), rtol=1e-14)
    before = fingerprint(p)
    namespace["C"] = 2.0
    assert fingerprint(p) != before
    np.testing.assert_allclose(d.value(x), 2.0 * 9.0, rtol=1e-14)
    np.testing.assert_allclose(simdiff.grad(p, x, backend=backend), 6.0 * x**2, rtol=1e-14)
    np.testing.assert_allclose(
        simdiff.hessian(p, x, backend=backend), np.diag(12.0 * x), rtol=1e-14
    )
    np.testing.assert_allclose(d.hessian(x), np.diag(12.0 * x), rtol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_array_changed_in_place_after_the_first_call_is_seen(backend: str) -> None:
    scale = np.array([1.0, 1.0])
    p = simdiff.Problem(lambda x, ops: ops.sum(ops.asarray(scale) * x**2), x0=np.ones(2))
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), [2.0, 2.0], rtol=1e-14)
    scale[1] = 5.0
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), [2.0, 10.0], rtol=1e-14)


def test_an_unchanged_problem_keeps_its_compiled_derivatives() -> None:
    p = quadratic(2.0, np.zeros(2))
    d = simdiff.Derivatives(p, "jax")
    for _ in range(3):
        d.grad()
    assert d.compilations == 1


class _Handle:
    """An object whose state cannot be read (no ``__dict__``)."""

    __slots__ = ()


def test_an_opaque_object_means_no_fingerprint_no_resume_and_no_sharing(tmp_path: Path) -> None:
    lock = threading.Lock()

    def f(x, ops):
        with lock:
            return ops.sum(x**2)

    p = simdiff.Problem(f, x0=np.ones(2))
    assert fingerprint(p) is None
    points = np.array([[1.0, 2.0]])
    first = simdiff.sweep(p, points, store=tmp_path / "s")
    again = simdiff.sweep(p, points, store=tmp_path / "s")
    assert again.chunks_resumed == 0 and "cannot be fingerprinted" in again.note
    assert len(simdiff.store.Store(tmp_path / "s").runs()) == 2 and first.note == again.note
    d = simdiff.Derivatives(p, "jax")
    d.grad()
    d.grad()
    assert d.compilations == 2  # rebuilt for each call: nothing is reused for an unknown identity


def test_fingerprint_survives_pickling_and_ignores_the_cache() -> None:
    p = quadratic(1.5, np.array([0.5, 0.0]))
    before = fingerprint(p)
    simdiff.grad(p)
    assert fingerprint(p) == before
    assert fingerprint(pickle.loads(cloudpickle.dumps(p))) == before  # as sent to dask workers


def test_fingerprint_refuses_what_is_not_a_problem() -> None:
    with pytest.raises(simdiff.errors.InputTypeError, match="simdiff.Problem"):
        fingerprint(lambda x, ops: x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_framework_array_in_a_closure_is_hashed_by_value(backend: str) -> None:
    be = simdiff.backends.get_backend(backend)
    scale = be.from_numpy(np.array([1.0, 2.0]), np.float64)
    p = simdiff.Problem(lambda x, ops: ops.sum(scale * x**2), x0=np.ones(2), backends=(backend,))
    same = simdiff.Problem(lambda x, ops: ops.sum(scale * x**2), x0=np.ones(2), backends=(backend,))
    assert fingerprint(p) == fingerprint(same) is not None
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), [2.0, 4.0], rtol=1e-14)
    if be.mutation_count(scale) is not None:  # arrays that change in place (torch)
        scale.mul_(2.0)
        np.testing.assert_allclose(simdiff.grad(p, backend=backend), [4.0, 8.0], rtol=1e-14)
