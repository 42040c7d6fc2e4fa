"""Record the comparisons ``simdiff.check`` makes on a few catalogue problems.

``tests/test_check_planted.py`` plants errors into these recorded arrays and
feeds them back to :func:`simdiff.evidence._check_tol.compare_arrays`, so the sweep over
catalogue problems runs in a second instead of the minutes ``check`` takes.
Each record holds what ``check`` passed to ``compare_arrays`` (the AD result,
the reference, SciPy's error estimate and status, the measured solver gap,
the function's scale, ``rtol``) and the verdict it got.

Regenerate (a few minutes on 2 cores)::

    python -m validation.check_comparisons tests/data/check_comparisons.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import problems
import simdiff.evidence._check as check_module
from simdiff.evidence._check_tol import compare_arrays

__all__ = ["PROBLEMS", "record"]

#: A stiff ODE (Rodas3), a nonstiff ODE (Dopri5), a potential-energy surface, a PDE, with
#: the derivatives recorded (the ODEs' first-order ones: their nested derivatives take
#: minutes under check's finite differences).
PROBLEMS = {
    "robertson": ("jvp", "jacobian"),
    "lotka_volterra": ("jvp", "vjp"),
    "morse-dimer": ("grad", "hessian", "hvp"),
    "heat_modes": ("grad", "hessian"),
}


def _array(a: Any) -> Any:
    return None if a is None else np.asarray(a, dtype=np.float64).tolist()


def record(name: str, derivatives: tuple[str, ...]) -> list[dict[str, Any]]:
    """The comparisons of ``check(problems.get(name), derivatives=...)``, one dict per entry."""
    calls: list[dict[str, Any]] = []

    def recording(got: Any, ref: Any, **kw: Any) -> Any:
        out = compare_arrays(got, ref, **kw)
        calls.append({"got": got, "ref": ref, "kw": kw, "verdict": out.verdict, "msg": out.message})
        return out

    check_module.compare_arrays = recording  # type: ignore[assignment]
    try:
        res = check_module.check(problems.get(name), derivatives=derivatives)
    finally:
        check_module.compare_arrays = compare_arrays
    print(res, flush=True)
    rows, k = [], 0
    for e in res.entries:  # entries whose comparison ran, in the order check ran them
        if k < len(calls) and (calls[k]["verdict"], calls[k]["msg"]) == (e.verdict, e.message):
            c, kw = calls[k], calls[k]["kw"]
            rows.append(
                {
                    "problem": name,
                    "derivative": e.derivative,
                    "backend": e.backend,
                    "reference": e.reference,
                    "verdict": e.verdict,
                    "got": _array(c["got"]),
                    "ref": _array(c["ref"]),
                    "err": _array(kw.get("err")),
                    "converged": None
                    if kw.get("converged") is None
                    else np.asarray(kw["converged"], bool).tolist(),
                    "gap": _array(kw.get("gap")),
                    "fscale": float(kw["fscale"]),
                    "rtol": float(kw["rtol"]),
                }
            )
            k += 1
    return rows


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "tests/data/check_comparisons.json")
    rows: list[dict[str, Any]] = []
    for name, derivatives in PROBLEMS.items():
        t = time.perf_counter()
        got = record(name, derivatives)
        print(f"{name}: {len(got)} comparisons in {time.perf_counter() - t:.0f} s", flush=True)
        rows.extend(got)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"problems": list(PROBLEMS), "comparisons": rows}) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
