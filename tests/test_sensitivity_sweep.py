"""simdiff.sweep: in-process chunks, failing points, resume from the store, dask LocalCluster."""

from __future__ import annotations

import importlib
import os
import socket

import h5py
import numpy as np
import pytest
from _numerics import path_rtol
from _xla import CHEAP_CODEGEN_XLA_FLAGS

import problems
import simdiff
from simdiff.core.config import Config
from simdiff.errors import SolverError, StoreError
from simdiff.sensitivity import resolve_problem
from simdiff.store import Store

DERIVS = ("value", "grad", "hessian")


@pytest.fixture(scope="module")
def points() -> np.ndarray:
    return np.random.default_rng(5).uniform(-2.0, 2.0, (50, 4))


def test_sweep_matches_exact_derivatives(points, backend):
    p = problems.get("rosenbrock4")
    r = simdiff.sweep(p, points, DERIVS, chunk_size=16, backend=backend)
    assert r.n_chunks == 4 and r.chunks_computed == 4 and r.ok.all()
    np.testing.assert_allclose(r["value"], [p.exact["value"](x) for x in points], rtol=1e-14)
    np.testing.assert_allclose(r["grad"], [p.exact["grad"](x) for x in points], rtol=1e-13)
    np.testing.assert_allclose(
        r["hessian"], [p.exact["hessian"](x) for x in points], rtol=1e-13, atol=1e-11
    )


def test_vector_problem_and_specs(points):
    r = simdiff.sweep("spherical", points[:, :3], ("value", "jacobian"), chunk_size=20)
    exact = problems.get("spherical").exact
    np.testing.assert_allclose(r["jacobian"], [exact["jacobian"](x) for x in points[:, :3]],
                               rtol=1e-13, atol=1e-14)  # fmt: skip
    assert resolve_problem("problems.sensitivity:ishigami").name == "ishigami"
    with pytest.raises(simdiff.ShapeError, match="'grad' needs a scalar problem"):
        simdiff.sweep("spherical", points[:, :3], ("grad",))


def _sqrt_fn(x, ops):
    return ops.sum(ops.sqrt(x))


def test_non_finite_points_are_reported_and_the_sweep_goes_on(backend):
    pts = np.array([[1.0, 4.0], [-1.0, 1.0], [4.0, 9.0], [0.0, 1.0], [1.0, 1.0]])
    r = simdiff.sweep(simdiff.Problem(_sqrt_fn, x0=np.ones(2)), pts, chunk_size=2, backend=backend)
    np.testing.assert_array_equal(r.status, [0, 1, 0, 1, 0])  # sqrt(-1) nan; grad at 0 inf
    np.testing.assert_allclose(r["value"][[0, 2, 4]], [3.0, 5.0, 2.0])
    np.testing.assert_allclose(r["grad"][2], [0.25, 1 / 6])


def _solver_fn(x, ops):
    """Raises SolverError for x0 > 1 when it can see the number (per-point torch evaluation)."""
    if ops.name == "torch" and not x.requires_grad:
        if float(x[0]) > 1.0:
            raise SolverError(f"step budget exhausted at x0={float(x[0])}")
    return ops.sum(x**2)


def test_solver_error_marks_points_in_a_failed_chunk():
    pts = np.array([[0.0, 1.0], [2.0, 1.0], [0.5, 0.5], [3.0, 0.0]])
    p = simdiff.Problem(_solver_fn, x0=np.zeros(2))
    r = simdiff.sweep(p, pts, ("value",), chunk_size=4, backend="torch")
    np.testing.assert_array_equal(r.status, [0, 2, 0, 2])
    assert "step budget exhausted at x0=2.0" in r.messages[1]
    np.testing.assert_allclose(r["value"], [1.0, np.nan, 0.5, np.nan])


class Interrupt(Exception):
    pass


