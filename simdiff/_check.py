"""``simdiff.check``: every derivative on every backend against independent references.

References, in decreasing independence from the code under test:

``scipy-fd``
    ``scipy.differentiate`` (Richardson-extrapolated finite differences with
    error estimates) of the problem evaluated in the numpy context, which shares
    no code path with the AD backends.  For second-order quantities of large
    problems (and for ``hvp`` and ``derivative``), finite differences of the
    backend's *AD gradient* (or of its order ``k-1`` directional derivative),
    which is itself checked first: ``scipy-fd(ad)``.
``exact``
    The problem's analytic references (``problem.exact``).
``cross:<backend>``
    The same derivative on the first backend.
``taylor``
    Nested forward mode against Taylor mode, where the taylor context exists.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.differentiate as sd

from ._api import Derivatives
from ._problem import Problem
from .backends import get_backend
from .errors import InputError, InputTypeError, ShapeError, SimdiffError

__all__ = ["DERIVATIVES", "CheckEntry", "CheckResult", "check", "tolerance"]

#: Derivatives :func:`check` knows; ``derivative`` means nested directional
#: derivatives of the orders in ``orders`` (and Taylor mode where available).
DERIVATIVES = ("grad", "hessian", "hvp", "jvp", "vjp", "jacobian", "derivative")
_SCALAR_ONLY = {"grad", "hessian", "hvp"}
EPS = float(np.finfo(np.float64).eps)
#: Default constants of :func:`tolerance`.
C_ERR = 10.0
RTOL_FD = math.sqrt(EPS)  # ~1.5e-8: the floor of a finite-difference comparison
RTOL_EXACT = 1e4 * EPS  # ~2.2e-12 for exact and cross-backend comparisons


def tolerance(err_estimate: Any, scale: float, *, c: float = C_ERR, rtol: float = RTOL_FD) -> Any:
    """Elementwise tolerance ``tol = c * err_estimate + rtol * scale``.

    Parameters
    ----------
    err_estimate : array_like
        The finite-difference error estimate of each element (``0`` for exact
        and cross-backend references).
    scale : float
        ``max(1, max |reference|)``: the magnitude the relative floor applies to.
    c : float
        Safety factor on the Richardson error estimate (default 10): the
        estimate is the difference of the last two extrapolations and can
        underestimate the true error by a small factor.
    rtol : float
        Relative floor: ``sqrt(eps)`` (about 1.5e-8) for finite differences,
        ``1e4 * eps`` (about 2.2e-12) for exact and cross-backend references.

    Examples
    --------
    >>> import numpy as np
    >>> from simdiff._check import tolerance
    >>> round(float(tolerance(np.array(1e-10), 1.0, rtol=1e-8)), 12)
    1.1e-08
    """
    return c * np.abs(np.asarray(err_estimate, dtype=np.float64)) + rtol * float(scale)


@dataclass
class CheckEntry:
    """One comparison: a derivative on a backend against a reference."""

    derivative: str
    backend: str
    reference: str
    max_abs_err: float = math.nan
    max_rel_err: float = math.nan
    err_estimate: float = math.nan
    tol: float = math.nan
    verdict: str = "n/a"  # "pass" | "fail" | "error" | "n/a"
    message: str = ""

    @property
    def passed(self) -> bool:
        """Whether this entry does not count against the check (pass or n/a)."""
        return self.verdict in ("pass", "n/a")


@dataclass
class CheckResult:
    """The outcome of :func:`check`: one :class:`CheckEntry` per comparison."""

    problem: str
    x: np.ndarray
    entries: list[CheckEntry] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no entry failed or errored and at least one comparison passed."""
        return all(e.passed for e in self.entries) and any(
            e.verdict == "pass" for e in self.entries
        )

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"

    def failures(self) -> list[CheckEntry]:
        """The entries that failed or raised."""
        return [e for e in self.entries if not e.passed]

    def __str__(self) -> str:
        head = f"check {self.problem!r} (n={self.x.size}): {self.verdict.upper()}"
        rows = [
            ("derivative", "backend", "reference", "max abs", "max rel", "fd err", "tol", "verdict")
        ]
        for e in self.entries:
            rows.append(
                (
                    e.derivative,
                    e.backend,
                    e.reference,
                    f"{e.max_abs_err:.2e}",
                    f"{e.max_rel_err:.2e}",
                    f"{e.err_estimate:.1e}",
                    f"{e.tol:.1e}",
                    e.verdict + (f" ({e.message})" if e.message else ""),
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(7)]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(r[:7], widths, strict=True)) + "  " + r[7]
            for r in rows
        ]
        return "\n".join([head, *lines])


