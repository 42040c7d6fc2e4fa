"""``Derivatives`` and ``cached_derivatives`` take their settings as one ``Config``."""

from __future__ import annotations

import numpy as np
import pytest

import simdiff
from simdiff.core.config import Config
from simdiff.core.derivatives import Derivatives, cached_derivatives
from simdiff.errors import OptionError


@pytest.fixture
def quad() -> simdiff.Problem:
    return simdiff.Problem(lambda x, ops: ops.sum(x**2), x0=np.array([1.0, 2.0]))


def test_the_keywords_become_one_config(quad) -> None:
    d = Derivatives(quad, "torch", compile="auto", check_finite=False)
    assert d.config == Config(backend="torch", dtype="float64", compile="auto",
                              check_finite=False)  # fmt: skip
    assert (d.compile, d.check_finite, d.probe) == ("auto", False, False)


def test_a_config_gives_the_settings_and_a_keyword_replaces_its_field(quad) -> None:
    config = Config(backend="torch", compile="auto", check_finite=False)
    d = Derivatives(quad, config=config)
    assert d.backend.name == "torch" and d.compile == "auto" and not d.check_finite
    assert Derivatives(quad, "jax", config=config.replace(compile=False)).backend.name == "jax"
    np.testing.assert_allclose(d.grad(), [2.0, 4.0])


def test_expect_calls_is_the_configs_expected_calls(quad) -> None:
    d = Derivatives(quad, "torch", compile="auto").expect_calls(7)
    assert d.config.expected_calls == 7
    assert d.expect_calls(None).config.expected_calls is None


def test_cached_derivatives_shares_one_object_per_config(quad) -> None:
    config = Config(backend="torch", compile="auto")
    d = cached_derivatives(quad, config=config)
    assert d is cached_derivatives(quad, "torch", compile="auto")
    assert d is cached_derivatives(quad, config=config.replace(expected_calls=12))
    assert d.config.expected_calls == 12
    assert cached_derivatives(quad, config=Config(backend="torch")) is not d


@pytest.mark.parametrize("value", [None, "yes"])
def test_compile_outside_the_accepted_values_is_refused_with_or_without_config(quad, value):
    with pytest.raises(OptionError, match="compile must be one of"):
        Derivatives(quad, "torch", compile=value)
    with pytest.raises(OptionError, match="compile must be one of"):
        cached_derivatives(quad, "torch", compile=value, config=Config())
