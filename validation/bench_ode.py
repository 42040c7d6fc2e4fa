"""Gradient and Hessian of the Lotka–Volterra misfit: simdiff, diffrax, torchdiffeq, FD.

One interleaved run (so load changes hit every configuration alike) of the
catalogue problem ``lotka_volterra_fit`` (4 parameters, Dopri5 at rtol 1e-7,
atol 1e-9, 6 data times on [0, 3]):

- simdiff-jax, simdiff-torch: :class:`simdiff.Derivatives` over simdiff's Dopri5;
- diffrax: the same ODEProblem through :func:`simdiff.ode.diffrax_problem`
  (Dopri5, PIDController; RecursiveCheckpointAdjoint for the value and the
  gradient, DirectAdjoint for the Hessian);
- torchdiffeq: ``odeint(method="dopri5")`` with plain autograd (the PyTorch
  ecosystem peer); its Hessian by ``torch.autograd.functional.hessian``;
- finite differences: central differences of the numpy evaluation
  (2p solves for a gradient).

Prints first-call seconds (compile on JAX) and steady-state medians, and the
ratios gradient / solve (cheap-gradient principle: about 4 or less for reverse
mode) and Hessian / gradient (about p + 1 = 5 for forward-over-reverse).

    python -m validation.bench_ode --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import jax
import numpy as np
import torch

import problems
import problems.ode as po
import simdiff
from simdiff.ode import Dopri5, ODEProblem, diffrax_problem

jax.config.update("jax_enable_x64", True)


def lv_long(max_steps: int = 4096) -> ODEProblem:
    """Issue 11's problem: Lotka–Volterra misfit, 100 save times on [0, 10], Dopri5 1e-8/1e-10."""
    import scipy.integrate

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
        solver=Dopri5(rtol=1e-8, atol=1e-10, max_steps=max_steps),
    )  # fmt: skip
    p.data = data
    return p


def torchdiffeq_callables(p) -> dict[str, Callable[[], object]]:
    """Value, gradient and Hessian of the misfit with torchdiffeq.odeint (autograd)."""
    import torchdiffeq

    t = torch.tensor(np.concatenate([[0.0], p.save_at]), dtype=torch.float64)
    y0 = torch.tensor(p.y0, dtype=torch.float64)
    data = torch.tensor(getattr(p, "data", None) if hasattr(p, "data") else po.lv_data(),
                        dtype=torch.float64)  # fmt: skip
    solver = p.solver

    def misfit(theta: torch.Tensor) -> torch.Tensor:
        def f(tt, y):
            a, b, d, g = theta[0], theta[1], theta[2], theta[3]
            return torch.stack([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]])

        ys = torchdiffeq.odeint(f, y0, t, rtol=solver.rtol, atol=solver.atol, method="dopri5")
        return 0.5 * torch.sum((ys[1:] - data) ** 2)

    x = torch.tensor(p.x0, dtype=torch.float64)

    def value() -> object:
        with torch.no_grad():
            return misfit(x)

    def grad() -> object:
        xr = x.clone().requires_grad_(True)
        return torch.autograd.grad(misfit(xr), xr)[0]

    def hessian() -> object:
        return torch.autograd.functional.hessian(misfit, x)

    return {"value": value, "grad": grad, "hessian": hessian}


def fd_callables(p) -> dict[str, Callable[[], object]]:
    """Central differences of the numpy evaluation (h = 1e-6 relative)."""
    h = 1e-6 * np.maximum(1.0, np.abs(p.x0))
    eye = np.eye(p.n)

    def grad() -> object:
        return np.array([(p.evaluate(p.x0 + h[i] * eye[i]) - p.evaluate(p.x0 - h[i] * eye[i]))
                         / (2 * h[i]) for i in range(p.n)])  # fmt: skip

    return {"value": lambda: p.evaluate(p.x0), "grad": grad}


def configurations(p) -> dict[str, dict[str, Callable[[], object]]]:
    out: dict[str, dict[str, Callable[[], object]]] = {}
    for be in ("jax", "torch"):
        d = simdiff.Derivatives(p, backend=be)
        out[f"simdiff-{be}"] = {"value": d.value, "grad": d.grad, "hessian": d.hessian}
    dv = simdiff.Derivatives(diffrax_problem(p, "grad", solver="dopri5"), backend="jax")
    dh = simdiff.Derivatives(diffrax_problem(p, "hessian", solver="dopri5"), backend="jax")
    out["diffrax (dopri5)"] = {"value": dv.value, "grad": dv.grad, "hessian": dh.hessian}
    out["torchdiffeq (dopri5, autograd)"] = torchdiffeq_callables(p)
    out["finite differences (numpy)"] = fd_callables(p)
    return out


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    if isinstance(out, jax.Array):
        out.block_until_ready()
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--max-steps-sweep",
        type=int,
        nargs="*",
        metavar="N",
        help="instead: simdiff-jax solve and gradient times for these max_steps",
    )
    parser.add_argument("--problem", choices=["long", "catalogue"], default="long",
                        help="long: issue 11's 100-time misfit on [0, 10]; catalogue: "
                        "lotka_volterra_fit")  # fmt: skip
    args = parser.parse_args(argv)
    p = lv_long() if args.problem == "long" else problems.get("lotka_volterra_fit")
    print(f"load: {os.getloadavg()}")
    if args.max_steps_sweep:
        return max_steps_sweep(p, args.max_steps_sweep, args.repeats)
    configs = configurations(p)
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
    times: dict[str, dict[str, list[float]]] = {n: {k: [] for k in c} for n, c in configs.items()}
    for _ in range(args.repeats):
        for name, kinds in configs.items():
            for kind, fn in kinds.items():
                times[name][kind].append(timed(fn)[0])
    print(f"Lotka–Volterra misfit (p = {p.n}), median of {args.repeats}, interleaved; ms")
    print(
        "| configuration | solve | grad | Hessian | grad/solve | Hessian/grad "
        "| first call solve / grad / Hessian (s) | grad rel. diff. vs simdiff-jax |"
    )
    print("|---|---|---|---|---|---|---|---|")
    medians: dict[str, dict[str, float]] = {}
    for name, kinds in times.items():
        med = {k: statistics.median(v) for k, v in kinds.items()}
        medians[name] = med
        g = results[name].get("grad")
        diff = (
            (np.max(np.abs(_np(g) - ref_grad)) / np.max(np.abs(ref_grad)))
            if g is not None
            else None
        )
        cells = [f"{1e3 * med[k]:.1f}" if k in med else "n/a" for k in ("value", "grad", "hessian")]
        r1 = f"{med['grad'] / med['value']:.1f}" if "grad" in med else "n/a"
        r2 = f"{med['hessian'] / med['grad']:.1f}" if "hessian" in med else "n/a"
        fc = " / ".join(f"{first[name][k]:.2f}" if k in first[name] else "n/a"
                        for k in ("value", "grad", "hessian"))  # fmt: skip
        dd = f"{diff:.1e}" if diff is not None else "n/a"
        print(f"| {name} | {' | '.join(cells)} | {r1} | {r2} | {fc} | {dd} |")
    for what, why in failures.items():
        print(f"- {what} failed: {why}")
    return medians


def max_steps_sweep(p, budgets: list[int], repeats: int) -> dict[str, dict[str, float]]:
    """On JAX the masked loop always runs max_steps iterations: time solve and gradient."""
    print(f"simdiff-jax, Lotka–Volterra misfit, median of {repeats}; ms")
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


def _np(a: object) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        return a.detach().numpy()
    return np.asarray(a)


if __name__ == "__main__":
    main()
