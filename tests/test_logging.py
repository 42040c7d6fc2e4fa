"""The "simdiff" logger (silent by default, decisions at INFO) and the opt-in progress bars."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

import simdiff
from simdiff.core.compile import CompiledCall
from simdiff.errors import InputTypeError
from simdiff.sensitivity import batched_value_and_grad, dgsm, moments


def _sqrt_sum() -> simdiff.Problem:
    return simdiff.Problem(lambda x, ops: ops.sum(ops.sqrt(x)), x0=np.ones(2), name="sqrt_sum")


def _residuals() -> simdiff.Problem:
    t = np.linspace(0.0, 1.0, 5)
    data = 2.0 * np.exp(-0.5 * t)
    return simdiff.Problem(
        lambda x, ops: x[0] * ops.exp(-x[1] * ops.asarray(t)) - ops.asarray(data),
        x0=np.array([1.0, 1.0]),
        name="decay_fit",
    )


def test_the_package_logger_is_silent_by_default():
    # a fresh interpreter with no logging configured: a failing sweep point (a WARNING
    # record) must print nothing; Python's last-resort handler would print it without
    # the package's NullHandler. Python warnings are off (-W ignore): this is about log
    # records, and a platform's own import-time warning (JAX on a TPU host) is not one.
    code = (
        "import numpy as np, simdiff\n"
        "p = simdiff.Problem(lambda x, ops: ops.sum(ops.sqrt(x)), x0=np.ones(2))\n"
        "r = simdiff.sweep(p, np.array([[1.0, 4.0], [-1.0, 1.0]]))\n"
        "assert r.status.tolist() == [0, 1]\n"
    )
    cmd = [sys.executable, "-W", "ignore", "-c", code]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("simdiff").handlers)


def test_sweep_logs_failed_points_and_resumed_chunks(tmp_path, caplog):
    p = _sqrt_sum()
    pts = np.array([[1.0, 4.0], [-1.0, 1.0], [4.0, 4.0], [9.0, 1.0]])
    with caplog.at_level(logging.INFO, logger="simdiff"):
        simdiff.sweep(p, pts, chunk_size=2, store=tmp_path / "s")
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and warned[0].name == "simdiff.sensitivity._sweep"
    assert "1 of 2 points of chunk 0 failed" in warned[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="simdiff"):
        r = simdiff.sweep(p, pts, chunk_size=2, store=tmp_path / "s")
    assert r.chunks_resumed == 2
    assert any("2 of 2 chunks stored, 0 to compute" in m for m in caplog.messages)


def test_optimisers_log_their_termination(caplog):
    with caplog.at_level(logging.INFO, logger="simdiff"):
        res = simdiff.least_squares(_residuals())
    (msg,) = [m for m in caplog.messages if m.startswith("least_squares of 'decay_fit'")]
    assert str(res.message) in msg and f"njac {res.njac}" in msg


def test_derivative_builds_are_logged_at_debug(caplog):
    d = simdiff.Derivatives(_sqrt_sum(), "jax")
    with caplog.at_level(logging.DEBUG, logger="simdiff"):
        d.grad(np.ones(2))
        d.grad(np.full(2, 2.0))  # cached: no second record
    built = [m for m in caplog.messages if "built; first call" in m]
    assert len(built) == 1 and built[0].startswith("grad of 'sqrt_sum' on jax")


def test_a_compile_failure_that_falls_back_to_eager_is_a_warning(caplog):
    def compiler(fn):
        raise RuntimeError("no compiler here")

    tries = []
    call = CompiledCall(
        lambda x: 2 * x, lambda fn: tries.append(1) or compiler(fn), "auto", "grad",
        lambda: 10**9, ("p", 1, "grad"),
    )  # fmt: skip
    with caplog.at_level(logging.INFO, logger="simdiff"):
        outs = [call(3.0) for _ in range(6)]
    assert outs == [6.0] * 6 and call.path == "eager"
    assert len(tries) == 1  # a compile that failed is not tried again on every call
    (rec,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "runs grad of 'p' eagerly" in rec.getMessage()
    assert "RuntimeError: no compiler here" in rec.getMessage()


def test_progress_bars_are_opt_in(capsys):
    p = _sqrt_sum()
    pts = np.random.default_rng(0).uniform(1.0, 2.0, (6, 2))
    simdiff.sweep(p, pts, chunk_size=2)
    batched_value_and_grad(p, pts, chunk_size=2)
    assert capsys.readouterr().err == ""
    simdiff.sweep(p, pts, chunk_size=2, progress=True)
    err = capsys.readouterr().err
    assert "sweep sqrt_sum" in err and "/3 " in err  # the bar knows the chunk count
    batched_value_and_grad(p, pts, chunk_size=4, progress=True)
    assert "gradients sqrt_sum" in capsys.readouterr().err
    r = dgsm(p, ("uniform", 1.0, 2.0), n_samples=8, n_bootstrap=0, chunk_size=4, progress=True)
    assert np.all(r.nu > 0) and "/2 " in capsys.readouterr().err
    m = moments(p, np.ones(2), np.full(2, 0.01), progress=True)
    assert np.isfinite(m.variance) and "/4 " in capsys.readouterr().err
    res = simdiff.least_squares(_residuals(), progress=True)
    err = capsys.readouterr().err
    assert res.success and "least_squares decay_fit" in err
    bowl = simdiff.Problem(lambda x, ops: ops.sum((x - 1.0) ** 2), x0=np.zeros(2), name="bowl")
    res = simdiff.minimize(bowl, method="BFGS", progress=True)
    err = capsys.readouterr().err
    assert res.success and "minimize bowl" in err


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_progress_must_be_a_bool(value):
    p = _sqrt_sum()
    with pytest.raises(InputTypeError, match="progress must be True or False"):
        simdiff.sweep(p, np.ones((2, 2)), progress=value)
    with pytest.raises(InputTypeError, match="progress must be True or False"):
        moments(p, np.ones(2), np.full(2, 0.01), progress=value)
    with pytest.raises(InputTypeError, match="progress must be True or False"):
        simdiff.least_squares(_residuals(), progress=value)
