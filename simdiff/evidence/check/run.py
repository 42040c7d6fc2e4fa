"""``simdiff.check``: every derivative on every backend against independent references.

References, in decreasing independence from the code under test:

``scipy-fd``
    ``scipy.differentiate`` (Richardson-extrapolated finite differences with
    error estimates) of the problem evaluated in the numpy context, which shares
    no code path with the AD backends.  For second-order quantities of large
    problems (and for ``hvp`` and ``derivative``), finite differences of the
    backend's *AD gradient* (or of its order ``k-1`` directional derivative),
    which is itself checked first: ``scipy-fd(ad ...)``.
``exact``
    The problem's analytic references (``problem.exact``).
``cross:<backend>``
    The same derivative on the first backend.
``nested``
    Taylor mode against nested forward mode.

The comparison rule is :func:`simdiff.evidence.check.tolerance.compare_arrays`; the
finite-difference machinery is :mod:`simdiff.evidence.check.fd`; the plans (which
derivative against which reference) are :mod:`simdiff.evidence.check.plans`.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simdiff._log import get_logger
from simdiff.backends import AD_BACKENDS
from simdiff.core.derivatives import Derivatives
from simdiff.core.problem import Problem, validate_exact
from simdiff.errors import InputError, InputTypeError, ShapeError, SimdiffError
from simdiff.evidence.check.fd import FiniteDifferences, batched, default_fd_step, numpy_vectorized
from simdiff.evidence.check.plans import SCALAR_ONLY, Plan, plans
from simdiff.evidence.check.tolerance import (
    C_ERR,
    ERR_FRAC,
    FLOOR,
    RESOLVE,
    RTOL_CROSS,
    RTOL_EXACT,
    RTOL_FD,
    S_GAP,
    compare_arrays,
    strictly_within,
    tolerance,
)

__all__ = [
    "C_ERR",
    "DERIVATIVES",
    "ERR_FRAC",
    "FLOOR",
    "NOISE_POINTS",
    "NOISE_ULPS",
    "RESOLVE",
    "RTOL_CROSS",
    "RTOL_EXACT",
    "RTOL_FD",
    "S_GAP",
    "TIGHTEN",
    "CheckEntry",
    "CheckResult",
    "FiniteDifferences",
    "batched",
    "check",
    "default_fd_step",
    "numpy_vectorized",
    "rtols",
    "tolerance",
]

_log = get_logger(__name__)

#: Derivatives :func:`check` knows; ``derivative`` means nested directional
#: derivatives of the orders in ``orders`` (and Taylor mode where available).
DERIVATIVES = ("grad", "hessian", "hvp", "jvp", "vjp", "jacobian", "derivative")
#: Tolerances of the tight-tolerance variant (:meth:`simdiff.Problem.tightened`) on which
#: :func:`check` computes finite-difference references: the working ones divided by this.
TIGHTEN = 1e2
#: Points at which :func:`check` measures a derivative's rounding noise (see ``noise``).
NOISE_POINTS = 4
#: Each coordinate of a noise point is ``x_i`` moved by up to this many ulps.
NOISE_ULPS = 4
#: Entry verdicts.  Only "pass" counts as checked-and-right.
VERDICTS = ("pass", "fail", "error", "inconclusive", "n/a")


@dataclass
class CheckEntry:
    """One comparison: a derivative on a backend against a reference.

    ``verdict`` is ``"pass"``, ``"fail"``, ``"error"`` (the computation or the
    reference raised or was not finite), ``"inconclusive"`` (the reference
    cannot resolve some element: see :func:`~simdiff.evidence.check.tolerance.compare_arrays`)
    or ``"n/a"`` (not checked; ``message`` says why).  ``n_pass``, ``n_fail``
    and ``n_inconclusive`` count the elements of each kind; ``resolution`` is
    the largest ``tol_i / |ref_i|`` over the passed elements (a larger relative
    error in any of them fails) and ``gap`` the largest measured
    solver-tolerance gap (0 without a tight-tolerance variant); for a
    ``cross:<backend>`` entry, the largest measured rounding noise where the
    strict cross-backend tolerance was exceeded (see :func:`check`).
    """

    derivative: str
    backend: str
    reference: str
    max_abs_err: float = math.nan
    max_rel_err: float = math.nan
    err_estimate: float = math.nan
    tol: float = math.nan
    verdict: str = "n/a"
    message: str = ""
    unresolved: int = 0
    n_pass: int = 0
    n_fail: int = 0
    n_inconclusive: int = 0
    resolution: float = math.nan
    gap: float = math.nan


@dataclass
class CheckResult:
    """The outcome of :func:`check`: one :class:`CheckEntry` per comparison.

    ``verdict`` is ``"fail"`` when any entry failed or errored, else
    ``"inconclusive"`` when some entry was inconclusive, else ``"pass"`` when
    some entry passed, else ``"not checked"``.  A finite-difference entry
    that is inconclusive does not make the result inconclusive where the same
    derivative on the same backend passed against an exact reference (an
    independent reference decided it; the entry stays in the table).  ``n/a``
    entries never count as a pass; :meth:`not_checked` lists them and
    ``str(result)`` names them.
    """

    problem: str
    x: np.ndarray
    entries: list[CheckEntry] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """``"pass"``, ``"fail"``, ``"inconclusive"`` or ``"not checked"``."""
        exact = {(e.derivative, e.backend) for e in self.entries
                 if e.reference == "exact" and e.verdict == "pass"}  # fmt: skip
        seen = {
            e.verdict for e in self.entries
            if not (e.verdict == "inconclusive" and e.reference.startswith("scipy-fd")
                    and (e.derivative, e.backend) in exact)
        }  # fmt: skip
        if seen & {"fail", "error"}:
            return "fail"
        if "inconclusive" in seen:
            return "inconclusive"
        return "pass" if "pass" in seen else "not checked"

    @property
    def passed(self) -> bool:
        """True only when the verdict is ``"pass"``."""
        return self.verdict == "pass"

    @property
    def exit_code(self) -> int:
        """0 pass, 1 fail, 2 inconclusive or not checked (for command lines)."""
        return {"pass": 0, "fail": 1}.get(self.verdict, 2)

    def counts(self) -> dict[str, int]:
        """Elements passed, failed and inconclusive, summed over the entries, and the entries
        that raised or gave a non-finite result (``n_errors``: they have no elements)."""
        return {
            "n_pass": sum(e.n_pass for e in self.entries),
            "n_fail": sum(e.n_fail for e in self.entries),
            "n_inconclusive": sum(e.n_inconclusive for e in self.entries),
            "n_errors": sum(e.verdict == "error" for e in self.entries),
        }

    def failures(self) -> list[CheckEntry]:
        """The entries that failed or raised."""
        return [e for e in self.entries if e.verdict in ("fail", "error")]

    def not_checked(self) -> list[CheckEntry]:
        """The entries that were not checked (``n/a``) or could not be decided."""
        return [e for e in self.entries if e.verdict in ("n/a", "inconclusive")]

    def __str__(self) -> str:
        head = f"check {self.problem!r} (n={self.x.size}): {self.verdict.upper()}"
        missing = sorted(
            {f"{e.derivative}/{e.backend}" for e in self.entries if e.verdict == "n/a"}
        )
        if missing:
            head += f"; not checked: {', '.join(missing)}"
        k = self.counts()
        head += (
            f"; elements: {k['n_pass']} pass, {k['n_fail']} fail, "
            f"{k['n_inconclusive']} inconclusive"
        )
        if k["n_errors"]:
            head += f"; {k['n_errors']} entries raised or were not finite (see 'error' below)"
        rows = [
            ("derivative", "backend", "reference", "max abs", "max rel", "fd err", "gap", "tol",
             "resol", "p/f/i", "verdict")
        ]  # fmt: skip
        for e in self.entries:
            rows.append(
                (
                    e.derivative,
                    e.backend,
                    e.reference,
                    f"{e.max_abs_err:.2e}",
                    f"{e.max_rel_err:.2e}",
                    f"{e.err_estimate:.1e}",
                    f"{e.gap:.1e}",
                    f"{e.tol:.1e}",
                    f"{e.resolution:.1e}",
                    f"{e.n_pass}/{e.n_fail}/{e.n_inconclusive}",
                    e.verdict + (f" ({e.message})" if e.message else ""),
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(10)]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(r[:10], widths, strict=True)) + "  " + r[10]
            for r in rows
        ]
        return "\n".join([head, *lines])


# --------------------------------------------------------------------------- validation


def _validate(
    problem: Any, x: Any, derivatives: Sequence[str], backends: Sequence[str], orders: Sequence[int]
) -> tuple[np.ndarray, list[str]]:
    if not isinstance(problem, Problem):
        raise InputTypeError(f"check expects a simdiff.Problem; got {type(problem).__name__}")
    unknown = [d for d in derivatives if d not in DERIVATIVES]
    if unknown:
        raise InputError(f"unknown derivatives {unknown}; expected a subset of {list(DERIVATIVES)}")
    bad = [b for b in backends if b not in AD_BACKENDS]
    if bad or not backends:
        raise InputError(
            f"backends must be a non-empty subset of {list(AD_BACKENDS)}; got {backends}"
        )
    if any(not isinstance(k, int) or k < 1 for k in orders):
        raise InputError(f"orders must be positive integers; got {list(orders)}")
    validate_exact(problem.exact, where=f"check({problem.name!r})")
    if x is None:
        at = problem.check_options.x
        x = problem.x0 if at is None else np.asarray(at, dtype=np.float64)
    else:
        x = np.asarray(x, dtype=np.float64)
    if x.shape != (problem.n,):
        raise ShapeError(f"check: x must have shape ({problem.n},); got {x.shape}")
    return x, [b for b in backends if problem.supports(b)]


def rtols(
    problem: Problem,
    rtol_fd: float | None = None,
    rtol_exact: float | None = None,
    rtol_cross: float | None = None,
) -> dict[str, float]:
    """The relative tolerance of each kind of reference for ``problem``.

    ``fd``: ``max(RTOL_FD, fd_rtol, 100 * solver_rtol)``; ``exact``:
    ``max(RTOL_EXACT, reference_rtol, 100 * solver_rtol)`` (fields of
    ``problem.check_options``); ``cross`` (the other backend, and Taylor mode
    against nested): ``RTOL_CROSS``, whatever the problem declares.  An
    explicit argument replaces the default before the problem's floors apply.

    :func:`check` calls it with the tight-tolerance variant where the problem
    has one (:meth:`~simdiff.Problem.tightened`), whose ``solver_rtol`` is
    :data:`TIGHTEN` times smaller: the working solver's error then enters the
    tolerance as the measured gap, not as ``100 * solver_rtol``.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> from simdiff.evidence.check.run import rtols
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(x), x0=np.ones(2),
    ...                     check_options=simdiff.CheckOptions(solver_rtol=1e-4))
    >>> {k: f"{v:.1e}" for k, v in rtols(p).items()}
    {'fd': '1.0e-02', 'exact': '1.0e-02', 'cross': '2.2e-12'}
    """
    opts = problem.check_options
    solver = 100.0 * opts.solver_rtol
    return {
        "fd": max(RTOL_FD if rtol_fd is None else rtol_fd, opts.fd_rtol, solver),
        "exact": max(RTOL_EXACT if rtol_exact is None else rtol_exact, opts.reference_rtol, solver),
        "cross": RTOL_CROSS if rtol_cross is None else rtol_cross,
    }


# --------------------------------------------------------------------------- check


def check(
    problem: Problem,
    x: Any = None,
    *,
    derivatives: Sequence[str] = DERIVATIVES,
    backends: Sequence[str] = ("jax", "torch"),
    orders: Sequence[int] = (2, 3),
    fd_full_max_n: int = 8,
    fd_max_n: int = 64,
    n_directions: int = 3,
    c: float = C_ERR,
    rtol_fd: float | None = None,
    rtol_exact: float | None = None,
    rtol_cross: float | None = None,
    seed: int = 0,
    fd_step: float | None = None,
    tighten: float | None = TIGHTEN,
    resolve: float = RESOLVE,
    s: float = S_GAP,
) -> CheckResult:
    """Check every derivative on every backend against SciPy, exact references and each other.

    Parameters
    ----------
    problem : Problem
        Its :class:`~simdiff.CheckOptions` declare a solver's or a
        reference's accuracy and the finite-difference step.
    x : array_like, shape (n,), optional
        The point (default ``problem.check_options.x`` where the problem
        declares one, else ``problem.x0``).
    derivatives : sequence of str
        Subset of :data:`DERIVATIVES`.  Scalar-only derivatives (grad, hessian,
        hvp) are marked ``n/a`` on vector-valued problems, with the reason.
    backends : sequence of {"jax", "torch"}
        Backends the problem does not run on are reported ``n/a``.
    orders : sequence of int
        Orders of the directional ``derivative`` checked (nested and Taylor).
    fd_full_max_n : int
        Largest ``n`` for which the Hessian reference is SciPy's full
        finite-difference Hessian of the numpy function; above it the
        reference is the finite-difference Jacobian of the AD gradient.
    fd_max_n : int
        Largest ``n`` for full arrays; above it, ``n_directions`` random
        directions ``w`` are checked instead, computed without forming the
        full array (``grad . w``, the HVP ``H w``, the JVP ``J w``, ``vjp . w``)
        against directional finite differences.
    c : float
        Safety factor on SciPy's error estimate.
    rtol_fd, rtol_exact, rtol_cross : float, optional
        Relative tolerances against finite differences (default ``sqrt(eps)``),
        exact references (``1e4 * eps``) and across backends / nested-vs-Taylor
        (``1e4 * eps``); see :func:`rtols` for how a problem's options raise
        the first two (never the third).
    seed : int
        Seed of the random directions and cotangents.
    fd_step : float, optional
        SciPy's initial finite-difference step (default
        :func:`~simdiff.evidence.check.fd.default_fd_step`; along a direction ``v``
        it is divided by ``max |v|``).
    tighten : float or None
        Factor by which the tight-tolerance variant divides an adaptive
        solver's ``rtol`` and ``atol`` (:meth:`~simdiff.Problem.tightened`;
        default 100).  The finite-difference and exact comparisons then use
        that variant's references, and each element's tolerance includes
        ``s`` times the measured gap between the working and the tight
        problem's derivative.  ``None`` compares with the working problem
        itself at ``100 * solver_rtol``.
    resolve : float
        An element passes only when its tolerance is below ``resolve * |ref_i|``
        (default a third: a 100% error in any passed element fails); an
        element that is not resolved is inconclusive.
    s : float
        Safety factor on the measured solver-tolerance gap (default 2).

    Returns
    -------
    CheckResult
        ``result.verdict`` is ``"pass"``, ``"fail"``, ``"inconclusive"`` or
        ``"not checked"``; ``result.passed`` is true for ``"pass"`` only;
        ``str(result)`` is a table that names what was not checked.

    Notes
    -----
    Each element ``i`` is compared with its own reference:

    .. math:: |ad_i - ref_i| \\le c \\, err_i + s \\, gap_i + rtol \\, (|ref_i| + 10^{-2} S)

    where ``err_i`` is SciPy's error estimate (0 for exact and cross
    references), ``gap_i`` the measured solver-tolerance gap ``|ad_i -
    ad'_i|`` against the tight-tolerance variant (0 without one, and for
    cross references) and ``S`` the larger of the array's largest converged
    reference and the function's scale ``max|f(x)| max|v|^k / max(1,
    max|x|)^k`` for an order-``k`` derivative (:func:`~simdiff.evidence.check.tolerance.tolerance`
    justifies the floor).  An element SciPy did not converge on, or whose
    ``c * err_i`` exceeds ``1e-3 (|ref_i| + 10^{-2} S)``, makes the entry
    ``"inconclusive"``: the estimate would otherwise widen its own tolerance.
    An element whose tolerance is not below ``resolve * |ref_i|`` (a
    structural zero, an element at the rounding floor or within the solver
    gap) is counted inconclusive and never as a pass; an entry none of whose
    elements passed is ``"inconclusive"``.
    Across backends the rule is the same with ``err_i = 0`` and ``rtol =
    1e4 eps``; where an element exceeds that, ``gap_i`` becomes the
    derivative's measured rounding noise: the largest change of the first
    backend's result at ``NOISE_POINTS`` points that move each ``x_j`` by up
    to ``NOISE_ULPS`` ulps.  Two backends compute the same mathematics in a
    different order of operations, which perturbs every intermediate by
    rounding; a derivative that moves by more than ``1e4 eps`` under
    rounding-level changes of its input (an adaptive solver's step decisions,
    ill-conditioned linear solves along a stiff trajectory) cannot be asked
    to agree more closely across backends.  The noise is measured only where
    the strict tolerance is exceeded (it can only widen it), and shown in
    the entry's ``gap``.
    Detection power (tested with planted errors on both backends): a relative
    error of ``1e-8`` in any element ``>= 1e-3`` of the array's largest is
    caught against exact references, ``1e-5`` against converged finite
    differences; a near-zero gradient wrong by 100% is caught.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x) * x[0]), x0=np.array([0.3, 0.5]))
    >>> res = simdiff.check(p, derivatives=("grad", "hessian"), backends=("jax",))
    >>> res.verdict
    'pass'
    """
    x, runnable = _validate(problem, x, derivatives, backends, orders)
    tight = problem.tightened(tighten) if tighten else None
    ref_problem = problem if tight is None else tight
    tols = rtols(ref_problem, rtol_fd, rtol_exact, rtol_cross)
    result = CheckResult(problem.name, x)
    rng = np.random.default_rng(seed)
    n = problem.n
    out_shape = problem.output_shape
    v = rng.standard_normal(n)
    u = rng.standard_normal(out_shape)
    dirs = rng.standard_normal((n_directions, n))
    ds = {b: Derivatives(problem, b, structured=False) for b in runnable}
    ds_ref = ds if tight is None else {b: Derivatives(tight, b, structured=False) for b in runnable}
    fd = FiniteDifferences(default_fd_step(problem, x) if fd_step is None else fd_step)

    def plain(p: Problem, d: dict[str, Derivatives]) -> Callable[[np.ndarray], np.ndarray]:
        if p.supports("numpy") or not runnable:
            return numpy_vectorized(p)
        return batched(d[runnable[0]].value, n)  # framework-only (Problem.from_jax/from_torch)

    f_np = plain(problem, ds)
    f_ref = f_np if tight is None else plain(tight, ds_ref)
    try:
        fmax = float(np.max(np.abs(f_np(x[:, None])), initial=0.0))
    except Exception:  # the value is checked by the entries; no function scale then
        fmax = 0.0
    xscale = max(1.0, float(np.max(np.abs(x))))
    first: dict[str, Any] = {}  # derivative label -> first backend's value (cross reference)

    for b in backends:
        if b not in runnable:
            why = f"{problem.name} does not run on {b} (backends={list(problem.backends)})"
            result.entries.append(CheckEntry("*", b, "-", message=why))

    noise_cache: dict[str, np.ndarray] = {}

    def noise(kind: str, label: str) -> np.ndarray:
        """The rounding noise of the first backend's ``label`` (see Notes)."""
        if label not in noise_cache:
            base = np.asarray(first[label], dtype=np.float64)
            spread = np.zeros_like(base)
            rng_noise = np.random.default_rng([seed, NOISE_POINTS, NOISE_ULPS])
            rest = (orders, fd_full_max_n, fd_max_n, fd)
            for _ in range(NOISE_POINTS):
                ulps = rng_noise.integers(-NOISE_ULPS, NOISE_ULPS + 1, size=n)
                xp = x + ulps * np.spacing(np.abs(x))
                for p in plans(kind, ds[runnable[0]], problem, xp, v, u, dirs, f_np, *rest):
                    if p.label == label:
                        got_p = np.asarray(p.got(), dtype=np.float64)
                        spread = np.maximum(spread, np.abs(got_p - base))
            noise_cache[label] = spread
        return noise_cache[label]

    def add(label: str, b: str, plan_scale: float, ref: str, got, refv, rtol: float,
            gap: Callable[[], Any] | None = None,
            rounding: Callable[[], Any] | None = None) -> None:  # fmt: skip
        entry = CheckEntry(label, b, ref)
        result.entries.append(entry)
        started = time.perf_counter()
        try:
            _compare_entry(entry, got, refv, rtol, plan_scale, gap, rounding)
        finally:
            _log.info(
                "check %s: %s on %s against %s: %s (%.1f s; %d entries so far)",
                problem.name, label, b, ref, entry.verdict, time.perf_counter() - started,
                len(result.entries),
            )  # fmt: skip

    def _compare_entry(entry, got, refv, rtol, plan_scale, gap, rounding) -> None:
        try:
            r = refv()
            values, err, conv = r if isinstance(r, tuple) else (r, None, None)
            gap_v = None if gap is None else gap()
            if rounding is not None and not strictly_within(  # cross: noise where 1e4 eps fails
                got(), values, rtol=rtol, fscale=plan_scale
            ):
                gap_v = rounding()
            cmp = compare_arrays(
                got(), values, rtol=rtol, err=err, converged=conv, fscale=plan_scale, c=c,
                gap=gap_v, s=s, resolve=resolve,
            )  # fmt: skip
        except (NotImplementedError, ImportError) as exc:  # not available (e.g. no taylor)
            entry.verdict, entry.message = "n/a", f"{type(exc).__name__}: {exc}"[:200]
            return
        except (SimdiffError, ArithmeticError, ValueError, RuntimeError, TypeError) as exc:
            entry.verdict, entry.message = "error", f"{type(exc).__name__}: {exc}"[:300]
            return
        entry.verdict, entry.message = cmp.verdict, cmp.message
        entry.max_abs_err, entry.max_rel_err = cmp.max_abs_err, cmp.max_rel_err
        entry.err_estimate, entry.tol, entry.unresolved = cmp.err_estimate, cmp.tol, cmp.unresolved
        for name in ("n_pass", "n_fail", "n_inconclusive", "resolution", "gap"):
            setattr(entry, name, getattr(cmp, name))

    for kind in derivatives:
        if kind in SCALAR_ONLY and out_shape != ():
            why = f"scalar-only derivative; problem output shape {out_shape}"
            result.entries.append(CheckEntry(kind, "*", "-", message=why))
            continue
        for b in runnable:
            args = (x, v, u, dirs)
            rest = (orders, fd_full_max_n, fd_max_n, fd)
            working = plans(kind, ds[b], problem, *args, f_np, *rest)
            nz = functools.partial(noise, kind)
            if tight is None:
                for plan in working:
                    add_plan(plan, b, add, tols, first, runnable, fmax, xscale, noise=nz)
                continue
            refs = plans(kind, ds_ref[b], tight, *args, f_ref, *rest)
            for plan, ref_plan in zip(working, refs, strict=True):
                add_plan(plan, b, add, tols, first, runnable, fmax, xscale, ref_plan, nz)
    return result


