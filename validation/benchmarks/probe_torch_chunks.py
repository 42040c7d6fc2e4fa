"""Would a torch while loop run as compiled chunks bring ODE derivatives near JAX?  A probe.

Issue 14's idea for the ODE rows of the catalogue: :func:`simdiff.ode.solvers.driver.drive`'s
traced loop (masked body, ``done`` lanes, controller on ``stop_gradient`` values)
has no Python control flow inside ``body``, so on torch ``while_loop(cond, body,
carry)`` can run as a Python loop over *compiled chunks*: ``chunk(carry)`` = ``K``
iterations of ``carry = where(cond(carry), body(carry), carry)``, compiled by
``torch.compile(fullgraph=True, dynamic=False)``, one host read of ``cond``
after each chunk.  The gradient is plain ``torch.autograd`` through the chunks
(AOTAutograd compiles the backward).

This script measures it without touching the library: on the catalogue's
``lotka_volterra_fit`` (Dopri5, rtol 1e-7) it runs simdiff's own driver with
``drive_eager`` switched off and ``TorchOps.while_loop`` replaced by the
chunked loop, and, because a compiled ``matmul`` of a (7,) by (7, 2) tableau
product is an external ``mm`` call per stage, with ``simdiff.ode.solvers.rk.weighted``
using its broadcast-and-sum form inside the compiled graph (as on JAX).  Each
``K`` runs in its own process with a fresh Inductor cache (so the first-call
seconds are cold compiles).  Printed per ``K``: first value and first gradient
seconds (compile included), interleaved steady-state medians of the chunked
value and gradient, simdiff's eager torch and JAX, chunks per solve, the
per-call floor of a compiled function taking the same arguments (Dynamo's
guards and the call itself), and the largest relative difference of the
gradient from eager torch and from JAX.

``--transforms`` probes, on a small chunk (four masked Euler steps of
Lotka-Volterra), whether torch 2.13 can take higher derivatives through or of a
compiled chunk: (a) ``torch.func.grad`` / ``jvp`` / ``vmap`` over it, and
forward-mode AD (``torch.autograd.forward_ad``) through it; (b) double backward
(``create_graph=True``, rev-rev Hessians), also with AOTAutograd's donated
buffers off; (c) ``torch.compile`` of a function that calls ``torch.func.jvp``,
``grad``, or ``jvp(grad)`` of the chunk.  torch's messages are printed verbatim
(first lines).

    python -m validation.benchmarks.probe_torch_chunks --K 8 16 --repeats 15
    python -m validation.benchmarks.probe_torch_chunks --transforms
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

PROBLEM = "lotka_volterra_fit"


# --------------------------------------------------------------------------- chunked loop


def _chunked_ops(K: int, cpp_wrapper: bool) -> Any:
    """A ``TorchOps`` whose ``while_loop`` runs compiled chunks of ``K`` masked iterations."""
    from simdiff.backends._tree import tree_map
    from simdiff.backends.torch import INDUCTOR_MIN_CHUNK, TorchOps, _numpy_guards_dropped

    def chunk(cond: Callable, body: Callable, carry: Any) -> Any:
        for _ in range(K):
            pred = cond(carry)
            carry = tree_map(lambda new, old, c=pred: torch.where(c, new, old), body(carry), carry)
        return carry

    options = {"guard_filter_fn": _numpy_guards_dropped, "cpp.min_chunk_size": INDUCTOR_MIN_CHUNK,
               "cpp_wrapper": cpp_wrapper}  # fmt: skip
    compiled = torch.compile(chunk, fullgraph=True, dynamic=False, options=options)

    class ChunkedOps(TorchOps):
        calls = 0

        def while_loop(self, cond: Callable, body: Callable, carry: Any, max_steps: int) -> Any:
            n = 0
            while n < max_steps and bool(cond(carry)):
                carry = compiled(cond, body, carry)
                ChunkedOps.calls += 1
                n += K
            return carry

    return ChunkedOps()


@contextlib.contextmanager
def _traced_loop_with_fused_tableau() -> Iterator[None]:
    """The driver's traced loop on torch; tableau products as broadcast sums when compiled."""
    import simdiff.ode.solvers.dopri5 as dopri5
    import simdiff.ode.solvers.driver as driver
    import simdiff.ode.solvers.rk as rk

    eager, weighted = driver.drive_eager, rk.weighted

    def fused(w: Any, ks: Any, ops: Any) -> Any:
        if torch.compiler.is_compiling() and len(w.shape) == 1:
            return ops.sum(ops.reshape(w, (-1,) + (1,) * (len(ks.shape) - 1)) * ks, axis=0)
        return weighted(w, ks, ops)

    driver.drive_eager = lambda *a, **k: None  # type: ignore[assignment]
    rk.weighted = dopri5.weighted = fused  # type: ignore[assignment]
    try:
        yield
    finally:
        driver.drive_eager = eager  # type: ignore[assignment]
        rk.weighted = dopri5.weighted = weighted  # type: ignore[assignment]


