"""Per-call time of the real FFTs the spectral PDE solvers use: numpy, JAX (jit), torch.

Usage::

    python -m validation.benchmarks.bench_fft                 # N = 4096, 8192, 16384, 32768
    python -m validation.benchmarks.bench_fft --sizes 16384 --repeats 50 --torch-threads 1
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import torch

from validation.benchmarks.bench_torch import median_ms

jax.config.update("jax_enable_x64", True)


def _time(f, repeats: int) -> float:
    """Median seconds of ``repeats`` calls after one untimed call (the benchmarks' timer)."""
    return median_ms(f, repeats) / 1e3


def _row(n: int, repeats: int) -> list[float]:
    x = np.random.default_rng(0).standard_normal(n)
    xh = np.fft.rfft(x)
    jx, jxh = jnp.asarray(x), jnp.asarray(xh)
    jr = jax.jit(jnp.fft.rfft)
    ji = jax.jit(lambda a: jnp.fft.irfft(a, n=n))
    tx, txh = torch.as_tensor(x), torch.as_tensor(xh)
    tz = torch.fft.fft(tx)
    return [
        _time(lambda: np.fft.rfft(x), repeats),
        _time(lambda: np.fft.irfft(xh, n=n), repeats),
        _time(lambda: jr(jx).block_until_ready(), repeats),
        _time(lambda: ji(jxh).block_until_ready(), repeats),
        _time(lambda: torch.fft.rfft(tx), repeats),
        _time(lambda: torch.fft.irfft(txh, n=n), repeats),
        _time(lambda: torch.fft.irfft(txh.to(torch.complex64), n=n), repeats),
        _time(lambda: torch.fft.ifft(tz), repeats),
    ]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 16384, 32768])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--torch-threads", type=int, default=0, help="0: torch's default")
    args = ap.parse_args(argv)
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    print(f"torch {torch.__version__} (MKL: {torch.backends.mkl.is_available()}, "
          f"{torch.get_num_threads()} threads), "
          f"jax {jax.__version__}, numpy {np.__version__}; "
          f"median of {args.repeats} calls, ms\n")  # fmt: skip
    print("| N | numpy rfft | numpy irfft | jax rfft | jax irfft | torch rfft | torch irfft "
          "| torch irfft (complex64) | torch ifft (complex128) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        print(f"| {n} | " + " | ".join(f"{1e3 * c:.3f}" for c in _row(n, args.repeats)) + " |")


if __name__ == "__main__":
    main()
