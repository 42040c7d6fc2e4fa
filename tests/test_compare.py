"""simdiff.compare: interleaved timing, failing configurations reported, accuracy, registry."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import problems
import simdiff
from simdiff.errors import UnsupportedError
from simdiff.evidence.compare.run import (
    CONFIGS,
    CompareResult,
    Task,
    compare,
    make_task,
    register_config,
)


def _broken(problem, task):
    raise RuntimeError("builder exploded on purpose")


def _unsupported(problem, task):
    raise UnsupportedError("this configuration does not do that")


def _wrong(problem, task):
    # A configuration that runs but returns a wrong gradient: accuracy must show it.
    return lambda: 2.0 * problem.exact["grad"](task.x)


def test_failing_configuration_is_reported_not_dropped() -> None:
    p = problems.get("rosenbrock4")
    builders = {"broken": _broken, "nope": _unsupported, "wrong": _wrong}
    r = compare(p, ["grad"], ["jax-jit", "broken", "nope", "wrong"], repeats=2, builders=builders)
    assert [e.config for e in r.entries] == ["jax-jit", "broken", "nope", "wrong"]
    broken = r.get("grad", "broken")
    assert broken.status == "error" and "builder exploded on purpose" in broken.error
    assert r.get("grad", "nope").status == "unsupported"
    assert r.get("grad", "wrong").status == "ok"
    assert r.get("grad", "wrong").max_rel_err > 0.1
    assert r.get("grad", "jax-jit").max_rel_err < 1e-14
    text = str(r)
    assert "builder exploded on purpose" in text and "unsupported" in text


def test_timings_and_ratios(backend: str) -> None:
    p = problems.get("seed8")
    cfg = "jax-jit" if backend == "jax" else "torch-eager"
    r = compare(
        p, ["grad", "hessian", "derivative2"], [cfg, "scipy-fd"], repeats=3, min_sample_s=1e-4
    )
    assert isinstance(r, CompareResult) and r.baseline == cfg
    for e in r.entries:
        if e.config == "scipy-fd" and e.derivative == "derivative2":
            assert e.status == "unsupported" and "first derivatives only" in e.error
            continue
        assert e.status == "ok", e.error
        assert e.repeats == 3 and len(e.samples) == 3 and e.inner >= 1
        assert e.steady_min_s <= e.steady_q25_s <= e.steady_s <= e.steady_q75_s <= e.steady_max_s
        assert e.first_call_s > 0
        assert e.reference == "exact" and e.max_rel_err < (
            1e-6 if e.config == "scipy-fd" else 1e-13
        )
    assert r.ratio("grad", cfg) == 1.0
    assert r.ratio("grad", "scipy-fd") == pytest.approx(
        r.get("grad", "scipy-fd").steady_s / r.get("grad", cfg).steady_s
    )
    assert r.threads["affinity"] >= 1 and "torch" in r.threads and "xla" in r.threads


def test_batched_points_and_compilation_count() -> None:
    p = problems.get("seed")
    x = np.linspace(-1.0, 1.0, 50)[:, None]
    r = compare(p, ["derivative3"], ["jax-jit", "torch-eager"], x=x, repeats=2)
    assert r.batch == 50
    for e in r.entries:
        assert e.status == "ok" and e.value.shape == (50,)
        assert e.reference == "exact" and e.max_rel_err < 1e-12
    assert r.get("derivative3", "jax-jit").compilations == 1


def test_scipy_fd_refuses_batches() -> None:
    p = problems.get("seed")
    r = compare(p, ["grad"], ["jax-jit", "scipy-fd"], x=np.zeros((3, 1)), repeats=1)
    assert r.get("grad", "scipy-fd").status == "unsupported"


def test_accuracy_falls_back_to_scipy_fd_then_baseline() -> None:
    p = simdiff.Problem(lambda x, ops: ops.sum(ops.cos(x) * x[0]), x0=np.array([0.2, 0.7]))
    r = compare(
        p, ["grad", "hessian", "derivative3"], ["jax-jit", "torch-eager", "scipy-fd"], repeats=1
    )
    assert r.get("grad", "torch-eager").reference == "scipy-fd"
    assert r.get("derivative3", "torch-eager").reference == "jax-jit"
    assert r.get("derivative3", "torch-eager").max_rel_err < 1e-13


def test_make_task_and_validation() -> None:
    p = problems.get("spherical")
    t = make_task(p, "derivative4.taylor")
    assert isinstance(t, Task) and (t.order, t.method, t.label) == (
        4,
        "taylor",
        "derivative4.taylor",
    )
    assert make_task(p, "vjp").u.shape == (3,)
    with pytest.raises(ValueError, match="unknown derivative 'laplace'"):
        make_task(p, "laplace")
    with pytest.raises(ValueError, match=r"unknown configurations \['nope'\]"):
        compare(p, ["jacobian"], ["nope"])
    with pytest.raises(ValueError, match="baseline 'scipy-fd' is not among"):
        compare(p, ["jacobian"], ["jax-jit"], baseline="scipy-fd")
    with pytest.raises(ValueError, match="already registered"):
        register_config("jax-jit", _broken)
    assert {"jax-jit", "torch-eager", "torch-compile", "scipy-fd", "numdifftools"} <= set(CONFIGS)


def test_numdifftools_peer() -> None:
    p = problems.get("rosenbrock4")
    r = compare(p, ["hessian", "hvp"], ["jax-jit", "numdifftools"], repeats=1)
    assert r.get("hessian", "numdifftools").status == "ok"
    assert r.get("hessian", "numdifftools").max_rel_err < 1e-8
    assert r.get("hvp", "numdifftools").status == "unsupported"
    assert math.isnan(r.get("hvp", "numdifftools").steady_s)


def _flattened(problem, task):
    # Right numbers in the wrong shape: must not pass as a configuration without an error.
    return lambda: problem.exact["hessian"](task.x).ravel()


def test_wrong_shape_is_an_error_not_a_blank() -> None:
    p = problems.get("rosenbrock4")
    r = compare(p, ["hessian"], ["jax-jit", "flat"], repeats=1, builders={"flat": _flattened})
    flat = r.get("hessian", "flat")
    assert flat.status == "error" and "returned shape (16,)" in flat.error
    assert flat.max_rel_err == math.inf
    assert r.get("hessian", "jax-jit").status == "ok"


def _nan(problem, task):
    return lambda: np.full(problem.n, np.nan)


def _tiny_wrong(problem, task):
    return lambda: 2.0 * problem.exact["grad"](task.x)


def test_non_finite_answer_is_an_error_and_small_entries_are_not_floored() -> None:
    base = problems.get("rosenbrock4")
    # the same function scaled by 1e-9: every gradient entry is below 1e-5
    p = simdiff.Problem(
        lambda x, ops: 1e-9 * base.fn(x, ops), x0=base.x0,
        exact={"grad": lambda x: 1e-9 * base.exact["grad"](x)}, name="tiny",
    )  # fmt: skip
    builders = {"nan": _nan, "tiny-wrong": _tiny_wrong}
    r = compare(p, ["grad"], ["jax-jit", "nan", "tiny-wrong"], repeats=1, builders=builders)
    assert r.get("grad", "nan").status == "error" and "non-finite" in r.get("grad", "nan").error
    assert r.get("grad", "tiny-wrong").max_rel_err == pytest.approx(1.0)
    assert r.get("grad", "jax-jit").max_rel_err < 1e-14


def test_numdifftools_one_parameter_gradient_has_the_gradient_shape() -> None:
    # numdifftools squeezes a one-parameter gradient to a scalar; the comparison must still
    # measure its accuracy (it used to be a blank), and its large trial steps on an
    # unstable simulator (Burgers' equation) must not leak overflow warnings.
    p = problems.get("heat_diffusivity")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        r = compare(p, ["grad"], ["numdifftools"], repeats=1)
    e = r.get("grad", "numdifftools")
    assert e.status == "ok", e.error
    assert e.value.shape == (1,) and e.reference == "exact" and e.max_rel_err < 1e-6


def test_simdiff_compare_is_the_function() -> None:
    from simdiff.evidence.compare import run as module

    assert simdiff.compare is module.compare
    r = simdiff.compare(problems.get("seed"), ["grad"], ["jax-jit"], repeats=1, memory=False)
    assert math.isnan(r.entries[0].peak_rss_mb)
