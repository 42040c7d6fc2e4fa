"""Gradients through ODE events: simdiff against diffrax's Event and torchdiffeq's odeint_event.

Two problems, each the same mathematics in every configuration (Dopri5,
rtol 1e-10, atol 1e-12, an adaptive step controller):

- ``decay``: ``y' = -k y``, ``y(0) = 1``, terminal event ``y = 1/2``; the
  gradient of the event time with respect to ``k`` (exact: ``-ln 2 / k^2``).
- ``ball``: the catalogue's ``bouncing_ball_drag``, ``x'' = -g - c x'`` from
  height 1 at rest, restitution ``e``: at each impact the velocity becomes
  ``-e v``; the gradient of the fourth bounce time with respect to ``(e,
  c)`` (exact: the Lambert-W flight times, in mpmath).

Configurations, timed interleaved in one run (order shuffled each round,
median of the rounds; ``simdiff.evidence._timing.interleaved``; a sample of a
fast configuration is as many calls in a row as last about 20 ms, at most 32,
the time per call their mean):

- simdiff-jax, simdiff-torch: ``simdiff.Derivatives(problem, backend).grad(x)``
  over simdiff's Dopri5 with ``Event`` (the ball: one non-terminal event
  with the update, one solve), at a numpy point (the result a numpy array);
  simdiff-jax also at a point that is a ``jax.Array``, as diffrax's jitted
  gradient is called (each result is read back with ``numpy.asarray``);
- diffrax: ``diffeqsolve(..., event=diffrax.Event(cond, root_finder=
  optimistix.Newton))`` under ``jax.jit(jax.grad(...))``, PIDController,
  RecursiveCheckpointAdjoint; the ball as four solves, each ending at its
  bounce (``direction=False``: downward crossings), the update between them;
- torchdiffeq: ``odeint_event(..., method="dopri5")`` with plain autograd;
  the ball as four ``odeint_event`` calls, the height nudged by 1e-9 after
  each bounce (torchdiffeq's own bouncing-ball example does so, by 1e-7) so
  the next one does not fire at once.

Prints first-call seconds (compile on JAX), steady-state medians (ms) with
their quartiles, each configuration's gradient error against the reference,
and simdiff-jax's time over diffrax's paired by round (the two calls of one
round see the same load): its median, quartiles and the rounds below 1.

    python -m validation.benchmarks bench_ode_events_gradient   # the registry's run
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import torch
import torchdiffeq

import problems
import simdiff
from problems.ode_events import BALL_BOUNCES as BOUNCES
from problems.ode_events import BALL_G as G
from problems.ode_events import BALL_H0 as H0
from problems.ode_events import BALL_PARAMS
from simdiff.evidence import _timing
from simdiff.ode import Dopri5, Event, ODEProblem
from validation.benchmarks.bench_torch import _timed

#: Seconds one sample lasts at least: a fast configuration's sample is that many calls
#: in a row (at most :data:`MAX_INNER`), so that one slow call under load moves it less.
SAMPLE_S, MAX_INNER = 0.02, 32

jax.config.update("jax_enable_x64", True)

RTOL, ATOL = 1e-10, 1e-12
K = 2.0
E, C = BALL_PARAMS


# ------------------------------------------------------------------ decay
def decay_simdiff() -> ODEProblem:
    return ODEProblem(lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 5.0), [K],
                      events=[Event(lambda t, y, p, ops: y[0] - 0.5)],
                      observable=lambda ys, ops, ev: ev.t,
                      solver=Dopri5(rtol=RTOL, atol=ATOL), name="decay_event")  # fmt: skip


def decay_diffrax() -> Callable[[Any], Any]:
    term = diffrax.ODETerm(lambda t, y, k: -k * y)
    event = diffrax.Event(lambda t, y, args, **kw: y[0] - 0.5,
                          root_finder=optx.Newton(rtol=RTOL, atol=ATOL))  # fmt: skip

    def t_event(k: Any) -> Any:
        sol = diffrax.diffeqsolve(term, diffrax.Dopri5(), 0.0, 5.0, None, jnp.array([1.0]),
                                  args=k, event=event, saveat=diffrax.SaveAt(t1=True),
                                  stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
                                  max_steps=4096)  # fmt: skip
        return sol.ts[-1]

    return jax.jit(jax.grad(t_event))


def decay_torchdiffeq(k: float) -> np.ndarray:
    kk = torch.tensor(k, dtype=torch.float64, requires_grad=True)
    t_event, _ = torchdiffeq.odeint_event(
        lambda t, y: -kk * y, torch.tensor([1.0], dtype=torch.float64),
        torch.tensor(0.0, dtype=torch.float64), event_fn=lambda t, y: y[0] - 0.5,
        method="dopri5", rtol=RTOL, atol=ATOL,
    )  # fmt: skip
    (g,) = torch.autograd.grad(t_event, kk)
    return g.numpy()[None]


# ------------------------------------------------------------------- ball
def ball_simdiff() -> ODEProblem:
    return problems.get("bouncing_ball_drag")  # type: ignore[return-value]


def ball_diffrax() -> Callable[[Any], Any]:
    term = diffrax.ODETerm(lambda t, y, q: jnp.stack([y[1], -G - q[1] * y[1]]))
    event = diffrax.Event(lambda t, y, args, **kw: y[0], direction=False,
                          root_finder=optx.Newton(rtol=RTOL, atol=ATOL))  # fmt: skip
    ctrl = diffrax.PIDController(rtol=RTOL, atol=ATOL)

    def t_bounce(q: Any) -> Any:
        t, y = jnp.asarray(0.0), jnp.array([H0, 0.0])
        for _ in range(BOUNCES):
            sol = diffrax.diffeqsolve(term, diffrax.Dopri5(), t, 10.0, None, y, args=q,
                                      event=event, stepsize_controller=ctrl,
                                      saveat=diffrax.SaveAt(t1=True), max_steps=4096)  # fmt: skip
            t, ye = sol.ts[-1], sol.ys[-1]
            y = jnp.stack([ye[0], -q[0] * ye[1]])
        return t

    return jax.jit(jax.grad(t_bounce))


def ball_torchdiffeq(q: np.ndarray) -> np.ndarray:
    qq = torch.tensor(q, dtype=torch.float64, requires_grad=True)

    def f(t: Any, y: Any) -> Any:
        return torch.stack([y[1], -G - qq[1] * y[1]])

    t = torch.tensor(0.0, dtype=torch.float64)
    y = torch.tensor([H0, 0.0], dtype=torch.float64)
    for _ in range(BOUNCES):
        t, ys = torchdiffeq.odeint_event(f, y, t, event_fn=lambda t, y: y[0], method="dopri5",
                                         rtol=RTOL, atol=ATOL)  # fmt: skip
        ye = ys[-1]
        y = torch.stack([ye[0] + 1e-9, -qq[0] * ye[1]])
    (g,) = torch.autograd.grad(t, qq)
    return g.numpy()


# ------------------------------------------------------------------ run
def run(name: str, repeats: int, budget: float) -> None:
    if name == "decay":
        prob, x = decay_simdiff(), np.array([K])
        ref = np.array([-np.log(2) / K**2])
        dfx, x_j = decay_diffrax(), jnp.asarray(K)
        peers: dict[str, Callable[[], Any]] = {
            "diffrax (Event, Newton)": lambda: np.asarray(dfx(x_j))[None],
            "torchdiffeq (odeint_event)": lambda: decay_torchdiffeq(K),
        }
        what, ref_name = "dt_event/dk", "exact -ln 2 / k^2"
    else:
        prob, x = ball_simdiff(), np.array([E, C])
        ref = prob.exact["grad"](x)
        dfx, x_j = ball_diffrax(), jnp.asarray([E, C])
        peers = {
            "diffrax (Event, Newton; a solve per bounce)": lambda: np.asarray(dfx(x_j)),
            "torchdiffeq (odeint_event per bounce)": lambda: ball_torchdiffeq(x),
        }
        what, ref_name = f"d t_{BOUNCES} / d(e, c)", "exact, Lambert W"
    dj = simdiff.Derivatives(prob, "jax", check_finite=False)
    x_native = jnp.asarray(x)  # as diffrax is called: the point already a JAX array
    dt = simdiff.Derivatives(prob, "torch", check_finite=False)
    calls: dict[str, Callable[[], Any]] = {
        "simdiff-jax": lambda: np.asarray(dj.grad(x)),
        "simdiff-jax (jax.Array point)": lambda: np.asarray(dj.grad(x_native)),
        "simdiff-torch": lambda: np.asarray(dt.grad(x)),
        **peers,
    }
    first, results = {}, {}
    for k, fn in calls.items():  # the first call: compiles on JAX
        first[k], out = _timed(fn)
        results[k] = np.asarray(out, dtype=float)
    once = {k: _timed(fn)[0] for k, fn in calls.items()}  # warm; the first sample
    fastest = {k: min(once[k], *(_timed(fn)[0] for _ in range(3))) for k, fn in calls.items()}
    inner = {k: max(1, min(MAX_INNER, int(SAMPLE_S / fastest[k]))) for k in calls}
    rest = _timing.interleaved(calls, repeats, inner=inner,
                               skip=lambda k, r: once[k] * inner[k] * (r + 1) > budget)  # fmt: skip
    times = {k: [once[k], *rest[k]] for k in calls}
    print(f"{prob.name}: gradient {what}, Dopri5 rtol {RTOL:g} atol {ATOL:g}; "
          f"median of {repeats}, interleaved; ms; calls per sample: "
          + ", ".join(f"{k} {n}" for k, n in inner.items()))  # fmt: skip
    print("| configuration | gradient (ms) | first call (s) | vs simdiff-jax | max abs. error "
          "| quartiles (ms) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    base = statistics.median(times["simdiff-jax"][1:])
    for k, ts in times.items():
        med = statistics.median(ts[1:]) if len(ts) > 1 else ts[0]
        q = np.percentile(ts[1:], [25, 75]) if len(ts) > 2 else (med, med)
        err = float(np.max(np.abs(results[k] - ref)))
        print(f"| {k} | {1e3 * med:.2f} | {first[k]:.2f} | {med / base:.2f} | {err:.1e} "
              f"| {1e3 * q[0]:.2f}-{1e3 * q[1]:.2f} |")  # fmt: skip
    print(f"- reference ({ref_name}): {ref}")
    # the same round's two calls, so a change of load between rounds cancels
    (dfx_name,) = [k for k in times if k.startswith("diffrax")]
    for k in ("simdiff-jax", "simdiff-jax (jax.Array point)"):
        n = min(len(times[k]), len(times[dfx_name]))  # a skipped round is a late one
        r = np.array(times[k][1:n]) / np.array(times[dfx_name][1:n])
        q25, q50, q75 = np.percentile(r, [25, 50, 75])
        print(f"- {k} / diffrax, paired by round: median {q50:.2f} "
              f"(quartiles {q25:.2f}-{q75:.2f}), below 1 in {int(np.sum(r < 1.0))} "
              f"of {r.size} rounds")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--budget", type=float, default=60.0,
                        help="seconds of timed calls per configuration at most")  # fmt: skip
    parser.add_argument("--problem", default="all", choices=["decay", "ball", "all"])
    args = parser.parse_args(argv)
    print(f"load: {os.getloadavg()}")
    for name in ["decay", "ball"] if args.problem == "all" else [args.problem]:
        print()
        run(name, args.repeats, args.budget)
        print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
