"""Structured parameters vs a flat vector: the same function, steady-state time per call.

Two kinds of problems, each written twice (a tree of parameters, and a hand-written
flat twin reading the same numbers from one vector):

Fixed-overhead microcases, functions so cheap that the per-call boundary shows:

- ``dict10``: ten scalar parameters ``{"p0": ..., "p9": ...}`` (the flat twin
  reads ``x[0]``, ..., ``x[9]``);
- ``leaf10``: one array-valued leaf ``{"w": (10,)}`` (the flat twin uses ``x``
  itself, so the structured side pays one slice per evaluation);
- ``leaves100``: ten leaves of shape ``(10,)`` (``n = 100``).

Problems users have:

- ``lv_fit_t6``, ``lv_fit_t24``: the Lotka-Volterra fit of docs/sensitivity.md
  and docs/parameters.md, the negative log-likelihood of noisy observations of
  an RK4 solution (120 steps to ``t = 6``, 480 steps to ``t = 24``) as a
  function of ``{"alpha", "beta", "delta", "gamma"}`` (flat twin: ``p[0..3]``);
- ``lj13_ab``, ``lj38_ab``: the energy of a binary Lennard-Jones cluster (13 and
  38 atoms, ``n = 39`` and ``114``) as a function of the positions of each
  species, ``{"A": (n_A, 3), "B": (n_B, 3)}`` (flat twin: the ``(3N,)`` vector
  reshaped), pair energies by species, dense over all pairs.

For each, on jax and torch, the public functions ``simdiff.grad`` and
``simdiff.hessian`` at a point given as a tree (structured: the point is
flattened and the result split into leaves / a ``simdiff.Labelled``) and as a
flat array (flat twin), after a warm-up, by the one timer in CPU seconds of the
process (:data:`~simdiff.evidence._timing.CPU_CLOCK`: the machine this runs on is
shared, and time spent descheduled would swamp microsecond differences)
(:func:`simdiff.evidence._timing.interleaved`: 21 rounds in shuffled order, each
sample the mean of 15 calls; calls over 2 ms: 15 rounds of as many calls as
make about 20 ms; over 0.2 s: 5 rounds of one call; torch's Hessian of
``lv_fit_t24``, 7 s a call in its eager RK4 loop, is left out); the median
over rounds, the ratio structured / flat and the difference in microseconds
(what the structure adds per call: flattening the point, splitting the
result, the slices inside the function).
The point is given twice: as numpy (leaves numpy arrays and floats; the flat
twin a numpy vector; results numpy) and as the backend's own arrays (leaves
``jax.Array`` / ``torch.Tensor``, the flat twin one such vector; results in
that framework, so the structured side splits a framework array).  The
gradients at framework arrays of the problems with a function of the tree
(the microcases and the LJ clusters) add what the framework itself takes for
the two ways of writing them, differentiated by hand ("by hand" columns):
``jax.jit(jax.grad(f))`` of the tree and of the flat vector on JAX;
``torch.autograd.grad`` of the same function of the leaves (each a tensor
that requires grad; the function's ``ops.concat`` of them is a
``torch.cat``) and of the flat vector on torch, eager.  Their ratio is the
cost of writing the function on the tree in the framework alone, without
simdiff.

A second table measures what JAX itself takes to hand back ``k`` arrays from one
compiled call, the cost a gradient split into ``k`` leaves pays at ``jax.Array``
points: ``jax.jit`` of a function of one vector returning ``2 x`` (one array)
against one returning ``k`` of its slices (``k`` 0-d arrays of a ``(10,)`` vector,
as ``dict10``'s gradient; 8 and 10 slices ``(10,)`` of a ``(100,)`` vector, as
``leaves100``'s), by the same timer.

Every thread of the process counts in CPU time, so the run uses ``--threads N``
(default 1) threads in torch and XLA, set by :func:`simdiff.backends.set_threads`
before jax is imported: with more than one, a thread spinning or waiting for
another on a loaded machine adds CPU time that is not work.

    python -m validation.benchmarks.bench_structured_params --threads 1 [PROBLEM ...]
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

import simdiff
from simdiff.backends import to_host
from simdiff.evidence._timing import CPU_CLOCK, Summary, interleaved, timed

ROUNDS, INNER = 21, 15
#: calls slower than this (seconds) take SLOW_ROUNDS rounds of about SAMPLE seconds each
SLOW, SLOW_ROUNDS, SAMPLE = 2e-3, 15, 0.02
#: calls slower than this (seconds: torch's eager RK4 loop) take VERY_SLOW_ROUNDS single calls
VERY_SLOW, VERY_SLOW_ROUNDS = 0.2, 5
#: left out: 7 s a call (torch's eager RK4 Hessian over 480 steps)
SKIP = {("lv_fit_t24", "torch", "hessian")}


def _chain(xs: list[Any], ops: Any) -> Any:
    """A coupled scalar function of a list of (array or scalar) parts: a Rosenbrock chain."""
    total = 0.0
    for a, b in itertools.pairwise(xs):
        total = total + ops.sum(100.0 * (b - a**2) ** 2 + (1.0 - a) ** 2)
    return total + ops.sum(ops.sin(xs[-1]))


def cases() -> dict[str, tuple[simdiff.Problem, simdiff.Problem, Any, Callable, Callable]]:
    """``name -> (tree problem, flat twin, a tree point, f(tree, ops), f(flat, ops))``."""
    rng = np.random.default_rng(0)
    out = {}
    keys = tuple(f"p{i}" for i in range(10))  # sorted order p0 < ... < p9; a tuple: not watched
    x0 = rng.uniform(0.5, 1.5, 10)

    def scalars(q: Any, ops: Any) -> Any:
        return _chain([q[k] for k in keys], ops)

    def scalars_flat(x: Any, ops: Any) -> Any:
        return _chain([x[i] for i in range(10)], ops)

    tree = simdiff.Problem(scalars, x0=dict(zip(keys, x0, strict=True)), name="dict10")
    flat = simdiff.Problem(scalars_flat, x0=x0)
    out["dict10"] = (tree, flat, dict(zip(keys, x0 + 0.01, strict=True)), scalars, scalars_flat)
    w = rng.uniform(0.5, 1.5, 10)

    def one(x: Any, ops: Any) -> Any:
        return ops.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    def vector(q: Any, ops: Any) -> Any:
        return one(q["w"], ops)

    leaf = simdiff.Problem(vector, x0={"w": w}, name="leaf10")
    out["leaf10"] = (leaf, simdiff.Problem(one, x0=w), {"w": w + 0.01}, vector, one)
    big = rng.uniform(0.5, 1.5, (10, 10))

    def vectors_flat(x: Any, ops: Any) -> Any:
        return _chain([x[10 * i : 10 * i + 10] for i in range(10)], ops)

    tree100 = simdiff.Problem(scalars, x0=dict(zip(keys, big, strict=True)), name="leaves100")
    flat100 = simdiff.Problem(vectors_flat, x0=big.reshape(-1))
    out["leaves100"] = (tree100, flat100, dict(zip(keys, big + 0.01, strict=True)), scalars,
                        vectors_flat)  # fmt: skip
    return out


def _lv_rhs(t: Any, y: Any, p: Any, ops: Any) -> Any:
    u, v = y[0], y[1]
    return ops.stack([p["alpha"] * u - p["beta"] * u * v, p["delta"] * u * v - p["gamma"] * v])


def _lv_rhs_flat(t: Any, y: Any, p: Any, ops: Any) -> Any:  # [alpha, beta, delta, gamma]
    u, v = y[0], y[1]
    return ops.stack([p[0] * u - p[1] * u * v, p[2] * u * v - p[3] * v])


def lv_fit(t_end: int) -> tuple[simdiff.Problem, simdiff.Problem, dict[str, float]]:
    """The Lotka-Volterra negative log-likelihood to ``t_end`` (20 RK4 steps per unit time,
    observations at each integer time), named and flat, and a point near the fit."""
    from simdiff.ode import ODEProblem

    truth = {"alpha": 1.0, "beta": 0.1, "delta": 0.075, "gamma": 1.5}
    times, sigma, steps = np.arange(1.0, t_end + 1.0), 0.5, 20 * t_end

    def lv(rhs: Any, params: Any, observable: Any = None) -> Any:
        return ODEProblem(rhs, [10.0, 5.0], (0.0, float(t_end)), params, save_at=times,
                          solver="rk4", n_steps=steps, observable=observable)  # fmt: skip

    data = lv(_lv_rhs, truth).evaluate()
    data = data + sigma * np.random.default_rng(1).standard_normal(data.shape)

    def nll(ys: Any, ops: Any) -> Any:
        return 0.5 * ops.sum(((ops.reshape(ys, (-1,)) - ops.asarray(data)) / sigma) ** 2)

    start = {"alpha": 1.2, "beta": 0.08, "delta": 0.08, "gamma": 1.35}
    flat_start = [start[k] for k in ("alpha", "beta", "delta", "gamma")]
    point = {k: v * 0.99 for k, v in truth.items()}
    return lv(_lv_rhs, start, nll), lv(_lv_rhs_flat, flat_start, nll), point


def lj_binary(n_atoms: int) -> tuple[simdiff.Problem, simdiff.Problem, dict[str, np.ndarray],
                                     Callable, Callable]:  # fmt: skip
    """A binary Lennard-Jones cluster of ``n_atoms`` (a third of them species B) on a jittered
    grid: the energy of ``{"A": (n_A, 3), "B": (n_B, 3)}`` and of the flat ``(3N,)`` vector
    (problems, a point, and the two functions ``f(tree, ops)``, ``f(flat, ops)``)."""
    rng = np.random.default_rng(n_atoms)
    side = int(np.ceil(n_atoms ** (1 / 3)))
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)
    pos = 1.12 * grid[:n_atoms] + 0.02 * rng.standard_normal((n_atoms, 3))
    n_b = n_atoms // 3
    species = np.r_[np.zeros(n_atoms - n_b), np.ones(n_b)]
    i, j = np.triu_indices(n_atoms, 1)
    eps = np.where(species[i] == species[j], np.where(species[i] == 0, 1.0, 0.5), 0.75)
    sig = np.where(species[i] == species[j], np.where(species[i] == 0, 1.0, 0.88), 0.8)

    def energy_of(r: Any, ops: Any) -> Any:
        d = r[i] - r[j]
        s6 = (ops.asarray(sig**2) / ops.sum(d * d, axis=-1)) ** 3
        return ops.sum(4.0 * ops.asarray(eps) * (s6 * s6 - s6))

    def energy(q: Any, ops: Any) -> Any:
        return energy_of(ops.concat([q["A"], q["B"]], axis=0), ops)

    def energy_flat(x: Any, ops: Any) -> Any:
        return energy_of(ops.reshape(x, (-1, 3)), ops)

    a, b = pos[: n_atoms - n_b], pos[n_atoms - n_b :]
    tree = simdiff.Problem(energy, x0={"A": a, "B": b}, name=f"lj{n_atoms}_ab")
    flat = simdiff.Problem(energy_flat, x0=pos.reshape(-1), name=f"lj{n_atoms}_ab_flat")
    return tree, flat, {"A": a + 0.005, "B": b - 0.005}, energy, energy_flat


def realistic() -> dict[str, tuple[simdiff.Problem, simdiff.Problem, Any, Any, Any]]:
    """``name -> (tree problem, flat twin, a tree point, f(tree, ops), f(flat, ops))``:
    problems users have (the ODE fits: ``None, None``, their functions are right-hand
    sides)."""
    out: dict[str, tuple[simdiff.Problem, simdiff.Problem, Any, Any, Any]] = {}
    for t_end in (6, 24):
        tree, flat, point = lv_fit(t_end)
        out[f"lv_fit_t{t_end}"] = (tree, flat, point, None, None)
    for n_atoms in (13, 38):
        out[f"lj{n_atoms}_ab"] = lj_binary(n_atoms)
    return out


def _native(backend: str, a: Any) -> Any:
    """``a`` (numpy or a float) as the backend's own array, float64."""
    return simdiff.backends.get_backend(backend).from_numpy(np.asarray(a), "float64")


