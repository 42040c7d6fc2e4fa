"""Record the comparisons ``simdiff.check`` makes on the catalogue's problems.

``tests/test_check_planted.py`` plants errors into these recorded arrays and
feeds them back to :func:`simdiff.evidence.check.tolerance.compare_arrays`, so the sweep over
catalogue problems runs in a second instead of the minutes ``check`` takes.
Each record holds what ``check`` passed to ``compare_arrays`` (the AD result,
the reference, SciPy's error estimate and status, the measured solver gap,
the function's scale, ``rtol``) and the verdict it got.

Regenerate (about an hour on 2 cores; written atomically)::

    python -m validation.check_comparisons tests/data/check_comparisons.json
    python -m validation.check_comparisons tests/data/check_comparisons.json hires  # one more
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import problems
from simdiff.evidence.check import run as check_module
from simdiff.evidence.check.tolerance import compare_arrays

__all__ = ["LIMITED", "MAX_N", "plan", "record"]

#: Largest input size recorded (the larger clusters and fields add only bigger arrays of the
#: same comparisons, and megabytes to tests/data).
MAX_N = 40
#: Problems recorded for some derivatives only: the derivatives, and why.
LIMITED = {
    "hires": (
        ("grad",),
        "its Hessian's finite-difference reference differentiates the torch gradient of the "
        "tight-tolerance solve (~16 s a point) at about a hundred points",
    ),
}


def plan() -> dict[str, tuple[str, ...]]:
    """Every catalogue problem with ``n <= MAX_N`` and the derivatives ``check`` makes of it.

    All of :data:`simdiff.evidence.DERIVATIVES` that apply, except the nested
    higher derivatives of simulators (ODE, PDE), whose finite-difference
    references take minutes each under ``check``.
    """
    out: dict[str, tuple[str, ...]] = {}
    for name in problems.names():
        p = problems.get(name)
        if p.n > MAX_N:
            continue
        tags = set(p.meta.get("tags", ()))
        scalar = p.output_shape == ()
        kinds = ("grad", "hessian", "hvp") if scalar else ("jvp", "vjp", "jacobian")
        if not tags & {"ode", "pde"}:
            kinds = (*kinds, "derivative")
        out[name] = LIMITED[name][0] if name in LIMITED else kinds
    return out


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
    """``OUT [NAME ...]``: record every planned problem, or only the named ones (their rows
    replace those already in ``OUT``)."""
    out = Path(argv[0] if argv else "tests/data/check_comparisons.json")
    todo = plan()
    names = argv[1:] or list(todo)
    unknown = sorted(set(names) - set(todo))
    if unknown:
        print(f"not in the plan: {unknown} (n > {MAX_N} or not in the catalogue)")
        return 2
    rows: list[dict[str, Any]] = []
    if argv[1:] and out.exists():
        rows = [r for r in json.loads(out.read_text())["comparisons"] if r["problem"] not in names]
    for name in names:
        t = time.perf_counter()
        got = record(name, todo[name])
        print(f"{name}: {len(got)} comparisons in {time.perf_counter() - t:.0f} s", flush=True)
        rows.extend(got)
    recorded = sorted({r["problem"] for r in rows})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"problems": recorded, "comparisons": rows}) + "\n")
    os.replace(tmp, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
