"""The suite's shared catalogue problems (tests/_shared.py): one object per name, and a change seen."""

from __future__ import annotations

import numpy as np
from _shared import changed, shared_problem

import simdiff


def test_every_call_in_a_process_gets_the_same_problem_and_what_was_built_for_it() -> None:
    first = shared_problem("rosenbrock4")
    simdiff.grad(first, backend="jax")
    second = shared_problem("rosenbrock4")
    assert second is first
    assert second.cache.keys() == first.cache.keys() and len(first.cache.keys()) > 0
    assert changed() == []  # read and differentiated: unchanged, still shared
    assert shared_problem("rosenbrock4") is first


def test_a_changed_exact_reference_is_seen_and_the_problem_is_rebuilt() -> None:
    p = shared_problem("rosenbrock4")
    p.exact["grad"] = lambda x: np.zeros_like(x)
    assert changed() == ["rosenbrock4"]
    fresh = shared_problem("rosenbrock4")
    assert fresh is not p and "grad" in fresh.exact
    assert not np.allclose(fresh.exact["grad"](fresh.x0 + 1.0), 0.0)
    assert changed() == []


def test_a_changed_meta_entry_or_starting_point_is_seen() -> None:
    p = shared_problem("spherical")
    p.meta["check_rtol"] = 1.0
    assert changed() == ["spherical"]
    q = shared_problem("spherical")
    assert "check_rtol" not in q.meta
    q.x0 = q.x0 + 1.0
    assert changed() == ["spherical"]
    assert shared_problem("spherical") is not q
    assert changed() == []