def test_resume_after_interruption_recomputes_nothing_finished(points, tmp_path):
    store = tmp_path / "sweep"
    full = simdiff.sweep("rosenbrock4", points, DERIVS, chunk_size=8)

    def stop_after_3(i, done, total):
        if done == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        simdiff.sweep("rosenbrock4", points, DERIVS, chunk_size=8, store=store,
                      callback=stop_after_3)  # fmt: skip
    (run,) = Store(store).runs()
    assert run["status"] == "running" and run["name"] == "sweep"
    chunks = [e for e in Store(store).entries(run["id"]) if e["kind"] == "chunk"]
    assert len(chunks) == 3
    (pts,) = [e for e in Store(store).entries(run["id"]) if e["kind"] == "points"]
    np.testing.assert_array_equal(pts["arrays"]["points"], points)
    # What a writer killed mid-chunk leaves (a temporary file of a dead process) is ignored.
    entries = store / "runs" / run["id"] / "entries"
    (entries / ".tmp-elsewhere-1-abc.h5").write_bytes(b"partial")
    seen = []
    r = simdiff.sweep("rosenbrock4", points, DERIVS, chunk_size=8, store=store,
                      callback=lambda i, d, t: seen.append(i))  # fmt: skip
    assert (r.chunks_resumed, r.chunks_computed, r.n_chunks) == (3, 4, 7)
    assert r.run == run["id"] and sorted(seen) == list(range(7))
    for name in DERIVS:
        np.testing.assert_array_equal(r[name], full[name])
    again = simdiff.sweep("rosenbrock4", points, DERIVS, chunk_size=8, store=store)
    assert again.chunks_computed == 0 and again.chunks_resumed == 7
    assert [x["status"] for x in Store(store).runs()] == ["complete"]


def test_a_different_sweep_gets_its_own_run(points, tmp_path):
    store = tmp_path / "s"
    simdiff.sweep("rosenbrock4", points[:10], ("value",), chunk_size=5, store=store)
    r = simdiff.sweep("rosenbrock4", points[:10], ("value", "grad"), chunk_size=5, store=store)
    assert r.chunks_resumed == 0
    r = simdiff.sweep("rosenbrock4", points[10:20], ("value",), chunk_size=5, store=store)
    assert r.chunks_resumed == 0
    assert len(Store(store).runs()) == 3


def test_two_lambdas_never_resume_each_others_results(tmp_path):
    """Matched by what the problem computes, not by its name (both are '<lambda>')."""
    store = tmp_path / "s"
    pts = np.random.default_rng(1).uniform(0.5, 2.0, (12, 3))
    f = simdiff.Problem(lambda x, ops: ops.sum(x**2), x0=np.ones(3))
    g = simdiff.Problem(lambda x, ops: ops.sum(x**3), x0=np.ones(3))
    assert f.name == g.name == "<lambda>"
    rf = simdiff.sweep(f, pts, chunk_size=4, store=store)
    rg = simdiff.sweep(g, pts, chunk_size=4, store=store)
    assert rg.chunks_resumed == 0 and rg.run != rf.run
    np.testing.assert_allclose(rg["value"], np.sum(pts**3, axis=1), rtol=1e-14)
    np.testing.assert_allclose(rg["grad"], 3 * pts**2, rtol=1e-14)
    assert simdiff.sweep(f, pts, chunk_size=4, store=store).chunks_resumed == 3


def test_a_file_simdiff_did_not_create_is_refused_untouched(points, tmp_path):
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f.create_dataset("data", data=np.arange(3))
    before = other.read_bytes()
    with pytest.raises(StoreError, match="other.h5: a file, not a simdiff store"):
        simdiff.sweep("rosenbrock4", points[:4], ("value",), store=other)
    assert other.read_bytes() == before
    junk = tmp_path / "junk"
    junk.write_bytes(os.urandom(2000))
    with pytest.raises(StoreError, match="junk: a file, not a simdiff store"):
        simdiff.sweep("rosenbrock4", points[:4], ("value",), store=junk)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"points": np.zeros((3, 2))}, simdiff.ShapeError, "must have shape (N, 4) with N >= 1"),
        ({"points": np.full((2, 4), np.inf)}, ValueError, "points[0, 0] = inf"),
        ({"derivatives": ("value", "laplacian")}, ValueError, "derivatives must be distinct"),
        ({"chunk_size": 0}, ValueError, "chunk_size must be a positive integer; got 0"),
        ({"problem": 3}, TypeError, "problem must be a simdiff.Problem, a catalogue name"),
    ],
)
def test_sweep_bad_input(kwargs, error, message):
    args = {"problem": "rosenbrock4", "points": np.zeros((2, 4))} | kwargs
    with pytest.raises(error) as info:
        simdiff.sweep(**args)
    assert message in str(info.value)