def _torch_grad(f: Callable, point: Any, ops: Any) -> Any:
    """The gradient of ``f(point, ops)`` by ``torch.autograd.grad``, eager: at a tensor, or at
    a dict of tensors (each leaf made a tensor that requires grad; a dict comes back)."""
    import torch

    if isinstance(point, dict):
        leaves = {k: v.detach().requires_grad_(True) for k, v in point.items()}
        grads = torch.autograd.grad(f(leaves, ops), list(leaves.values()))
        return dict(zip(leaves, grads, strict=True))
    x = point.detach().requires_grad_(True)
    return torch.autograd.grad(f(x, ops), x)[0]


def main(names: tuple[str, ...] = (), threads: int = 1) -> None:
    """Print the table (every problem, or those of ``names``) with ``threads`` threads in torch
    and XLA (XLA's setting takes effect only if jax is not imported yet)."""
    from simdiff.backends import set_threads

    info = set_threads(threads)  # before jax is imported: XLA reads its flags once
    import jax

    print(f"threads: torch {info['torch']} (inter-op {info['torch_interop']}), "
          f"XLA {info['xla']}; XLA_FLAGS={info['XLA_FLAGS']!r}")  # fmt: skip
    print(
        "CPU ms of this process per call (time spent descheduled on a machine with more work "
        "than cores does not count; every thread of the process does)"
    )
    print(f"ms per call: median over {ROUNDS} interleaved rounds (shuffled order) of the mean "
          f"of {INNER} calls; calls over {1e3 * SLOW:g} ms: {SLOW_ROUNDS} rounds of the mean of "
          f"as many calls as take about {1e3 * SAMPLE:g} ms; over {1e3 * VERY_SLOW:g} ms: "
          f"{VERY_SLOW_ROUNDS} rounds of one call")  # fmt: skip
    print()
    print("| problem | n | backend | point | derivative | flat | structured | structured / flat "
          "| difference (us) | by hand: flat | tree | tree / flat |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    jops = simdiff.backends.get_backend("jax").ops("float64")
    tops = simdiff.backends.get_backend("torch").ops("float64")
    only = set(names)
    for name, (tree, flat, numpy_point, f_tree, f_flat) in {**cases(), **realistic()}.items():
        if only and name not in only:
            continue
        for backend, arrays in itertools.product(("jax", "torch"), ("numpy", "native")):
            point, flat_point = numpy_point, np.asarray(tree.flatten(numpy_point))
            if arrays == "native":
                point = {k: _native(backend, v) for k, v in numpy_point.items()}
                flat_point = _native(backend, flat_point)
            for kind in ("grad", "hessian"):
                if (name, backend, kind) in SKIP:
                    continue
                fn = getattr(simdiff, kind)
                a = to_host(fn(flat, flat_point, backend=backend))
                b = fn(tree, point, backend=backend)
                b = b.to_numpy() if kind == "hessian" else to_host(tree.flatten(b))
                assert np.allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(a).max()), name
                calls = {
                    "flat": lambda fn=fn, p=flat, x=flat_point, b=backend: fn(p, x, backend=b),
                    "structured": lambda fn=fn, p=tree, x=point, b=backend: fn(p, x, backend=b),
                }
                plain = (backend == "jax" and arrays == "native" and kind == "grad"
                         and f_tree is not None and f_flat is not None)  # fmt: skip
                if plain:  # what JAX itself takes for the same two ways of writing it
                    g_flat = jax.jit(jax.grad(lambda x, f=f_flat: f(x, jops)))
                    g_tree = jax.jit(jax.grad(lambda q, f=f_tree: f(q, jops)))
                    assert np.allclose(np.asarray(g_flat(flat_point)), a, rtol=1e-12, atol=0)
                    calls["hand flat"] = lambda g=g_flat, x=flat_point: g(x).block_until_ready()
                    calls["hand tree"] = lambda g=g_tree, q=point: jax.block_until_ready(g(q))
                by_hand = (backend == "torch" and arrays == "native" and kind == "grad"
                           and f_tree is not None and f_flat is not None)  # fmt: skip
                if by_hand:  # torch's eager autograd on the same two ways of writing it
                    t_flat = lambda x=flat_point, f=f_flat: _torch_grad(f, x, tops)  # noqa: E731
                    t_tree = lambda q=point, f=f_tree: _torch_grad(f, q, tops)  # noqa: E731
                    assert np.allclose(t_flat().numpy(), a, rtol=1e-12, atol=0)
                    calls["hand flat"], calls["hand tree"] = t_flat, t_tree
                for call in calls.values():  # the warm-up: every call after it is steady
                    call()
                one = max(timed(call) for call in calls.values())
                rounds, inner = ROUNDS, INNER
                if one > VERY_SLOW:
                    rounds, inner = VERY_SLOW_ROUNDS, 1
                elif one > SLOW:
                    rounds, inner = SLOW_ROUNDS, max(1, round(SAMPLE / one))
                runs = interleaved(calls, rounds, inner=inner, clock=CPU_CLOCK)
                ms = {k: 1e3 * Summary.of(v).median for k, v in runs.items()}
                f, s = ms["flat"], ms["structured"]
                jf, jt = ms.get("hand flat"), ms.get("hand tree")
                own = f"{jf:.3g} | {jt:.3g} | {jt / jf:.3f}" if jf and jt else "- | - | -"
                print(f"| {name} | {tree.n} | {backend} | {arrays} | {kind} | {f:.3g} | {s:.3g} | "
                      f"{s / f:.3f} | {1e3 * (s - f):.0f} | {own} |", flush=True)  # fmt: skip


