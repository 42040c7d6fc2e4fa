"""Tolerances for comparing two code paths that compute the same quantity in float64.

Two paths (torch.autograd and torch.func, a compiled and an eager loop, a
closed form and an AD pass) round differently: each floating-point operation
rounds its result by at most ``eps / 2`` relative, and the rounding errors of a
chain of ``length`` operations add up, amplified by the condition number of
the computation.  The bound used here is the classical worst case

    rtol = k * eps * condition * length

with ``k = 4`` (both paths round: a factor 2, and a factor 2 of slack for the
operation that combines the two, e.g. a sum in a different order).  Bit-level
equality is for identity only (the same code path run twice, a cache
returning the same object), never between two paths: a CPU with other vector
widths or another libm changes the last bits.
"""

from __future__ import annotations

import numpy as np

EPS = float(np.finfo(np.float64).eps)


def path_rtol(length: int, condition: float = 1.0, k: float = 4.0) -> float:
    """``k * eps * condition * length``: two paths through ``length`` roundings each.

    >>> path_rtol(1) == 4 * EPS
    True
    """
    if length < 1 or condition < 1.0:
        raise ValueError(f"length >= 1 and condition >= 1 expected; got {length}, {condition}")
    return k * EPS * condition * length


def torch_graph_length(out) -> int:
    """Number of nodes in the autograd graph behind ``out`` (the backward pass's path length)."""
    seen: set[int] = set()
    stack = [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(fn for fn, _ in node.next_functions)
    return max(len(seen), 1)