# --------------------------------------------------------------------------- helpers


def numpy_vectorized(problem: Problem) -> Callable[[np.ndarray], np.ndarray]:
    """``f`` in the numpy context, vectorised as ``scipy.differentiate`` wants.

    The returned callable maps ``x`` of shape ``(n, ...)`` to ``(out..., ...)``.
    """
    be = get_backend("numpy")
    ops = be.ops()

    def f(x: np.ndarray) -> np.ndarray:
        batch = x.shape[1:]
        cols = np.moveaxis(x.reshape(x.shape[0], -1), 0, -1)
        ys = np.stack([np.asarray(problem.fn(be.from_numpy(c, np.float64), ops)) for c in cols], -1)
        return ys.reshape(ys.shape[:-1] + batch)

    return f


#: Points per call of an AD callable under finite differences (one compiled shape).
FD_CHUNK = 16


def _batched(
    fn: Callable[[np.ndarray], np.ndarray], n: int, chunk: int = FD_CHUNK
) -> Callable[[np.ndarray], np.ndarray]:
    """Wrap a batched AD callable (``(batch, n) -> (batch, out...)``) for scipy's layout.

    SciPy shrinks the batch as elements converge; the points go through in
    chunks of ``chunk`` (the last one padded), so that JAX compiles one shape
    per derivative instead of one per SciPy iteration.  ``chunk=1`` calls the
    unbatched function point by point (torch: ``torch.func.vmap`` falls back to
    slow loops for some ops, FFTs of solvers among them).
    """

    def f(x: np.ndarray) -> np.ndarray:
        batch = x.shape[1:]
        pts = np.moveaxis(x.reshape(n, -1), 0, -1)
        count = pts.shape[0]
        if chunk == 1:
            chunks = [np.asarray(fn(np.ascontiguousarray(p)))[None] for p in pts]
            size = count
        else:
            size = -(-count // chunk) * chunk
            padded = np.concatenate([pts, np.broadcast_to(pts[:1], (size - count, n))])
            chunks = [
                np.asarray(fn(np.ascontiguousarray(padded[i : i + chunk])))
                for i in range(0, size, chunk)
            ]
        y = np.concatenate(chunks)[:count]
        y = np.moveaxis(y, 0, -1)
        return y.reshape(y.shape[:-1] + batch)

    return f


def _chunk(d: Derivatives) -> int:
    """Points per AD call under finite differences: vmapped chunks on JAX, one by one on torch."""
    return 1 if d.backend.name == "torch" else FD_CHUNK


def _line(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, v: np.ndarray):
    """``t -> f(x + t v)`` with scipy's layout (``t`` of shape ``(1, ...)``)."""

    def g(t: np.ndarray) -> np.ndarray:
        pts = x.reshape((-1,) + (1,) * (t.ndim - 1)) + t[0] * v.reshape((-1,) + (1,) * (t.ndim - 1))
        return f(pts)

    return g


def default_fd_step(problem: Problem, x: np.ndarray) -> float:
    """SciPy's initial step: ``problem.meta["fd_step"]`` or ``0.1 * max(1, max |x|)``.

    ``scipy.differentiate`` starts at 0.5 by default, which sends a simulator
    (an ODE rollout, say) far from where it is well behaved; the extrapolation
    then shrinks the step by 2 per iteration.
    """
    return float(problem.meta.get("fd_step", 0.1 * max(1.0, float(np.max(np.abs(x))))))


def solver_floor(problem: Problem) -> float:
    """``100 * problem.solver.rtol`` for problems with an adaptive solver, else 0.

    An adaptive solver's accepted steps change with the input, so finite
    differences of its output differ from the derivative of the discrete solver
    (which AD computes) by about the solver tolerance (chaotic systems amplify
    it), and a closed-form reference of the continuous problem differs from the
    discrete solution by as much.  Cross-backend comparisons stay tight.
    """
    solver_rtol = getattr(getattr(problem, "solver", None), "rtol", None)
    if isinstance(solver_rtol, (int, float)) and solver_rtol > 0:
        return 100.0 * float(solver_rtol)
    return 0.0


def fd_floor(problem: Problem, rtol: float = RTOL_FD) -> float:
    """Relative floor of finite-difference comparisons for ``problem``.

    ``max(rtol, problem.meta["fd_rtol"], solver_floor(problem))``.
    """
    return max(float(rtol), float(problem.meta.get("fd_rtol", 0.0)), solver_floor(problem))


class FiniteDifferences:
    """``scipy.differentiate`` with one initial step for a problem (scipy layout callables).

    A reference that comes out non-finite (the first, largest step left the
    region where the simulator is well behaved) is recomputed with the initial
    step divided by 10, twice at most.
    """

    def __init__(self, step: float = 0.5) -> None:
        self.step = float(step)

    def _retry(self, run: Callable[[float], tuple[Any, Any]]) -> tuple[np.ndarray, np.ndarray]:
        for k in range(3):
            with np.errstate(all="ignore"):
                df, err = run(self.step / 10.0**k)
            df, err = np.asarray(df), np.asarray(err)
            if np.all(np.isfinite(df)):
                break
        return df, err

    def jacobian(self, f: Callable, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        def run(h: float) -> tuple[Any, Any]:
            res = sd.jacobian(f, x, initial_step=h)
            return res.df, res.error

        return self._retry(run)

    def hessian(self, f: Callable, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        def run(h: float) -> tuple[Any, Any]:
            res = sd.hessian(f, x, initial_step=h)
            return res.ddf, res.error

        return self._retry(run)

    def direction(self, f: Callable, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Directional derivative of ``f`` at ``x`` along ``v``, and its error estimate."""
        scale = max(1.0, float(np.max(np.abs(v), initial=0.0)))

        def run(h: float) -> tuple[Any, Any]:
            res = sd.jacobian(_line(f, x, v), np.zeros(1), initial_step=h / scale)
            return res.df[..., 0], res.error[..., 0]

        return self._retry(run)


def _compare(entry: CheckEntry, got: Any, ref: Any, err: Any, rtol: float, c: float) -> None:
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        entry.verdict, entry.message = "fail", f"shape {got.shape}, reference {ref.shape}"
        return
    err = np.zeros_like(ref) if err is None else np.broadcast_to(np.asarray(err, float), ref.shape)
    scale = max(1.0, float(np.max(np.abs(ref), initial=0.0)))
    tol = tolerance(err, scale, c=c, rtol=rtol)
    if not np.all(np.isfinite(ref)):
        entry.verdict = "error"
        entry.message = "reference is not finite (for finite differences: try a smaller fd_step)"
        return
    diff = np.abs(got - ref)
    bad = ~np.isfinite(got)
    entry.max_abs_err = float(np.max(diff, initial=0.0))
    entry.max_rel_err = entry.max_abs_err / scale
    entry.err_estimate = float(np.max(err, initial=0.0))
    entry.tol = float(np.max(tol, initial=0.0))
    ok = bool(np.all(diff <= tol)) and not bool(np.any(bad))
    entry.verdict = "pass" if ok else "fail"
    if not ok:
        i = np.unravel_index(int(np.argmax(np.where(bad, np.inf, diff - tol))), diff.shape)
        entry.message = f"worst at {tuple(int(j) for j in i)}: got {got[i]:.6g}, ref {ref[i]:.6g}"


# --------------------------------------------------------------------------- validation


def _validate(
    problem: Any, x: Any, derivatives: Sequence[str], backends: Sequence[str], orders: Sequence[int]
) -> tuple[np.ndarray, list[str]]:
    if not isinstance(problem, Problem):
        raise InputTypeError(f"check expects a simdiff.Problem; got {type(problem).__name__}")
    unknown = [d for d in derivatives if d not in DERIVATIVES]
    if unknown:
        raise InputError(f"unknown derivatives {unknown}; expected a subset of {list(DERIVATIVES)}")
    bad = [b for b in backends if b not in ("jax", "torch")]
    if bad or not backends:
        raise InputError(f"backends must be a non-empty subset of ['jax', 'torch']; got {backends}")
    if any(not isinstance(k, int) or k < 1 for k in orders):
        raise InputError(f"orders must be positive integers; got {list(orders)}")
    x = problem.x0 if x is None else np.asarray(x, dtype=np.float64)
    if x.shape != (problem.n,):
        raise ShapeError(f"check: x must have shape ({problem.n},); got {x.shape}")
    return x, [b for b in backends if problem.supports(b)]


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
    rtol_fd: float = RTOL_FD,
    rtol_exact: float | None = None,
    seed: int = 0,
    fd_step: float | None = None,
) -> CheckResult:
    """Check every derivative on every backend against SciPy, exact references and each other.

    Parameters
    ----------
    problem : Problem
    x : array_like, shape (n,), optional
        The point (default ``problem.x0``).
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
        Largest ``n`` for full finite-difference gradients and Jacobians;
        above it, ``n_directions`` random directions ``v`` are checked
        (``grad . v``, ``H v``, ``J v`` against directional finite differences).
    c, rtol_fd : float
        Tolerance constants for finite-difference references (see below);
        ``rtol_fd`` is raised by :func:`fd_floor` for problems with an
        adaptive solver or ``meta["fd_rtol"]``, and the exact-reference
        tolerance by :func:`solver_floor`.
    rtol_exact : float, optional
        Relative tolerance for exact and cross-backend references (default
        ``problem.meta["check_rtol"]``, else ``problem.meta["rtol"]`` (the
        catalogue's tolerance, e.g. the discretisation error of a PDE against
        its closed form), else ``1e4 * eps``; never below ``1e4 * eps``).
    seed : int
        Seed of the random directions and cotangents.
    fd_step : float, optional
        SciPy's initial finite-difference step (default
        :func:`default_fd_step`: ``problem.meta["fd_step"]`` or
        ``0.1 * max(1, max |x|)``; along a direction ``v`` it is divided by
        ``max |v|``).

    Returns
    -------
    CheckResult
        ``result.passed`` is the overall verdict; ``str(result)`` is a table.

    Notes
    -----
    An entry passes when, elementwise, ``|ad - ref| <= tol`` with

    .. math:: tol = c \\cdot err + rtol \\cdot \\max(1, \\max|ref|)

    where ``err`` is SciPy's error estimate of that element (0 for exact and
    cross-backend references), ``c = 10`` and ``rtol = sqrt(eps)`` for
    finite-difference references and ``1e4 * eps`` otherwise.  SciPy's estimate
    is the change between the last two Richardson extrapolations; it is not a
    bound, hence the factor ``c`` and the floor.  A planted error of relative
    size above about ``1e-7`` is caught against finite differences, above
    ``1e-11`` against exact references.

    Examples
    --------
    >>> import numpy as np, simdiff
    >>> p = simdiff.Problem(lambda x, ops: ops.sum(ops.sin(x) * x[0]), x0=np.array([0.3, 0.5]))
    >>> res = simdiff.check(p, derivatives=("grad", "hessian"), backends=("jax",))
    >>> res.passed
    True
    """
    x, runnable = _validate(problem, x, derivatives, backends, orders)
    if rtol_exact is None:
        rtol_exact = float(problem.meta.get("check_rtol", problem.meta.get("rtol", RTOL_EXACT)))
    rtol_x = max(float(rtol_exact), RTOL_EXACT)
    rtol_fd = fd_floor(problem, rtol_fd)
    rtol_ex = max(rtol_x, solver_floor(problem))
    result = CheckResult(problem.name, x)
    rng = np.random.default_rng(seed)
    n = problem.n
    out_shape = problem.output_shape
    v = rng.standard_normal(n)
    u = rng.standard_normal(out_shape)
    dirs = rng.standard_normal((n_directions, n))
    ex = problem.exact
    ds = {b: Derivatives(problem, b) for b in runnable}
    fd = FiniteDifferences(default_fd_step(problem, x) if fd_step is None else fd_step)
    if problem.supports("numpy") or not runnable:
        f_np = numpy_vectorized(problem)
    else:  # a framework-only problem (Problem.from_jax/from_torch): FD of its plain values
        f_np = _batched(ds[runnable[0]].value, n)
    first: dict[str, Any] = {}  # derivative label -> first backend's value (cross reference)

    for b in backends:
        if b not in runnable:
            why = f"{problem.name} does not run on {b} (backends={list(problem.backends)})"
            result.entries.append(CheckEntry("*", b, "-", message=why))

    def add(
        label: str,
        b: str,
        ref: str,
        got: Callable[[], Any],
        refv: Callable[[], Any],
        err: Callable[[], Any] | None,
        rtol: float,
    ) -> None:
        entry = CheckEntry(label, b, ref)
        result.entries.append(entry)
        try:
            e = None if err is None else err()
            _compare(entry, got(), refv(), e, rtol, c)
        except (NotImplementedError, ImportError) as exc:  # not available (e.g. no taylor yet)
            entry.verdict, entry.message = "n/a", f"{type(exc).__name__}: {exc}"[:200]
        except (SimdiffError, ArithmeticError, ValueError, RuntimeError, TypeError) as exc:
            entry.verdict, entry.message = "error", f"{type(exc).__name__}: {exc}"[:300]

    for kind in derivatives:
        if kind in _SCALAR_ONLY and out_shape != ():
            result.entries.append(
                CheckEntry(
                    kind,
                    "*",
                    "-",
                    message=f"scalar-only derivative; problem output shape {out_shape}",
                )
            )
            continue
        for b in runnable:
            d = ds[b]
            for label, got, refs in _plans(
                kind, d, problem, x, v, u, dirs, f_np, ex, orders, fd_full_max_n, fd_max_n, fd
            ):
                cache: dict[str, Any] = {}

                def value(got=got, cache=cache):
                    if "v" not in cache:
                        cache["v"] = np.asarray(got(), dtype=np.float64)
                    return cache["v"]

                for ref_name, refv, err, is_fd in refs:
                    rtol = rtol_fd if is_fd else (rtol_ex if ref_name == "exact" else rtol_x)
                    add(label, b, ref_name, value, refv, err, rtol)
                if label in first and b != runnable[0]:
                    add(
                        label,
                        b,
                        f"cross:{runnable[0]}",
                        value,
                        (lambda lab=label: first[lab]),
                        None,
                        rtol_x,
                    )
                elif b == runnable[0]:
                    try:
                        first[label] = value()
                    except Exception:  # reported by the entries above
                        pass
    return result


def _fd_cached(fn: Callable[[], tuple[np.ndarray, np.ndarray]]):
    cache: dict[str, Any] = {}

    def get() -> tuple[np.ndarray, np.ndarray]:
        if "r" not in cache:
            cache["r"] = fn()
        return cache["r"]

    return (lambda: get()[0]), (lambda: get()[1])


def _plans(kind, d, problem, x, v, u, dirs, f_np, ex, orders, full_n, max_n, fd):
    """Yield ``(label, got, [(ref_name, ref, err, is_fd), ...])`` for one derivative."""
    n = problem.n
    if kind == "grad":
        if n <= max_n:
            ref, err = _fd_cached(lambda: fd.jacobian(f_np, x))
            refs = [("scipy-fd", ref, err, True)]
            if "grad" in ex:
                refs.append(("exact", lambda: ex["grad"](x), None, False))
            yield "grad", (lambda: d.grad(x)), refs
        else:
            for i, w in enumerate(dirs):
                ref, err = _fd_cached(lambda w=w: fd.direction(f_np, x, w))
                refs = [("scipy-fd", ref, err, True)]
                if "grad" in ex:
                    refs.append(("exact", lambda w=w: ex["grad"](x) @ w, None, False))
                yield f"grad.v{i}", (lambda w=w: d.grad(x) @ w), refs
    elif kind == "hessian":
        if n <= max_n:
            if n <= full_n:
                ref, err = _fd_cached(lambda: fd.hessian(f_np, x))
                name = "scipy-fd"
            else:
                g = _batched(d.grad, n, _chunk(d))
                ref, err = _fd_cached(lambda: fd.jacobian(g, x))
                name = "scipy-fd(ad grad)"
            refs = [(name, ref, err, True)]
            if "hessian" in ex:
                refs.append(("exact", lambda: ex["hessian"](x), None, False))
            yield "hessian", (lambda: d.hessian(x)), refs
        else:
            g = _batched(d.grad, n, _chunk(d))
            for i, w in enumerate(dirs):
                ref, err = _fd_cached(lambda w=w: fd.direction(g, x, w))
                refs = [("scipy-fd(ad grad)", ref, err, True)]
                if "hessian" in ex:
                    refs.append(("exact", lambda w=w: ex["hessian"](x) @ w, None, False))
                yield f"hessian.v{i}", (lambda w=w: d.hessian(x) @ w), refs
    elif kind == "hvp":
        g = _batched(d.grad, n, _chunk(d))
        ref, err = _fd_cached(lambda: fd.direction(g, x, v))
        refs = [("scipy-fd(ad grad)", ref, err, True)]
        if "hessian" in ex:
            refs.append(("exact", lambda: ex["hessian"](x) @ v, None, False))
        yield "hvp", (lambda: d.hvp(v, x)), refs
    elif kind == "jvp":
        ref, err = _fd_cached(lambda: fd.direction(f_np, x, v))
        refs = [("scipy-fd", ref, err, True)]
        jac = _exact_jacobian(ex, problem)
        if jac is not None:
            refs.append(("exact", lambda: jac(x) @ v, None, False))
        yield "jvp", (lambda: d.jvp(v, x)), refs
    elif kind == "vjp":

        def s(y: np.ndarray) -> np.ndarray:  # u . f(y), scipy layout
            fy = f_np(y)
            return np.tensordot(u, fy, axes=u.ndim) if u.ndim else u * fy

        ref, err = _fd_cached(lambda: fd.jacobian(s, x) if n <= max_n else None)
        jac = _exact_jacobian(ex, problem)
        if n <= max_n:
            refs = [("scipy-fd", ref, err, True)]
            if jac is not None:
                refs.append(("exact", lambda: np.tensordot(u, jac(x), axes=u.ndim), None, False))
            yield "vjp", (lambda: d.vjp(u, x)), refs
        else:
            for i, w in enumerate(dirs):
                r2, e2 = _fd_cached(lambda w=w: fd.direction(s, x, w))
                yield f"vjp.v{i}", (lambda w=w: d.vjp(u, x) @ w), [("scipy-fd", r2, e2, True)]
    elif kind == "jacobian":
        jac = _exact_jacobian(ex, problem)
        if n <= max_n:
            ref, err = _fd_cached(lambda: fd.jacobian(f_np, x))
            refs = [("scipy-fd", ref, err, True)]
            if jac is not None:
                refs.append(("exact", lambda: jac(x), None, False))
            yield "jacobian", (lambda: d.jacobian(x)), refs
        else:
            for i, w in enumerate(dirs):
                r2, e2 = _fd_cached(lambda w=w: fd.direction(f_np, x, w))
                yield (
                    f"jacobian.v{i}",
                    (lambda w=w: d.jacobian(x) @ w),
                    [("scipy-fd", r2, e2, True)],
                )
    elif kind == "derivative":
        for k in orders:
            prev = _batched(
                lambda y, k=k: d.derivative(
                    k - 1, np.broadcast_to(v, y.shape).copy(), y, method="nested"
                ),
                n,
                _chunk(d),
            )
            ref, err = _fd_cached(lambda prev=prev: fd.direction(prev, x, v))
            refs = [("scipy-fd(ad k-1)", ref, err, True)]
            if "derivative" in ex and k <= problem.meta.get("max_exact_order", k):
                refs.append(("exact", lambda k=k: ex["derivative"](x, k, v), None, False))

            def nested(k: int = k) -> Any:
                return d.derivative(k, v, x, method="nested")

            yield f"derivative{k}", nested, refs
            yield (
                f"derivative{k}.taylor",
                (lambda k=k: d.derivative(k, v, x, method="taylor")),
                [("nested", nested, None, False)],
            )


def _exact_jacobian(ex: dict[str, Callable], problem: Problem) -> Callable | None:
    if "jacobian" in ex:
        return ex["jacobian"]
    if "grad" in ex and problem.output_shape == ():
        return ex["grad"]
    return None
