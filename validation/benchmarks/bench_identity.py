"""Cost of keeping each problem's identity on steady derivative calls.

Every call of a :class:`simdiff.Derivatives` rechecks the problem's
fingerprint (a shallow check of what could have changed in place, see
simdiff/_fingerprint.py) and its point (``Problem.check_point``).  This times
steady ``simdiff.grad`` calls of catalogue problems with the recheck and with
it replaced by a no-op, interleaved in shuffled rounds (one sample of
``--calls`` calls each), and prints the median of the per-round ratios.
On a shared machine that ratio is noise around a few percent, so it also
times the recheck alone (``DerivativeCache.refresh``, the fastest of the
rounds of ``--calls * 20`` calls) and prints its share of the fastest steady
call ("share"), with the number of entries the recheck compares.

Run: ``python -m validation.benchmarks.bench_identity [--rounds 7] [--calls 50]``
"""

from __future__ import annotations

import argparse

import numpy as np

import simdiff
from simdiff._cache import DerivativeCache
from simdiff._catalogue import catalogue
from simdiff.evidence._timing import interleaved, timed

PROBLEMS = ("seed", "rosenbrock4", "lj38", "heat_diffusivity", "ode_rk4_decay", "lorenz63")


def _unchecked(self: DerivativeCache) -> int:
    return self.generation


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    real = DerivativeCache.refresh
    registry = catalogue().registry()
    print(f"{'problem':18s} {'backend':7s} {'checked us':>11s} {'unchecked us':>13s} ratio "
          f"{'entries':>7s} {'recheck us':>10s} {'share':>6s}")  # fmt: skip
    for name in PROBLEMS:
        p = registry[name]()
        derivative = simdiff.grad if p.is_scalar else simdiff.jacobian
        for backend in ("jax", "torch"):
            if not p.supports(backend):
                continue
            derivative(p, backend=backend)  # build and compile outside the timing

            def call(derivative=derivative, p=p, backend=backend) -> None:
                derivative(p, backend=backend)

            def sample(refresh, call=call) -> None:
                DerivativeCache.refresh = refresh  # type: ignore[method-assign]
                for _ in range(args.calls):
                    call()

            try:
                t = interleaved(
                    {"on": lambda: sample(real), "off": lambda: sample(_unchecked)},
                    args.rounds,
                )
            finally:
                DerivativeCache.refresh = real  # type: ignore[method-assign]
            on = [s / args.calls for s in t["on"]]
            off = [s / args.calls for s in t["off"]]
            ratio = float(np.median(np.array(on) / np.array(off)))
            inner = 20 * args.calls
            alone = min(timed(p.cache.refresh, inner) / inner for _ in range(args.rounds))
            entries = len(p.cache._identity._watch or ())
            print(f"{name:18s} {backend:7s} {np.median(on) * 1e6:11.1f} "
                  f"{np.median(off) * 1e6:13.1f} {ratio:.3f} {entries:7d} "
                  f"{alone * 1e6:10.2f} {alone / min(on):6.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
