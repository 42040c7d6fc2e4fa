"""ODE derivatives on torch as one compiled graph: simdiff's Taylor arithmetic in a while_loop.

torch 2.13 cannot give a loop's second derivatives or forward-mode tangents
through a compiled graph (``python -m validation.benchmarks.probe_torch_loop_hops``):
torch.func refuses the loop operators, double backward is unsupported, dual
numbers lose their tangent.  What is left is to compute the derivatives as
*values*: run the problem under simdiff's Taylor context
(:class:`simdiff.backends.taylor.TaylorOps`, coefficients of ``t -> f(x + t v)``)
and compile that, the ODE loop as ``torch.ops.higher_order.while_loop`` over
the Taylor coefficients.  No autograd is involved, so none of the failures
above applies.

Dynamo cannot trace the Taylor arithmetic (a binary operator between a
user-defined object and a tensor, ``TaylorArray * Tensor``, fails with
"Failed to convert args/kwargs to proxy"), so the function is traced to an
ATen graph by ``make_fx`` (which runs the Python as it is) and that graph is
compiled by ``torch.compile(fullgraph=True)``.  The probe switches simdiff's
eager loop off while tracing (the driver's traced loop runs instead, as on
JAX) and replaces ``TaylorOps.while_loop`` on torch by the operator; nothing in
``simdiff/`` changes.

For each problem and Taylor order: seconds to trace and compile, agreement
with the eager Taylor coefficients and with JAX's, steady milliseconds
(median of 21, one thread) of the compiled call against the eager one and
against JAX's derivative it would replace (Hessian for order 2, JVP for
order 1), and what Inductor's code does per loop iteration (Python calls
per iteration of the compiled body, from a profile).

    python -m validation.benchmarks.probe_torch_taylor_loop [--cpp-wrapper]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import problems
import simdiff
import simdiff.ode.solvers.driver as driver
from simdiff.backends._tree import tree_flatten, tree_unflatten
from simdiff.backends.taylor import TaylorArray, TaylorOps, taylor_function
from simdiff.backends.torch import TorchOps
from simdiff.evidence._timing import first_call
from simdiff.ode import adjoint
from validation.benchmarks.bench_torch import median_ms

jax.config.update("jax_enable_x64", True)
TRACING = [False]


class TracedTorchOps(TorchOps):
    """Torch ops that say "not eager" while ``make_fx`` traces (the driver's traced loop runs)."""

    @property
    def eager(self) -> bool:  # type: ignore[override]
        return not TRACING[0]


def _patch() -> None:
    eager_drive = driver.drive_eager

    def drive_eager(*args: Any, **kwargs: Any) -> Any:
        return None if TRACING[0] else eager_drive(*args, **kwargs)

    driver.drive_eager = drive_eager  # type: ignore[assignment]
    for cls in (adjoint.CheckpointAdjoint, adjoint.DirectAdjoint):
        loop = cls.loop

        def plain_loop(self: Any, cond: Any, body: Any, carry: Any, n: int, ops: Any,
                       _loop: Any = loop) -> Any:  # fmt: skip
            if TRACING[0]:  # forward only: a plain while loop, as ForwardAdjoint
                return ops.while_loop(cond, body, carry, n)
            return _loop(self, cond, body, carry, n, ops)

        cls.loop = plain_loop  # type: ignore[method-assign]
    taylor_loop = TaylorOps.while_loop

    def while_loop(self: TaylorOps, cond: Any, body: Any, carry: Any, max_steps: int) -> Any:
        if not TRACING[0]:
            return taylor_loop(self, cond, body, carry, max_steps)

        def flat(tree: Any) -> tuple[list[Any], Any]:
            leaves, treedef = tree_flatten(tree)
            out = []
            for leaf in leaves:
                if isinstance(leaf, TaylorArray):
                    out.append(leaf.coeffs)
                else:
                    t = leaf if isinstance(leaf, torch.Tensor) else self.base.asarray(leaf)
                    out.append(self.s.lift(t) if t.is_floating_point() else t)
            return out, treedef

        leaves0, treedef = flat(carry)
        taylor = [x.is_floating_point() for x in leaves0]

        def tree(leaves: Any) -> Any:
            return tree_unflatten(
                treedef, [self.wrap(c) if k else c for c, k in zip(leaves, taylor, strict=True)]
            )

        def go(i: torch.Tensor, *leaves: torch.Tensor) -> torch.Tensor:
            pred = cond(tree(leaves))
            return (i < max_steps) & (pred.coeffs[0] if isinstance(pred, TaylorArray) else pred)

        def step(i: torch.Tensor, *leaves: torch.Tensor) -> tuple:
            new, _ = flat(body(tree(leaves)))  # the operator refuses an output aliasing an input
            return (i + 1, *[n.clone() if n is o else n for n, o in zip(new, leaves, strict=True)])

        out = torch.ops.higher_order.while_loop(go, step, (torch.tensor(0), *leaves0), ())
        return tree(list(out[1:]))

    TaylorOps.while_loop = while_loop  # type: ignore[method-assign]


def per_iteration_calls(f: Callable[[], Any]) -> str:
    prof = cProfile.Profile()
    prof.enable()
    f()
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    counts = {fn[2]: s[1] for fn, s in stats.items()}
    body = next((v for k, v in counts.items() if k.startswith("while_loop_body")), None)
    if not body:
        return "body runs in C++ (no Python profile)"
    wanted = ("_reinterpret_tensor", "_empty_strided_cpu", "assert_size_stride")
    parts = [f"{sum(v for k, v in counts.items() if w in k) / body:.0f} {w}" for w in wanted]
    return f"{body} body calls; per iteration: " + ", ".join(parts)


def probe(name: str, order: int, cpp_wrapper: bool) -> None:
    p = problems.get(name)
    g = taylor_function(p, TracedTorchOps(), order)
    x0 = torch.as_tensor(np.asarray(p.x0, dtype=float))
    v = torch.as_tensor(np.random.default_rng(0).standard_normal(p.n))

    def trace() -> Any:
        TRACING[0] = True
        try:
            with torch.no_grad():
                return make_fx(g, tracing_mode="real")(x0, v)
        finally:
            TRACING[0] = False

    graph, traced = first_call(trace)

    def run(x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        return graph(x, d)  # type: ignore[no-any-return]

    compiled = torch.compile(run, fullgraph=True, dynamic=False,
                             options={"cpp_wrapper": cpp_wrapper})  # fmt: skip
    with torch.no_grad():
        out, compile_s = first_call(lambda: compiled(x0, v))
        eager = g(x0, v)
        ms = median_ms(lambda: compiled(x0, v), 21)
        eager_ms = median_ms(lambda: g(x0, v), 5)
        calls = per_iteration_calls(lambda: compiled(x0, v))
    d = simdiff.Derivatives(p, "jax")
    ref = np.asarray(d.taylor(order, v.numpy(), np.asarray(p.x0, float)))
    if order == 2:
        what, jax_ms = "Hessian", median_ms(lambda: d.hessian(), 21)
    else:
        what, jax_ms = "JVP", median_ms(lambda: d.jvp(v.numpy()), 21)
    scale = float(np.abs(ref).max())
    vs_eager = float((out - eager).abs().max()) / scale
    vs_jax = float(np.abs(out.numpy() - ref).max()) / scale
    wrapper = "C++" if cpp_wrapper else "Python"
    print(
        f"| {name} | {order} | {wrapper} | {traced:.1f} / {compile_s:.1f} | {vs_eager:.1e} "
        f"| {vs_jax:.1e} | {ms:.2f} | {eager_ms:.1f} | {jax_ms:.2f} ({what}) "
        f"| {ms / jax_ms:.1f} | {calls} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpp-wrapper", action="store_true", help="Inductor's C++ wrapper too")
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    _patch()
    print(f"torch {torch.__version__}, jax {jax.__version__}, one thread")
    print(
        "| problem | order | wrapper | trace / first call s | vs eager (rel) | vs JAX (rel) "
        "| compiled ms | eager ms | JAX ms | compiled / JAX | Inductor per iteration |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, order in (("lotka_volterra_fit", 2), ("lotka_volterra", 1)):
        for cpp in (False, True) if args.cpp_wrapper else (False,):
            probe(name, order, cpp)


if __name__ == "__main__":
    main()
