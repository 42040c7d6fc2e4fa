"""Cold compile time of the compiled Dopri5 step on torch (bench_ode's LV problem).

Run in a fresh process with an empty Inductor cache::

    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) \
        python -m validation.benchmarks.bench_ode_compile --repeats 5

Prints the first compiled gradient and value (seconds, compile included), the
graphs Dynamo built, where the compile time went (``torch._dynamo.utils.compile_times``:
Dynamo, AOTAutograd, Inductor, the C++ compiler, the lazily compiled backward)
and the steady-state gradient against torchdiffeq's, interleaved in a shuffled order, median of
``--repeats``.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from torch._dynamo.utils import compile_times, counters

import simdiff
from simdiff.evidence._accuracy import rel_error
from simdiff.evidence._timing import Summary, first_call, interleaved
from validation.benchmarks.bench_ode import lv_long, torchdiffeq_callables

#: compile_times() rows that split the cold compile (seconds, summed over graphs)
PHASES = {
    "_compile.compile_inner": "Dynamo (trace + everything below)",
    "create_aot_dispatcher_function": "AOTAutograd forward (+ Inductor below)",
    "aot_trace_joint_graph": "  AOT joint-graph trace",
    "compile_fx_inner": "Inductor (forward and backward graphs)",
    "Scheduler.codegen": "  Inductor codegen",
    "compile_file": "  C++ compiler (summed over kernels/threads)",
    "async_compile.wait": "  waiting for the C++ compiles",
    "backward._backward_impl": "backward graph (compiled on the first backward)",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    p = lv_long()
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    g, first_grad = first_call(d.grad)
    graphs_grad = dict(counters["stats"])
    first_value = first_call(d.value)[1]
    print(f"torch {torch.__version__}, cache dir cold (TORCHINDUCTOR_CACHE_DIR fresh)")
    print(f"first compiled grad  {first_grad:8.2f} s")
    print(f"first compiled value {first_value:8.2f} s")
    print(f"Dynamo after grad:   {graphs_grad}")
    print(f"Dynamo after value:  {dict(counters['stats'])}")
    print(f"recompiles:          {dict(counters['recompiles'])}")
    print(f"aot_autograd:        {dict(counters['aot_autograd'])}")
    fx = {k: v for k, v in counters["inductor"].items() if "fxgraph" in k}
    print(f"inductor fxgraph:    {fx}")
    table = compile_times(repr="csv", aggregate=True)
    totals = dict(zip(table[0], table[1], strict=True)) if isinstance(table, tuple) else {}
    for key, label in PHASES.items():
        if key in totals:
            print(f"{label:50s} {float(totals[key]):8.2f} s")
    keep = ("kind", "compile_s", "compiles")
    print("cache_info:", [{k: i[k] for k in keep if k in i} for i in d.cache_info()])
    td = torchdiffeq_callables(p, np.ones(4))
    want = np.asarray(td["grad"](), dtype=float)
    print(f"grad vs torchdiffeq max rel diff {rel_error(g, want):.1e}")
    ts = interleaved({"compiled grad": d.grad, "torchdiffeq grad": td["grad"]}, args.repeats)
    med = {k: 1e3 * Summary.of(v).median for k, v in ts.items()}
    for k, v in med.items():
        print(f"steady {k:20s} {v:8.1f} ms (median of {args.repeats})")
    print(f"ratio compiled / torchdiffeq {med['compiled grad'] / med['torchdiffeq grad']:.2f}")


if __name__ == "__main__":
    main()