# --------------------------------------------------------------------------- dask


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    try:  # dask's workers talk TCP; sandboxes without sockets (gVisor) refuse even loopback
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
    except OSError as e:
        pytest.skip(f"no TCP socket on this machine, which dask's LocalCluster needs: {e}")
    # ":0": a free port for the dashboard; the default 8787 collides with any other
    # cluster on the machine (a concurrent test run), and its warning is an error here.
    # The workers compile as this process does (tests/_xla.py), or the sweeps below differ
    # in the last bit.
    off = os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] != "0"
    env = {"XLA_FLAGS": CHEAP_CODEGEN_XLA_FLAGS} if off else {}
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=":0", env=env)  # fmt: skip
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _closure_problem() -> simdiff.Problem:
    scale = np.array([1.0, 2.0, 3.0, 4.0])
    return simdiff.Problem(lambda x, ops: ops.sum(ops.asarray(scale) * ops.sin(x) ** 2),
                           x0=np.zeros(4), name="closure")  # fmt: skip


@pytest.mark.slow
def test_local_cluster_is_bit_identical_to_in_process(points, client, tmp_path):
    local = simdiff.sweep("rosenbrock4", points, DERIVS, chunk_size=8)
    dist = simdiff.sweep("rosenbrock4", points, DERIVS, chunk_size=8, client=client,
                         store=tmp_path / "d")  # fmt: skip
    for name in DERIVS:
        np.testing.assert_array_equal(dist[name], local[name])
    p = _closure_problem()
    p_local = simdiff.sweep(p, points, ("value", "grad"), chunk_size=8)
    p_dist = simdiff.sweep(p, points, ("value", "grad"), chunk_size=8, client=client)
    np.testing.assert_array_equal(p_dist["grad"], p_local["grad"])

    # each worker resolved the catalogue name once and compiled each derivative once:
    # the compiled functions live in that problem's own cache, in the worker process
    def worker_counts():
        sweep = importlib.import_module("simdiff.sensitivity._sweep")
        if sweep._resolve_spec.cache_info().currsize == 0:
            return None
        d = sweep._derivatives_for("rosenbrock4", Config(backend="jax", check_finite=False))
        return sweep._resolve_spec.cache_info().currsize, d.compilations, len(d.cache_info())

    counts = [c for c in client.run(worker_counts).values() if c is not None]
    assert counts and all(size == 1 and comp == built for size, comp, built in counts)


def _dies_once(marker: str):
    """A model that kills its dask worker process the first time it runs there (marker file)."""

    def fn(x, ops):
        from distributed import get_worker

        try:
            get_worker()
        except ValueError:  # not on a worker: the in-process evaluation
            return ops.sum(x**2)
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return ops.sum(x**2)

    return fn


@pytest.mark.slow
def test_lost_worker_chunk_is_recomputed(points, client, tmp_path):
    marker = tmp_path / "died"
    p = simdiff.Problem(_dies_once(str(marker)), x0=np.zeros(4), name="dies_once")
    r = simdiff.sweep(p, points, ("value", "grad"), chunk_size=10, client=client)
    assert marker.exists()  # a worker did die
    assert r.ok.all() and r.chunks_computed == 5
    # 4 squares and their sum in another order: 8 roundings; the gradient 2 x is exact on any path
    np.testing.assert_allclose(r["value"], np.sum(points**2, axis=1), rtol=path_rtol(8))
    np.testing.assert_allclose(r["grad"], 2 * points, rtol=1e-15)
