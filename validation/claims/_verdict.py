"""Verdict rules of the claims: pure functions of measured samples (no framework imported).

A claim's verdict is decided by an interval, never by a point estimate:

1. every side of the comparison is timed in the same interleaved rounds
   (:func:`validation.claims._measure.interleaved`), giving one sample per
   round per side;
2. :func:`bootstrap_ratio` resamples the rounds (paired: a round's samples
   stay together, so a slow phase of the machine hits both sides of the ratio
   alike) and returns the median ratio with a percentile interval;
3. :func:`decide` compares the interval with the claim's threshold:
   ``confirmed`` when the whole interval is on the claim's side,
   ``refuted`` when the whole interval is on the other side, ``depends``
   when it straddles the threshold.

A claim such as "JAX is faster by at least the article's margin" then
reads ``ratio = t_torch / t_jax``, ``threshold = margin``: the verdict could
come out either way, and does come out ``depends`` when the machine's noise
does not allow a decision.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "CONFIDENCE",
    "Interval",
    "bootstrap",
    "bootstrap_ratio",
    "break_even_calls",
    "decide",
    "threads_used",
]

#: Two-sided coverage of the bootstrap interval.
CONFIDENCE = 0.95
#: Bootstrap resamples (the interval's percentiles are stable to ~1% at this count).
N_BOOT = 2000


@dataclass(frozen=True)
class Interval:
    """A ratio with its bootstrap interval: ``lo <= ratio <= hi`` (``ratio`` the median)."""

    ratio: float
    lo: float
    hi: float
    rounds: int

    def record(self) -> dict[str, float]:
        """Plain-dict form (for the store)."""
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.ratio:.3g} [{self.lo:.3g}, {self.hi:.3g}]"


def bootstrap(
    stat: Callable[..., float],
    *samples: Sequence[float],
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    batched: Callable[..., np.ndarray] | None = None,
) -> Interval:
    """``stat(*samples)`` with a bootstrap percentile interval over paired rounds.

    Every array in ``samples`` has one sample per round; rounds are resampled
    together (a slow phase of the machine hits every side of the statistic
    alike), rounds with a non-finite sample are dropped.  NaNs when no round
    is left.  ``batched``, where given, computes ``stat`` of every resample at
    once: it takes arrays of shape ``(n_boot, rounds)``, one resample per row,
    and returns the ``n_boot`` values (the same resamples, the same values).

    Examples
    --------
    >>> import numpy as np
    >>> from validation.claims._verdict import bootstrap
    >>> iv = bootstrap(lambda a, b: np.median(b - a), [1.0, 1.1, 0.9], [3.0, 3.1, 2.9])
    >>> iv.ratio, iv.lo, iv.hi
    (2.0, 2.0, 2.0)
    """
    arrays = [np.asarray(a, dtype=np.float64) for a in samples]
    if len({a.shape for a in arrays}) != 1:
        raise ValueError(f"paired samples need equal lengths; got {[a.shape for a in arrays]}")
    keep = np.all([np.isfinite(a) for a in arrays], axis=0)
    arrays = [a[keep] for a in arrays]
    rounds = int(arrays[0].size)
    if rounds == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    value = float(stat(*arrays))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, rounds, size=(n_boot, rounds))
    if batched is not None:
        boots = np.asarray(batched(*(a[idx] for a in arrays)), dtype=np.float64)
    else:
        boots = np.array([stat(*(a[i] for a in arrays)) for i in idx], dtype=np.float64)
    boots = boots[~np.isnan(boots)]  # inf stays: "never" is a value (break-even calls)
    if boots.size == 0 or math.isnan(value):
        return Interval(value, math.nan, math.nan, rounds)
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(boots, [tail, 100 - tail], method="nearest")
    return Interval(value, float(min(lo, value)), float(max(hi, value)), rounds)


def _median_ratios(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``median(a) / median(b)`` of each row of ``a`` and ``b`` (NaN where ``median(b) <= 0``)."""
    ma, mb = np.median(a, axis=-1), np.median(b, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mb > 0, ma / np.where(mb > 0, mb, 1.0), math.nan)


def _median_ratio(a: np.ndarray, b: np.ndarray) -> float:
    """:func:`_median_ratios` of one pair of samples."""
    return float(_median_ratios(a, b))


def bootstrap_ratio(num: Sequence[float], den: Sequence[float], **kwargs: Any) -> Interval:
    """``median(num) / median(den)`` with its interval (:func:`bootstrap`, paired rounds).

    Examples
    --------
    >>> from validation.claims._verdict import bootstrap_ratio
    >>> iv = bootstrap_ratio([2.0, 2.2, 1.8, 2.0], [1.0, 1.1, 0.9, 1.0])
    >>> iv.ratio, iv.lo > 1.5, iv.hi < 2.5
    (2.0, True, True)
    """
    return bootstrap(_median_ratio, num, den, batched=_median_ratios, **kwargs)


def decide(
    iv: Interval, threshold: float, *, claim_side: str = "above", condition: str = ""
) -> str:
    """``confirmed`` / ``refuted`` / ``depends: ...`` from an interval and a threshold.

    Parameters
    ----------
    iv : Interval
    threshold : float
        The article's figure turned into a ratio (e.g. 1.5 for "1.5x faster").
    claim_side : {"above", "below"}
        Where the ratio lies if the claim holds.
    condition : str
        Appended to ``depends`` (what the answer depends on).

    Examples
    --------
    >>> from validation.claims._verdict import Interval, decide
    >>> decide(Interval(3.0, 2.0, 4.0, 9), 1.5)
    'confirmed'
    >>> decide(Interval(1.0, 0.8, 1.2, 9), 1.5)
    'refuted'
    >>> decide(Interval(1.6, 1.2, 2.0, 9), 1.5)
    'depends: the interval [1.2, 2] straddles the threshold 1.5'
    """
    if claim_side not in ("above", "below"):
        raise ValueError(f"claim_side must be 'above' or 'below'; got {claim_side!r}")
    if math.isnan(iv.lo) or math.isnan(iv.hi):
        return "depends: not measurable here"
    above, below = iv.lo > threshold, iv.hi < threshold
    if above or below:
        holds = above if claim_side == "above" else below
        return "confirmed" if holds else "refuted"
    why = f"the interval [{iv.lo:.3g}, {iv.hi:.3g}] straddles the threshold {threshold:g}"
    return f"depends: {why}" + (f"; {condition}" if condition else "")


def break_even_calls(first_a: float, steady_a: float, first_b: float, steady_b: float) -> float:
    """Calls after which ``a``'s total time (first call + steady ones) drops below ``b``'s.

    ``0`` when ``a``'s first call is not slower; ``inf`` when ``a`` is never
    ahead (its first call is slower and its steady state is not faster).

    Examples
    --------
    >>> from validation.claims._verdict import break_even_calls
    >>> break_even_calls(1.0, 0.001, 0.01, 0.002)  # a compiles for 1 s, then saves 1 ms a call
    990.0
    >>> break_even_calls(1.0, 0.003, 0.01, 0.002)
    inf
    """
    if first_a <= first_b:
        return 0.0
    gain = steady_b - steady_a
    if not gain > 0:
        return math.inf
    return float(math.ceil(round((first_a - first_b) / gain, 9)))


def threads_used(cpu_s: float, wall_s: float) -> float:
    """Threads busy on average during a timed call: process CPU time over wall time.

    Examples
    --------
    >>> from validation.claims._verdict import threads_used
    >>> threads_used(1.8, 1.0)
    1.8
    """
    return cpu_s / wall_s if wall_s > 0 else math.nan
