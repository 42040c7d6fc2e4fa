"""Run every catalogue problem through the leak probe on torch; it must never fire.

For each problem with a torch context, two forms of the probe (simdiff/core/probe.py):

* ``vjp``: its own VJP at a shifted point (what a first Hessian/HVP call costs);
* ``reuse``: the first ``grad`` (or ``jacobian``) call of a ``Derivatives``
  object, whose result the probe reuses.

Printed: the status, the gap between derivative and difference quotient as a
fraction of the tolerance (a leak gives >1), and the probe's cost in units
of one evaluation of the function (noisy on a loaded machine; single runs).

Run from the repository root: ``python validation/benchmarks/probe_catalogue.py``.
"""

from __future__ import annotations

import numpy as np

import problems
import simdiff
from simdiff.backends import get_backend
from simdiff.core.probe import probe
from simdiff.evidence._timing import first_call


def main() -> int:
    T = get_backend("torch")
    fired = 0
    for name in problems.names():
        p = problems.get(name)
        if "torch" not in p.backends:
            print(f"{name:24s} n/a (no torch context)")
            continue
        x = np.asarray(p.x0, dtype=np.float64)
        t_value = first_call(lambda p=p, x=x: p.evaluate(x, backend="torch"))[1]
        cells = []
        try:
            r, seconds = first_call(lambda p=p, x=x: probe(p, T, T.ops(), x, np.float64))
            cost = seconds / t_value
            gap = np.max(np.abs(r["derivative"] - r["difference"])) / r["tolerance"]
            cells.append(f"vjp: {r['status']}, gap/tol {gap:.1e}, {cost:.1f} values")
        except simdiff.LeakError as exc:
            fired += 1
            cells.append(f"vjp: FIRED {str(exc)[:160]}")
        d = simdiff.Derivatives(p, backend="torch")
        try:
            d.grad(x) if p.is_scalar else d.jacobian(x)
            r = d.probe_result
            cells.append(f"reuse: {r['status']}, {r['seconds'] / t_value:.1f} values")
        except simdiff.LeakError as exc:
            fired += 1
            cells.append(f"reuse: FIRED {str(exc)[:160]}")
        print(f"{name:24s} value {t_value:.3f}s | " + " | ".join(cells), flush=True)
    print(f"probe fired on {fired} catalogue problem(s)")
    return int(fired > 0)


if __name__ == "__main__":
    raise SystemExit(main())
