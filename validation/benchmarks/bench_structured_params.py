"""Structured parameters vs a flat vector: the same function, steady-state time per call.

Three ways of writing one problem, each with a hand-written flat twin:

- ``dict10``: ten scalar parameters ``{"p0": ..., "p9": ...}`` (the flat twin
  reads ``x[0]``, ..., ``x[9]``);
- ``leaf10``: one array-valued leaf ``{"w": (10,)}`` (the flat twin uses ``x``
  itself, so the structured side pays one slice per evaluation);
- ``leaves100``: ten leaves of shape ``(10,)`` (``n = 100``).

For each, on jax and torch, the public functions ``simdiff.grad`` and
``simdiff.hessian`` at a point given as a tree (structured: the point is
flattened and the result split into leaves / a ``simdiff.Labelled``) and as a
flat array (flat twin), after a warm-up, by the one timer
(:func:`simdiff.evidence._timing.interleaved`: 21 rounds in shuffled order, each
sample the mean of 15 calls); the median over rounds, the ratio structured / flat and the
difference in microseconds (what the structure adds per call: flattening
the point, splitting the result, one slice per leaf inside the function).
The point is given twice: as numpy (leaves numpy arrays and floats; the flat
twin a numpy vector; results numpy) and as the backend's own arrays (leaves
``jax.Array`` / ``torch.Tensor``, the flat twin one such vector; results in
that framework, so the structured side splits a framework array).

    python -m validation.benchmarks.bench_structured_params
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

import simdiff
from simdiff.evidence._timing import Summary, interleaved

ROUNDS, INNER = 21, 15


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


def _native(backend: str, a: Any) -> Any:
    """``a`` (numpy or a float) as the backend's own array, float64."""
    return simdiff.backends.get_backend(backend).from_numpy(np.asarray(a), "float64")


def _host(a: Any) -> np.ndarray:
    return np.asarray(simdiff.backends.backend_of(a).to_numpy(a))


def main() -> None:
    print(f"ms per call: median over {ROUNDS} interleaved rounds (shuffled order) of the mean "
          f"of {INNER} calls")  # fmt: skip
    print()
    print("| problem | n | backend | point | derivative | flat | structured | structured / flat "
          "| difference (us) | jax.jit(jax.grad): flat | tree | tree / flat |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    jops = simdiff.backends.get_backend("jax").ops("float64")
    for name, (tree, flat, numpy_point, f_tree, f_flat) in cases().items():
        for backend, arrays in itertools.product(("jax", "torch"), ("numpy", "native")):
            point, flat_point = numpy_point, np.asarray(tree.flatten(numpy_point))
            if arrays == "native":
                point = {k: _native(backend, v) for k, v in numpy_point.items()}
                flat_point = _native(backend, flat_point)
            for kind in ("grad", "hessian"):
                fn = getattr(simdiff, kind)
                host = _host
                a = np.asarray(host(fn(flat, flat_point, backend=backend)))
                b = fn(tree, point, backend=backend)
                b = b.to_numpy() if kind == "hessian" else np.asarray(host(tree.flatten(b)))
                assert np.allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(a).max()), name
                calls = {
                    "flat": lambda fn=fn, p=flat, x=flat_point, b=backend: fn(p, x, backend=b),
                    "structured": lambda fn=fn, p=tree, x=point, b=backend: fn(p, x, backend=b),
                }
                plain = backend == "jax" and arrays == "native" and kind == "grad"
                if plain:  # what JAX itself takes for the same two ways of writing it
                    g_flat = jax.jit(jax.grad(lambda x, f=f_flat: f(x, jops)))
                    g_tree = jax.jit(jax.grad(lambda q, f=f_tree: f(q, jops)))
                    assert np.allclose(np.asarray(g_flat(flat_point)), a, rtol=1e-12, atol=0)
                    calls["jax flat"] = lambda g=g_flat, x=flat_point: g(x).block_until_ready()
                    calls["jax tree"] = lambda g=g_tree, q=point: jax.block_until_ready(g(q))
                for call in calls.values():  # the warm-up: every call after it is steady
                    call()
                runs = interleaved(calls, ROUNDS, inner=INNER)
                ms = {k: 1e3 * Summary.of(v).median for k, v in runs.items()}
                f, s = ms["flat"], ms["structured"]
                jf, jt = ms.get("jax flat"), ms.get("jax tree")
                own = f"{jf:.3g} | {jt:.3g} | {jt / jf:.3f}" if jf and jt else "- | - | -"
                print(f"| {name} | {tree.n} | {backend} | {arrays} | {kind} | {f:.3g} | {s:.3g} | "
                      f"{s / f:.3f} | {1e3 * (s - f):.0f} | {own} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