def output_arrays() -> None:
    """Print what one ``jax.jit`` call takes to return ``k`` arrays (slices of its input)
    against one array (``2 x``) of the same input, the part of a gradient split into ``k``
    leaves that JAX's dispatch and XLA's runtime take."""
    import jax
    import jax.numpy as jnp

    def slices(width: int, k: int) -> Callable:
        if width == 0:
            return jax.jit(lambda x: tuple(x[i] for i in range(k)))
        return jax.jit(lambda x: tuple(x[width * i : width * (i + 1)] for i in range(k)))

    print()
    print("JAX alone: one jax.jit call returning k arrays (slices of its input vector) against "
          "one returning 2 x (one array)")  # fmt: skip
    print()
    print("| input | k arrays returned | one array (ms) | k arrays (ms) | k / one "
          "| difference (us) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    double = jax.jit(lambda x: 2.0 * x)
    for n, width, k in ((10, 0, 10), (100, 10, 8), (100, 10, 10)):
        x = jnp.asarray(np.linspace(1.0, 2.0, n))
        many = slices(width, k)
        calls = {
            "one": lambda x=x: double(x).block_until_ready(),
            "k": lambda f=many, x=x: jax.block_until_ready(f(x)),
        }
        for call in calls.values():
            call()
        runs = interleaved(calls, ROUNDS, inner=INNER, clock=CPU_CLOCK)
        ms = {key: 1e3 * Summary.of(v).median for key, v in runs.items()}
        what = "0-d" if width == 0 else f"({width},)"
        one, many_ms = ms["one"], ms["k"]
        print(f"| ({n},) {x.dtype} | {k} x {what} | {one:.3g} | {many_ms:.3g} | "
              f"{many_ms / one:.3f} | {1e3 * (many_ms - one):.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m validation.benchmarks.bench_structured_params")
    ap.add_argument("names", nargs="*", help="problems to run (default: all)")
    ap.add_argument("--threads", type=int, default=1, help="threads in torch and XLA")
    args = ap.parse_args()
    main(tuple(args.names), args.threads)
    output_arrays()
