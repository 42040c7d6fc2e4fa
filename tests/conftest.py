"""Test configuration: float64 everywhere, strict JAX dtype promotion, warnings are errors."""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
from collections.abc import Iterator

# One OpenBLAS thread per test process: `pytest -n 2` runs two processes on two cores, and
# a pool of a thread per core in each (spinning while it waits for work) oversubscribes
# them; small LAPACK calls (ASE's cell filter, SciPy's Radau) then ran 2-3x slower at
# load 6-9 (tests/test_pes_ase_cells.py: 87-119 s, 38-57 s with one thread).  xdist's workers
# start after this line and read it when they load numpy and SciPy; a run without xdist
# has numpy loaded already (pytest's plugins), SciPy not.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# No persistent JAX compilation cache: every run compiles what it runs, as on a fresh
# machine.  ``import sella`` (tests/test_pes_ase.py, docs/pes.md) otherwise points JAX at
# ~/.cache/sella/jax_cache for the rest of the process, and the suite's time then depends on
# what earlier runs left there (375 s with it full, 545 s with it empty, on the same 2 cores).
os.environ["JAX_COMPILATION_CACHE_DIR"] = ""
# The same for Inductor's cache of generated C++ and compiled kernels (default
# /tmp/torchinductor_<user>, kept across runs): a directory of this run's own, shared by its
# xdist workers (they start after this line), removed at the end (pytest_unconfigure).
# Not in it: the precompiled header of Inductor's C++ prelude, which torch keeps in
# /tmp/torchinductor_<user>/precompiled_headers keyed by compiler, flags and include paths; a
# fresh checkout builds it once (about 6 s of g++), a rerun in the same checkout reuses it.
# Without it (TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS=0) each kernel build parses the
# prelude: test_dopri5_compiled_loop_gradient_matches_eager_and_jax and
# test_compiled_pde_gradient_and_hvp_equal_eager took 81 s together, 59 s with it.
# Inductor compiles in this process (one thread): its default, a pool of a subprocess per
# core in each of the two test processes, took 89 s for tests/test_ode_compiled_loop.py
# where one thread took 80 s.
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.environ.get(
    "TORCHINDUCTOR_CACHE_DIR"
) or tempfile.mkdtemp(prefix="simdiff-tests-inductor-")
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
# Inductor takes the vector instruction set the CPU reports (cpuinfo) instead of proving it
# first by building and loading a test library per candidate set in each process: the first
# compile in an empty cache took 12 s with the proof, 4.9 s without (a compiler that cannot
# build for the reported set fails the compiling test, it does not change a result).
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
# The MLIR locations of JAX's programs name the innermost user frame of each operation, not
# its whole Python stack (a hundred frames deep inside simdiff's solver loops): locations
# serve debugging and profiling, not results.  With whole stacks the JAX ODE tests took 3%
# more CPU (tests/test_ode_loop.py: 32.9 s against 32.0 s, twice, interleaved), most of it
# in XLA's compile.  JAX reads the variable when it is imported (below, and in the
# processes the tests start).
os.environ.setdefault("JAX_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS", "0")

import jax
import numpy as np
import pytest
from _shared import changed
from _xla import install_cheap_codegen, most_optimisations_off
from hypothesis import HealthCheck, settings
from xdist.scheduler import WorkStealingScheduling

import simdiff.backends.jax  # noqa: F401  (switches on x64)

