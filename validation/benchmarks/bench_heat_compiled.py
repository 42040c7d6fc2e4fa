"""Would torch.compile pay on the PDE entries?  heat_modes by hand, compiled whole.

The upper bound of compiling the PDE path: the catalogue's ``heat_modes``
(64 points, 10 ETDRK4 steps, the same coefficients, nonlinearity zero as in
the diffusion equation) written directly in torch and in JAX with the
coefficients precomputed, so that ``torch.compile(fullgraph=True)`` takes the
whole function.  Gradient and dense Hessian (torch rev-rev, JAX fwd-rev): the
median of 3 x rounds calls, interleaved in a shuffled order
(``simdiff.evidence._timing.interleaved``).

    python -m validation.benchmarks.bench_heat_compiled
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from simdiff.evidence._timing import Summary, first_call, interleaved

N, T, KAPPA, STEPS, CONTOUR = 64, 0.5, 0.3, 10, 64
X0 = np.array([1.0, -0.5, 0.25, 0.4, 0.8, 0.3, -0.6, 0.1])


def coefficients() -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The basis of the initial modes and the ETDRK4 coefficients (Kassam & Trefethen)."""
    k_modes = np.arange(1, 5)
    x = np.linspace(0, 2 * np.pi, N, endpoint=False)
    basis = np.concatenate([np.cos(np.outer(x, k_modes)), np.sin(np.outer(x, k_modes))], axis=1)
    hL = T / STEPS * (-KAPPA * np.fft.rfftfreq(N, d=1.0 / N) ** 2)
    z = hL[:, None] + np.exp(2j * np.pi * (np.arange(1, CONTOUR + 1) - 0.5) / CONTOUR)
    ez, ez2, h = np.exp(z), np.exp(z / 2), T / STEPS

    def mean(a: np.ndarray) -> np.ndarray:
        return h * a.mean(-1).real

    c = {
        "E": np.exp(hL),
        "E2": np.exp(hL / 2),
        "Q": mean((ez2 - 1) / z),
        "f1": mean((-4 - z + ez * (4 - 3 * z + z * z)) / z**3),
        "f2": mean((2 + z + ez * (z - 2)) / z**3),
        "f3": mean((-4 - 3 * z - z * z + ez * (4 - z)) / z**3),
    }
    return basis, {k: v.astype(np.complex128) for k, v in c.items()}


def energy(xp: Any, fft: Any, c: dict[str, Any], basis: Any) -> Callable[[Any], Any]:
    """0.5 mean(u(T)^2) as a function of the 8 initial modes, in ``xp``."""

    def step(v: Any) -> Any:
        nv = v * 0.0
        a = c["E2"] * v + c["Q"] * nv
        na = a * 0.0
        b = c["E2"] * v + c["Q"] * na
        nb = b * 0.0
        cc = c["E2"] * a + c["Q"] * (2.0 * nb - nv)
        nc = cc * 0.0
        return c["E"] * v + c["f1"] * nv + c["f2"] * (2.0 * (na + nb)) + c["f3"] * nc

    def f(p: Any) -> Any:
        v = fft.rfft(basis @ p)
        for _ in range(STEPS):
            v = step(v)
        u = fft.irfft(v, n=N)
        return 0.5 * xp.mean(u * u)

    return f


def main(rounds: int = 15) -> None:
    torch.set_default_dtype(torch.float64)
    jax.config.update("jax_enable_x64", True)
    basis, c = coefficients()
    tf = energy(
        torch, torch.fft, {k: torch.as_tensor(v) for k, v in c.items()}, torch.as_tensor(basis)
    )
    jf = energy(jnp, jnp.fft, {k: jnp.asarray(v) for k, v in c.items()}, jnp.asarray(basis))
    tx, jx = torch.as_tensor(X0), jnp.asarray(X0)
    for kind in ("grad", "hessian"):
        tg = torch.func.grad(tf) if kind == "grad" else torch.func.jacrev(torch.func.jacrev(tf))
        jg = jax.jit(jax.grad(jf) if kind == "grad" else jax.jacfwd(jax.jacrev(jf)))
        jg(jx).block_until_ready()
        tc = torch.compile(tg, fullgraph=True)
        got, compile_s = first_call(lambda tc=tc: tc(tx))
        want = tg(tx)
        rel = float((got - want).abs().max() / want.abs().max())
        calls = {
            "eager": lambda tg=tg: tg(tx),
            "compiled": lambda tc=tc: tc(tx),
            "jax": lambda jg=jg: jg(jx).block_until_ready(),
        }
        samples = interleaved(calls, 3 * rounds)
        e, co, j = (Summary.of(samples[k]).median for k in ("eager", "compiled", "jax"))
        print(
            f"{kind}: JAX {j * 1e3:.3f} ms, torch eager {e * 1e3:.3f} ms ({e / j:.1f}x), "
            f"torch compiled {co * 1e3:.3f} ms ({co / j:.1f}x), compile {compile_s:.1f} s, "
            f"compiled vs eager rel {rel:.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
