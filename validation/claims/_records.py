"""The claims of the JAX-vs-PyTorch article as data, and the one function that decides them.

Each claim is a :class:`ClaimRecord`: the article's question in one sentence,
its figure, the statistic simdiff measures, the band around the figure that
counts as "reproduced", the neutral point, and the rounds and processes the
measurement needs.  :func:`decide_claim` turns a record and its measurements
(one list of per-round values of the statistic per process) into a
:class:`Verdict`; no experiment decides its own claim.

The rule, for a statistic whose interval is ``[lo, hi]``:

- **not measured**: the measurement failed (the reason is kept) or gave no
  finite round;
- **not measurable**: the interval reaches a physically impossible value
  (``lo <= record.impossible_at``, e.g. a per-op cost <= 0);
- **unstable**: two processes' own intervals give different outcomes (both
  are named);
- **confirmed**: the interval lies inside the band, or beyond it on the
  article's side (``record.beyond``);
- **refuted**: the interval lies wholly on the other side of the neutral
  point, or wholly between the neutral point and the band (the direction
  holds, the article's size does not: said in the text);
- **never** (C3 only: ``record.never_outcome``): JAX's steady state is not
  faster in any round, so its first-call cost is never paid back;
- **depends**: the interval straddles the band's edge or the neutral point;
  the record's condition is named.

A *fact* record (C9) is decided by a check, not by an interval:
:func:`decide_fact`.

The interval pools the processes: :func:`bootstrap_processes` resamples the
processes, then the rounds within each, so it covers what differs between
runs, not only the rounds of one process.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ._verdict import CONFIDENCE, N_BOOT, Interval

__all__ = [
    "ARTICLE",
    "OUTCOMES",
    "RECORDS",
    "ClaimRecord",
    "Verdict",
    "bootstrap_processes",
    "decide_claim",
    "decide_fact",
    "interval_of",
    "says",
]

#: The article whose claims the records restate.
ARTICLE = (
    "the widely shared JAX-vs-PyTorch comparison article restated in the claim records "
    "of simdiff.validation.claims"
)

#: Every outcome a verdict can have.
OUTCOMES = (
    "confirmed",
    "refuted",
    "depends",
    "never",
    "not measurable",
    "unstable",
    "not measured",
)


@dataclass(frozen=True)
class ClaimRecord:
    """One claim of the article, declared: what is asked, measured and counted as reproduced.

    ``band`` is ``(lo, hi)`` of the statistic that reproduces the article
    (``hi`` may be ``inf``); ``beyond`` the side past the band that still
    agrees with the article (``"above"``, ``"below"`` or ``""``);
    ``neutral`` the value where neither framework is ahead; ``impossible_at``
    the value at or below which the statistic is physically impossible
    (``None``: none).  ``rounds`` and ``processes`` are (quick, full).
    """

    id: str
    question: str
    claim: str
    article: str
    figure: float
    statistic: str
    band: tuple[float, float]
    neutral: float
    beyond: str = "above"
    impossible_at: float | None = 0.0
    condition: str = ""
    rounds: tuple[int, int] = (6, 12)
    processes: tuple[int, int] = (2, 3)
    kind: str = "interval"  # or "fact"
    never_outcome: bool = False
    proxy: str = ""
    beside: tuple[str, ...] = ()
    plain: dict[str, str] = field(default_factory=dict)
    reads: str = ""
    #: ``reads`` for an infinite statistic (C3: JAX never catches up), where it needs other words
    reads_never: str = ""
    unit: str = "x"

    def n_rounds(self, quick: bool) -> int:
        return self.rounds[0] if quick else self.rounds[1]

    def n_processes(self, quick: bool) -> int:
        return self.processes[0] if quick else self.processes[1]

    def band_text(self) -> str:
        lo, hi = self.band
        if self.kind == "fact":
            return "a passing check refutes; a failing check or an unsupported op confirms"
        if math.isinf(hi):
            return f">= {lo:g}"
        return f"{lo:g} - {hi:g}" + (" (and beyond)" if self.beyond == "above" else "")


@dataclass(frozen=True)
class Verdict:
    """A claim's outcome (one of :data:`OUTCOMES`), its sentence, and the intervals behind it."""

    outcome: str
    text: str
    interval: Interval
    processes: tuple[Interval, ...] = ()
    beside: dict[str, Interval] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.outcome}: {self.text}" if self.text else self.outcome


