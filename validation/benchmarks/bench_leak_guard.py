"""Cost of the torch leak guard on steady derivative calls (eager torch).

Every eager torch call of :class:`simdiff.Derivatives` runs under
``TorchBackend.leak_guard()`` (:mod:`simdiff.backends.torch.leaks`).  For
each problem (gradient for scalar problems, VJP for vector-valued ones) two
configurations are timed, interleaved in one run (order shuffled each round;
per-call time of the median round and of the fastest round, the latter the
steadier estimate on a shared machine): with the guard, and with
``leak_guard`` replaced by ``contextlib.nullcontext`` ("without"), and
that plus torch's own methods put back in place of the guard's wrappers
("bare torch": what a process that never entered a guard runs; the wrappers
stay in place once installed, so "without" still pays their pass-through,
e.g. on simdiff's own ``x.detach()`` calls, and torch's ``_set_grad_enabled``
with them).  Also printed: the cost of entering and leaving the guard alone,
of the grad-mode check around each call of the problem's function
(``watching_grad_mode``, built into the derivative, so in every column), and
of the wrapped ``_set_grad_enabled`` per ``torch.enable_grad()`` block, and of the
dispatch-level watch per watched aten operation (``detach``, ``item``).  ``--strict`` adds a fourth
configuration, ``Derivatives(probe="strict")`` (every torch operation through
the guard's TorchFunctionMode), and its ratio to the default guard.

    python -m validation.benchmarks.bench_leak_guard
    python -m validation.benchmarks.bench_leak_guard --rounds 7 --calls 200 lj38 rosenbrock4
    python -m validation.benchmarks.bench_leak_guard --strict --rounds 7 --calls 30
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics

import numpy as np
import torch

import problems
import simdiff
from simdiff.backends import get_backend
from simdiff.backends.torch import leaks as _torch_leaks
from simdiff.backends.torch.leaks import LeakGuard
from simdiff.evidence._timing import timed

# torch's own attributes, read before any guard installs its wrappers (None: inherited)
_TORCH_OWN = {name: torch.Tensor.__dict__.get(name) for name in _torch_leaks._METHODS}
_TORCH_TENSOR = torch.tensor
_TORCH_SWITCH = torch._C._set_grad_enabled


def _bare() -> None:
    """torch's own methods back in place of the guard's wrappers."""
    for name, own in _TORCH_OWN.items():
        if own is None:
            if name in torch.Tensor.__dict__:
                delattr(torch.Tensor, name)
        else:
            setattr(torch.Tensor, name, own)
    torch.tensor = _TORCH_TENSOR
    torch._C._set_grad_enabled = _TORCH_SWITCH


DEFAULT = ("rosenbrock4", "muller-brown", "ishigami", "lj7", "lj38", "ode_rk4_decay",
           "lotka_volterra")  # fmt: skip


def _call(name: str, probe: bool | str = True):  # type: ignore[no-untyped-def]
    p = problems.get(name)
    d = simdiff.Derivatives(p, "torch", probe=probe)
    x = p.x0
    if p.is_scalar:
        return lambda: d.grad(x)
    u = np.ones(p.output_shape)
    return lambda: d.vjp(u, x)


def _per_call(f, calls: int) -> float:  # type: ignore[no-untyped-def]
    return timed(f, calls) / calls


def _guard_alone() -> None:
    with LeakGuard():
        pass


def _enable_grad_block() -> None:
    with torch.enable_grad():
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=list(DEFAULT))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--strict", action="store_true", help="also time probe='strict'")
    args = ap.parse_args()
    torch_backend = type(get_backend("torch"))
    guarded = torch_backend.leak_guard
    print(f"guard enter+exit alone: {_per_call(_guard_alone, 100_000) * 1e6:.2f} us")
    # the grad-mode check around each call of the problem's function (in every column)
    plain = lambda x, ops: x  # noqa: E731
    watched = _torch_leaks.watching_grad_mode(plain)
    with LeakGuard():
        bare_fn = _per_call(lambda: plain(None, None), 100_000)
        fn_check = (_per_call(lambda: watched(None, None), 100_000) - bare_fn) * 1e6
    print(f"grad-mode check per call of fn (in every column): {fn_check:.2f} us")
    block: dict[str, list[float]] = {"own": [], "wrapped": []}
    wrapped = torch._C._set_grad_enabled
    with LeakGuard():
        for _ in range(5):  # alternating; the fastest of each
            for config, switch in (("own", _TORCH_SWITCH), ("wrapped", wrapped)):
                torch._C._set_grad_enabled = switch
                block[config].append(_per_call(_enable_grad_block, 50_000) * 1e6)
    torch._C._set_grad_enabled = wrapped
    print(f"torch.enable_grad() block, wrapped switch over torch's: "
          f"{min(block['wrapped']) - min(block['own']):.2f} us")  # fmt: skip
    # the dispatch-level watch: a Python kernel per watched aten operation (detach, detach_,
    # _local_scalar_dense) while a guard is active, whatever reference called it
    t = torch.ones(3, dtype=torch.float64)
    own_detach = torch._C.TensorBase.detach
    own_item = torch._C.TensorBase.item
    per_op: dict[str, list[float]] = {"watched": [], "paused": []}
    with LeakGuard():
        for _ in range(5):
            for config in ("watched", "paused"):
                paused = config == "paused"
                with _torch_leaks.dispatch_paused() if paused else contextlib.nullcontext():
                    pair = _per_call(lambda: (own_detach(t), own_item(t[0])), 20_000)
                    per_op[config].append(pair / 2 * 1e6)
    print(f"dispatch-level watch per watched aten op (detach, item): "
          f"{min(per_op['watched']) - min(per_op['paused']):.2f} us")  # fmt: skip
    strict = " strict (us) | strict/guard (median) |" if args.strict else ""
    print("| problem | derivative | with guard (us) | without (us) | bare torch (us) "
          f"| guard/bare (median) | guard/bare (fastest) |{strict}")  # fmt: skip
    print("|---|---|---|---|---|---|---|" + "---|---|" * args.strict)
    rng = random.Random(0)
    for name in args.names:
        f = _call(name)
        calls = {"guard": f, "none": f, "bare": f}
        if args.strict:
            calls["strict"] = _call(name, probe="strict")
        for g in calls.values():
            for _ in range(5):
                g()  # first calls: probe, traces
        times: dict[str, list[float]] = {config: [] for config in calls}
        for _ in range(args.rounds):
            order = list(calls)
            rng.shuffle(order)
            for config in order:
                if config in ("none", "bare"):
                    torch_backend.leak_guard = lambda self, *args: contextlib.nullcontext()  # type: ignore[method-assign]
                if config == "bare":
                    _bare()
                try:
                    times[config].append(_per_call(calls[config], args.calls))
                finally:
                    torch_backend.leak_guard = guarded  # type: ignore[method-assign]
                    _torch_leaks._install()
        g, n, b = (statistics.median(times[c]) for c in ("guard", "none", "bare"))
        fastest = min(times["guard"]) / min(times["bare"])
        kind = "grad" if problems.get(name).is_scalar else "vjp"
        row = f"| {name} | {kind} | {g * 1e6:.1f} | {n * 1e6:.1f} | {b * 1e6:.1f} | {g / b:.3f} "
        row += f"| {fastest:.3f} |"
        if args.strict:
            st = statistics.median(times["strict"])
            row += f" {st * 1e6:.1f} | {st / g:.2f} |"
        print(row)


if __name__ == "__main__":
    main()
