"""Tracing profile-likelihood paths: constrained optima by Newton steps, in lockstep.

:class:`Tracer` evaluates constrained optima ``theta(c)`` (Newton on the
free parameters, SciPy where Newton fails) and follows each side of each
profile by Euler predictor steps along ``d theta_r / dc = -H_rr^{-1} H_ri``;
the sides run as generators (:data:`Steps`) whose points are evaluated
together, one batched derivative call per round.  Used by
:func:`simdiff.sensitivity.profile_likelihood`.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import scipy.linalg
import scipy.optimize

from simdiff.core.derivatives import Derivatives

__all__ = ["COUNTS", "Eval", "Point", "Steps", "Tracer", "chol_solve"]


@dataclass
class Point:
    """A constrained optimum: ``theta`` with ``theta_i = c``, ``grad_r L = 0``."""

    c: float
    value: float
    theta: np.ndarray
    slope: float  # dPL/dc = dL/dtheta_i at the constrained optimum
    curvature: float  # d2PL/dc2: the Schur complement H_ii - H_ir H_rr^-1 H_ri (NaN if singular)
    tangent: np.ndarray  # d theta / dc, shape (n,)
    reoptimised: bool = False


#: ``(L, grad L, H)`` at one point.
Eval = tuple[float, np.ndarray, np.ndarray]
R = TypeVar("R")
#: A computation that yields the points where it needs :data:`Eval`, is sent
#: them, and returns ``R`` (run by :meth:`Tracer.lockstep`).
Steps = Generator[np.ndarray, Eval, R]

#: The counters of a profile (``Profile.counts`` adds ``steps``).
COUNTS = ("nfun", "ngrad", "nhess", "newton", "reoptimised", "rejected")


class Tracer:
    """Evaluates constrained optima by Newton (or SciPy) and traces profile paths.

    The path computations are generators (:data:`Steps`): :meth:`lockstep`
    runs several side by side and evaluates the points they ask for together.
    """

    def __init__(
        self,
        d: Derivatives,
        bounds: np.ndarray | None,
        *,
        newton_steps: int,
        rcond: float,
        ftol: float,
        width: int = 1,
    ) -> None:
        self.d = d
        self.width = width  # the batch size of vgh_rows
        self.bounds = bounds
        self.newton_steps = newton_steps
        self.rcond = rcond
        self.ftol = ftol
        self.points: dict[int, list[Point]] = {}
        self.counts = dict.fromkeys((*COUNTS, "batches"), 0)
        self._last: tuple[bytes, Eval] | None = None
        self.unbatched: str | None = None  # why batched calls were switched off

    # ------------------------------------------------------------------ derivatives
    def vgh(self, theta: np.ndarray, counts: dict[str, int]) -> Eval:
        """``(L, grad L, H)`` at one point (the last point's values are reused)."""
        key = theta.tobytes()
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        if self.width > 1:
            # the batched program, the point padded to its width: no second compilation
            # of each derivative for single points (the start's polish, Newton corrections)
            out = self._batched(theta[None, :], [counts])[0]
        else:
            counts["nfun"] += 1
            counts["ngrad"] += 1
            counts["nhess"] += 1
            f, g = self.d.value_and_grad(theta)
            h = np.asarray(self.d.hessian(theta), dtype=np.float64)
            out = (float(f), np.asarray(g, dtype=np.float64), 0.5 * (h + h.T))
        self._last = (key, out)
        return out

    def vgh_rows(self, rows: np.ndarray, counts: list[dict[str, int]]) -> list[Eval]:
        """``(L, grad L, H)`` at each row of ``rows`` (distinct points), counted in ``counts``.

        Batched calls of ``self.width`` rows, the last padded (repeating its
        last row), so that every batched call has one shape: one compilation
        whatever the number of paths still running, single points included
        (:meth:`vgh`).  ``width`` 1, or a batched call that raised (a problem the
        framework cannot ``vmap``; ``self.unbatched`` says why, and batching
        stays off): one call per point.
        """
        if rows.shape[0] == 1 or self.width == 1:
            return [self.vgh(row, c) for row, c in zip(rows, counts, strict=True)]
        return self._batched(rows, counts)

    def _batched(self, rows: np.ndarray, counts: list[dict[str, int]]) -> list[Eval]:
        """:meth:`vgh_rows` by padded batched calls (``self.width > 1``)."""
        out: list[Eval] = []
        for lo in range(0, rows.shape[0], self.width):
            chunk = rows[lo : lo + self.width]
            m = chunk.shape[0]
            pad = np.concatenate([chunk, np.repeat(chunk[-1:], self.width - m, axis=0)])
            try:
                f, g = self.d.value_and_grad(pad)
                h = np.asarray(self.d.hessian(pad), dtype=np.float64)[:m]
            except Exception as exc:  # a real failure raises again, point by point
                self.width, self.unbatched = 1, f"{type(exc).__name__}: {exc}"
                rest = zip(rows[lo:], counts[lo:], strict=True)
                return out + [self.vgh(row, c) for row, c in rest]
            self.counts["batches"] += 1
            f, g = np.asarray(f, dtype=np.float64)[:m], np.asarray(g, dtype=np.float64)[:m]
            h = 0.5 * (h + np.swapaxes(h, 1, 2))
            for j, c in enumerate(counts[lo : lo + m]):
                for name in ("nfun", "ngrad", "nhess"):
                    c[name] += 1
                out.append((float(f[j]), g[j], h[j]))
        return out

    def lockstep(self, paths: list[tuple[Steps[Any], dict[str, int]]]) -> list[Any]:
        """Run the generators ``paths`` (each with its counts) side by side; their results.

        Each generator yields the points where it needs ``(L, grad L, H)`` and is
        sent them back.  The points of all the generators still running are
        evaluated together: one batched call per round (one point too, padded),
        each distinct point once, counted for the first path that asked.
        """
        results: list[Any] = [None] * len(paths)
        pending: dict[int, np.ndarray] = {}

        def advance(k: int, value: Any) -> None:
            try:
                pending[k] = paths[k][0].send(value)
            except StopIteration as stop:
                results[k] = stop.value
                pending.pop(k, None)

        for k in range(len(paths)):
            advance(k, None)
        while pending:
            keys = list(pending)
            rows, first, inverse = np.unique(
                np.stack([pending[k] for k in keys]), axis=0, return_index=True, return_inverse=True
            )
            inverse = inverse.reshape(-1)
            evals = self.vgh_rows(rows, [paths[keys[j]][1] for j in first])
            for pos, k in enumerate(keys):
                advance(k, evals[inverse[pos]])
        return results

    def run(self, steps: Steps[R], counts: dict[str, int]) -> R:
        """One generator, its points evaluated one at a time."""
        return self.lockstep([(steps, counts)])[0]

    def _factor(self, hrr: np.ndarray) -> np.ndarray | None:
        """Cholesky factor of ``H_rr``, or ``None`` when it is not safely positive definite."""
        if hrr.shape[0] == 0:
            return hrr
        lam = np.linalg.eigvalsh(hrr)
        if lam[0] <= self.rcond * max(lam[-1], 0.0) or lam[-1] <= 0:
            return None
        return np.linalg.cholesky(hrr)

    def _point(
        self,
        i: int,
        theta: np.ndarray,
        f: float,
        g: np.ndarray,
        h: np.ndarray,
        chol: np.ndarray | None,
        reopt: bool,
    ) -> Point:
        """The point with its tangent and curvature (least squares where ``H_rr`` is singular)."""
        r = np.arange(theta.shape[0]) != i
        tangent = np.zeros_like(theta)
        tangent[i] = 1.0
        if chol is not None:
            t = -chol_solve(chol, h[r, i])
        else:
            t = -np.linalg.lstsq(h[np.ix_(r, r)], h[r, i], rcond=self.rcond)[0]
        tangent[r] = t
        curvature = float(h[i, i] + h[i, r] @ t)
        return Point(float(theta[i]), f, theta.copy(), float(g[i]), curvature, tangent, reopt)

    def _inside(self, theta: np.ndarray) -> bool:
        b = self.bounds
        return b is None or bool(np.all((theta >= b[:, 0]) & (theta <= b[:, 1])))

    def newton(
        self, i: int, theta: np.ndarray, counts: dict[str, int]
    ) -> Steps[tuple[Point | None, bool]]:
        """Newton on the free parameters from ``theta``: ``(point, singular)``.

        ``point`` is ``None`` when Newton cannot converge here; ``singular`` says
        whether that is because ``H_rr`` is singular (a smaller step will not help).
        """
        theta = theta.copy()
        r = np.arange(theta.shape[0]) != i
        for k in range(self.newton_steps + 1):
            f, g, h = yield theta.copy()
            if not np.isfinite(f):
                return None, False
            chol = self._factor(h[np.ix_(r, r)])
            if chol is None:
                return None, True
            step = -chol_solve(chol, g[r])
            if -0.5 * float(g[r] @ step) <= self.ftol:
                return self._point(i, theta, f, g, h, chol, False), False
            if k == self.newton_steps:
                return None, False
            theta[r] += step
            counts["newton"] += 1
            if not self._inside(theta):
                return None, False
        return None, False  # pragma: no cover - the loop returns

    def reoptimise(self, i: int, theta: np.ndarray, counts: dict[str, int]) -> Point:
        """SciPy minimisation over the free parameters (the fallback), then the point there."""
        counts["reoptimised"] += 1
        n = theta.shape[0]
        r = np.arange(n) != i
        base = theta.copy()

        def full(z: np.ndarray) -> np.ndarray:
            x = base.copy()
            x[r] = z
            return x

        def fun(z: np.ndarray) -> tuple[float, np.ndarray]:
            counts["nfun"] += 1
            counts["ngrad"] += 1
            f, g = self.d.value_and_grad(full(z))
            return float(f), np.asarray(g, dtype=np.float64)[r]

        def hess(z: np.ndarray) -> np.ndarray:
            counts["nhess"] += 1
            return np.asarray(self.d.hessian(full(z)), dtype=np.float64)[np.ix_(r, r)]

        z0 = theta[r]
        if n > 1:
            if self.bounds is None:
                res = scipy.optimize.minimize(
                    fun,
                    z0,
                    jac=True,
                    hess=hess,
                    method="trust-exact",
                    options={"gtol": 1e-10, "maxiter": 200},
                )
            else:
                res = scipy.optimize.minimize(
                    fun,
                    z0,
                    jac=True,
                    method="L-BFGS-B",
                    bounds=self.bounds[r],
                    options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 2000},
                )
            z0 = res.x
        x = full(z0)
        f, g, h = self.vgh(x, counts)
        return self._point(i, x, f, g, h, self._factor(h[np.ix_(r, r)]), True)

    def solve(self, i: int, theta: np.ndarray, counts: dict[str, int]) -> Steps[Point]:
        p, _ = yield from self.newton(i, theta, counts)
        return p if p is not None else self.reoptimise(i, theta, counts)

    def predict(self, i: int, p: Point, c: float) -> np.ndarray:
        """The Euler predictor from ``p`` to ``c``, inside the bounds."""
        theta = p.theta + (c - p.c) * p.tangent
        theta[i] = c
        if self.bounds is not None:
            theta = np.clip(theta, self.bounds[:, 0], self.bounds[:, 1])
        return theta

    def evaluate(self, i: int, c: float) -> tuple[float, np.ndarray]:
        """``(PL(c), theta(c))`` of parameter ``i``: from the nearest traced point."""
        pts = self.points[i]
        near = min(pts, key=lambda p: abs(p.c - c))
        theta = self.predict(i, near, c)
        p = self.run(self.solve(i, theta, self.counts), self.counts)
        return p.value, p.theta

    def polish(self, x: np.ndarray) -> tuple[np.ndarray, str]:
        """A few Newton steps on the full problem from ``x`` (the fit's tolerance is loose)."""
        for _ in range(5):
            _, g, h = self.vgh(x, self.counts)
            chol = self._factor(h)
            if chol is None:
                return x, "the Hessian at the optimum is not positive definite; fit.x used as is"
            step = -chol_solve(chol, g)
            if -0.5 * float(g @ step) <= self.ftol:
                return x, "fit.x is a minimum to the tolerance"
            if not self._inside(x + step):
                return x, "fit.x lies at a bound; used as is"
            x = x + step
            self.counts["newton"] += 1
        return x, "fit.x tightened by Newton steps"

    # ------------------------------------------------------------------ one side
    def side(
        self,
        i: int,
        start: Point,
        direction: int,
        counts: dict[str, int],
        *,
        lmin: float,
        threshold: float,
        bound: float,
        max_step: float,
        max_steps: int,
        step_fraction: float,
        flat_steps: int,
    ) -> Steps[tuple[list[Point], float | None, str, str]]:
        """Trace from ``start`` along ``direction`` to the threshold, a bound, or flatness."""
        target = step_fraction * threshold
        pts: list[Point] = []
        cur, h_prev, flat = start, None, 0
        for _ in range(max_steps):
            slope, s = direction * cur.slope, cur.curvature
            if np.isfinite(s) and s > 0:
                h = (-slope + np.sqrt(slope * slope + 2.0 * s * target)) / s
            elif slope > 0:
                h = target / slope
            else:
                h = max_step
            h = min(h, max_step, 4.0 * h_prev if h_prev else np.inf)
            room = abs(bound - cur.c)
            if room <= 1e-14 * max(1.0, abs(cur.c)):
                return pts, None, "bound", f"reached the bound {bound:.6g} below the threshold"
            at_bound = h >= room
            h = min(h, room)
            for _halving in range(12):
                c = bound if at_bound else cur.c + direction * h
                p, singular = yield from self.newton(i, self.predict(i, cur, c), counts)
                if singular:
                    p = self.reoptimise(i, self.predict(i, cur, c), counts)
                if p is not None and (singular or p.value - cur.value <= 4.0 * target):
                    break
                counts["rejected"] += 1
                h, at_bound = 0.5 * h, False
            else:
                p = self.reoptimise(i, self.predict(i, cur, c), counts)
            pts.append(p)
            if p.value - lmin >= threshold:
                end = yield from self.root(i, cur, p, lmin + threshold, counts)
                pts.append(end)
                return (
                    pts,
                    end.c,
                    "threshold",
                    (f"likelihood ratio reached the threshold at {end.c:.8g}"),
                )
            if at_bound:
                return pts, None, "bound", f"reached the bound {bound:.6g} below the threshold"
            rise = p.value - cur.value
            flat = flat + 1 if (h >= max_step * (1 - 1e-12) and rise <= 1e-6 * threshold) else 0
            if flat >= flat_steps:
                return (
                    pts,
                    None,
                    "flat",
                    (
                        f"flat: {flat} steps of the largest size {max_step:.3g} raised the profile "
                        f"by {p.value - lmin:.3g} in all (threshold {threshold:.3g}); not "
                        "identifiable in this direction"
                    ),
                )
            cur, h_prev = p, h
        return (
            pts,
            None,
            "max_steps",
            (
                f"{max_steps} steps reached c = {cur.c:.6g} with the profile "
                f"{cur.value - lmin:.3g} above the minimum, below the threshold {threshold:.3g}"
            ),
        )

    def root(
        self, i: int, a: Point, b: Point, level: float, counts: dict[str, int]
    ) -> Steps[Point]:
        """``PL(c) = level`` between ``a`` (below) and ``b`` (above): safeguarded Newton."""
        lo, hi = a, b
        p = b
        for _ in range(40):
            c = p.c - (p.value - level) / p.slope if p.slope != 0 else np.nan
            inside = min(lo.c, hi.c) < c < max(lo.c, hi.c)
            if not inside:
                c = 0.5 * (lo.c + hi.c)
            near = lo if abs(lo.c - c) < abs(hi.c - c) else hi
            q = yield from self.solve(i, self.predict(i, near, c), counts)
            # the next Newton step would move c by less than 1e-11 (relative): converged
            nxt = abs(q.value - level) / abs(q.slope) if q.slope != 0 else np.inf
            done = nxt <= 1e-11 * (1.0 + abs(q.c))
            if q.value >= level:
                hi = q
            else:
                lo = q
            p = q
            if done or abs(hi.c - lo.c) <= 1e-13 * (1.0 + abs(q.c)):
                break
        return p


def chol_solve(chol: np.ndarray, b: np.ndarray) -> np.ndarray:
    if chol.shape[0] == 0:
        return np.zeros(0)
    return scipy.linalg.cho_solve((chol, True), b)