def one_k(K: int, repeats: int, rounds: int, cpp_wrapper: bool) -> None:
    """Measure the chunked loop for one ``K`` (run in a fresh process and Inductor cache)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import problems
    import simdiff
    from simdiff.backends.torch import TorchOps
    from simdiff.evidence._timing import Summary, first_call
    from validation.benchmarks.bench_torch import median_ms

    prob = problems.get(PROBLEM)
    x0 = torch.tensor(prob.x0, dtype=torch.float64)
    chunked, eager = _chunked_ops(K, cpp_wrapper), TorchOps()

    def value_chunked(x: Any) -> Any:
        with _traced_loop_with_fused_tableau():
            return prob._fn(x, chunked)

    def value_eager(x: Any) -> Any:
        return prob._fn(x, eager)

    def grad_of(value: Callable[[Any], Any]) -> Callable[[], Any]:
        def grad() -> Any:
            x = x0.clone().requires_grad_(True)
            return torch.autograd.grad(value(x), x)[0]

        return grad

    first_value = first_call(lambda: value_chunked(x0))[1]
    counter = type(chunked)
    before = counter.calls
    value_chunked(x0)
    per_solve = counter.calls - before
    g_chunked, first_grad = first_call(grad_of(value_chunked))
    g_eager = grad_of(value_eager)()
    D = simdiff.Derivatives(prob, "jax")
    g_jax = np.asarray(D.grad(prob.x0))
    D.value(prob.x0)

    def rel(a: Any, b: Any) -> float:
        return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))

    # the floor: a compiled function of the same arguments that does nothing (guards + call)
    captured: dict[str, Any] = {}

    class Capture(TorchOps):
        def while_loop(self, cond: Callable, body: Callable, carry: Any, max_steps: int) -> Any:
            captured.update(cond=cond, body=body, carry=carry)
            return super().while_loop(cond, body, carry, max_steps)

    with _traced_loop_with_fused_tableau():
        prob._fn(x0, Capture())
    nothing = torch.compile(lambda cond, body, carry: carry[0] + 1.0, fullgraph=True,
                            dynamic=False)  # fmt: skip
    nothing(captured["cond"], captured["body"], captured["carry"])
    one_chunk = [captured["cond"], captured["body"], captured["carry"]]

    rows: dict[str, list[float]] = {}
    configs: dict[str, Callable[[], Any]] = {
        "chunked value": lambda: value_chunked(x0),
        "chunked grad": grad_of(value_chunked),
        "eager value": lambda: value_eager(x0),
        "eager grad": grad_of(value_eager),
        "jax value": lambda: jax.block_until_ready(D.value(prob.x0)),
        "jax grad": lambda: jax.block_until_ready(D.grad(prob.x0)),
        "floor per chunk call": lambda: nothing(*one_chunk),
    }
    for _ in range(rounds):
        for name, fn in configs.items():
            n = max(3, repeats // 3) if name.startswith("eager") else repeats
            rows.setdefault(name, []).append(median_ms(fn, n, warm=False))
    print(f"K = {K}  (cpp_wrapper={cpp_wrapper}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch threads)")  # fmt: skip
    print(f"  first chunked value {first_value:.1f} s, first chunked gradient {first_grad:.1f} s "
          f"(cold Inductor cache: compile included)")  # fmt: skip
    print(f"  chunks per solve {per_solve}; gradient vs eager torch {rel(g_chunked, g_eager):.1e}, "
          f"vs JAX {rel(g_chunked, g_jax):.1e}")  # fmt: skip
    med = {name: Summary.of(v).median for name, v in rows.items()}
    for name, ms in med.items():
        print(f"  {name:22s} {ms:9.3f} ms  (rounds: {', '.join(f'{v:.3f}' for v in rows[name])})")
    for kind in ("value", "grad"):
        print(f"  {kind}: chunked / JAX = {med['chunked ' + kind] / med['jax ' + kind]:.1f}x, "
              f"eager / JAX = {med['eager ' + kind] / med['jax ' + kind]:.1f}x, "
              f"chunked / eager = {med['chunked ' + kind] / med['eager ' + kind]:.2f}")  # fmt: skip
    sys.stdout.flush()


# --------------------------------------------------------------------------- transforms


def _small_chunk(y: torch.Tensor, p: torch.Tensor, n: torch.Tensor) -> tuple[Any, Any]:
    for _ in range(4):
        go = n < 10.0
        k = torch.stack([p[0] * y[0] - p[1] * y[0] * y[1], p[2] * y[0] * y[1] - p[3] * y[1]])
        y = torch.where(go, y + 0.01 * k, y)
        n = n + torch.where(go, 1.0, 0.0)
    return y, n


def transforms() -> None:
    """Probe (a)-(c) of the module docstring; one line per attempt, torch's error verbatim."""
    torch.set_default_dtype(torch.float64)
    y0, n0 = torch.tensor([1.0, 1.0]), torch.tensor(0.0)
    p0, v = torch.tensor([1.5, 1.0, 1.0, 3.0]), torch.tensor([1.0, 0.5, -0.3, 0.2])
    compiled = torch.compile(_small_chunk, fullgraph=True, dynamic=False)

    def f(chunk: Callable, p: torch.Tensor) -> torch.Tensor:
        y, n = y0, n0
        for _ in range(3):
            y, n = chunk(y, p, n)
        return (y**2).sum()

    def eager_f(p: torch.Tensor) -> torch.Tensor:
        return f(_small_chunk, p)

    def attempt(name: str, fn: Callable[[], Any], reference: Callable[[], Any]) -> None:
        try:
            out = fn()
        except Exception as exc:  # torch's errors are what is probed
            lines = [s.strip() for s in str(exc).strip().splitlines() if s.strip()]
            print(f"{name}: FAIL {type(exc).__name__}: {' | '.join(lines[:4])[:600]}")
            return
        if out is None:
            print(f"{name}: WRONG (no derivative: None)")
            return
        diff = float((out - reference()).abs().max())
        print(f"{name}: {'OK' if diff < 1e-12 else 'WRONG'} (max difference from eager {diff:.1e})")

    def plain_grad(chunk: Callable) -> Any:
        p = p0.clone().requires_grad_(True)
        return torch.autograd.grad(f(chunk, p), p)[0]

    def rev_rev_hvp(chunk: Callable) -> Any:
        p = p0.clone().requires_grad_(True)
        g = torch.autograd.grad(f(chunk, p), p, create_graph=True)[0]
        return torch.autograd.grad(g @ v, p)[0]

    def forward_ad() -> Any:
        import torch.autograd.forward_ad as fwad

        with fwad.dual_level():
            return fwad.unpack_dual(f(compiled, fwad.make_dual(p0, v))).tangent

    eager_jvp = lambda: torch.func.jvp(eager_f, (p0,), (v,))[1]  # noqa: E731
    attempt("plain autograd gradient through compiled chunks", lambda: plain_grad(compiled),
            lambda: plain_grad(_small_chunk))  # fmt: skip
    attempt("(a) torch.func.grad over compiled chunks",
            lambda: torch.func.grad(lambda p: f(compiled, p))(p0),
            lambda: torch.func.grad(eager_f)(p0))  # fmt: skip
    attempt(
        "(a) torch.func.jvp over compiled chunks",
        lambda: torch.func.jvp(lambda p: f(compiled, p), (p0,), (v,))[1],
        eager_jvp,
    )
    attempt("(a) torch.func.vmap over compiled chunks",
            lambda: torch.func.vmap(lambda p: f(compiled, p))(p0[None].repeat(3, 1)),
            lambda: torch.func.vmap(eager_f)(p0[None].repeat(3, 1)))  # fmt: skip
    attempt("(a) forward-mode AD (forward_ad dual) through compiled chunks", forward_ad, eager_jvp)
    attempt("(b) double backward (create_graph=True) through compiled chunks",
            lambda: rev_rev_hvp(compiled), lambda: rev_rev_hvp(_small_chunk))  # fmt: skip
    import torch._functorch.config as functorch_config

    with functorch_config.patch(donated_buffer=False):
        again = torch.compile(_small_chunk, fullgraph=True, dynamic=False)
        attempt("(b) double backward, AOTAutograd donated_buffer=False",
                lambda: rev_rev_hvp(again), lambda: rev_rev_hvp(_small_chunk))  # fmt: skip

    def jvp_chunk(y: Any, p: Any, n: Any, w: Any) -> Any:
        return torch.func.jvp(lambda q: _small_chunk(y, q, n)[0], (p,), (w,))[1]

    def grad_chunk(y: Any, p: Any, n: Any) -> Any:
        return torch.func.grad(lambda q: (_small_chunk(y, q, n)[0] ** 2).sum())(p)

    def hvp_chunk(y: Any, p: Any, n: Any, w: Any) -> Any:
        return torch.func.jvp(lambda q: grad_chunk(y, q, n), (p,), (w,))[1]

    cases = (("jvp(chunk)", jvp_chunk, (y0, p0, n0, v)),
             ("grad(chunk)", grad_chunk, (y0, p0, n0)),
             ("jvp(grad(chunk)) (fwd-rev HVP)", hvp_chunk, (y0, p0, n0, v)))  # fmt: skip
    for name, fn, args in cases:
        c = torch.compile(fn, fullgraph=True, dynamic=False)
        attempt(f"(c) torch.compile of torch.func {name}", lambda c=c, a=args: c(*a),
                lambda fn=fn, a=args: fn(*a))  # fmt: skip


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--K", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-cpp-wrapper", action="store_true",
                        help="Inductor's Python wrapper instead of its C++ one")  # fmt: skip
    parser.add_argument("--transforms", action="store_true")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.transforms:
        transforms()
        return
    if args.one is not None:
        one_k(args.one, args.repeats, args.rounds, not args.no_cpp_wrapper)
        return
    for K in args.K:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
            cmd = [sys.executable, "-m", "validation.benchmarks.probe_torch_chunks",
                   "--one", str(K),
                   "--repeats", str(args.repeats), "--rounds", str(args.rounds)]  # fmt: skip
            if args.no_cpp_wrapper:
                cmd.append("--no-cpp-wrapper")
            subprocess.run(cmd, env=env, check=False)


if __name__ == "__main__":
    main()
