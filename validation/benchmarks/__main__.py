"""Regenerate the benchmark results the docs cite: ``python -m validation.benchmarks --all``.

Every file in ``docs/results/`` (the stored ``simdiff report --quick`` in
``docs/results/quick/`` aside, which ``simdiff report`` writes) is the output
of one entry of :data:`BENCHMARKS`: a module of this package and its
arguments.  The runner writes each output atomically, with a header naming
the command, the commit and the machine's load, so a result file always
says how to remake it; a benchmark that fails leaves the stored file as it
was.  Runs hold a lock, so two benchmarks never time each other.  Each
successful run is also recorded in the results store (``results/store`` by
default, the main job's; ``--store PATH``, or ``--no-store``): one run named
``benchmark-<name>`` with the environment record, and one entry per file it
wrote, holding the file's text, so the store keeps every run while
``docs/results`` keeps the current one.

    python -m validation.benchmarks --list           # the entries and their outputs
    python -m validation.benchmarks bench_ode_memory # one entry (by output name)
    python -m validation.benchmarks --all            # every entry (hours on 2 cores)
    python -m validation.benchmarks --render-docs    # docs/performance.md from the results

docs/performance.md is generated from the stored results by
:mod:`validation.benchmarks.page`, which places each entry on the page and
declares the simdiff paths it measures; a result older than the code under
those paths is listed there as to be re-measured instead of shown.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from simdiff.environment import _git_revision
from simdiff.store import Store
from validation.benchmarks import page

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
STORE = ROOT / "results" / "store"


@dataclass(frozen=True)
class Benchmark:
    """One result file of ``docs/results`` and the run that makes it.

    ``module`` is a module of this package, or a dotted module path
    (``simdiff.cli``).  ``output`` is written from the module's standard output (unless
    ``stdout`` is false: the module writes ``output`` itself, atomically);
    ``writes`` are further files the module writes (its ``--out``); ``each`` runs the module
    once per item, in a fresh process each, with the item as the last
    argument; ``fresh_inductor_cache`` gives the run an empty Inductor cache
    (compile times are measured cold).
    """

    output: str
    module: str
    args: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    each: tuple[str, ...] = ()
    fresh_inductor_cache: bool = False
    env: dict[str, str] = field(default_factory=dict)
    stdout: bool = True

    @property
    def name(self) -> str:
        return self.output.rsplit(".", 1)[0]

    def command(self) -> str:
        head = "TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) " if self.fresh_inductor_cache else ""
        head += "".join(f"{k}={v} " for k, v in self.env.items())
        tail = " <each of: " + " ".join(self.each) + ">" if self.each else ""
        return f"{head}python -m {self.module_path} {' '.join(self.args)}{tail}"

    @property
    def module_path(self) -> str:
        return self.module if "." in self.module else f"validation.benchmarks.{self.module}"


_TORCH_CATALOGUE = ("--rounds", "10", "--budget", "1.5")
_ODE = "ode_rk4_decay lotka_volterra_fit ode_linear_energy ode_oscillator lotka_volterra "
_ODE += "van_der_pol lorenz63 ode_linear van_der_pol_stiff robertson"
_CLOSED_FORM = "seed ishigami spherical rosenbrock4 seed8 sobol_g rosenbrock32"
_PES = "lj-dimer morse-dimer morse-h2 lj7 lj13 lj38 lj75 lj150 muller-brown"

#: Every result file the docs cite, by the page section that cites it (docs/performance.md
#: unless noted).
BENCHMARKS: tuple[Benchmark, ...] = (
    # docs/performance.md, core overhead
    Benchmark("bench_core_hessian_lj38.txt", "bench_core", ("--atoms", "38", "--repeats", "30")),
    Benchmark(
        "bench_core_grad_lj2.txt",
        "bench_core",
        ("--atoms", "2", "--derivative", "grad", "--repeats", "30"),
    ),
    Benchmark(
        "bench_torch_catalogue.txt",
        "bench_torch",
        (
            *_CLOSED_FORM.split(),
            "--out",
            "docs/results/bench_torch_catalogue.jsonl",
            *_TORCH_CATALOGUE,
            "--timeout",
            "300",
        ),
        writes=("bench_torch_catalogue.jsonl",),
    ),
    Benchmark(
        "bench_torch_pes.txt",
        "bench_torch",
        (
            *_PES.split(),
            "--out",
            "docs/results/bench_torch_pes.jsonl",
            *_TORCH_CATALOGUE,
            "--timeout",
            "900",
            "--auto",
        ),
        writes=("bench_torch_pes.jsonl",),
    ),
    Benchmark(
        "bench_torch_ode.txt",
        "bench_torch",
        (
            "--auto",
            *_ODE.split(),
            "--out",
            "docs/results/bench_torch_ode.jsonl",
            *_TORCH_CATALOGUE,
            "--timeout",
            "420",
        ),
        writes=("bench_torch_ode.jsonl",),
    ),
    Benchmark(
        "bench_torch_pde.txt",
        "bench_torch",
        (
            "--auto",
            "ks_field",
            "burgers_colehopf",
            "--out",
            "docs/results/bench_torch_pde.jsonl",
            *_TORCH_CATALOGUE,
            "--timeout",
            "300",
        ),
        writes=("bench_torch_pde.jsonl",),
    ),
    Benchmark(
        "bench_torch_pde_heat.txt",
        "bench_torch",
        (
            "--auto",
            "heat_modes",
            "heat_diffusivity",
            "--out",
            "docs/results/bench_torch_pde_heat.jsonl",
            *_TORCH_CATALOGUE,
            "--timeout",
            "600",
        ),
        writes=("bench_torch_pde_heat.jsonl",),
    ),
    Benchmark("bench_torch_e2e.txt", "bench_torch_e2e", ("--samples", "10000", "--repeats", "3")),
    Benchmark(
        "bench_torch_hessian_compiled.txt",
        "bench_torch_hessian",
        ("--compiled", "--rounds", "10", "--budget", "2"),
        each=(
            "ishigami",
            "muller-brown",
            "sobol_g",
            "rosenbrock32",
            "spherical",
            "lj7",
            "lj13",
            "lj38",
        ),
    ),
    Benchmark("bench_torch_hessian_hvps.txt", "bench_torch_hessian_hvps"),
    Benchmark("bench_heat_compiled.txt", "bench_heat_compiled"),
    # docs/ode.md
    Benchmark("bench_ode_gradient.txt", "bench_ode", ("--problem", "all", "--repeats", "7")),
    Benchmark("bench_ode_memory.txt", "bench_ode", ("--problem", "memory", "--repeats", "3")),
    Benchmark(
        "bench_ode_compile.txt", "bench_ode_compile", ("--repeats", "7"), fresh_inductor_cache=True
    ),
    Benchmark("bench_ode_tape.txt", "bench_ode_tape", ("--repeats", "7")),
    Benchmark(
        "bench_ode_groups.txt",
        "bench_ode_groups",
        ("--groups", "1", "8", "16", "32", "--repeats", "21"),
    ),
    Benchmark(
        "bench_pde_torch.txt",
        "bench_pde_torch",
        (
            "heat_modes",
            "heat_diffusivity",
            "ks_field",
            "burgers_colehopf",
            "--rounds",
            "10",
            "--budget",
            "3",
        ),
    ),
    Benchmark("bench_ode_lorenz96.txt", "bench_ode", ("--problem", "lorenz96", "--repeats", "7")),
    Benchmark(
        "bench_ode_hires_gradient.txt",
        "bench_ode",
        ("--problem", "hires", "--repeats", "3"),
        fresh_inductor_cache=True,
    ),
    Benchmark(
        "bench_ode_robertson.txt",
        "bench_ode",
        ("--problem", "robertson", "--robertson-torch", "--repeats", "5"),
        fresh_inductor_cache=True,
    ),
    Benchmark(
        "bench_ode_brusselator2d.txt",
        "bench_ode",
        ("--problem", "brusselator2d", "--bruss-t1", "0.1", "--repeats", "2", "--bruss-torch"),
    ),
    Benchmark(
        "probe_ode_linsolve.txt",
        "probe_ode_linsolve",
        ("--dim", "2048", "--band", "64", "--repeats", "3"),
    ),
    Benchmark("bench_ode_events_gradient.txt", "bench_ode_events", ("--repeats", "41")),
    Benchmark("check_bouncing_ball_drag.txt", "simdiff.cli", ("check", "bouncing_ball_drag")),
    # docs/pes.md
    Benchmark(
        "bench_pes_scaling.md",
        "bench_pes_scaling",
        (
            "--sizes",
            "38",
            "150",
            "500",
            "1000",
            "2000",
            "--repeats",
            "5",
            "--threads",
            "1",
            "--profile",
        ),
    ),
    Benchmark(
        "bench_pes_scaling_large.md",
        "bench_pes_scaling",
        ("--sizes", "500", "1000", "2000", "--repeats", "5", "--threads", "1", "--profile"),
    ),
    Benchmark("bench_pes_saddles.md", "bench_pes_saddles"),
    Benchmark(
        "bench_pes_anharmonic.txt", "bench_pes_anharmonic", ("--repeats", "3", "--threads", "1")
    ),
    Benchmark("bench_pes_memory.txt", "bench_pes_memory"),
    Benchmark(
        "bench_pes_ase.txt", "bench_pes_ase", ("--rounds", "3"), env={"OPENBLAS_NUM_THREADS": "1"}
    ),
    Benchmark(
        "bench_pes_phonons.txt",
        "bench_pes_phonons",
        ("--rounds", "5"),
        env={"OPENBLAS_NUM_THREADS": "1"},
    ),
    # docs/taylor.md
    Benchmark("bench_operators.txt", "bench_operators", ("--repeats", "15", "--bih-points", "4")),
    Benchmark("bench_operators_sigma.txt", "bench_operators", ("--sigma-probe", "--repeats", "30")),
    # docs/errors.md
    Benchmark(
        "bench_leak_guard.txt", "bench_leak_guard", ("--strict", "--rounds", "7", "--calls", "50")
    ),
    # docs/performance.md, the identity recheck of every derivative call
    Benchmark("bench_identity_recheck.txt", "bench_identity", ("--rounds", "7")),
    # docs/parameters.md
    Benchmark("bench_structured_params.txt", "bench_structured_params", ("--threads", "1")),
    # docs/sensitivity.md (bench_profile writes its JSON itself, atomically)
    Benchmark("profile_likelihood_lv.json", "bench_profile", stdout=False),
    Benchmark("check_decay_product_fit.txt", "simdiff.cli", ("check", "decay_product_fit")),
    # probes (docs/performance.md, "Probes")
    Benchmark("probe_compile_crash.txt", "probe_compile_crash"),
    Benchmark("probe_inductor_complex_cast.txt", "probe_inductor_complex_cast"),
    Benchmark(
        "probe_ode_compiled_loop.txt",
        "probe_ode_compiled_loop",
        (
            "ode_rk4_decay",
            "lotka_volterra_fit",
            "ode_linear_energy",
            "lotka_volterra",
            "--rounds",
            "15",
            "--budget",
            "3",
        ),
        fresh_inductor_cache=True,
    ),
    Benchmark(
        "probe_torch_chunks.txt",
        "probe_torch_chunks",
        ("--K", "4", "8", "--repeats", "15", "--rounds", "3"),
    ),
    Benchmark("probe_torch_chunks_transforms.txt", "probe_torch_chunks", ("--transforms",)),
    Benchmark("probe_torch_forward_ad.txt", "probe_torch_forward_ad"),
    Benchmark("probe_torch_loop_hops.txt", "probe_torch_loop_hops"),
    Benchmark("probe_ode_auto.txt", "probe_ode_auto", ("--repeats", "5")),  # docs/ode.md
    Benchmark("probe_torch_pde_hvp.txt", "probe_torch_pde_hvp"),
    Benchmark("probe_torch_pde_loop.txt", "probe_torch_pde_loop"),
    Benchmark("probe_torch_rosenbrock.txt", "probe_torch_rosenbrock", ("--repeats", "200")),
    Benchmark("probe_torch_scan.txt", "probe_torch_scan"),
    Benchmark("probe_torch_taylor_loop.txt", "probe_torch_taylor_loop", ("--cpp-wrapper",)),
)


def outputs() -> dict[str, Benchmark]:
    """Every file the entries write, by name under ``docs/results``."""
    out: dict[str, Benchmark] = {}
    for b in BENCHMARKS:
        for name in (b.output, *b.writes):
            if name in out:
                raise ValueError(f"docs/results/{name} is written by two entries")
            out[name] = b
    return out


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    """One benchmark at a time on this machine (a second runner waits)."""
    path = Path(tempfile.gettempdir()) / "simdiff-benchmarks.lock"
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def record(b: Benchmark, store: Path) -> str:
    """Record the files ``b`` wrote in the results store at ``store``; the run id.

    One run ``benchmark-<name>`` (params: the command and the commit; the
    store adds the environment record), one entry per file, kind
    ``"benchmark"``, config the command, record ``{"text": ...}``.
    """
    s = Store(store)
    run_id = s.start_run(
        f"benchmark-{b.name}", {"command": b.command(), "git": _git_revision()}, resume=False
    )
    for name in (b.output, *b.writes):
        s.put(run_id, name, "benchmark", b.command(), {"text": (RESULTS / name).read_text()})
    s.finish_run(run_id)
    return run_id


def run(b: Benchmark, store: Path | None = STORE) -> int:
    """Run ``b`` and replace its output file; the return code of its (last failing) process.

    A successful run is recorded in the results store at ``store`` (none when
    ``store`` is None), see :func:`record`.
    """
    env = {**os.environ, **b.env}
    header = [
        f"# command: {b.command()}",
        f"# git {_git_revision()}, started {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
        "# load average (1, 5, 15 min) before: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()),
    ]
    body: list[str] = []
    rc = 0
    with _lock(), tempfile.TemporaryDirectory() as inductor:
        if b.fresh_inductor_cache:
            env["TORCHINDUCTOR_CACHE_DIR"] = inductor
        for item in b.each or (None,):
            cmd = [sys.executable, "-m", b.module_path, *b.args]
            cmd += [item] if item is not None else []
            done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            body.append(done.stdout)
            if done.returncode != 0:
                rc = done.returncode
                sys.stderr.write(done.stderr[-2000:])
    if rc != 0:
        print(f"{b.output}: failed (exit {rc}); docs/results/{b.output} left as it was")
        return rc
    if not b.stdout:
        print(f"{b.output}: written by the benchmark")
        _record_if(b, store)
        return 0
    header.append("# load average after: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    target = RESULTS / b.output
    fd, tmp = tempfile.mkstemp(dir=RESULTS, prefix=f".{b.output}.")
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(header) + "\n\n" + "".join(body))
    os.replace(tmp, target)
    print(f"{b.output}: written")
    _record_if(b, store)
    return 0


def _record_if(b: Benchmark, store: Path | None) -> None:
    if store is not None:
        print(f"{b.output}: recorded in {store} as run {record(b, store)}")


def render_docs() -> int:
    """Write docs/performance.md from the stored results (:func:`.page.render`)."""
    text = page.render({b.output: b.command() for b in BENCHMARKS})
    fd, tmp = tempfile.mkstemp(dir=page.PAGE.parent, prefix=".performance.md.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, page.PAGE)
    print(f"{page.PAGE.relative_to(ROOT)}: written")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.benchmarks", description=__doc__)
    ap.add_argument("names", nargs="*", help="entries by output name (with or without suffix)")
    ap.add_argument("--all", action="store_true", help="run every entry")
    ap.add_argument("--list", action="store_true", help="list the entries and their commands")
    ap.add_argument("--store", type=Path, default=STORE, help="results store to record runs in")
    ap.add_argument("--no-store", action="store_true", help="do not record runs in a store")
    ap.add_argument(
        "--render-docs", action="store_true", help="write docs/performance.md from the results"
    )
    args = ap.parse_args(argv)
    if args.render_docs:
        return render_docs()
    if args.list:
        for b in BENCHMARKS:
            extra = f" (also writes {', '.join(b.writes)})" if b.writes else ""
            print(f"{b.output}{extra}\n    {b.command()}")
        return 0
    by_name = {b.name: b for b in BENCHMARKS} | {b.output: b for b in BENCHMARKS}
    unknown = [n for n in args.names if n not in by_name]
    if unknown or not (args.names or args.all):
        ap.error(f"unknown entries {unknown} (see --list)" if unknown else "name entries or --all")
    chosen = list(BENCHMARKS) if args.all else [by_name[n] for n in args.names]
    store = None if args.no_store else args.store
    failed = [b.output for b in chosen if run(b, store) != 0]
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
