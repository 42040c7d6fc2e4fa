"""Cost of keeping each problem's identity on steady derivative calls.

Every call of a :class:`simdiff.Derivatives` rechecks the problem's
fingerprint (a shallow check of what could have changed in place, see
simdiff/core/fingerprint.py): ``DerivativeCache.refresh``, once per call.  For
each problem, backend and derivative (the gradient, or the Jacobian of a
vector-valued problem, and the Hessian of a scalar one) this prints:

- ``call us``: the median steady call, recheck included;
- ``recheck us``: the median time of the recheck inside those calls (timed
  around ``refresh`` as the calls run, so with the caches the call leaves
  behind, which makes it slower than in a loop of its own), and ``share``, its
  fraction of the call: the number the 5 % target is about;
- ``off/on``: the median over rounds of the ratio of calls with the recheck
  replaced by a no-op to calls with it (interleaved, shuffled rounds): the
  same share seen from outside, noisy on a shared machine; only for calls
  under ``--ratio-below`` seconds (``-`` otherwise).

Calls slower than ``--slow`` seconds are timed once (``share`` is then the
recheck over that one call).

Run: ``python -m validation.benchmarks.bench_identity [--rounds 7] [--problems ...]``
"""

from __future__ import annotations

import argparse

import numpy as np

import simdiff
from simdiff.core.cache import DerivativeCache
from simdiff.core.catalogue import catalogue
from simdiff.evidence._timing import first_call, interleaved, timed

#: the smallest call of each family first (the hardest for a 5 % target), then larger ones
PROBLEMS = (
    "seed",
    "rosenbrock4",
    "ishigami",
    "muller-brown",
    "lj-dimer",
    "lj38",
    "heat_modes",
    "heat_diffusivity",
    "ode_rk4_decay",
    "lotka_volterra",
    "lorenz63",
)


def _unchecked(self: DerivativeCache) -> int:
    return self.generation


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--budget", type=float, default=0.05, help="seconds per sample")
    ap.add_argument("--slow", type=float, default=1.0, help="time calls above this once")
    ap.add_argument("--ratio-below", type=float, default=0.02)
    ap.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    args = ap.parse_args()
    real = DerivativeCache.refresh
    spent: list[float] = []

    def measured(self: DerivativeCache) -> int:
        out, seconds = first_call(lambda: real(self))
        spent.append(seconds)
        return out

    registry = catalogue().registry()
    print("| problem | backend | derivative | watched | call us | recheck us | share | off/on |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.problems:
        p = registry[name]()
        kinds = [(simdiff.grad if p.is_scalar else simdiff.jacobian)]
        if p.is_scalar:
            kinds.append(simdiff.hessian)
        for backend in ("jax", "torch"):
            if not p.supports(backend):
                continue
            for derivative in kinds:

                def call(derivative=derivative, p=p, backend=backend) -> None:
                    derivative(p, backend=backend)

                call()  # build and compile outside the timing
                one = timed(call)
                calls = max(1, min(200, int(args.budget / one)))
                rounds = 1 if one > args.slow else args.rounds
                spent.clear()
                DerivativeCache.refresh = measured  # type: ignore[method-assign]
                try:
                    on = [timed(call, calls) / calls for _ in range(rounds)]
                finally:
                    DerivativeCache.refresh = real  # type: ignore[method-assign]
                recheck = float(np.median(spent))
                ratio = "-"
                if one < args.ratio_below:

                    def sample(refresh, call=call, calls=calls) -> None:
                        DerivativeCache.refresh = refresh  # type: ignore[method-assign]
                        try:
                            for _ in range(calls):
                                call()
                        finally:
                            DerivativeCache.refresh = real  # type: ignore[method-assign]

                    t = interleaved(
                        {"on": lambda: sample(real), "off": lambda: sample(_unchecked)},
                        args.rounds,
                    )
                    ratio = f"{float(np.median(np.array(t['off']) / np.array(t['on']))):.3f}"
                watched = len(p.cache._identity._watch or ())
                median = float(np.median(on))
                print(f"| {name} | {backend} | {derivative.__name__} | {watched} | "
                      f"{median * 1e6:.1f} | {recheck * 1e6:.2f} | {recheck / median:.1%} | "
                      f"{ratio} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
