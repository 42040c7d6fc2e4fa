"""The sweep's measured intra-op thread choice on torch (``SweepResult.threads``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import simdiff


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(before)


@pytest.fixture
def quad():
    return simdiff.Problem(lambda x, ops: ops.sum(x**2) + x[0] * x[1], x0=np.ones(3))


def test_torch_sweep_measures_one_thread_against_the_start_and_restores_it(two_threads):
    seen = []  # the thread count each chunk's (eager) evaluation ran with

    def fn(x, ops):
        seen.append(torch.get_num_threads())
        return ops.sum(x**2) + x[0] * x[1]

    p = simdiff.Problem(fn, x0=np.ones(3))
    pts = np.random.default_rng(0).standard_normal((12, 3))
    seen.clear()
    r = simdiff.sweep(p, pts, chunk_size=2, backend="torch")
    t = r.threads
    assert t["start"] == 2 and t["used"] in (1, 2) and "at 1 thread" in t["reason"]
    assert t["one_thread_s"] > 0 and t["start_threads_s"] > 0
    assert seen[-6:] == [1, 1, 1, 2] + [t["used"]] * 2  # one evaluation per chunk (6 chunks)
    assert torch.get_num_threads() == 2
    np.testing.assert_allclose(r["grad"], 2 * pts + pts[:, [1, 0, 2]] * [1, 1, 0])


def test_the_start_count_is_restored_when_the_sweep_fails(quad, two_threads):
    def stop(i, done, total):
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        simdiff.sweep(quad, np.ones((12, 3)), chunk_size=2, backend="torch", callback=stop)
    assert torch.get_num_threads() == 2


def test_no_trial_on_few_chunks_or_on_jax(quad, two_threads):
    r = simdiff.sweep(quad, np.ones((8, 3)), chunk_size=2, backend="torch")
    assert r.threads == {"start": 2}
    assert simdiff.sweep(quad, np.ones((12, 3)), chunk_size=2, backend="jax").threads == {}
