"""ODE derivatives side by side: simdiff, diffrax, torchdiffeq, torchode, finite differences.

``--problem long`` (default; issue 11's problem): the Lotka–Volterra misfit,
4 parameters, 100 save times on [0, 10], Dopri5 at rtol 1e-8, atol 1e-10.
``--problem catalogue``: the catalogue's ``lotka_volterra_fit`` (6 times on
[0, 3], rtol 1e-7).  One interleaved run (so load changes hit every
configuration alike) of:

- simdiff-jax, simdiff-torch: :class:`simdiff.Derivatives` over simdiff's
  Dopri5 (default adjoint, ``CheckpointAdjoint``); torch gradients by plain
  autograd at the top level (``TorchBackend.grad``);
- simdiff-torch ``compile=True``: the same, the whole Dopri5 step loop
  (method, controller, saving) one ``torch.compile`` graph with torch's
  ``while_loop`` (value and gradient; the first call includes the compiles);
- diffrax: the same ODEProblem through :func:`simdiff.ode.diffrax_problem`
  (Dopri5, PIDController; RecursiveCheckpointAdjoint for the value and the
  gradient, DirectAdjoint for the Hessian and the HVP);
- torchdiffeq: ``odeint(method="dopri5")`` with plain autograd;
- torchode: ``AutoDiffAdjoint(Dopri5, IntegralController)`` at its defaults
  (eager, autograd through the solver and its step-size control);
- finite differences: central differences of the numpy evaluation.

The torch peers' Hessians are ``torch.autograd.functional.hessian`` and their
HVPs double backward.  Each gradient is compared with simdiff-jax's and with a
tight reference: the forward sensitivity equations integrated by
``scipy.integrate.solve_ivp`` (DOP853, rtol 1e-12, analytic Jacobians).
Prints first-call seconds (compile on JAX), steady-state medians and the
ratios gradient / solve (cheap-gradient principle: about 4 or less) and
Hessian / gradient (about p + 1 = 5 for forward-over-reverse).

``--problem memory``: reverse-mode peak memory of the JAX gradient through
FixedStep RK4 with 10^3, 10^4 and 10^5 steps, CheckpointAdjoint against
DirectAdjoint (XLA's ``memory_analysis()`` of the compiled gradient, and the
resident-set peak of one call by :class:`simdiff.evidence._memory.PeakRSS`), with the
exponent of ``n`` fitted to each.

``--problem robertson``: Robertson's stiff kinetics to t = 1e5, simdiff
Rodas3 against diffrax Kvaerno5 at several tolerances: gradient time and
gradient error against Radau-integrated sensitivity equations, and simdiff's
time interpolated (log-log) to each diffrax point's accuracy.  ``--robertson-torch
[RTOL ...]`` adds simdiff-torch Rodas3 (``compile=True``: each step and its VJP
one compiled graph, the loop on the host; and eager) at those tolerances
(default 1e-6 and 1e-8), and simdiff-torch Rodas5P the same two ways at
``--rtols-rodas5p`` (default 1e-5 to 1e-8), timed in the same
interleaved run, with their step counts and compiled Rodas5P's time
interpolated to each diffrax point's accuracy.

``--problem hires``: HIRES (8 species, the stiff test-set problem) at
rtol 1e-9, atol 1e-12, the gradient of y8(321.8122) with respect to the 12
rate constants: simdiff-jax and simdiff-torch Rodas5P (eager, and with
``compile=True``: each step one compiled graph and, under the default
``CheckpointAdjoint``, its VJP by recomputation another, the loop on the host) against diffrax
Kvaerno5 (through :func:`simdiff.ode.diffrax_problem`), and simdiff-jax at
tolerances 10 and 100 times tighter (to compare at Kvaerno5's accuracy); gradient time
(median, interleaved), first call, resident-set peak of the first and of a
later call, value error against the test set's reference solution and
gradient error against Radau-integrated sensitivity equations (rtol 1e-11).

``--problem brusselator2d``: the 2-D Brusselator with diffusion (Hairer &
Wanner), a 32 x 32 grid (2,048 states, u and v interleaved, no-flux
boundaries, 5-point Laplacian), A = 1, B = 3.4, alpha = 0.002, the gradient of
the mean of u at T with respect to (A, B, alpha): simdiff Rodas5P with
``jac_sparsity`` (compressed forward mode) and ``linsolve="banded"`` (block
elimination in 32 blocks of 64, W's blocks read from the compressed
Jacobian) at rtol and at 1000 times tighter (Kvaerno5's accuracy), against
diffrax Kvaerno5 (dense Jacobian) at rtol; gradient time (median,
interleaved), first call, value error against SciPy's Radau (rtol 1e-10,
with the same sparsity pattern) and the gradients' relative difference.
``--bruss-torch`` adds simdiff-torch (eager) at rtol.

``--problem lorenz96``: Lorenz-96 with a forcing parameter per site,
``y_i' = (y_{i+1} - y_{i-2}) y_{i-1} - y_i + F_i`` (periodic), F = 8 + a
small site-to-site variation, y0 = 8 + a small random perturbation, on [0, 1] with
5 save times; the loss is the misfit 0.5 sum (y - data)^2 against a
trajectory of F = 8 (the n parameters are the F_i).  Dopri5 at rtol 1e-6,
atol 1e-8, for each n of ``--l96-n``: simdiff-jax (default adjoint) against
diffrax Dopri5 through :func:`simdiff.ode.diffrax_problem`
(RecursiveCheckpointAdjoint for the solve and the gradient, DirectAdjoint
for the HVP); median of interleaved repeats (fewer at n >= 10,000), ratios
simdiff / diffrax and the gradients' relative difference.

``--problem all``: long, catalogue, robertson, hires and memory, one after the other.

    python -m validation.benchmarks.bench_ode --problem all --repeats 7
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
import scipy.linalg
import scipy.sparse
import torch

import problems
import problems.ode as po
import simdiff
from problems.ode import hires_jacobians, sensitivities
from simdiff.evidence._accuracy import rel_error
from simdiff.evidence._memory import PeakRSS
from simdiff.evidence._timing import first_call
from simdiff.ode import (
    CheckpointAdjoint,
    DirectAdjoint,
    Dopri5,
    FixedStep,
    ODEProblem,
    Rodas3,
    Rodas5P,
    diffrax_problem,
)

jax.config.update("jax_enable_x64", True)

KINDS = ("value", "grad", "hessian", "hvp")
Callables = dict[str, Callable[[], object]]


# --------------------------------------------------------------------------- problems


def lv_long(max_steps: int = 4096, solver: Any = None) -> ODEProblem:
    """Issue 11's problem: Lotka–Volterra misfit, 100 save times on [0, 10], Dopri5 1e-8/1e-10."""
    times = np.linspace(0.1, 10.0, 100)
    data = scipy.integrate.solve_ivp(
        lambda t, y: po.lotka_volterra_rhs(t, y, po.LV_PARAMS, np), (0.0, 10.0), po.LV_Y0,
        method="DOP853", rtol=1e-12, atol=1e-12, t_eval=times,
    ).y.T.copy()  # fmt: skip

    def misfit(ys, ops):
        return 0.5 * ops.sum((ys - ops.asarray(data)) ** 2)

    p = ODEProblem(
        po.lotka_volterra_rhs, po.LV_Y0, (0.0, 10.0), np.array([1.2, 0.8, 1.2, 2.6]),
        save_at=times, observable=misfit, name="lotka_volterra_long",
        solver=solver or Dopri5(rtol=1e-8, atol=1e-10, max_steps=max_steps),
    )  # fmt: skip
    p.data = data
    return p


