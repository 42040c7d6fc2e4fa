"""Which reference each derivative of :func:`simdiff.check` is compared with.

A :class:`Plan` is one computed array (``got``) and the references it is
checked against; each :class:`Ref` says which tolerance family applies
(``"fd"``, ``"exact"`` or ``"cross"``).  Finite-difference references are
computed once and shared by the entries that use them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simdiff.core.derivatives import Derivatives
from simdiff.core.problem import Problem
from simdiff.evidence.check.fd import FiniteDifferences, batched, chunk_for

__all__ = ["SCALAR_ONLY", "Plan", "Ref", "plans"]

SCALAR_ONLY = {"grad", "hessian", "hvp"}


@dataclass
class Ref:
    """A reference: ``value()`` returns an array, or ``(values, err, converged)`` for FD."""

    name: str
    value: Callable[[], Any]
    kind: str  # "fd" | "exact" | "cross"


@dataclass
class Plan:
    """One computed derivative and its references.

    ``order`` and ``weight`` give the function's scale for this array:
    ``max|f| * weight / max(1, max|x|)^order`` (``weight`` is ``max|v|^order``
    for a derivative along ``v``, times ``max|u|`` for a cotangent).
    """

    label: str
    got: Callable[[], Any]
    order: int
    weight: float = 1.0
    refs: list[Ref] = field(default_factory=list)


def _once(fn: Callable[[], Any]) -> Callable[[], Any]:
    cache: dict[str, Any] = {}

    def get() -> Any:
        if "r" not in cache:
            cache["r"] = fn()
        return cache["r"]

    return get


def _inf(a: np.ndarray) -> float:
    return float(np.max(np.abs(a), initial=0.0))


def _exact_jacobian(ex: dict[str, Callable], problem: Problem) -> Callable | None:
    if "jacobian" in ex:
        return ex["jacobian"]
    if "grad" in ex and problem.output_shape == ():
        return ex["grad"]
    return None


def plans(
    kind: str,
    d: Derivatives,
    problem: Problem,
    x: np.ndarray,
    v: np.ndarray,
    u: np.ndarray,
    dirs: np.ndarray,
    f_np: Callable[[np.ndarray], np.ndarray],
    orders: Sequence[int],
    full_n: int,
    max_n: int,
    fd: FiniteDifferences,
) -> Iterator[Plan]:
    """Yield the plans of derivative ``kind`` on the backend of ``d``.

    Above ``max_n`` inputs, directions replace full arrays and nothing
    ``n x n`` is formed: ``grad . w``, ``hvp(w)``, ``jvp(w)``, ``vjp . w``.
    """
    n, ex = problem.n, problem.exact
    jac = _exact_jacobian(ex, problem)
    if kind == "grad":
        if n <= max_n:
            refs = [Ref("scipy-fd", _once(lambda: fd.jacobian(f_np, x)), "fd")]
            if "grad" in ex:
                refs.append(Ref("exact", lambda: ex["grad"](x), "exact"))
            yield Plan("grad", lambda: d.grad(x), 1, 1.0, refs)
            return
        for i, w in enumerate(dirs):
            refs = [Ref("scipy-fd", _once(lambda w=w: fd.direction(f_np, x, w)), "fd")]
            if "grad" in ex:
                refs.append(Ref("exact", lambda w=w: ex["grad"](x) @ w, "exact"))
            yield Plan(f"grad.v{i}", lambda w=w: d.grad(x) @ w, 1, _inf(w), refs)
    elif kind == "hessian":
        g = batched(d.grad, n, chunk_for(d))
        if n <= max_n:
            if n <= full_n:
                name, ref = "scipy-fd", _once(lambda: fd.hessian(f_np, x))
            else:
                name, ref = "scipy-fd(ad grad)", _once(lambda: fd.jacobian(g, x))
            refs = [Ref(name, ref, "fd")]
            if "hessian" in ex:
                refs.append(Ref("exact", lambda: ex["hessian"](x), "exact"))
            yield Plan("hessian", lambda: d.hessian(x), 2, 1.0, refs)
            return
        for i, w in enumerate(dirs):  # H w by an HVP: no n x n array
            refs = [Ref("scipy-fd(ad grad)", _once(lambda w=w: fd.direction(g, x, w)), "fd")]
            if "hessian" in ex:
                refs.append(Ref("exact", lambda w=w: ex["hessian"](x) @ w, "exact"))
            yield Plan(f"hessian.v{i}", lambda w=w: d.hvp(w, x), 2, _inf(w), refs)
    elif kind == "hvp":
        g = batched(d.grad, n, chunk_for(d))
        refs = [Ref("scipy-fd(ad grad)", _once(lambda: fd.direction(g, x, v)), "fd")]
        if "hessian" in ex:
            refs.append(Ref("exact", lambda: ex["hessian"](x) @ v, "exact"))
        yield Plan("hvp", lambda: d.hvp(v, x), 2, _inf(v), refs)
    elif kind == "jvp":
        refs = [Ref("scipy-fd", _once(lambda: fd.direction(f_np, x, v)), "fd")]
        if jac is not None:
            refs.append(Ref("exact", lambda: jac(x) @ v, "exact"))
        yield Plan("jvp", lambda: d.jvp(v, x), 1, _inf(v), refs)
    elif kind == "vjp":

        def s(y: np.ndarray) -> np.ndarray:  # u . f(y), scipy layout
            fy = f_np(y)
            return np.tensordot(u, fy, axes=u.ndim) if u.ndim else u * fy

        weight = max(_inf(np.atleast_1d(u)), 1e-300)
        if n <= max_n:
            refs = [Ref("scipy-fd", _once(lambda: fd.jacobian(s, x)), "fd")]
            if jac is not None:
                refs.append(Ref("exact", lambda: np.tensordot(u, jac(x), axes=u.ndim), "exact"))
            yield Plan("vjp", lambda: d.vjp(u, x), 1, weight, refs)
            return
        for i, w in enumerate(dirs):
            refs = [Ref("scipy-fd", _once(lambda w=w: fd.direction(s, x, w)), "fd")]
            yield Plan(f"vjp.v{i}", lambda w=w: d.vjp(u, x) @ w, 1, weight * _inf(w), refs)
    elif kind == "jacobian":
        if n <= max_n:
            refs = [Ref("scipy-fd", _once(lambda: fd.jacobian(f_np, x)), "fd")]
            if jac is not None:
                refs.append(Ref("exact", lambda: jac(x), "exact"))
            yield Plan("jacobian", lambda: d.jacobian(x), 1, 1.0, refs)
            return
        for i, w in enumerate(dirs):  # J w by a JVP: no m x n array
            refs = [Ref("scipy-fd", _once(lambda w=w: fd.direction(f_np, x, w)), "fd")]
            yield Plan(f"jacobian.v{i}", lambda w=w: d.jvp(w, x), 1, _inf(w), refs)
    elif kind == "derivative":
        top = problem.check_options.max_exact_order
        for k in orders:
            prev = batched(
                lambda y, k=k: d.derivative(
                    k - 1, np.broadcast_to(v, y.shape).copy(), y, method="nested"
                ),
                n,
                chunk_for(d),
            )
            refs = [
                Ref("scipy-fd(ad k-1)", _once(lambda prev=prev: fd.direction(prev, x, v)), "fd")
            ]
            if "derivative" in ex and (top is None or k <= top):
                refs.append(Ref("exact", lambda k=k: ex["derivative"](x, k, v), "exact"))
            nested = _once(lambda k=k: np.asarray(d.derivative(k, v, x, method="nested")))
            yield Plan(f"derivative{k}", nested, k, _inf(v) ** k, refs)
            yield Plan(
                f"derivative{k}.taylor",
                lambda k=k: d.derivative(k, v, x, method="taylor"),
                k,
                _inf(v) ** k,
                [Ref("nested", nested, "cross")],
            )