def _median(v: np.ndarray) -> float:
    return float(np.median(v)) if v.size else math.nan


def interval_of(values: Sequence[float], seed: int = 0) -> Interval:
    """The median of one process's per-round values with its bootstrap interval over rounds.

    Examples
    --------
    >>> from validation.claims._records import interval_of
    >>> iv = interval_of([2.0, 2.0, 2.0])
    >>> (iv.ratio, iv.lo, iv.hi, iv.rounds)
    (2.0, 2.0, 2.0, 3)
    """
    return bootstrap_processes([values], seed=seed)


def _resampled_medians(
    groups: list[np.ndarray], n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """``n_boot`` medians of two-level resamples of ``groups``, drawn all at once.

    Resample ``b`` picks ``k`` groups with replacement and, from each picked
    group of ``s`` rounds, ``s`` rounds with replacement.  The draws fill a
    ``(n_boot, k, max s)`` block; the slots past a picked group's size are
    NaN, and each row's median is ``numpy.nanmedian`` of its own rounds.
    """
    k = len(groups)
    sizes = np.array([g.size for g in groups])
    padded = np.full((k, int(sizes.max())), np.nan)
    for i, g in enumerate(groups):
        padded[i, : g.size] = g
    picked = rng.integers(0, k, size=(n_boot, k))
    size = sizes[picked]  # (n_boot, k)
    slot = np.arange(padded.shape[1])
    rows = rng.integers(0, size[..., None], size=(n_boot, k, padded.shape[1]))
    drawn = np.where(slot < size[..., None], padded[picked[..., None], rows], np.nan)
    return np.nanmedian(drawn.reshape(n_boot, -1), axis=1)


def bootstrap_processes(
    processes: Sequence[Sequence[float]],
    *,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """Median of per-round values pooled over processes, interval by a two-level bootstrap.

    Each resample draws processes with replacement, then rounds with
    replacement within each drawn process, and takes the median of what it
    drew; the interval is the percentile interval of those medians, so a
    process that sits apart from the others widens it.  ``inf`` is a value
    (a break-even that never comes); NaN rounds are dropped.

    Examples
    --------
    >>> from validation.claims._records import bootstrap_processes
    >>> one = bootstrap_processes([[1.0, 1.0, 1.0, 1.0]])
    >>> two = bootstrap_processes([[1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    >>> (one.lo, one.hi), (two.lo, two.hi)
    ((1.0, 1.0), (1.0, 2.0))
    """
    groups = [np.asarray(p, dtype=np.float64) for p in processes]
    groups = [g[~np.isnan(g)] for g in groups]
    groups = [g for g in groups if g.size]
    rounds = sum(g.size for g in groups)
    if not groups:
        return Interval(math.nan, math.nan, math.nan, 0)
    value = _median(np.concatenate(groups))
    boots = _resampled_medians(groups, n_boot, np.random.default_rng(seed))
    boots = boots[~np.isnan(boots)]
    if boots.size == 0 or math.isnan(value):
        return Interval(value, math.nan, math.nan, rounds)
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(boots, [tail, 100 - tail], method="nearest")
    return Interval(value, float(min(lo, value)), float(max(hi, value)), rounds)


def _g(v: float) -> str:
    return "inf" if math.isinf(v) else f"{v:.3g}"


def _ivs(iv: Interval) -> str:
    return f"{_g(iv.ratio)} [{_g(iv.lo)}, {_g(iv.hi)}]"


def _outcome(record: ClaimRecord, iv: Interval) -> tuple[str, str]:
    """The outcome of one interval against the record's band and neutral point."""
    lo, hi = iv.lo, iv.hi
    if math.isnan(lo) or math.isnan(hi):
        return "not measured", "no finite round"
    if record.impossible_at is not None and lo <= record.impossible_at:
        return (
            "not measurable",
            f"the interval {_ivs(iv)} reaches {_g(record.impossible_at)} or less, which "
            f"{record.statistic} cannot be",
        )
    if record.never_outcome and math.isinf(lo):
        return "never", "JAX's steady state is not faster, so its first call is never paid back"
    if record.never_outcome and math.isinf(hi):
        return "depends", (
            f"the interval {_ivs(iv)} reaches 'never' (JAX's steady state not faster in some "
            "resamples)"
        )
    b_lo, b_hi = record.band
    if b_lo <= lo and hi <= b_hi:
        return "confirmed", f"{_ivs(iv)} inside the band {record.band_text()}"
    if record.beyond == "above" and lo >= b_lo:
        return "confirmed", f"{_ivs(iv)} at or beyond the band {record.band_text()}"
    if record.beyond == "below" and hi <= b_hi:
        return "confirmed", f"{_ivs(iv)} at or beyond the band {record.band_text()}"
    up = b_lo >= record.neutral  # the article's band lies above the neutral point
    if (up and hi < record.neutral) or (not up and lo > record.neutral):
        return "refuted", f"{_ivs(iv)} on the other side of {_g(record.neutral)}"
    outside = hi < b_lo or lo > b_hi
    same_side = lo >= record.neutral if up else hi <= record.neutral
    if outside and same_side:
        return "refuted", (
            f"{_ivs(iv)} outside the band {record.band_text()}: the direction holds, the "
            "article's size does not"
        )
    why = f"the interval {_ivs(iv)} straddles the band {record.band_text()} or {_g(record.neutral)}"
    return "depends", why + (f"; {record.condition}" if record.condition else "")


def decide_claim(
    record: ClaimRecord,
    processes: Sequence[Sequence[float]],
    *,
    beside: dict[str, Sequence[Sequence[float]]] | None = None,
    failure: str = "",
) -> Verdict:
    """The verdict of an interval claim from its per-process, per-round values of the statistic.

    Parameters
    ----------
    record : ClaimRecord
    processes : list of lists of float
        ``processes[k][r]``: the statistic's value in round ``r`` of process ``k``.
    beside : dict, optional
        Further statistics reported with the verdict whatever it is (C1's
        torch.compile / JAX), in the same per-process form.
    failure : str
        Why the measurement failed ("" when it ran): the claim is then
        ``not measured`` with that reason.

    Examples
    --------
    >>> from validation.claims._records import RECORDS, decide_claim
    >>> decide_claim(RECORDS["C2"], [[3.0, 3.1, 2.9], [3.0, 2.8, 3.2]]).outcome
    'confirmed'
    >>> decide_claim(RECORDS["C2"], [[0.5, 0.6], [0.55, 0.5]]).outcome
    'refuted'
    >>> decide_claim(RECORDS["C2"], [], failure="boom").text
    'boom'
    """
    if record.kind == "fact":
        raise ValueError(f"claim {record.id} is a fact: decide it with decide_fact")
    extra = {k: bootstrap_processes(v) for k, v in (beside or {}).items()}
    if failure:
        return Verdict(
            "not measured", failure, Interval(math.nan, math.nan, math.nan, 0), (), extra
        )
    pooled = bootstrap_processes(processes)
    own = tuple(interval_of(p) for p in processes if len(p))
    outcome, text = _outcome(record, pooled)
    if outcome not in ("not measured", "not measurable") and len(own) > 1:
        each = [_outcome(record, iv)[0] for iv in own]
        if len(set(each)) > 1:
            outcome = "unstable"
            text = "processes disagree: " + "; ".join(
                f"process {i + 1} {o} ({_ivs(iv)})"
                for i, (o, iv) in enumerate(zip(each, own, strict=True))
            )
    if extra:
        text += "; " + "; ".join(f"{k} {_ivs(iv)}" for k, iv in extra.items())
    return Verdict(outcome, text, pooled, own, extra)


def decide_fact(
    record: ClaimRecord, checks: Iterable[tuple[str, str, str]], *, failure: str = ""
) -> Verdict:
    """A fact claim (C9) from check rows ``(derivative, verdict, message)`` of torch's results.

    Refuted: every derivative the record asks for (``record.beside``) passed
    on torch and none failed; confirmed: one was unsupported or failed;
    not measured: a derivative was not checked, or ``failure``.

    Examples
    --------
    >>> from validation.claims._records import RECORDS, decide_fact
    >>> rows = [(d, "pass", "") for d in ("hessian", "hvp", "derivative3")]
    >>> decide_fact(RECORDS["C9"], rows).outcome
    'refuted'
    >>> decide_fact(RECORDS["C9"], rows[:2] + [("derivative3", "fail", "")]).outcome
    'confirmed'
    """
    nan = Interval(math.nan, math.nan, math.nan, 0)
    if failure:
        return Verdict("not measured", failure, nan)
    wanted = record.beside
    rows = [r for r in checks if r[0].split(".")[0] in wanted]
    unsupported = sorted({d for d, v, m in rows if v in ("error", "n/a") and "Unsupported" in m})
    if unsupported:
        return Verdict("confirmed", f"torch.func cannot compute {', '.join(unsupported)}", nan)
    bad = sorted({d for d, v, _ in rows if v in ("fail", "error")})
    if bad:
        return Verdict("confirmed", f"torch.func's {', '.join(bad)} did not check", nan)
    passed = {d.split(".")[0] for d, v, _ in rows if v == "pass"}
    missing = [d for d in wanted if d not in passed]
    if missing:
        return Verdict(
            "not measured", f"torch results for {', '.join(missing)} were not checked", nan
        )
    return Verdict(
        "refuted",
        "torch.func computes " + ", ".join(wanted) + " natively, and they check",
        nan,
    )


#: Plain words for the outcomes a record gives no sentence of its own for.
UNDECIDED = {
    "depends": "undecided here (the interval straddles the article's band)",
    "unstable": "undecided: the processes disagree",
    "not measurable": "not measurable here (the interval reaches an impossible value)",
    "not measured": "not measured",
    "never": "JAX's compile time is never paid back",
}


def quantity(iv: Interval, unit: str) -> str:
    """``iv`` in words: ``2.1x (1.8-2.5x)``, ``157 calls (50-500)``, ``2.4 us (-7.3-3.9 us)``.

    Examples
    --------
    >>> from validation.claims._records import quantity
    >>> from validation.claims._verdict import Interval
    >>> quantity(Interval(2.1, 1.8, 2.5, 9), "x")
    '2.1x (1.8-2.5x)'
    >>> quantity(Interval(1080.0, 448.0, 1770.0, 9), "x")
    '1080x (448-1770x)'
    >>> quantity(Interval(157.0, 50.0, math.inf, 9), "calls")
    '157 calls (50-never)'
    """
    if math.isnan(iv.ratio):
        return "not measured"
    if unit == "s":
        return f"{iv.ratio * 1e6:.2g} us ({iv.lo * 1e6:.2g} to {iv.hi * 1e6:.2g} us)"
    if unit == "calls":

        def c(v: float) -> str:
            return "never" if math.isinf(v) else f"{v:.3g}"

        return f"{c(iv.ratio)} calls ({c(iv.lo)}-{c(iv.hi)})"

    def x(v: float) -> str:
        return "inf" if math.isinf(v) else (f"{v:.0f}" if abs(v) >= 100 else f"{v:.2g}")

    return f"{x(iv.ratio)}x ({x(iv.lo)}-{x(iv.hi)}x)"


def says(record: ClaimRecord, verdict: Verdict) -> str:
    """The verdict in plain words, with the measured number: what a reader needs first."""
    head = record.plain.get(verdict.outcome) or UNDECIDED.get(verdict.outcome, verdict.outcome)
    if verdict.outcome == "not measured":
        return f"{head}: {verdict.text}"
    if record.kind == "fact" or not record.reads:
        return head
    reads = record.reads
    if record.reads_never and math.isinf(verdict.interval.ratio):
        reads = record.reads_never
    return f"{head}: {reads.format(quantity(verdict.interval, record.unit))}"


RECORDS: dict[str, ClaimRecord] = {
    r.id: r
    for r in [
        ClaimRecord(
            "C1",
            question="Is JAX's batched 3rd derivative of sin(x^2) + exp(cos(x)) about 8x faster "
            "than PyTorch's?",
            claim="Batched 2nd/3rd derivatives of sin(x^2)+exp(cos(x)): JAX faster",
            article="JAX < 1 ms (batched 3rd derivative); PyTorch 8 ms",
            figure=8.0,
            statistic="steady time torch.func eager / JAX, batched 3rd derivative, 10,000 points",
            band=(4.0, math.inf),
            neutral=1.0,
            condition="on the machine's load and the batch size",
            beside=("torch.compile / JAX",),
            reads="torch.func eager takes {} JAX's time",
            plain={
                "confirmed": "JAX's batched 3rd derivative is at least 4x faster than torch.func's",
                "refuted": "JAX's batched 3rd derivative is not the article's 8x faster than "
                "torch.func's",
            },
        ),
        ClaimRecord(
            "C2",
            question="Does JAX's vmap run 64 simulator rollouts with gradients about 2.3x faster "
            "than torch.func.vmap?",
            claim="vmap batches per-environment loops; PyTorch needs manual batching",
            article="JAX 3200 FPS vs PyTorch 1400 FPS (2.3x) at batch 64",
            figure=3200 / 1400,
            statistic="throughput JAX vmap / torch.func.vmap, 64 RK4 rollouts with gradients",
            band=(1.5, 4.6),
            neutral=1.0,
            condition="on the rollout length",
            beside=("JAX broadcast / vmap time", "torch broadcast / vmap time"),
            reads="JAX's vmap runs {} as many rollouts per second as torch.func.vmap",
            plain={
                "confirmed": "JAX's vmap batches the rollouts faster than torch.func.vmap, as "
                "the article says",
                "refuted": "torch.func.vmap batches the rollouts as fast as JAX's vmap or faster",
            },
        ),
        ClaimRecord(
            "C3",
            question="Does JAX need about 157 calls before its slow first call is paid back "
            "against eager PyTorch?",
            claim="JIT: slow first call, fast later calls; matters when models are reset often",
            article="JAX ~800 ms first, ~10 ms after; torch ~15 ms: (800-15)/(15-10) = 157 calls",
            figure=157.0,
            statistic="calls until JAX's total time (first call + steady) drops below torch's, "
            "gradient of rosenbrock4",
            band=(50.0, 500.0),
            neutral=1.0,
            beyond="",
            impossible_at=None,
            never_outcome=True,
            condition="on how often the model is reset",
            beside=("Hessian calls", "HVP calls", "order-3 calls"),
            reads="JAX is ahead of eager torch after {} (gradient)",
            reads_never="JAX does not get ahead of eager torch: {} (gradient)",
            unit="calls",
            plain={
                "confirmed": "JAX's compile time is paid back after about as many calls as the "
                "article implies",
                "refuted": "JAX's compile time is paid back after a different number of calls "
                "than the article implies",
                "never": "JAX's later calls are not faster than PyTorch's, so its compile time "
                "is never paid back",
            },
        ),
        ClaimRecord(
            "C4",
            question="Over one stream of changing (sometimes repeating) sizes, is JAX slower "
            "than torch.compile(dynamic=True)?",
            claim="Changing input sizes force recompilation; JAX slower then",
            article="qualitative: JAX slower when sizes change",
            figure=1.5,
            statistic="total time over the stream, JAX jit / torch.compile(dynamic=True)",
            band=(1.5, math.inf),
            neutral=1.0,
            condition="on how often sizes repeat",
            beside=("JAX / eager torch",),
            rounds=(4, 8),
            processes=(2, 3),
            reads="JAX takes {} torch.compile(dynamic=True)'s time over the stream",
            plain={
                "confirmed": "JAX is slower than torch.compile(dynamic=True) when sizes change",
                "refuted": "JAX is not slower than torch.compile(dynamic=True) when sizes change",
            },
        ),
        ClaimRecord(
            "C5",
            question="Does torch.compile speed eager PyTorch derivatives up by 1.5-2x?",
            claim="torch.compile narrows the gap",
            article="1.5-2x (CNN/Transformer)",
            figure=1.75,
            statistic="steady time torch eager / torch.compile, batched 3rd derivative",
            band=(1.3, 3.0),
            neutral=1.0,
            condition="on the workload's size",
            reads="eager torch takes {} torch.compile's time",
            plain={
                "confirmed": "torch.compile speeds the derivative up by the article's 1.5-2x "
                "or more",
                "refuted": "torch.compile does not speed the derivative up",
            },
        ),
        ClaimRecord(
            "C6",
            question="Does eager PyTorch pay about 5-10 us per operation?",
            claim="PyTorch eager pays a per-op dispatch cost",
            article="5-10 us per op (GPU kernel launch)",
            figure=7.5e-6,
            statistic="seconds per op, eager torch (CPU proxy of a GPU figure)",
            band=(2.5e-6, 20e-6),
            neutral=0.0,
            beyond="",
            condition="CPU proxy; GPU launches not measured",
            proxy="CPU proxy of the article's GPU launch figure",
            beside=("JAX eager seconds per op",),
            reads="eager torch costs {} per op on CPU",
            unit="s",
            plain={
                "confirmed": "eager PyTorch pays about the article's per-op cost (CPU proxy)",
                "refuted": "eager PyTorch's per-op cost is not the article's 5-10 us (CPU proxy)",
            },
        ),
        ClaimRecord(
            "C7",
            question="Does JAX use about 18% less memory than PyTorch for a Hessian?",
            claim="Functional style lets XLA save memory",
            article="18% less memory (GPT-2 fine-tune): torch / JAX = 1/0.82 = 1.22",
            figure=1 / 0.82,
            statistic="peak RSS increase torch / JAX, Hessian, a fresh process per round",
            band=(1.1, 1.5),
            neutral=1.0,
            beyond="above",
            rounds=(7, 9),
            processes=(1, 1),
            condition="on the problem size",
            reads="torch needs {} JAX's memory for the Hessian",
            plain={
                "confirmed": "JAX needs less memory than PyTorch for the Hessian",
                "refuted": "JAX does not need less memory than PyTorch for the Hessian",
            },
        ),
        ClaimRecord(
            "C8",
            question="Does writing a simulator's loop as lax.scan cost about 20% more compile "
            "time than unrolling it?",
            claim="lax.scan instead of Python loops raises compile time",
            article="+20% compile time",
            figure=1.2,
            statistic="first-call (trace + compile) time scan / unrolled, JAX",
            band=(1.1, 1.4),
            neutral=1.0,
            rounds=(3, 7),
            processes=(2, 3),
            condition="on the loop length",
            reads="lax.scan compiles in {} the unrolled loop's time",
            plain={
                "confirmed": "lax.scan compiles more slowly than the unrolled loop",
                "refuted": "lax.scan compiles faster than the unrolled loop",
            },
        ),
        ClaimRecord(
            "C9",
            question="Does PyTorch lack native higher-order functional derivatives?",
            claim="PyTorch has no native higher-order functional derivatives",
            article="qualitative: 'needs hand-written loops'",
            figure=math.nan,
            statistic="simdiff.check of torch.func's Hessian, HVP and nested 3rd derivative",
            band=(math.nan, math.nan),
            neutral=math.nan,
            kind="fact",
            impossible_at=None,
            rounds=(1, 1),
            processes=(1, 1),
            beside=("hessian", "hvp", "derivative3"),
            plain={
                "confirmed": "PyTorch lacks a higher-order functional derivative here",
                "refuted": "PyTorch does have higher-order functional derivatives: "
                "torch.func.hessian, HVP and nested jvp check",
            },
        ),
    ]
}