def _data(p: ODEProblem) -> np.ndarray:
    return getattr(p, "data", None) if hasattr(p, "data") else po.lv_data()


def lv_reference_grad(p: ODEProblem) -> np.ndarray:
    """Gradient of the misfit 0.5 sum (y - data)^2 by DOP853 sensitivities at rtol 1e-12."""

    def jy(y: np.ndarray, q: np.ndarray) -> np.ndarray:
        a, b, d, g = q
        return np.array([[a - b * y[1], -b * y[0]], [d * y[1], d * y[0] - g]])

    def jp(y: np.ndarray, q: np.ndarray) -> np.ndarray:
        return np.array([[y[0], -y[0] * y[1], 0.0, 0.0], [0.0, 0.0, y[0] * y[1], -y[1]]])

    ys, S = sensitivities(po.lotka_volterra_rhs, jy, jp, np.asarray(p.y0), p.x0, p.save_at,
                          "DOP853", 1e-12, 1e-14)  # fmt: skip
    return np.einsum("ti,tij->j", ys - _data(p), S)


# --------------------------------------------------------------------------- configurations


def torch_callables(misfit: Callable[[torch.Tensor], torch.Tensor], x0: np.ndarray,
                    v: np.ndarray) -> Callables:  # fmt: skip
    """Value, gradient, Hessian and HVP of a torch misfit by plain autograd."""
    x = torch.tensor(x0, dtype=torch.float64)
    vt = torch.tensor(v, dtype=torch.float64)

    def value() -> object:
        with torch.no_grad():
            return misfit(x)

    def grad() -> object:
        xr = x.clone().requires_grad_(True)
        return torch.autograd.grad(misfit(xr), xr)[0]

    def hessian() -> object:
        return torch.autograd.functional.hessian(misfit, x)

    def hvp() -> object:  # double backward
        xr = x.clone().requires_grad_(True)
        g = torch.autograd.grad(misfit(xr), xr, create_graph=True)[0]
        return torch.autograd.grad(g @ vt, xr)[0]

    return {"value": value, "grad": grad, "hessian": hessian, "hvp": hvp}


