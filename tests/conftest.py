"""Test configuration: float64 everywhere, strict JAX dtype promotion, warnings are errors."""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import simdiff.backends.jax  # noqa: F401  (switches on x64)

jax.config.update("jax_numpy_dtype_promotion", "strict")
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

BACKENDS = ["jax", "torch"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each differentiating backend, as a parameter so failures name it."""
    return request.param


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)
