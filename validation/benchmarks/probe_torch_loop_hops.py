"""Which derivatives of a loop torch 2.13's control-flow operators get right: a table.

A data-dependent loop (a Lotka-Volterra Euler step whose step size grows
10% per step until ``t >= 0.5``; 2 states, parameters ``b`` closed over,
initial state ``(a, a)``) is written four ways:

- ``python``: a Python ``while`` (what simdiff's eager torch loop is): the
  reference for every derivative;
- ``while``: ``torch._higher_order_ops.while_loop``, eager and under
  ``torch.compile(fullgraph=True)``;
- the same with only the closed-over ``b`` tracked (``a`` a constant), so
  that no carry leaf requires grad at loop entry: ``while, closure only``;
- the same with every floating carry leaf given ``+ 0.0 * ANCHOR``, ``ANCHOR``
  a tracked zero created outside the compiled region: ``while, anchored``;
- ``scan``: ``torch._higher_order_ops.scan`` over a fixed 20 steps (the
  Python reference is the same 20 steps).

Each is asked for the first derivative by plain ``torch.autograd.grad``, the
second by double backward (``create_graph=True``), a forward-mode tangent by
``torch.autograd.forward_ad``, and the gradient by ``torch.func.grad``
(eager, and inside ``torch.compile``).  Every outcome is compared with the
Python loop's: ``right``, ``WRONG`` (silently: a number that differs), or the
exception's first line.  Last, the steady time of one value-and-gradient call
(plain autograd), median of 30, for the Python loop and the compiled
``while_loop``.

    python -m validation.benchmarks.probe_torch_loop_hops
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.autograd.forward_ad as fwAD
from torch._higher_order_ops import scan, while_loop

from simdiff.evidence._timing import median_time

torch.set_default_dtype(torch.float64)

#: A tracked zero made outside any compiled region (Dynamo refuses to create one inside).
ANCHOR = torch.zeros((), requires_grad=True)
T_END = 0.5
SCAN_STEPS = 20


def rhs(y: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.stack([b[0] * y[0] - y[0] * y[1], -b[1] * y[1] + y[0] * y[1]])


def f_python(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y, t, h = torch.stack([a, a]), 0.0, 0.01
    while t < T_END - 1e-12:
        y, t, h = y + h * rhs(y, b), t + h, h * 1.1
    return y.sum()


def f_python_fixed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = torch.stack([a, a])
    for _ in range(SCAN_STEPS):
        y = y + 0.01 * rhs(y, b)
    return y.sum()


def make_while(anchored: bool) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        carry = (torch.tensor(0.0), torch.tensor(0.01), torch.stack([a, a]))
        if anchored:
            carry = tuple(c + 0.0 * ANCHOR for c in carry)

        def cond(t: torch.Tensor, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return t < T_END - 1e-12

        def body(t: torch.Tensor, h: torch.Tensor, y: torch.Tensor) -> tuple:
            return t + h, h * 1.1, y + h * rhs(y, b)

        return while_loop(cond, body, carry)[2].sum()

    return f


def f_scan(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    def step(y: torch.Tensor, _: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y2 = y + 0.01 * rhs(y, b)
        return y2, y2.sum()

    return scan(step, torch.stack([a, a]), torch.zeros(SCAN_STEPS))[0].sum()


def derivatives(f: Callable, a: torch.Tensor, b: torch.Tensor) -> dict[str, Callable[[], object]]:
    """Each derivative route as a thunk returning a tensor (a tuple for the gradient)."""
    x = torch.cat([a.detach()[None], b.detach()])

    def first() -> object:
        return torch.cat(
            [
                g.reshape(-1)
                for g in torch.autograd.grad(f(a, b), (a, b) if a.requires_grad else (b,))
            ]
        )

    def second() -> object:
        (g,) = torch.autograd.grad(f(a, b), (b,), create_graph=True)
        return torch.autograd.grad(g[0], (b,))[0]

    def forward() -> object:
        with fwAD.dual_level():
            out = f(a.detach(), fwAD.make_dual(b.detach(), torch.tensor([1.0, 0.0])))
            return fwAD.unpack_dual(out).tangent

    def on_x(x: torch.Tensor) -> torch.Tensor:
        return f(x[0], x[1:])

    compiled_grad = torch.compile(torch.func.grad(on_x), fullgraph=True)

    return {
        "grad (autograd)": first,
        "2nd (double backward)": second,
        "forward-mode tangent": forward,
        "torch.func.grad": lambda: torch.func.grad(on_x)(x),
        "torch.compile(torch.func.grad)": lambda: compiled_grad(x),
    }


def verdict(got: Callable[[], object], want: object) -> str:
    try:
        value = got()
    except Exception as exc:  # the outcome is what this probe reports
        return f"fails: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:90]}"
    if value is None:
        return "WRONG (no tangent: None)"
    assert isinstance(value, torch.Tensor) and isinstance(want, torch.Tensor)
    err = float((value - want).abs().max() / want.abs().max())
    return "right" if err < 1e-12 else f"WRONG (rel. error {err:.2g})"


def median_ms(f: Callable, a: torch.Tensor, b: torch.Tensor) -> float:
    def call() -> None:
        torch.autograd.grad(f(a, b), (a, b))

    call()  # the first of 31 calls is left out
    return 1e3 * median_time(call, 30)


def main() -> None:
    print(f"torch {torch.__version__}")
    tracked_a = torch.tensor(1.0, requires_grad=True)
    b = torch.tensor([1.5, 0.3], requires_grad=True)
    const_a = tracked_a.detach()
    cases = [
        ("while", make_while(False), tracked_a, f_python),
        ("while, closure only", make_while(False), const_a, f_python),
        ("while, anchored", make_while(True), const_a, f_python),
        ("scan", f_scan, tracked_a, f_python_fixed),
    ]
    print("| loop | mode | derivative | outcome |")
    print("|---|---|---|---|")
    for name, f, a, ref in cases:
        reference = derivatives(ref, a, b)
        wants = {k: thunk() for k, thunk in reference.items()}
        for mode in ("eager", "compiled"):
            g = f if mode == "eager" else torch.compile(f, fullgraph=True)
            for what, thunk in derivatives(g, a, b).items():
                if what.startswith("torch.compile") and mode == "compiled":
                    continue
                print(f"| {name} | {mode} | {what} | {verdict(thunk, wants[what])} |", flush=True)
    compiled = torch.compile(make_while(False), fullgraph=True)
    compiled(tracked_a, b)
    print(
        "\nvalue and gradient, median of 30 (ms): "
        f"Python loop {median_ms(f_python, tracked_a, b):.3f}, "
        f"compiled while_loop {median_ms(compiled, tracked_a, b):.3f}"
    )


if __name__ == "__main__":
    main()