def add_plan(
    plan: Plan,
    b: str,
    add: Callable[..., None],
    tols: dict[str, float],
    first: dict[str, Any],
    runnable: list[str],
    fmax: float,
    xscale: float,
    ref_plan: Plan | None = None,
    noise: Callable[[str], np.ndarray] | None = None,
) -> None:
    """Run one plan's comparisons on backend ``b`` (and the cross-backend one).

    With ``ref_plan`` (the same plan on the tight-tolerance variant), the
    finite-difference and exact references are ``ref_plan``'s and each
    comparison carries the gap ``|plan.got - ref_plan.got|``; cross
    references (Taylor against nested) stay the working problem's own.
    """
    cache: dict[str, Any] = {}

    def value() -> np.ndarray:
        if "v" not in cache:
            cache["v"] = np.asarray(plan.got(), dtype=np.float64)
        return cache["v"]

    def gap() -> np.ndarray:
        assert ref_plan is not None
        if "t" not in cache:
            try:
                cache["t"] = np.asarray(ref_plan.got(), dtype=np.float64)
            except SimdiffError as exc:
                raise type(exc)(f"tight-tolerance variant: {exc}") from exc
        return np.abs(value() - cache["t"])

    scale = fmax * plan.weight / xscale**plan.order
    for i, ref in enumerate(plan.refs):
        if ref_plan is None or ref.kind == "cross":
            add(plan.label, b, scale, ref.name, value, ref.value, tols[ref.kind])
        else:
            tref = ref_plan.refs[i]
            add(plan.label, b, scale, tref.name, value, tref.value, tols[tref.kind], gap)
    if plan.label in first and b != runnable[0]:
        rounding = None if noise is None else (lambda: noise(plan.label))
        add(plan.label, b, scale, f"cross:{runnable[0]}", value, (lambda: first[plan.label]),
            tols["cross"], rounding=rounding)  # fmt: skip
    elif b == runnable[0]:
        try:
            first[plan.label] = value()
        except Exception:  # reported by the entries above
            pass
