"""Probe: ks_field's ETDRK4 march as a compiled ``while_loop`` HOP, gradient by plain autograd.

Issue 14 (PDE rows).  ks_field's torch gradient runs 80 ETDRK4 steps as a Python loop
(``simdiff.pde.marching.march``); Dynamo unrolls it (no compile in 9 minutes).  torch 2.13's
``torch._higher_order_ops.while_loop`` compiled with ``fullgraph=True`` traces the body once and
plain ``torch.autograd`` differentiates it.  This times ks_field's gradient (``grad`` of
``0.5*mean(u(T)^2)`` w.r.t. ``u0``, n = 128) in these variants, interleaved, median of rounds:

- ``jax``: ``simdiff.Derivatives(ks_field, "jax").grad()`` (jit), the reference time;
- ``simdiff_torch``: ``simdiff.Derivatives(ks_field, "torch").grad()`` (eager, torch.func);
- ``complex_eager`` / ``complex_hop``: plain torch, complex Fourier state (as simdiff's), Python
  loop eager / ``while_loop`` compiled;
- ``pair_eager`` / ``pair_hop``: real and imaginary parts as two real arrays, the ETDRK4
  coefficients real (they are: contour means of real parts), the nonlinear symbol ``-(ik/2)``
  applied as a swap; ``rfft``/``irfft`` stay aten ops (``torch.complex`` in, ``.real`` and
  ``.imag`` out);
- ``dft_eager`` / ``dft_hop``: the same pair state with the transforms as real matmuls
  (128 x 65 cos/sin matrices), so nothing in the loop is complex;
- ``mat_eager`` / ``mat_hop``: the pair stacked into one real vector of 130, the symbol folded
  into the forward matrix: ``N(w) = M (B w)^2``, two matmuls per evaluation;
- ``*_hop_1thread``: the compiled variant called at one intra-op thread.

Every variant's gradient is compared with simdiff's eager torch and JAX gradients (largest
difference relative to the largest entry).  The same on burgers_colehopf (gradient w.r.t. the
viscosity, which reaches the loop through closed-over coefficients; the ANCHOR workaround of the
lead's probe: every floating carry leaf gets ``0.0 * ANCHOR`` at loop entry).

    python -m validation.benchmarks.probe_torch_pde_loop [--rounds 15] [--budget 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch._higher_order_ops import while_loop

import problems
import simdiff
from problems.pde import (
    BURGERS_A0,
    BURGERS_A1,
    BURGERS_N,
    BURGERS_STEPS,
    BURGERS_T,
    KS_N,
    KS_STEPS,
    KS_T,
)
from simdiff.evidence._accuracy import rel_error
from simdiff.evidence._timing import Summary, first_call
from simdiff.pde import Grid
from simdiff.pde.etdrk import etdrk4_coefficients
from simdiff.pde.spectral import spectral_multiplier
from validation.benchmarks.bench_torch import interleaved

torch.set_default_dtype(torch.float64)
#: Created outside any compiled region; ``0.0 * ANCHOR`` makes a carry leaf require grad.
ANCHOR = torch.zeros((), requires_grad=True)


def _anchor(x: torch.Tensor) -> torch.Tensor:
    """``x`` contiguous (the body's outputs are) and, under grad mode, requiring grad."""
    return x + 0.0 * ANCHOR if torch.is_grad_enabled() else x.contiguous()


class Setup:
    """Constant pieces of a 1-D periodic ETDRK4 solve with ``N(v) = -(ik/2) F[(F^-1 v)^2]``."""

    def __init__(self, n: int, length: float, t_final: float, n_steps: int) -> None:
        self.grid = Grid((n,), (length,))
        self.n, self.n_steps, self.h = n, n_steps, t_final / n_steps
        k = self.grid.wavenumbers()[0]
        self.k = k
        # -(ik/2) with the Nyquist mode zeroed (odd derivative), as simdiff's symbol
        sym = -0.5 * spectral_multiplier(self.grid, (1,))
        assert np.all(sym.real == 0)
        self.s = torch.tensor(sym.imag)  # N = i*s*F[u^2]
        self.sym = torch.tensor(sym)
        # rfft / irfft as real matrices: F[u] = (Cr u, Ci u), F^-1 (a, b) = Br a + Bi b
        eye = np.eye(n)
        f = np.fft.rfft(eye, axis=0)  # (m, n): column j = rfft(e_j)
        self.Fr, self.Fi = torch.tensor(f.real.copy()), torch.tensor(f.imag.copy())
        m = f.shape[0]
        br = np.fft.irfft(np.eye(m, dtype=complex), n=n, axis=0)  # (n, m)
        bi = np.fft.irfft(1j * np.eye(m), n=n, axis=0)
        self.Br, self.Bi = torch.tensor(br), torch.tensor(bi)
        # the state as one real vector (re; im) of 2m: u = B w, N(w) = M u^2 with the
        # symbol's i*s folded in: i*s*(pr + i pi) = (-s pi; s pr)
        s = sym.imag
        self.B = torch.tensor(np.concatenate([br, bi], axis=1))  # (n, 2m)
        self.M = torch.tensor(np.concatenate([-s[:, None] * f.imag, s[:, None] * f.real]))
        self.F = torch.tensor(np.concatenate([f.real, f.imag]))  # (2m, n): w0 = F u0

        self.kept: dict[str, torch.Tensor] | None = None

    def coefficients(self, L: Any) -> dict[str, torch.Tensor]:
        """Real ETDRK4 coefficients (``Q, f1..f3`` times ``h``) for the real diagonal ``L``;
        computed once for a constant ``L`` (as simdiff keeps a constant L's)."""
        if not L.requires_grad and self.kept is not None:
            return self.kept
        c = etdrk4_coefficients(self.h * L, simdiff.get_ops("torch"), 64)
        out = {k: (v if k in ("E", "E2") else v * self.h) for k, v in c.items()}
        if not L.requires_grad:
            self.kept = out
        return out


# ---- one step, three representations -----------------------------------------------------


def step_complex(v, c, S: Setup):  # type: ignore[no-untyped-def]
    def N(w):  # type: ignore[no-untyped-def]
        u = torch.fft.irfft(w, n=S.n)
        return S.sym * torch.fft.rfft(u * u)

    cc = {k: x.to(torch.complex128) for k, x in c.items()}
    nv = N(v)
    e2v, qnv = cc["E2"] * v, cc["Q"] * nv
    a = e2v + qnv
    na = N(a)
    b = e2v + cc["Q"] * na
    nb = N(b)
    d = cc["E2"] * a + (2.0 * cc["Q"] * nb - qnv)
    nd = N(d)
    return cc["E"] * v + cc["f1"] * nv + 2.0 * cc["f2"] * (na + nb) + cc["f3"] * nd


def _step_pair(vr, vi, c, S: Setup, fwd, inv):  # type: ignore[no-untyped-def]
    def N(a, b):  # type: ignore[no-untyped-def]
        u = inv(a, b)
        pr, pi = fwd(u * u)
        return -S.s * pi, S.s * pr  # i*s*(pr + i pi)

    E, E2, Q, f1, f2, f3 = (c[k] for k in ("E", "E2", "Q", "f1", "f2", "f3"))
    nvr, nvi = N(vr, vi)
    ar, ai = E2 * vr + Q * nvr, E2 * vi + Q * nvi
    nar, nai = N(ar, ai)
    br_, bi_ = E2 * vr + Q * nar, E2 * vi + Q * nai
    nbr, nbi = N(br_, bi_)
    dr, di = E2 * ar + Q * (2.0 * nbr - nvr), E2 * ai + Q * (2.0 * nbi - nvi)
    ndr, ndi = N(dr, di)
    out_r = E * vr + f1 * nvr + 2.0 * f2 * (nar + nbr) + f3 * ndr
    out_i = E * vi + f1 * nvi + 2.0 * f2 * (nai + nbi) + f3 * ndi
    return out_r, out_i


def step_pair_fft(vr, vi, c, S: Setup):  # type: ignore[no-untyped-def]
    def fwd(u):  # type: ignore[no-untyped-def]
        z = torch.fft.rfft(u)
        return z.real, z.imag

    def inv(a, b):  # type: ignore[no-untyped-def]
        return torch.fft.irfft(torch.complex(a, b), n=S.n)

    return _step_pair(vr, vi, c, S, fwd, inv)


def step_pair_dft(vr, vi, c, S: Setup):  # type: ignore[no-untyped-def]
    def fwd(u):  # type: ignore[no-untyped-def]
        return S.Fr @ u, S.Fi @ u

    def inv(a, b):  # type: ignore[no-untyped-def]
        return S.Br @ a + S.Bi @ b

    return _step_pair(vr, vi, c, S, fwd, inv)


def step_mat(w, c, S: Setup):  # type: ignore[no-untyped-def]
    """One ETDRK4 step on the stacked real state: 2 matmuls per N, real coefficients doubled."""

    def N(a):  # type: ignore[no-untyped-def]
        # as (k, 1) matrix products: Inductor decomposes a matrix-vector product into its
        # own reduction loop (slow here) but calls BLAS for a matrix-matrix one
        u = (S.B @ a[:, None])[:, 0]
        return (S.M @ (u * u)[:, None])[:, 0]

    E, E2, Q, f1, f2, f3 = (torch.cat([c[k], c[k]]) for k in ("E", "E2", "Q", "f1", "f2", "f3"))
    nv = N(w)
    e2v, qnv = E2 * w, Q * nv
    a = e2v + qnv
    na = N(a)
    b = e2v + Q * na
    nb = N(b)
    d = E2 * a + (2.0 * Q * nb - qnv)
    nd = N(d)
    return E * w + f1 * nv + 2.0 * f2 * (na + nb) + f3 * nd


def march_mat_loop(w0, c, S):  # type: ignore[no-untyped-def]
    w = w0
    for _ in range(S.n_steps):
        w = step_mat(w, c, S)
    return w


def march_mat_hop(w0, c, S):  # type: ignore[no-untyped-def]
    def cond(i, w):  # type: ignore[no-untyped-def]
        return i < S.n_steps

    def body(i, w):  # type: ignore[no-untyped-def]
        return i + 1, step_mat(w, c, S)

    return while_loop(cond, body, (torch.tensor(0), _anchor(w0)))[1]


# ---- marches: Python loop and while_loop HOP ---------------------------------------------


def march_complex_loop(v0, c, S):  # type: ignore[no-untyped-def]
    v = v0
    for _ in range(S.n_steps):
        v = step_complex(v, c, S)
    return v


def march_complex_hop(v0, c, S):  # type: ignore[no-untyped-def]
    def cond(i, v):  # type: ignore[no-untyped-def]
        return i < S.n_steps

    def body(i, v):  # type: ignore[no-untyped-def]
        return i + 1, step_complex(v, c, S)

    return while_loop(cond, body, (torch.tensor(0), _anchor(v0)))[1]


def pair_marches(step):  # type: ignore[no-untyped-def]
    def loop(vr, vi, c, S):  # type: ignore[no-untyped-def]
        for _ in range(S.n_steps):
            vr, vi = step(vr, vi, c, S)
        return vr, vi

    def hop(vr, vi, c, S):  # type: ignore[no-untyped-def]
        def cond(i, a, b):  # type: ignore[no-untyped-def]
            return i < S.n_steps

        def body(i, a, b):  # type: ignore[no-untyped-def]
            return (i + 1, *step(a, b, c, S))

        out = while_loop(cond, body, (torch.tensor(0), _anchor(vr), _anchor(vi)))
        return out[1], out[2]

    return loop, hop


# ---- the two problems ---------------------------------------------------------------------


def objective(u: torch.Tensor) -> torch.Tensor:
    return 0.5 * torch.mean(u * u)


def variants(S: Setup, prepare, compile_kw) -> dict[str, Callable[[torch.Tensor], Any]]:  # type: ignore[no-untyped-def]
    """``name -> x -> gradient``; ``prepare(x) -> (u0, L)`` with ``L`` real (tensor)."""
    out: dict[str, Callable[[torch.Tensor], Any]] = {}
    c_hop = torch.compile(march_complex_hop, fullgraph=True, **compile_kw)

    def complex_grad(march):  # type: ignore[no-untyped-def]
        def g(x):  # type: ignore[no-untyped-def]
            x = x.detach().requires_grad_(True)
            u0, L = prepare(x)
            v = march(torch.fft.rfft(u0), S.coefficients(L), S)
            (gx,) = torch.autograd.grad(objective(torch.fft.irfft(v, n=S.n)), x)
            return gx

        return g

    out["complex_eager"] = complex_grad(march_complex_loop)
    out["complex_hop"] = complex_grad(c_hop)
    for name, step in (("pair", step_pair_fft), ("dft", step_pair_dft)):
        loop, hop = pair_marches(step)
        hop_c = torch.compile(hop, fullgraph=True, **compile_kw)

        def pair_grad(march, dft=name == "dft"):  # type: ignore[no-untyped-def]
            def g(x):  # type: ignore[no-untyped-def]
                x = x.detach().requires_grad_(True)
                u0, L = prepare(x)
                if dft:
                    vr, vi = S.Fr @ u0, S.Fi @ u0
                else:
                    z = torch.fft.rfft(u0)
                    vr, vi = z.real, z.imag
                vr, vi = march(vr, vi, S.coefficients(L), S)
                u = S.Br @ vr + S.Bi @ vi if dft else torch.fft.irfft(torch.complex(vr, vi), n=S.n)
                (gx,) = torch.autograd.grad(objective(u), x)
                return gx

            return g

        out[f"{name}_eager"] = pair_grad(loop)
        out[f"{name}_hop"] = pair_grad(hop_c)
        out[f"{name}_hop_1thread"] = one_thread(pair_grad(hop_c))

    def mat_grad(march):  # type: ignore[no-untyped-def]
        def g(x):  # type: ignore[no-untyped-def]
            x = x.detach().requires_grad_(True)
            u0, L = prepare(x)
            w = march(S.F @ u0, S.coefficients(L), S)
            (gx,) = torch.autograd.grad(objective(S.B @ w), x)
            return gx

        return g

    out["mat_eager"] = mat_grad(march_mat_loop)
    mat_hop = mat_grad(torch.compile(march_mat_hop, fullgraph=True, **compile_kw))
    out["mat_hop"] = mat_hop
    out["mat_hop_1thread"] = one_thread(mat_hop)
    return out


def one_thread(g):  # type: ignore[no-untyped-def]
    """``g`` run at one intra-op thread (Inductor's C++ kernels use OpenMP; on a loaded
    machine a descheduled thread stalls every parallel region)."""

    def run(x):  # type: ignore[no-untyped-def]
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return g(x)
        finally:
            torch.set_num_threads(before)

    return run


def ks_case() -> tuple[str, Setup, Any]:
    S = Setup(KS_N, 32 * np.pi, KS_T, KS_STEPS)
    L = torch.tensor(S.k**2 - S.k**4)
    return "ks_field", S, lambda x: (x, L)


def burgers_case() -> tuple[str, Setup, Any]:
    S = Setup(BURGERS_N, 2 * np.pi, BURGERS_T, BURGERS_STEPS)
    xs = torch.tensor(S.grid.coords()[0])
    k2 = torch.tensor(S.k**2)

    def prepare(x):  # type: ignore[no-untyped-def]
        nu = x[0]
        u0 = 2.0 * nu * BURGERS_A1 * torch.sin(xs) / (BURGERS_A0 + BURGERS_A1 * torch.cos(xs))
        return u0, -nu * k2

    return "burgers_colehopf", S, prepare


def rel(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return rel_error(a, b)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--budget", type=float, default=4.0)
    parser.add_argument("--cases", nargs="+", default=["ks_field", "burgers_colehopf"])
    parser.add_argument(
        "--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)"
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    cases = {"ks_field": ks_case, "burgers_colehopf": burgers_case}
    for case in args.cases:
        name, S, prepare = cases[case]()
        p = problems.get(name)
        x0 = np.asarray(p.x0, dtype=float)
        dj = simdiff.Derivatives(p, "jax", check_finite=False)
        dt = simdiff.Derivatives(p, "torch", check_finite=False)
        g_jax, g_torch = np.asarray(dj.grad()), np.asarray(dt.grad())
        calls: dict[str, Callable[[], Any]] = {"jax": dj.grad, "simdiff_torch": dt.grad}
        first: dict[str, float] = {}
        print(f"\n## {name} (n = {p.n}, {S.n_steps} steps)")
        print(f"simdiff torch vs JAX gradient: {rel(g_torch, g_jax):.1e}")
        print("| variant | first call s | vs simdiff torch | vs JAX |")
        print("|---|---|---|---|")
        for vname, g in variants(S, prepare, {}).items():
            x = torch.tensor(x0)
            try:
                gx, first[vname] = first_call(lambda g=g, x=x: g(x).numpy())
            except Exception as e:  # a probe reports every failure
                print(f"| {vname} | failed: {type(e).__name__}: {str(e)[:160]!r} | | |")
                continue
            print(
                f"| {vname} | {first[vname]:.2f} | {rel(gx, g_torch):.1e} | {rel(gx, g_jax):.1e} |"
            )
            calls[vname] = lambda g=g, x=x: g(x)
        times = interleaved(calls, args.rounds, args.budget)
        jax_ms = Summary.of(times["jax"][1:] or times["jax"]).median * 1e3
        print("\n| variant | median ms | / JAX | samples |")
        print("|---|---|---|---|")
        for vname, ts in times.items():
            ms = Summary.of(ts[1:] or ts).median * 1e3
            print(f"| {vname} | {ms:.3g} | {ms / jax_ms:.2f} | {len(ts) - 1} |")
    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