jax.config.update("jax_numpy_dtype_promotion", "strict")
# XLA compiles the suite's programs with most optimisations off (LLVM at -O0, no expensive
# passes) and generates their code the cheaper way (tests/_xla.py: older emitters, one LLVM
# module); even so its 3,200 compiles are a quarter of the suite's CPU time (176 s of 705 s,
# tests/_jax_times.py, docs/contributing.md).  Off and on interleaved,
# the optimisation setting took 15-22% less CPU on the JAX ODE test files; the code
# generation a third less XLA compile time (tests/test_ode_rejected_step.py and
# test_taylor_ops.py: 13.6 s of compiling, 8.7 s).  The tests check derivatives, not XLA's
# code generation; the tests marked ``xla_optimised`` (timings, and
# tests/test_xla_optimisation.py, which holds optimised programs to these) compile as a
# user's do.  JAX_DISABLE_MOST_OPTIMIZATIONS=0 in the environment runs the whole suite as
# users compile.  The variable is exported, so that processes the tests start (dask's
# workers, the CLI) compile with the same optimisation setting.
XLA_OPTIMISATIONS_OFF = os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1") != "0"
jax.config.update("jax_disable_most_optimizations", XLA_OPTIMISATIONS_OFF)
install_cheap_codegen()
# No deadline and no "too slow" health check: both time the machine, not the code (a
# loaded or sandboxed CPU stalled one draw of test_taylor_sympy's strategy for 100 s).
settings.register_profile(
    "simdiff",
    deadline=None,
    max_examples=25,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("simdiff")
os.environ.setdefault("MPLBACKEND", "Agg")
# Python's cyclic garbage collector, tuned for a process that lives for thousands of tests:
# JAX's tracing allocates millions of short-lived objects, and with the default thresholds
# (700, 10, 10) the full collections alone took 5-6 s of a 60 s run of
# tests/test_ode_loop.py + test_ode_rodas5p.py.  Collections stay automatic, only rarer;
# what is alive after collection (modules, test items) is frozen out of them
# (``pytest_collection_finish``).  Tests of memory release call ``gc.collect()`` themselves.
gc.set_threshold(10_000, 50, 50)


def pytest_unconfigure(config: pytest.Config) -> None:
    cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    if os.path.basename(cache).startswith("simdiff-tests-inductor-") and not hasattr(
        config, "workerinput"
    ):
        shutil.rmtree(cache, ignore_errors=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()


BACKENDS = ["jax", "torch"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each differentiating backend, as a parameter so failures name it."""
    return request.param


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


@pytest.fixture(autouse=True)
def _shared_problems_unchanged() -> Iterator[None]:
    """A test that changed a catalogue problem it shares with the process's other tests fails
    (tests/_shared.py); the problem is dropped, so later tests build it anew."""
    yield
    names = changed()
    if names:
        pytest.fail(
            f"the test changed the shared catalogue problem(s) {names}; "
            "a test that changes a problem builds its own with problems.get"
        )


@pytest.fixture(autouse=True)
def _xla_optimised(request: pytest.FixtureRequest) -> Iterator[None]:
    """Programs compiled inside a test marked ``xla_optimised`` get XLA's full optimisation."""
    if request.node.get_closest_marker("xla_optimised") is None:
        yield
        return
    with most_optimisations_off(False):
        yield


@pytest.fixture
def aot_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.compile`` with ``backend="aot_eager"``: Dynamo and AOTAutograd, no Inductor.

    For tests of what Dynamo's graphs and AOTAutograd's backward do (the
    ``while_loop`` op's gradient, retained graphs), not of Inductor's code:
    the same graphs without its C++ build (about 8x less time).  Tests of the
    Inductor path itself do not take this fixture.

    The graphs that simdiff traces without Dynamo
    (:class:`simdiff.backends.torch.traced.TracedGraph`: a Rosenbrock step and
    its VJP under ``CheckpointAdjoint``) go to Inductor by
    ``torch._inductor.standalone_compile``; here they run as ``make_fx`` traced
    them, the same graph op by op without Inductor.
    """
    import torch
    import torch._inductor

    real = torch.compile

    def compile_aot_eager(fn=None, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.pop("options", None)  # Inductor's options
        kwargs["backend"] = "aot_eager"
        return real(fn, **kwargs) if fn is not None else real(**kwargs)

    def traced_graph_as_is(gm, example_inputs, **kwargs):  # type: ignore[no-untyped-def]
        return gm

    monkeypatch.setattr(torch, "compile", compile_aot_eager)
    monkeypatch.setattr(torch._inductor, "standalone_compile", traced_graph_as_is)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``-n N`` without ``--dist``: work stealing instead of xdist's default ``load``.

    ``load`` hands each worker contiguous chunks of up to a quarter of what is
    left; at the end one worker can still hold minutes of tests while the other
    idles.  ``worksteal`` splits the collection in halves and lets an idle
    worker take half of the other's queue.  Replayed on this suite's measured
    durations (2 workers), ``load`` ended 5% after the ideal split, ``worksteal``
    within 1% of it.  An explicit ``--dist`` is left as asked.
    """
    if any(a in ("--dist", "-d") or a.startswith("--dist=") for a in config.invocation_params.args):
        return None
    return WorkStealingScheduling(config, log)  # type: ignore[arg-type]
