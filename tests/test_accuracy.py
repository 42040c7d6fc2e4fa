"""The one accuracy rule (simdiff.evidence._accuracy.rel_error) and the benchmarks' use of it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import torch

from simdiff.errors import ShapeError
from simdiff.evidence._accuracy import rel_error

BENCHMARKS = Path(__file__).resolve().parents[1] / "validation" / "benchmarks"
#: a relative error written out by hand: max |a - b| divided by something
OWN_RULE = re.compile(
    r"np\.abs\([^()]*-[^()]*\)\.max\(\)\s*/\s*(np\.|max\()|np\.max\(np\.abs\([^()]*-[^()]*\)\)\s*/\s*(np\.|max\()"
)


def test_relative_to_the_largest_reference_element() -> None:
    assert rel_error([1.0, -4.0], [1.0, -4.0]) == 0.0
    assert rel_error([1.0, -4.5], [1.0, -4.0]) == pytest.approx(0.125, rel=1e-15)
    assert rel_error(2.0, 1.0) == pytest.approx(1.0, rel=1e-15)


def test_floor_makes_small_references_absolute() -> None:
    assert rel_error([1e-3], [2e-3], floor=1.0) == pytest.approx(1e-3, rel=1e-12)
    assert rel_error([1e-3], [2e-3]) == pytest.approx(0.5, rel=1e-12)


def test_zero_reference_and_nan() -> None:
    assert rel_error([0.0], [0.0]) == 0.0
    assert rel_error([1e-300], [0.0]) == math.inf
    assert math.isnan(rel_error([np.nan], [1.0]))
    assert math.isnan(rel_error([1.0], [np.nan]))


@pytest.mark.parametrize(
    "wrap", [np.asarray, jnp.asarray, torch.as_tensor], ids=["numpy", "jax", "torch"]
)
def test_framework_arrays(wrap) -> None:
    assert rel_error(wrap(np.array([1.0, 3.0])), np.array([1.0, 2.0])) == pytest.approx(
        0.5, rel=1e-15
    )


def test_a_tensor_that_requires_grad_is_read_through_its_backend() -> None:
    got = torch.tensor([1.0, 3.0], dtype=torch.float64, requires_grad=True) * 1.0
    assert rel_error(got, [1.0, 2.0]) == pytest.approx(0.5, rel=1e-15)


def test_shape_mismatch_is_refused() -> None:
    with pytest.raises(ShapeError, match=r"shapes differ: got \(2,\), reference \(3,\)"):
        rel_error(np.ones(2), np.ones(3))


def test_the_rule_detector_sees_a_hand_written_rule() -> None:
    assert OWN_RULE.search("err = float(np.abs(a - b).max() / np.abs(b).max())")
    assert OWN_RULE.search("x = np.max(np.abs(c - e)) / max(np.max(np.abs(e)), 1e-300)")
    assert not OWN_RULE.search("fd = np.abs(coarse - e_a).max() / 3 * 1e3")
    assert not OWN_RULE.search('gap = np.max(np.abs(r["d"] - r["f"])) / r["tolerance"]')


def test_benchmarks_state_errors_by_the_one_rule() -> None:
    own = {
        p.name: [i for i, line in enumerate(p.read_text().splitlines(), 1) if OWN_RULE.search(line)]
        for p in sorted(BENCHMARKS.glob("*.py"))
    }
    own = {k: v for k, v in own.items() if v}
    assert not own, f"benchmarks computing a relative error by hand (use rel_error): {own}"