def _lv_torch(theta: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a, b, d, g = theta[0], theta[1], theta[2], theta[3]
    y0, y1 = y[..., 0], y[..., 1]
    return torch.stack([a * y0 - b * y0 * y1, d * y0 * y1 - g * y1], dim=-1)


def torchdiffeq_callables(p: ODEProblem, v: np.ndarray) -> Callables:
    """The misfit by ``torchdiffeq.odeint(method="dopri5")``."""
    import torchdiffeq

    t = torch.tensor(np.concatenate([[0.0], p.save_at]), dtype=torch.float64)
    y0 = torch.tensor(p.y0, dtype=torch.float64)
    data = torch.tensor(_data(p), dtype=torch.float64)
    solver = p.solver

    def misfit(theta: torch.Tensor) -> torch.Tensor:
        ys = torchdiffeq.odeint(lambda tt, y: _lv_torch(theta, y), y0, t, rtol=solver.rtol,
                                atol=solver.atol, method="dopri5")  # fmt: skip
        return 0.5 * torch.sum((ys[1:] - data) ** 2)

    return torch_callables(misfit, p.x0, v)


def torchode_callables(p: ODEProblem, v: np.ndarray) -> Callables:
    """The misfit by torchode: ``AutoDiffAdjoint(Dopri5, IntegralController)``, a batch of one."""
    import torchode

    t = torch.tensor(np.concatenate([[0.0], p.save_at]), dtype=torch.float64)[None]
    y0 = torch.tensor(p.y0, dtype=torch.float64)[None]
    data = torch.tensor(_data(p), dtype=torch.float64)
    solver = p.solver

    def misfit(theta: torch.Tensor) -> torch.Tensor:
        term = torchode.ODETerm(lambda tt, y: _lv_torch(theta, y))
        control = torchode.IntegralController(atol=solver.atol, rtol=solver.rtol, term=term)
        adjoint = torchode.AutoDiffAdjoint(torchode.Dopri5(term=term), control,
                                           max_steps=solver.max_steps)  # fmt: skip
        sol = adjoint.solve(torchode.InitialValueProblem(y0=y0, t_eval=t))
        if int(sol.status[0]) != 0:
            raise RuntimeError(f"torchode failed with status {int(sol.status[0])}")
        return 0.5 * torch.sum((sol.ys[0, 1:] - data) ** 2)

    return torch_callables(misfit, p.x0, v)


def fd_callables(p: ODEProblem) -> Callables:
    """Central differences of the numpy evaluation (h = 1e-6 relative)."""
    h = 1e-6 * np.maximum(1.0, np.abs(p.x0))
    eye = np.eye(p.n)

    def grad() -> object:
        return np.array([(p.evaluate(p.x0 + h[i] * eye[i]) - p.evaluate(p.x0 - h[i] * eye[i]))
                         / (2 * h[i]) for i in range(p.n)])  # fmt: skip

    return {"value": lambda: p.evaluate(p.x0), "grad": grad}


def configurations(p: ODEProblem, v: np.ndarray) -> dict[str, Callables]:
    out: dict[str, Callables] = {}
    for be in ("jax", "torch"):
        d = simdiff.Derivatives(p, backend=be)
        out[f"simdiff-{be}"] = {"value": d.value, "grad": d.grad, "hessian": d.hessian,
                                "hvp": lambda d=d: d.hvp(v)}  # fmt: skip
    # compile=True: on torch the Dopri5 step loop is one compiled graph (torch's while_loop);
    # value and gradient only (second-order derivatives never take the compiled loop)
    dc = simdiff.Derivatives(p, backend="torch", compile=True)
    out["simdiff-torch compile=True (loop compiled)"] = {"value": dc.value, "grad": dc.grad}
    dv = simdiff.Derivatives(diffrax_problem(p, "grad", solver="dopri5"), backend="jax")
    dh = simdiff.Derivatives(diffrax_problem(p, "hessian", solver="dopri5"), backend="jax")
    out["diffrax (dopri5)"] = {"value": dv.value, "grad": dv.grad, "hessian": dh.hessian,
                               "hvp": lambda: dh.hvp(v)}  # fmt: skip
    out["torchdiffeq (dopri5, autograd)"] = torchdiffeq_callables(p, v)
    out["torchode (dopri5, AutoDiffAdjoint)"] = torchode_callables(p, v)
    out["finite differences (numpy)"] = fd_callables(p)
    return out


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    """``(seconds, result)`` of one call, JAX's asynchronous dispatch included."""

    def call() -> object:
        out = fn()
        if isinstance(out, jax.Array):
            out.block_until_ready()
        return out

    out, seconds = first_call(call)
    return seconds, out


def _rel(a: object, ref: np.ndarray) -> float:
    return rel_error(_np(a), ref)


# --------------------------------------------------------------------------- the LV table


def compare(p: ODEProblem, repeats: int) -> dict[str, dict[str, float]]:
    """The interleaved side-by-side run; prints the table and returns the medians (s)."""
    v = np.linspace(1.0, -0.5, p.n)  # the HVP direction
    configs = configurations(p, v)
    first: dict[str, dict[str, float]] = {}
    results: dict[str, dict[str, object]] = {}
    failures: dict[str, str] = {}
    for name, kinds in configs.items():
        first[name], results[name] = {}, {}
        for kind, fn in list(kinds.items()):
            try:
                first[name][kind], results[name][kind] = timed(fn)
            except Exception as exc:  # a peer that cannot do it is reported, not hidden
                failures[f"{name} {kind}"] = f"{type(exc).__name__}: {str(exc)[:160]}"
                del kinds[kind]
    ref_grad = np.asarray(results["simdiff-jax"]["grad"])
    tight = lv_reference_grad(p)
    times: dict[str, dict[str, list[float]]] = {n: {k: [] for k in c} for n, c in configs.items()}
    for _ in range(repeats):
        for name, kinds in configs.items():
            for kind, fn in kinds.items():
                times[name][kind].append(timed(fn)[0])
    print(f"{p.name} (p = {p.n}), median of {repeats}, interleaved; ms")
    print(
        "| configuration | solve | grad | Hessian | HVP | grad/solve | Hessian/grad "
        "| first call solve / grad / Hessian / HVP (s) | grad rel. diff. vs simdiff-jax "
        "| grad rel. error vs reference |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    medians: dict[str, dict[str, float]] = {}
    for name, kinds in times.items():
        med = {k: statistics.median(t) for k, t in kinds.items()}
        medians[name] = med
        g = results[name].get("grad")
        cells = [f"{1e3 * med[k]:.1f}" if k in med else "n/a" for k in KINDS]
        r1 = f"{med['grad'] / med['value']:.1f}" if "grad" in med else "n/a"
        r2 = f"{med['hessian'] / med['grad']:.1f}" if "hessian" in med else "n/a"
        fc = " / ".join(f"{first[name][k]:.2f}" if k in first[name] else "n/a" for k in KINDS)
        d1 = f"{_rel(g, ref_grad):.1e}" if g is not None else "n/a"
        d2 = f"{_rel(g, tight):.1e}" if g is not None else "n/a"
        print(f"| {name} | {' | '.join(cells)} | {r1} | {r2} | {fc} | {d1} | {d2} |")
    for name, res in results.items():  # each HVP against its own Hessian times v
        if "hvp" in res and "hessian" in res:
            hv = _np(res["hessian"]) @ v
            print(f"- {name}: HVP vs its Hessian @ v, rel. diff. {_rel(res['hvp'], hv):.1e}")
    print(f"- reference gradient (DOP853 sensitivities, rtol 1e-12): {np.array2string(tight)}")
    for what, why in failures.items():
        print(f"- {what} failed: {why}")
    return medians


def max_steps_sweep(p: ODEProblem, budgets: list[int], repeats: int) -> dict[str, dict[str, float]]:
    """simdiff-jax solve and gradient times for several ``max_steps``."""
    print(f"simdiff-jax, {p.name}, median of {repeats}; ms")
    print("| max_steps | solve | grad | grad/solve |")
    print("|---|---|---|---|")
    out = {}
    for n in budgets:
        solver = Dopri5(rtol=p.solver.rtol, atol=p.solver.atol, max_steps=n)
        q = ODEProblem(p.rhs, p.y0, p.t_span, p.x0, save_at=p.save_at, observable=p.observable,
                       solver=solver)  # fmt: skip
        d = simdiff.Derivatives(q, backend="jax")
        d.value(), d.grad()
        tv, tg = [], []
        for _ in range(repeats):
            tv.append(timed(d.value)[0])
            tg.append(timed(d.grad)[0])
        v, g = statistics.median(tv), statistics.median(tg)
        out[str(n)] = {"value": v, "grad": g}
        print(f"| {n} | {1e3 * v:.2f} | {1e3 * g:.2f} | {g / v:.1f} |")
    return out


# --------------------------------------------------------------------------- memory


def fitted_exponent(ns: list[int], values: list[float]) -> float:
    """Least-squares slope of ``log value`` against ``log n``."""
    return float(np.polyfit(np.log(ns), np.log(values), 1)[0])


def memory(ns: list[int], repeats: int) -> dict[str, dict[int, float]]:
    """Peak memory of the compiled JAX gradient through n RK4 steps, per adjoint."""
    ops = simdiff.get_ops("jax")
    adjoints = {"CheckpointAdjoint": CheckpointAdjoint(), "DirectAdjoint": DirectAdjoint()}
    temp: dict[str, dict[int, float]] = {a: {} for a in adjoints}
    rss: dict[str, dict[int, float]] = {a: {} for a in adjoints}
    print("Reverse-mode memory: JAX gradient of the long LV misfit through FixedStep RK4 with n "
          f"steps on [0, 10]; time median of {repeats}")  # fmt: skip
    print("| n steps | adjoint | XLA temp (MB) | RSS peak of one call (MB) | grad (ms) "
          "| grad rel. diff. vs CheckpointAdjoint |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for n in ns:
        ref = None
        for name, adjoint in adjoints.items():
            base = lv_long(solver=FixedStep(n_steps=n))
            p = ODEProblem(base.rhs, base.y0, base.t_span, base.x0, save_at=base.save_at,
                           observable=base.observable, solver=base.solver,
                           adjoint=adjoint)  # fmt: skip
            x = jnp.asarray(p.x0)
            compiled = jax.jit(jax.grad(lambda z, p=p: p.fn(z, ops))).lower(x).compile()
            temp[name][n] = compiled.memory_analysis().temp_size_in_bytes / 2**20
            with PeakRSS() as probe:  # the first run allocates XLA's buffers
                g = np.asarray(compiled(x))
            rss[name][n] = probe.delta_mb
            ts = [timed(lambda c=compiled, x=x: c(x))[0] for _ in range(repeats)]
            ref = g if ref is None else ref
            print(f"| {n} | {name} | {temp[name][n]:.3f} | {rss[name][n]:.1f} "
                  f"| {1e3 * statistics.median(ts):.1f} | {_rel(g, ref):.1e} |")  # fmt: skip
    for name in adjoints:
        ks = sorted(temp[name])
        if len(ks) > 1:  # a power needs two sizes at least
            e = fitted_exponent(ks, [temp[name][k] for k in ks])
            print(f"- {name}: XLA temp memory ~ n^{e:.2f} (fit over n = {ks})")
    return temp


# --------------------------------------------------------------------------- Robertson

ROBERTSON_TIMES = np.logspace(-1, 5, 13)  # 0.1 ... 1e5


def robertson_long(rtol: float, solver: str = "rodas3", max_steps: int = 20_000) -> ODEProblem:
    """Robertson to t = 1e5, x = ln k; observable sum_i y1(t_i) + 1e4 sum_i y2(t_i).

    ``solver``: ``"rodas3"``, ``"rodas5p"`` or ``"kvaerno5"`` (diffrax's, through
    :func:`simdiff.ode.diffrax_problem`)."""
    atol = 1e-4 * rtol
    method = Rodas5P if solver == "rodas5p" else Rodas3
    sol = method(rtol=rtol, atol=atol, max_steps=max_steps)
    p = ODEProblem(
        po.robertson_rhs, np.array([1.0, 0.0, 0.0]), (0.0, 1e5), np.log(po.ROBERTSON_K),
        save_at=ROBERTSON_TIMES, observable=_robertson_observable, solver=sol,
        name="robertson_1e5",
    )  # fmt: skip
    if solver == "kvaerno5":
        return diffrax_problem(p, "grad", solver="kvaerno5")
    return p


def _robertson_observable(ys: Any, ops: Any) -> Any:
    return ops.sum(ys[:, 0]) + 1e4 * ops.sum(ys[:, 1])


def robertson_reference(rtol: float = 1e-11, x: Any = None) -> tuple[float, np.ndarray]:
    """Value and gradient (in ``x = ln k``) of the observable by Radau sensitivity equations."""
    x = np.log(po.ROBERTSON_K) if x is None else np.asarray(x, dtype=np.float64)
    k = np.exp(x)

    def jy(y: np.ndarray, _: np.ndarray) -> np.ndarray:
        return np.array([[-k[0], k[2] * y[2], k[2] * y[1]],
                         [k[0], -2 * k[1] * y[1] - k[2] * y[2], -k[2] * y[1]],
                         [0.0, 2 * k[1] * y[1], 0.0]])  # fmt: skip

    def jp(y: np.ndarray, _: np.ndarray) -> np.ndarray:  # d f / d ln k_j = k_j d f / d k_j
        r1, r2, r3 = k[0] * y[0], k[1] * y[1] ** 2, k[2] * y[1] * y[2]
        return np.array([[-r1, 0.0, r3], [r1, -r2, -r3], [0.0, r2, 0.0]])

    ys, S = sensitivities(po.robertson_rhs, jy, jp, np.array([1.0, 0.0, 0.0]), x,
                          ROBERTSON_TIMES, "Radau", rtol, 1e-6 * rtol)  # fmt: skip
    w = np.array([1.0, 1e4, 0.0])
    return float(np.sum(ys @ w)), np.einsum("i,tij->j", w, S)


def robertson(rtols: list[float], rtols_diffrax: list[float], repeats: int,
              rtols_torch: list[float] | None = None,
              rtols_rodas5p: list[float] | None = None) -> dict[str, Any]:  # fmt: skip
    """Gradient time and error, simdiff Rodas3 (at ``rtols``) vs diffrax Kvaerno5.

    Rodas3 is of order 3 and Kvaerno5 of order 5, so equal tolerances do not
    give equal accuracy: simdiff runs at more (tighter) tolerances, and its
    time is interpolated to each diffrax point's gradient error.  With
    ``rtols_torch``, simdiff-torch Rodas3 at those tolerances, and with
    ``rtols_rodas5p`` simdiff-torch Rodas5P at those, each ``compile=True``
    (each step and its VJP one compiled graph, the loop on the host; the
    first call includes the compiles) and eager, timed in the same
    interleaved run; compiled Rodas5P's time is interpolated to each diffrax
    point's gradient error too.
    """
    value_ref, grad_ref = robertson_reference()
    _, grad_ref2 = robertson_reference(1e-10)
    print("Robertson to t = 1e5 (13 save times, x = ln k), gradient of sum y1 + 1e4 sum y2; "
          f"atol = 1e-4 rtol; median of {repeats}, interleaved")  # fmt: skip
    print(f"- reference: Radau sensitivities at rtol 1e-11, gradient {np.array2string(grad_ref)}; "
          f"rtol 1e-10 differs by {_rel(grad_ref2, grad_ref):.1e}")  # fmt: skip
    configs: dict[tuple[str, float], Callable[[], object]] = {}
    errs: dict[tuple[str, float], tuple[float, float]] = {}
    first: dict[tuple[str, float], float] = {}
    grads: dict[tuple[str, float], np.ndarray] = {}
    steps: dict[tuple[str, float], tuple[int, int]] = {}
    runs = [("rodas3", r) for r in rtols] + [("kvaerno5", r) for r in rtols_diffrax]
    for method, rts in (("rodas3", rtols_torch), ("rodas5p", rtols_rodas5p)):
        for r in rts or []:
            runs += [(f"{method}-torch-compiled", r), (f"{method}-torch", r)]
    for solver, rtol in runs:
        method = solver.split("-")[0]
        if "-torch" in solver:
            p = robertson_long(rtol, method)
            info = p.solve_info(backend="torch")
            steps[solver, rtol] = (info["n_accepted"], info["n_rejected"])
            d = simdiff.Derivatives(p, backend="torch", compile=solver.endswith("compiled"))
        else:
            d = simdiff.Derivatives(robertson_long(rtol, solver), backend="jax")
        first[solver, rtol], g = timed(d.grad)
        grads[solver, rtol] = _np(g)
        val = float(d.value())
        errs[solver, rtol] = (abs(val - value_ref) / abs(value_ref), _rel(g, grad_ref))
        configs[solver, rtol] = d.grad
    ts: dict[tuple[str, float], list[float]] = {key: [] for key in configs}
    for _ in range(repeats):
        for key, fn in configs.items():
            ts[key].append(timed(fn)[0])
    med = {key: statistics.median(t) for key, t in ts.items()}
    print("| solver | rtol | grad (ms) | first call (s) | value rel. error | grad rel. error |")
    print("|---|---|---|---|---|---|")
    names = {"rodas3": "simdiff Rodas3", "kvaerno5": "diffrax Kvaerno5"}
    for method in ("Rodas3", "Rodas5P"):
        names[f"{method.lower()}-torch-compiled"] = (
            f"simdiff-torch {method} compile=True (step compiled)"
        )
        names[f"{method.lower()}-torch"] = f"simdiff-torch {method} (eager)"
    for (solver, rtol), m in med.items():
        ev, eg = errs[solver, rtol]
        print(f"| {names[solver]} | {rtol:.0e} | {1e3 * m:.1f} | {first[solver, rtol]:.2f} "
              f"| {ev:.1e} | {eg:.1e} |")  # fmt: skip
    for solver, rtol in med:
        if solver.startswith("rodas3-torch") and ("rodas3", rtol) in med:
            ratio = med[solver, rtol] / med["rodas3", rtol]
            print(f"- {names[solver]}, rtol {rtol:.0e}: {ratio:.0f}x simdiff Rodas3 (JAX)'s "
                  f"gradient; gradient rel. diff. vs JAX "
                  f"{_rel(grads[solver, rtol], grads['rodas3', rtol]):.1e}")  # fmt: skip
    for (solver, rtol), (acc, rej) in steps.items():
        per = 1e3 * med[solver, rtol] / (acc + rej)
        print(f"- {names[solver]}, rtol {rtol:.0e}: {acc} accepted and {rej} rejected steps, "
              f"{per:.2f} ms per step")  # fmt: skip
    ratios = {}
    for label, solver, kept in (("simdiff Rodas3", "rodas3", rtols),
                                ("simdiff-torch Rodas5P compile=True", "rodas5p-torch-compiled",
                                 rtols_rodas5p or [])):  # fmt: skip
        ratios[solver] = _at_diffrax_error(label, solver, kept, rtols_diffrax, errs, med)
    return {"errors": {f"{s} {r:g}": v for (s, r), v in errs.items()}, "ratios": ratios,
            "median_s": {f"{s} {r:g}": m for (s, r), m in med.items()}}  # fmt: skip


def _at_diffrax_error(label: str, solver: str, rtols: list[float], rtols_diffrax: list[float],
                      errs: dict, med: dict) -> dict[float, float]:  # fmt: skip
    """Print ``solver``'s time interpolated (log-log along its rows) to each diffrax row's
    gradient error, against diffrax's; returns the ratios."""
    if not rtols:
        return {}
    pts = sorted((errs[solver, r][1], med[solver, r]) for r in rtols)
    le, lt = np.log([e for e, _ in pts]), np.log([t for _, t in pts])
    short = "simdiff" if solver == "rodas3" else "torch"
    print(f"| diffrax Kvaerno5 rtol | its grad error | diffrax grad (ms) "
          f"| {label} at that error (ms) | {short} / diffrax |")  # fmt: skip
    print("|---|---|---|---|---|")
    ratios = {}
    for r in rtols_diffrax:
        e, t = errs["kvaerno5", r][1], med["kvaerno5", r]
        if not (le[0] <= math.log(e) <= le[-1]) or len(pts) < 2:
            print(f"| {r:.0e} | {e:.1e} | {1e3 * t:.1f} | outside {short}'s range | n/a |")
            continue
        ts_at = math.exp(float(np.interp(math.log(e), le, lt)))
        ratios[r] = ts_at / t
        print(f"| {r:.0e} | {e:.1e} | {1e3 * t:.1f} | {1e3 * ts_at:.1f} | {ts_at / t:.2f} |")
    return ratios


# --------------------------------------------------------------------------- HIRES


def hires_problem(rtol: float = 1e-9, atol: float = 1e-13, solver: str = "rodas5p",
                  max_steps: int = 10_000) -> ODEProblem:  # fmt: skip
    """HIRES on [0, 321.8122], observable y8(T), parameters the 12 rate constants."""
    p = ODEProblem(
        po.hires_rhs, po.HIRES_Y0, (0.0, po.HIRES_T), po.HIRES_K,
        save_at=np.array([po.HIRES_T]), observable=lambda ys, ops: ys[-1, 7],
        solver=Rodas5P(rtol=rtol, atol=atol, max_steps=max_steps), name="hires_y8",
    )  # fmt: skip
    if solver == "kvaerno5":
        return diffrax_problem(p, "grad", solver="kvaerno5")
    return p


def hires_reference(rtol: float = 1e-11, x: Any = None) -> tuple[float, np.ndarray]:
    """y8(T) and its gradient in the rate constants by Radau sensitivity equations."""
    x = po.HIRES_K if x is None else np.asarray(x, dtype=np.float64)
    ys, S = sensitivities(po.hires_rhs, lambda y, k: hires_jacobians(y, k)[0],
                          lambda y, k: hires_jacobians(y, k)[1], po.HIRES_Y0, x,
                          np.array([po.HIRES_T]), "Radau", rtol, 1e-4 * rtol,
                          newton_jac=True)  # fmt: skip
    return float(ys[-1, 7]), S[-1, 7].copy()


def hires(rtol: float, repeats: int, backends: tuple[str, ...] = ("jax", "torch")) -> dict:
    """simdiff Rodas5P (JAX, torch) against diffrax Kvaerno5 on HIRES's y8(T) gradient."""
    value_ref = po.HIRES_REFERENCE[7]
    _, grad_ref = hires_reference()
    atol = 1e-3 * rtol  # diffrax Kvaerno5 at rtol 1e-9 fails (NaN) with atol 1e-13
    configs: dict[str, Any] = {}
    for be in backends:
        configs[f"simdiff-{be} Rodas5P"] = simdiff.Derivatives(
            hires_problem(rtol, atol), backend=be)  # fmt: skip
        if be == "torch":  # each step (and its VJP) compiled, the loop on the host
            configs["simdiff-torch Rodas5P compile=True (step compiled)"] = simdiff.Derivatives(
                hires_problem(rtol, atol), backend="torch", compile=True)  # fmt: skip
    if "jax" in backends:  # tighter: to compare at the accuracy of Kvaerno5, not the tolerance
        for f in (10.0, 100.0):
            configs[f"simdiff-jax Rodas5P, rtol {rtol / f:g}"] = simdiff.Derivatives(
                hires_problem(rtol / f, atol / f), backend="jax")  # fmt: skip
    configs["diffrax Kvaerno5"] = simdiff.Derivatives(
        hires_problem(rtol, atol, solver="kvaerno5"), backend="jax")  # fmt: skip
    first: dict[str, float] = {}
    rss_first: dict[str, float] = {}
    rss_later: dict[str, float] = {}
    errs: dict[str, tuple[float, float]] = {}
    for name, d in configs.items():
        with PeakRSS() as probe:
            first[name], g = timed(d.grad)
        rss_first[name] = probe.delta_mb
        val = float(d.value())
        errs[name] = (abs(val - value_ref) / abs(value_ref), _rel(g, grad_ref))
    ts: dict[str, list[float]] = {name: [] for name in configs}
    for i in range(repeats):
        for name, d in configs.items():
            if i == 0:
                with PeakRSS() as probe:
                    ts[name].append(timed(d.grad)[0])
                rss_later[name] = probe.delta_mb
            else:
                ts[name].append(timed(d.grad)[0])
    med = {name: statistics.median(t) for name, t in ts.items()}
    base = med["diffrax Kvaerno5"]
    steps = hires_problem(rtol, atol).solve_info(backend="jax")
    print(f"HIRES, gradient of y8({po.HIRES_T}) in the 12 rate constants, rtol {rtol:g}, atol "
          f"{atol:g}; median of {repeats}, interleaved; Rodas5P: "
          f"{int(steps['n_accepted'])} accepted, {int(steps['n_rejected'])} rejected steps "
          f"(JAX)")  # fmt: skip
    print("| configuration | grad (s) | vs diffrax Kvaerno5 | first call (s) "
          "| RSS peak, first call (MB) | RSS peak, later call (MB) "
          "| y8(T) rel. error vs test set | grad rel. error vs Radau sensitivities |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name in configs:
        ev, eg = errs[name]
        print(f"| {name} | {med[name]:.2f} | {med[name] / base:.2f}x | {first[name]:.1f} "
              f"| {rss_first[name]:.0f} | {rss_later[name]:.0f} | {ev:.1e} "
              f"| {eg:.1e} |")  # fmt: skip
    if "jax" in backends:
        for name in configs:
            if name.startswith("simdiff-torch"):
                print(f"- {name}: {med[name] / med['simdiff-jax Rodas5P']:.1f}x simdiff-jax's "
                      "gradient")  # fmt: skip
    print(f"- reference gradient (Radau sensitivities, rtol 1e-11): {np.array2string(grad_ref)}")
    return {"median_s": med, "first_s": first, "rss_first_mb": rss_first,
            "rss_later_mb": rss_later, "errors": errs}  # fmt: skip


# --------------------------------------------------------------------------- 2-D Brusselator

BRUSS_N = 32
BRUSS_P = np.array([1.0, 3.4, 0.002])  # A, B, alpha


def bruss2d_rhs(t: Any, y: Any, p: Any, ops: Any) -> Any:
    """The 2-D Brusselator on an n x n cell grid of [0, 1]^2, states (u, v) interleaved per cell.

    ``u' = A + u^2 v - (B + 1) u + alpha lap(u)``, ``v' = B u - u^2 v + alpha lap(v)``,
    ``lap`` the 5-point Laplacian with no-flux (mirrored) boundaries.
    """
    n = math.isqrt(int(y.shape[0]) // 2)
    z = ops.reshape(y, (n, n, 2))
    zp = ops.concat([z[:1], z, z[-1:]], axis=0)
    zp = ops.concat([zp[:, :1], zp, zp[:, -1:]], axis=1)
    lap = (zp[2:, 1:-1] + zp[:-2, 1:-1] + zp[1:-1, 2:] + zp[1:-1, :-2] - 4.0 * z) * float(n * n)
    u, v = z[..., 0], z[..., 1]
    uuv = u * u * v
    du = p[0] + uuv - (p[1] + 1.0) * u + p[2] * lap[..., 0]
    dv = p[1] * u - uuv + p[2] * lap[..., 1]
    return ops.reshape(ops.stack([du, dv], axis=-1), (-1,))


def bruss2d_y0(n: int = BRUSS_N) -> np.ndarray:
    x = (np.arange(n) + 0.5) / n
    X, Y = np.meshgrid(x, x, indexing="ij")
    u = 22.0 * Y * (1.0 - Y) ** 1.5
    v = 27.0 * X * (1.0 - X) ** 1.5
    return np.stack([u, v], axis=-1).reshape(-1)


def bruss2d_pattern(n: int = BRUSS_N) -> np.ndarray:
    """The exact pattern of ``df/dy``: each cell's two species, and each species' 4 neighbours."""
    idx = np.arange(n * n).reshape(n, n)
    m = np.zeros((2 * n * n, 2 * n * n), dtype=bool)
    for di, dj in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
        a = idx[max(0, -di) : n - max(0, di), max(0, -dj) : n - max(0, dj)].ravel()
        b = idx[max(0, di) : n + min(0, di), max(0, dj) : n + min(0, dj)].ravel()
        for s in (0, 1):
            m[2 * a + s, 2 * b + s] = True
    cells = np.arange(n * n)
    m[2 * cells, 2 * cells + 1] = m[2 * cells + 1, 2 * cells] = True
    return m


def bruss2d_problem(t1: float, rtol: float, n: int = BRUSS_N, solver: str = "rodas5p",
                    linsolve: str = "banded") -> ODEProblem:  # fmt: skip
    """The mean of u at ``t1`` as a function of (A, B, alpha)."""
    p = ODEProblem(
        bruss2d_rhs, bruss2d_y0(n), (0.0, t1), BRUSS_P, save_at=np.array([t1]),
        observable=lambda ys, ops: ops.mean(ys[-1, 0::2]),
        solver=Rodas5P(rtol=rtol, atol=1e-3 * rtol, max_steps=10_000,
                       jac_sparsity=bruss2d_pattern(n), linsolve=linsolve),
        name=f"brusselator2d_{n}x{n}",
    )  # fmt: skip
    if solver == "kvaerno5":
        return diffrax_problem(p, "grad", solver="kvaerno5")
    return p


def bruss2d_reference(t1: float, n: int = BRUSS_N) -> float:
    """The mean of u at ``t1`` by SciPy's Radau at rtol 1e-10 with the exact sparsity pattern."""
    ops = simdiff.backends.get_ops("numpy")
    sol = scipy.integrate.solve_ivp(
        lambda t, y: np.asarray(bruss2d_rhs(t, y, BRUSS_P, ops)), (0.0, t1), bruss2d_y0(n),
        method="Radau", rtol=1e-10, atol=1e-13,
        jac_sparsity=scipy.sparse.csr_matrix(bruss2d_pattern(n)),
    )  # fmt: skip
    return float(sol.y[0::2, -1].mean())


def brusselator2d(t1: float, rtol: float, repeats: int, torch_too: bool, n: int = BRUSS_N,
                  tight: float = 1e-3) -> dict:  # fmt: skip
    """simdiff Rodas5P (sparse J, banded W) against diffrax Kvaerno5 on the 2-D Brusselator.

    simdiff at ``rtol`` and at ``tight * rtol`` (for Kvaerno5's accuracy at
    ``rtol``); with ``torch_too`` simdiff-torch (eager) at ``rtol``.
    """
    ref = bruss2d_reference(t1, n)
    rt = rtol * tight
    configs: dict[str, Any] = {
        f"simdiff-jax Rodas5P, banded, rtol {rtol:g}": simdiff.Derivatives(
            bruss2d_problem(t1, rtol, n), backend="jax"),
        f"simdiff-jax Rodas5P, banded, rtol {rt:g}": simdiff.Derivatives(
            bruss2d_problem(t1, rt, n), backend="jax"),
    }  # fmt: skip
    if torch_too:
        configs[f"simdiff-torch Rodas5P, banded, rtol {rtol:g}"] = simdiff.Derivatives(
            bruss2d_problem(t1, rtol, n), backend="torch")  # fmt: skip
    configs[f"diffrax Kvaerno5, rtol {rtol:g}"] = simdiff.Derivatives(
        bruss2d_problem(t1, rtol, n, solver="kvaerno5"), backend="jax")  # fmt: skip
    kv = f"diffrax Kvaerno5, rtol {rtol:g}"
    first: dict[str, float] = {}
    grads: dict[str, np.ndarray] = {}
    errs: dict[str, float] = {}
    for name, d in configs.items():
        first[name], g = timed(d.grad)
        grads[name] = _np(g)
        errs[name] = abs(float(d.value()) - ref) / abs(ref)
        print(f"- {name}: first gradient call {first[name]:.1f} s", flush=True)
    ts: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(repeats):
        for name, d in configs.items():
            ts[name].append(timed(d.grad)[0])
    med = {name: statistics.median(t) for name, t in ts.items()}
    base = med[kv]
    g_ref = grads[kv]
    steps = {r: bruss2d_problem(t1, r, n).solve_info(backend="jax") for r in (rtol, rt)}
    print(f"2-D Brusselator {n}x{n} ({2 * n * n} states), gradient of mean u({t1:g}) in "
          f"(A, B, alpha), atol = 1e-3 rtol; median of {repeats}, interleaved; Rodas5P: "
          + ", ".join(f"{int(i['n_accepted'])} accepted steps at rtol {r:g}"
                      for r, i in steps.items()))  # fmt: skip
    print("| configuration | grad (s) | vs diffrax Kvaerno5 | first call (s) "
          "| mean u(T) rel. error vs Radau 1e-10 | grad rel. diff. vs Kvaerno5 |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name in configs:
        print(f"| {name} | {med[name]:.2f} | {med[name] / base:.2f}x | {first[name]:.1f} "
              f"| {errs[name]:.1e} | {_rel(grads[name], g_ref):.1e} |")  # fmt: skip
    tight_name = f"simdiff-jax Rodas5P, banded, rtol {rt:g}"
    print(f"- gradient ({tight_name}): {np.array2string(grads[tight_name])}")
    return {"median_s": med, "first_s": first, "errors": errs}


# --------------------------------------------------------------------------- Lorenz-96

L96_T = 1.0
L96_SAVE = np.linspace(0.2, L96_T, 5)


def l96_rhs(t: Any, y: Any, p: Any, ops: Any) -> Any:
    """Lorenz-96: ``y_i' = (y_{i+1} - y_{i-2}) y_{i-1} - y_i + F_i``, periodic, ``p = F``."""
    return (ops.roll(y, -1) - ops.roll(y, 2)) * ops.roll(y, 1) - y + p


def l96_problem(n: int, rtol: float = 1e-6, atol: float = 1e-8) -> ODEProblem:
    """The misfit of the saved trajectory against that of F = 8, as a function of F (n values)."""
    i = np.arange(n)
    y0 = 8.0 + 0.1 * np.random.default_rng(0).standard_normal(n)
    forcing = 8.0 + 0.5 * np.cos(2.0 * np.pi * i / n)
    ops = simdiff.backends.get_ops("numpy")
    data = scipy.integrate.solve_ivp(
        lambda t, y: l96_rhs(t, y, np.full(n, 8.0), ops), (0.0, L96_T), y0,
        method="DOP853", rtol=1e-10, atol=1e-12, t_eval=L96_SAVE,
    ).y.T.copy()  # fmt: skip

    def misfit(ys: Any, ops: Any) -> Any:
        return 0.5 * ops.sum((ys - ops.asarray(data)) ** 2)

    return ODEProblem(
        l96_rhs, y0, (0.0, L96_T), forcing, save_at=L96_SAVE, observable=misfit,
        solver=Dopri5(rtol=rtol, atol=atol, max_steps=1024), name=f"lorenz96_{n}",
    )  # fmt: skip


def lorenz96(ns: list[int], repeats: int) -> dict[int, dict[str, float]]:
    """simdiff-jax Dopri5 against diffrax Dopri5 on Lorenz-96: solve, gradient and HVP."""
    print(f"Lorenz-96, F per site (n parameters), Dopri5 rtol 1e-6, atol 1e-8, [0, {L96_T:g}], "
          f"{len(L96_SAVE)} save times; median of interleaved repeats; ms")  # fmt: skip
    print("| n | steps | repeats | simdiff solve | diffrax solve | solve ratio | simdiff grad "
          "| diffrax grad | grad ratio | simdiff HVP | diffrax HVP | HVP ratio "
          "| grad rel. diff. | HVP rel. diff. |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    out: dict[int, dict[str, float]] = {}
    for n in ns:
        p = l96_problem(n)
        v = np.cos(np.arange(n) * 0.7)
        sd = simdiff.Derivatives(p, backend="jax")
        dg = simdiff.Derivatives(diffrax_problem(p, "grad", solver="dopri5"), backend="jax")
        dh = simdiff.Derivatives(diffrax_problem(p, "hvp", solver="dopri5"), backend="jax")
        fns: dict[str, Callable[[], object]] = {
            "simdiff solve": sd.value, "diffrax solve": dg.value,
            "simdiff grad": sd.grad, "diffrax grad": dg.grad,
            "simdiff HVP": lambda sd=sd, v=v: sd.hvp(v),
            "diffrax HVP": lambda dh=dh, v=v: dh.hvp(v),
        }  # fmt: skip
        res = {name: timed(fn)[1] for name, fn in fns.items()}  # first calls: compiles
        reps = repeats if n < 10_000 else max(1, min(repeats, 3))
        ts: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(reps):
            for name, fn in fns.items():
                ts[name].append(timed(fn)[0])
        med = {name: statistics.median(t) for name, t in ts.items()}
        steps = int(p.solve_info(backend="jax")["n_accepted"])
        cells = [str(n), str(steps), str(reps)]
        for what in ("solve", "grad", "HVP"):
            a, b = med[f"simdiff {what}"], med[f"diffrax {what}"]
            cells += [f"{1e3 * a:.1f}", f"{1e3 * b:.1f}", f"{a / b:.2f}x"]
        cells += [f"{_rel(res['simdiff grad'], _np(res['diffrax grad'])):.1e}",
                  f"{_rel(res['simdiff HVP'], _np(res['diffrax HVP'])):.1e}"]  # fmt: skip
        print("| " + " | ".join(cells) + " |", flush=True)
        out[n] = med
    return out


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--max-steps-sweep",
        type=int,
        nargs="*",
        metavar="N",
        help="instead: simdiff-jax solve and gradient times for these max_steps",
    )
    parser.add_argument("--problem", default="long",
                        choices=["long", "catalogue", "memory", "robertson", "hires",
                                 "brusselator2d", "lorenz96", "all"],
                        help="long: issue 11's 100-time misfit on [0, 10]; catalogue: "
                        "lotka_volterra_fit; memory: reverse-mode memory against steps; "
                        "robertson: stiff, to t = 1e5; hires: the stiff test-set "
                        "problem at rtol 1e-9; all: long, catalogue, robertson and memory in turn "
                        "(hires, brusselator2d and lorenz96 are runs of their own)")  # fmt: skip
    parser.add_argument("--steps", type=int, nargs="*", default=[1_000, 10_000, 100_000],
                        help="memory: the step counts")  # fmt: skip
    parser.add_argument("--rtols", type=float, nargs="*",
                        default=[1e-5, 1e-6, 1e-7, 1e-8, 1e-9],
                        help="robertson: simdiff Rodas3's tolerances")  # fmt: skip
    parser.add_argument("--rtols-diffrax", type=float, nargs="*", default=[1e-5, 1e-6, 1e-7],
                        help="robertson: diffrax Kvaerno5's tolerances")  # fmt: skip
    parser.add_argument("--robertson-torch", type=float, nargs="*", default=None,
                        metavar="RTOL",
                        help="robertson: simdiff-torch Rodas3 (compile=True and eager) too, at "
                        "these tolerances (default 1e-6 1e-8)")  # fmt: skip
    parser.add_argument("--rtols-rodas5p", type=float, nargs="*",
                        default=[1e-5, 1e-6, 1e-7, 1e-8],
                        help="robertson, with --robertson-torch: simdiff-torch Rodas5P's "
                        "tolerances (compile=True and eager)")  # fmt: skip
    parser.add_argument("--hires-rtol", type=float, default=1e-9, help="hires: the tolerance")
    parser.add_argument("--bruss-t1", type=float, default=1.0,
                        help="brusselator2d: the end time")  # fmt: skip
    parser.add_argument("--bruss-rtol", type=float, default=1e-6,
                        help="brusselator2d: the tolerance")  # fmt: skip
    parser.add_argument("--bruss-n", type=int, default=BRUSS_N,
                        help="brusselator2d: the grid size (2 n^2 states)")  # fmt: skip
    parser.add_argument("--bruss-torch", action="store_true",
                        help="brusselator2d: simdiff-torch (eager) too")  # fmt: skip
    parser.add_argument("--l96-n", default="10,100,1000,10000",
                        help="lorenz96: the sizes, a comma list")  # fmt: skip
    parser.add_argument("--hires-backends", nargs="*", default=["jax", "torch"],
                        help="hires: simdiff's backends")  # fmt: skip
    args = parser.parse_args(argv)
    out: dict[str, Any] = {}
    print(f"load: {os.getloadavg()}")
    if args.max_steps_sweep:
        p = lv_long() if args.problem == "long" else problems.get("lotka_volterra_fit")
        return max_steps_sweep(p, args.max_steps_sweep, args.repeats)
    todo = ["long", "catalogue", "robertson", "memory"] if args.problem == "all" else [args.problem]
    for what in todo:
        print()
        if what == "long":
            out[what] = compare(lv_long(), args.repeats)
        elif what == "catalogue":
            out[what] = compare(problems.get("lotka_volterra_fit"), args.repeats)
        elif what == "robertson":
            rt = args.robertson_torch
            rt = [1e-6, 1e-8] if rt is not None and not rt else rt
            r5 = args.rtols_rodas5p if rt is not None else None
            out[what] = robertson(args.rtols, args.rtols_diffrax, args.repeats, rt, r5)
        elif what == "hires":
            out[what] = hires(args.hires_rtol, args.repeats, tuple(args.hires_backends))
        elif what == "brusselator2d":
            out[what] = brusselator2d(args.bruss_t1, args.bruss_rtol, args.repeats,
                                      args.bruss_torch, args.bruss_n)  # fmt: skip
        elif what == "lorenz96":
            out[what] = lorenz96([int(n) for n in args.l96_n.split(",")], args.repeats)
        else:
            out[what] = memory(args.steps, args.repeats)
        print(f"load: {os.getloadavg()}")
    return out


def _np(a: object) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        return a.detach().numpy()
    return np.asarray(a)


if __name__ == "__main__":
    main()
