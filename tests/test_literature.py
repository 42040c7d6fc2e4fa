"""validation.literature: literature values reproduced, and a wrong one caught."""

from __future__ import annotations

import numpy as np

import problems
import simdiff
from validation.literature import reproduce


def _muller_brown_like() -> simdiff.Problem:
    # Two wells and a saddle: f = (x^2 - 1)^2 + y^2; minima (+-1, 0) at 0, saddle (0, 0) at 1.
    return simdiff.Problem(
        lambda x, ops: (x[0] ** 2 - 1.0) ** 2 + x[1] ** 2,
        x0=np.zeros(2),
        meta={
            "minima": [(-1.0004, 0.0002, 0.0), (0.9996, -0.0001, 0.0)],
            "saddles": [(0.0003, 0.0, 1.0)],
            "atol_position": 1e-3,
            "atol_energy": 1e-2,
        },
    )


def test_catalogue_minimum_is_reproduced() -> None:
    rows = reproduce(problems.get("rosenbrock4"))
    assert [r["verdict"] for r in rows] == ["pass"]


def test_minima_and_saddles_are_refined_and_classified() -> None:
    rows = reproduce(_muller_brown_like())
    assert [r["key"] for r in rows] == ["minima[0]", "minima[1]", "saddles[0]"]
    assert [r["verdict"] for r in rows] == ["pass", "pass", "pass"]


def test_wrong_literature_values_fail() -> None:
    p = _muller_brown_like()
    p.meta["minima"] = [(-1.0, 0.0, 0.5)]  # wrong energy
    p.meta["saddles"] = [(0.9999, 0.0, 0.0)]  # a minimum quoted as a saddle
    assert [r["verdict"] for r in reproduce(p)] == ["fail", "fail"]
    q = simdiff.Problem(
        lambda x, ops: ops.sum((x - 1.0) ** 2),
        x0=np.zeros(2),
        meta={"minimum": np.array([1.0, 1.01]), "minimum_energy": -1.0},
    )
    rows = reproduce(q)
    assert [r["verdict"] for r in rows] == ["fail", "n/a"]
    assert "no generic rule" in rows[1]["note"]
