"""Which torch.func constructions crash torch.compile: one subprocess per case.

The evidence behind ``TorchBackend.compile_refusal``.  Each case compiles a
plain ``torch.func`` construction (no simdiff) of a small function with
``torch.compile`` and calls it once, in its own process, so that a
segmentation fault in the generated code (exit code -11 / 139) is a row of
the table rather than the end of the run.  Outcomes: ``ok`` (with the first
call's seconds and the relative difference from eager), ``error`` (a Python
exception: catchable, ``compile="auto"`` turns it into eager), ``CRASH``
(the process died), ``timeout``.

Constructions (``x`` one point; ``batched``: ``vmap`` over 10,000 points):
``ff`` ``jacfwd(jacfwd f)``, ``fr`` ``jacfwd(jacrev f)``, ``rr``
``jacrev(jacrev f)``, ``ffr`` ``jacfwd(jacfwd(jacrev f))``, ``jvpK`` ``K``
nested ``jvp`` (simdiff's nested directional derivative), ``vjvpK`` the same
vmapped over ``n`` directions at one point (simdiff's nested derivative sums),
``hvp`` ``jvp(grad f)``.

    python -m validation.benchmarks.probe_compile_crash                  # the default cases
    # function:construction:batched
    python -m validation.benchmarks.probe_compile_crash ishigami:jvp2:0
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from simdiff.evidence._timing import first_call

#: function:construction:batched, the cases docs/performance.md reports.
DEFAULT_CASES = [
    *(f"ishigami:{c}:0" for c in ("fr", "hvp", "ff", "jvp2", "jvp3", "ffr", "vjvp2", "vjvp3")),
    "seed1:ff:0", "seed1:jvp2:0", "seed1:jvp3:0",
    "seed4:ff:0", "seed4:jvp3:0", "seed4:vjvp3:0",
    "rosen4:ff:0", "rosen4:jvp3:0", "poly3:ff:0",
    "vec2:ff:0", "vec2:jvp3:0", "vec2:vjvp3:0",
    *(f"ishigami:{c}:1" for c in ("ff", "jvp2", "jvp3", "jvp4")),
    "seed1:jvp3:1", "seed4:ffr:1", "seed4:jvp3:1", "rosen4:jvp3:1", "vec2:jvp3:1",
]  # fmt: skip


def _case(fn_name: str, cons: str, batched: bool) -> str:
    """Run one case in this process; the outcome line (the process may die instead)."""
    import torch
    from torch.func import grad, jacfwd, jacrev, jvp, vmap

    torch.set_default_dtype(torch.float64)

    def ishigami(x):
        return torch.sin(x[0]) + 7.0 * torch.sin(x[1]) ** 2 + 0.1 * x[2] ** 4 * torch.sin(x[0])

    def seed(x):
        return torch.sum(torch.sin(x**2) + torch.exp(torch.cos(x)))

    def rosen(x):
        return torch.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    def vec(x):
        return torch.stack([torch.sin(x[0]) * x[1], x[0] ** 2 + torch.cos(x[1])])

    fns = {
        "ishigami": (ishigami, 3),
        "seed1": (seed, 1),
        "seed4": (seed, 4),
        "rosen4": (rosen, 4),
        "sinsum3": (lambda x: torch.sum(torch.sin(x)), 3),
        "poly3": (lambda x: torch.sum(x**3), 3),
        "vec2": (vec, 2),
    }
    f, n = fns[fn_name]

    def nested(order):
        g = lambda x, v: f(x)  # noqa: E731
        for _ in range(order):
            g = (lambda h: lambda x, v: jvp(lambda y: h(y, v), (x,), (v,))[1])(g)
        return g

    def per_direction(order):
        return lambda x, v: vmap(lambda w: nested(order)(x, w))(torch.eye(n) + v)

    cases = {
        "ff": lambda x, v: jacfwd(jacfwd(f))(x),
        "fr": lambda x, v: jacfwd(jacrev(f))(x),
        "rr": lambda x, v: jacrev(jacrev(f))(x),
        "ffr": lambda x, v: jacfwd(jacfwd(jacrev(f)))(x),
        "hvp": lambda x, v: jvp(grad(f), (x,), (v,))[1],
        **{f"jvp{k}": nested(k) for k in (2, 3, 4)},
        **{f"vjvp{k}": per_direction(k) for k in (2, 3)},
    }
    g = cases[cons]
    gen = torch.Generator().manual_seed(0)
    shape = (10_000, n) if batched else (n,)
    x, v = torch.rand(shape, generator=gen) + 0.3, torch.ones(shape)
    if batched:
        g = vmap(g)
    want = g(x, v)
    compiled = torch.compile(g)
    try:
        got, first = first_call(lambda: compiled(x, v))
    except Exception as exc:  # a Python error: catchable
        return f"error {type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
    rel = float((got - want).abs().max() / want.abs().max().clamp_min(1e-300))
    return f"ok compile+first call {first:.1f} s, rel. diff {rel:.1e}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="function:construction:batched (default: all)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # in the child
    args = parser.parse_args(argv)
    if args.one:
        fn_name, cons, batched = args.cases[0].split(":")
        print(_case(fn_name, cons, batched == "1"), flush=True)
        return
    import torch

    print(f"torch {torch.__version__}, one process per case")
    print("| function | construction | batched | outcome |\n|---|---|---|---|")
    for case in args.cases or DEFAULT_CASES:
        cmd = [sys.executable, "-m", "validation.benchmarks.probe_compile_crash", "--one", case]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            outcome = f"timeout after {args.timeout:.0f} s"
        else:
            lines = done.stdout.strip().splitlines()
            if done.returncode != 0:
                outcome = f"CRASH (exit {done.returncode})"
            else:
                outcome = lines[-1] if lines else "no output"
        fn_name, cons, batched = case.split(":")
        batch = "yes" if batched == "1" else "no"
        print(f"| {fn_name} | {cons} | {batch} | {outcome} |", flush=True)


if __name__ == "__main__":
    main()
