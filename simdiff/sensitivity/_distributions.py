"""Sampling distributions of uncertain parameters, and quasi-random samples from them.

A distribution maps uniform numbers ``u`` in (0, 1) to parameter values by its
inverse CDF (``ppf``), so Monte Carlo and Sobol sequences share one code path.
Each distribution also states the constant of the DGSM bound on total Sobol
indices (:func:`simdiff.sensitivity.dgsm`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special
import scipy.stats

from simdiff.errors import InputError, InputTypeError, UnsupportedError

__all__ = [
    "SAMPLING_METHODS",
    "Distribution",
    "LogUniform",
    "Normal",
    "Uniform",
    "as_distributions",
    "sample",
]

SAMPLING_METHODS = ("sobol", "random")
# Sobol points can come arbitrarily close to 0 and 1; an unbounded ppf maps those
# to +-inf.  Clipping to [_EPS, 1 - _EPS] bounds a normal sample at about 8.2 sigma.
_EPS = float(np.finfo(np.float64).eps)


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputTypeError(f"{what} must be a real number; got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise InputError(f"{what} must be finite; got {value}")
    return value


def _set_interval(dist: Any, kind: str, floor: float) -> None:
    """Validate and store ``floor < a < b`` (both finite) on a frozen dataclass."""
    a, b = _finite(dist.a, f"{kind} lower bound a"), _finite(dist.b, f"{kind} upper bound b")
    if not floor < a < b:
        need = "a < b" if floor == -math.inf else f"{floor:g} < a < b"
        raise InputError(f"{kind}(a, b) needs {need}; got a={a}, b={b}")
    object.__setattr__(dist, "a", a)
    object.__setattr__(dist, "b", b)


class Distribution:
    """Base class: a one-dimensional distribution with an inverse CDF."""

    kind: str = "base"

    def ppf(self, u: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")

    @property
    def variance(self) -> float:  # pragma: no cover - abstract
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")

    @property
    def poincare(self) -> float:  # pragma: no cover - abstract
        """The Poincare constant of the DGSM bound."""
        raise UnsupportedError(f"{type(self).__name__} does not implement this method")


@dataclass(frozen=True)
class Uniform(Distribution):
    """Uniform on ``[a, b]``; DGSM bound constant ``(b - a)**2 / pi**2``.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.sensitivity import Uniform
    >>> Uniform(0.0, 2.0).ppf(np.array([0.25]))
    array([0.5])
    """

    a: float
    b: float
    kind = "uniform"

    def __post_init__(self) -> None:
        _set_interval(self, "uniform", -math.inf)

    def ppf(self, u: np.ndarray) -> np.ndarray:
        return self.a + (self.b - self.a) * np.asarray(u, dtype=np.float64)

    @property
    def variance(self) -> float:
        return (self.b - self.a) ** 2 / 12.0

    @property
    def poincare(self) -> float:
        """Optimal Poincaré constant ``(b - a)^2 / pi^2`` (Sobol & Kucherenko 2009)."""
        return (self.b - self.a) ** 2 / math.pi**2


@dataclass(frozen=True)
class Normal(Distribution):
    """Normal with mean ``mu`` and standard deviation ``sigma``; bound constant ``sigma**2``.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.sensitivity import Normal
    >>> float(Normal(1.0, 2.0).ppf(np.array([0.5]))[0])
    1.0
    """

    mu: float
    sigma: float
    kind = "normal"

    def __post_init__(self) -> None:
        mu, sigma = _finite(self.mu, "normal mean mu"), _finite(self.sigma, "normal sigma")
        if not sigma > 0:
            raise InputError(f"normal(mu, sigma) needs sigma > 0; got sigma={sigma}")
        object.__setattr__(self, "mu", mu)
        object.__setattr__(self, "sigma", sigma)

    def ppf(self, u: np.ndarray) -> np.ndarray:
        u = np.clip(np.asarray(u, dtype=np.float64), _EPS, 1.0 - _EPS)
        return self.mu + self.sigma * scipy.special.ndtri(u)

    @property
    def variance(self) -> float:
        return self.sigma**2

    @property
    def poincare(self) -> float:
        """Poincaré constant ``sigma^2`` of the normal distribution."""
        return self.sigma**2


@dataclass(frozen=True)
class LogUniform(Distribution):
    """``log x`` uniform on ``[log a, log b]`` with ``0 < a < b``.

    The DGSM bound is taken in the log coordinate, where the distribution is
    uniform: ``S_T <= (log b - log a)^2 / pi^2 * E[(x df/dx)^2] / Var f``
    (Sobol indices are invariant under a monotone change of one variable).

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff.sensitivity import LogUniform
    >>> LogUniform(1.0, 100.0).ppf(np.array([0.5]))
    array([10.])
    """

    a: float
    b: float
    kind = "log-uniform"

    def __post_init__(self) -> None:
        _set_interval(self, "log-uniform", 0.0)

    def ppf(self, u: np.ndarray) -> np.ndarray:
        la, lb = math.log(self.a), math.log(self.b)
        return np.exp(la + (lb - la) * np.asarray(u, dtype=np.float64))

    @property
    def variance(self) -> float:
        la, lb = math.log(self.a), math.log(self.b)
        m1 = (self.b - self.a) / (lb - la)
        m2 = (self.b**2 - self.a**2) / (2.0 * (lb - la))
        return m2 - m1**2

    @property
    def poincare(self) -> float:
        """Constant of the bound in the log coordinate, ``(log b - log a)^2 / pi^2``."""
        return (math.log(self.b) - math.log(self.a)) ** 2 / math.pi**2


_KINDS = {"uniform": Uniform, "normal": Normal, "log-uniform": LogUniform, "loguniform": LogUniform}


def as_distributions(spec: Any, n: int) -> tuple[Distribution, ...]:
    """Validate ``spec`` as ``n`` distributions.

    ``spec`` is a sequence of length ``n`` whose items are
    :class:`Distribution` objects or tuples ``("uniform", a, b)``,
    ``("normal", mu, sigma)``, ``("log-uniform", a, b)``; a single item is
    used for every parameter.

    Examples
    --------
    >>> from simdiff.sensitivity import as_distributions
    >>> as_distributions(("uniform", -1.0, 1.0), 2)
    (Uniform(a=-1.0, b=1.0), Uniform(a=-1.0, b=1.0))
    """
    if isinstance(spec, (Distribution, tuple)) and (
        isinstance(spec, Distribution) or (spec and isinstance(spec[0], str))
    ):
        spec = [spec] * n
    if not isinstance(spec, Sequence) or isinstance(spec, str):
        raise InputTypeError(f"distributions must be a sequence of {n} distributions; got {spec!r}")
    if len(spec) != n:
        raise InputError(f"expected {n} distributions (one per parameter); got {len(spec)}")
    out = []
    for i, item in enumerate(spec):
        if isinstance(item, Distribution):
            out.append(item)
            continue
        if not isinstance(item, (tuple, list)) or len(item) != 3 or item[0] not in _KINDS:
            raise InputError(
                f"distribution {i} must be a Distribution or a tuple (kind, p1, p2) with kind in "
                f"{sorted(set(_KINDS) - {'loguniform'})}; got {item!r}"
            )
        try:
            out.append(_KINDS[item[0]](item[1], item[2]))
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"distribution {i}: {exc}") from None
    return tuple(out)


def sample(
    distributions: Sequence[Distribution],
    n_samples: int,
    *,
    method: str = "sobol",
    seed: int | None = 0,
) -> np.ndarray:
    """Draw ``n_samples`` points, shape ``(n_samples, d)``, from independent distributions.

    ``method="sobol"`` uses a scrambled Sobol sequence (``scipy.stats.qmc``):
    ``2**ceil(log2 n)`` points are drawn and the first ``n_samples`` kept, so
    a power of two keeps the sequence's balance.  ``"random"`` is plain Monte
    Carlo from ``numpy.random.default_rng(seed)``.

    Examples
    --------
    >>> from simdiff.sensitivity import Uniform, sample
    >>> sample([Uniform(0.0, 1.0)] * 3, 8).shape
    (8, 3)
    """
    if method not in SAMPLING_METHODS:
        raise InputError(f"unknown sampling method {method!r}; expected one of {SAMPLING_METHODS}")
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
        raise InputTypeError(f"n_samples must be an integer; got {n_samples!r}")
    if n_samples < 2:
        raise InputError(f"n_samples must be at least 2; got {n_samples}")
    d = len(distributions)
    if method == "sobol":
        engine = scipy.stats.qmc.Sobol(d, scramble=True, rng=seed)
        u = engine.random_base2(math.ceil(math.log2(n_samples)))[:n_samples]
    else:
        u = np.random.default_rng(seed).random((int(n_samples), d))
    return np.stack([dist.ppf(u[:, i]) for i, dist in enumerate(distributions)], axis=1)
