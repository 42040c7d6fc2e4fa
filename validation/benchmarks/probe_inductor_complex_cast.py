"""Inductor's second derivative through a real -> complex cast (torch 2.13 CPU): wrong.

``f(k) = mean(irfft(cast(exp(k s)) * rfft(u0))^2) / 2``, its Hessian by reverse over reverse
and by grad of grad, eager and under ``torch.compile`` with the backends ``eager``,
``aot_eager`` and ``inductor``; the cast written as ``.to(complex128)`` and as a product with
a complex one.  Found when ``simdiff.pde`` became traceable by Dynamo: the compiled Hessian of
the catalogue's ``heat_diffusivity`` was 0.75 of the exact one.  Printed: one line per
(cast, construction, backend) with the eager and the compiled value.

    python -m validation.benchmarks.probe_inductor_complex_cast
"""

from __future__ import annotations

import warnings

import torch


def main() -> None:
    warnings.filterwarnings("ignore")
    s = -(torch.arange(5.0, dtype=torch.float64) ** 2)
    u0 = torch.randn(8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    one = torch.ones((), dtype=torch.complex128)
    casts = {"to(complex128)": lambda a: a.to(torch.complex128), "a * (1+0j)": lambda a: a * one}
    k = torch.tensor([0.3], dtype=torch.float64)
    for name, cast in casts.items():

        def f(k: torch.Tensor, cast=cast) -> torch.Tensor:
            u = torch.fft.irfft(cast(torch.exp(0.5 * k[0] * s)) * torch.fft.rfft(u0), n=8)
            return 0.5 * torch.mean(u * u)

        hessians = {
            "rev-rev": torch.func.jacrev(torch.func.jacrev(f)),
            "grad-grad": torch.func.grad(lambda k, f=f: torch.func.grad(f)(k).sum()),
        }
        for how, h in hessians.items():
            want = float(h(k).sum())
            for backend in ("eager", "aot_eager", "inductor"):
                torch._dynamo.reset()
                got = float(torch.compile(h, backend=backend)(k).sum())
                verdict = "ok" if abs(got - want) <= 1e-12 * abs(want) else "WRONG"
                print(f"{name:15s} {how:9s} {backend:9s} eager {want:.15g} compiled {got:.15g} "
                      f"{verdict}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
