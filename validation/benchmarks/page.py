"""docs/performance.md from the stored results: ``python -m validation.benchmarks --render-docs``.

Every entry of the registry (:data:`validation.benchmarks.__main__.BENCHMARKS`)
has a place on the page here (:data:`SECTIONS`): the section it belongs to, one
sentence on what it measures and the simdiff paths it measures.  The page
shows each stored result as one table (the result file's tables, in order),
with the command that regenerates it and the commit it was measured at.

No table older than the code it describes: a result is *current* when no
commit after the one it was measured at changed the code under its paths
(:func:`stale`).  A commit that only moves files and rewrites their imports,
docstrings or comments does not change the code (the modules' syntax trees
without imports and docstrings are the same), so a pure reorganisation leaves
a result current; any other change makes it stale, and the page lists it under
"To be re-measured" with its command instead of showing its numbers.
"""

from __future__ import annotations

import ast
import atexit
import functools
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
PAGE = ROOT / "docs" / "performance.md"

CORE = ("simdiff/core", "simdiff/backends")
ODE = (*CORE, "simdiff/ode")
PDE = (*CORE, "simdiff/pde")
PES = (*CORE, "simdiff/pes")
#: Probes of the frameworks themselves (torch.compile, Inductor, torch.func): no simdiff code.
FRAMEWORK: tuple[str, ...] = ()


@dataclass(frozen=True)
class Place:
    """Where one registry entry sits on the page: what it measures, and which simdiff paths."""

    output: str
    about: str
    measures: tuple[str, ...]


#: The page's sections, in order: title, one paragraph, and the entries shown there.
SECTIONS: tuple[tuple[str, str, tuple[Place, ...]], ...] = (
    (
        "Core overhead",
        "simdiff's derivative objects against the same derivative written directly in each "
        "framework (`jax.jit(jax.hessian(f))`, `torch.func.hessian(f)`), interleaved in one "
        "run; the last column is what the wrapper adds per call.",
        (
            Place("bench_core_hessian_lj38.txt", "The Hessian of LJ-38 (114 inputs).", CORE),
            Place("bench_core_grad_lj2.txt", "The gradient of LJ-2 (6 inputs).", CORE),
            Place(
                "bench_identity_recheck.txt",
                "The share of a steady derivative call spent rechecking that the problem's "
                "definition did not change since its fingerprint was taken.",
                CORE,
            ),
            Place(
                "bench_structured_params.txt",
                "Structured parameters (dicts, pytrees, species) against the same problem on a "
                "flat vector.",
                (*CORE, "simdiff/ode", "simdiff/pes"),
            ),
            Place(
                "bench_leak_guard.txt",
                "The cost of the torch leak guard per derivative call.",
                ("simdiff/backends",),
            ),
        ),
    ),
    (
        "Torch against JAX",
        'The catalogue\'s problems on torch (eager, compiled and the `compile="auto"` policy) '
        "as multiples of JAX's jit time.",
        (
            Place(
                "bench_torch_catalogue.txt",
                "The closed-form entries: gradient, HVP and Hessian (VJP, JVP and Hessian for "
                "the vector-valued `spherical`).",
                CORE,
            ),
            Place(
                "bench_torch_pes.txt",
                "The PES rows (Lennard-Jones and Morse clusters, Müller-Brown).",
                PES,
            ),
            Place(
                "bench_torch_ode.txt",
                "The ODE rows (the compiled loop is the torch compiled path).",
                ODE,
            ),
            Place(
                "bench_torch_pde.txt",
                "The PDE rows with a compiled march (Kuramoto-Sivashinsky, Burgers).",
                PDE,
            ),
            Place("bench_torch_pde_heat.txt", "The heat-equation PDE rows.", PDE),
            Place(
                "bench_torch_e2e.txt",
                'End to end: `dgsm` on Ishigami and a sweep on LJ-38 with `compile="auto"`.',
                (*PES, "simdiff/sensitivity"),
            ),
            Place(
                "bench_torch_hessian_compiled.txt",
                "The Hessian method on the compiled torch path, one process per problem.",
                PES,
            ),
            Place(
                "bench_torch_hessian_hvps.txt",
                "Hessians built from HVPs against the direct methods on torch.",
                CORE,
            ),
            Place(
                "bench_heat_compiled.txt",
                "The heat equation's derivatives compiled by torch, written in plain torch.",
                FRAMEWORK,
            ),
        ),
    ),
    (
        "ODE gradients",
        "Gradients of ODE solutions against torchdiffeq and diffrax, per adjoint.",
        (
            Place(
                "bench_ode_gradient.txt",
                "Lotka-Volterra gradients per adjoint and backend.",
                ODE,
            ),
            Place("bench_ode_memory.txt", "Peak memory of the ODE gradient per adjoint.", ODE),
            Place(
                "bench_ode_compile.txt",
                "The compiled ODE loop on torch: cold compile and steady state against "
                "torchdiffeq.",
                ODE,
            ),
            Place(
                "bench_ode_tape.txt",
                "Plain autograd against torch.func on a long eager ODE tape.",
                ODE,
            ),
            Place("bench_ode_groups.txt", "Batched ODE gradients by group size.", ODE),
            Place("bench_ode_lorenz96.txt", "Lorenz-96 gradients by dimension.", ODE),
            Place(
                "bench_ode_hires_gradient.txt",
                "The stiff HIRES problem at rtol 1e-9.",
                ODE,
            ),
            Place("bench_ode_robertson.txt", "The stiff Robertson problem to t = 1e5.", ODE),
            Place(
                "bench_ode_brusselator2d.txt",
                "The 2-D Brusselator, a large stiff system with a banded Jacobian.",
                ODE,
            ),
            Place(
                "probe_ode_linsolve.txt",
                "Banded against dense linear solves in the Rosenbrock stages.",
                ODE,
            ),
            Place(
                "bench_ode_events_gradient.txt",
                "Gradients through events (decay to a threshold, a bouncing ball with drag).",
                ODE,
            ),
            Place(
                "check_bouncing_ball_drag.txt",
                "`simdiff check` of the bouncing ball with drag.",
                (*ODE, "simdiff/evidence"),
            ),
            Place(
                "probe_ode_auto.txt",
                'The ODE solver that `method="auto"` picks, against each solver.',
                ODE,
            ),
        ),
    ),
    (
        "PDE derivatives on torch",
        "PDE derivatives on torch, eager and compiled, against JAX.",
        (Place("bench_pde_torch.txt", "Heat, Kuramoto-Sivashinsky and Burgers.", PDE),),
    ),
    (
        "Potential energy surfaces",
        "Exact Hessians of potential energy surfaces and what they buy.",
        (
            Place(
                "bench_pes_scaling.md",
                "Exact Hessians and normal modes against ASE's finite-difference Vibrations, "
                "by cluster size.",
                PES,
            ),
            Place(
                "bench_pes_scaling_large.md",
                "The same for the largest clusters (500 to 2000 atoms).",
                PES,
            ),
            Place("bench_pes_saddles.md", "Saddle searches with exact Hessians.", PES),
            Place("bench_pes_anharmonic.txt", "Cubic and quartic force constants.", PES),
            Place("bench_pes_memory.txt", "Peak memory of structured PES Hessians.", PES),
            Place(
                "bench_pes_ase.txt",
                "simdiff's ASE calculator against ASE's own potentials.",
                PES,
            ),
            Place("bench_pes_phonons.txt", "Phonon dispersion from exact Hessians.", PES),
        ),
    ),
    (
        "Differential operators and Taylor mode",
        "Laplacians and biharmonics by collapsed Taylor mode.",
        (
            Place(
                "bench_operators.txt",
                "Laplacian and biharmonic against folx and nested autodiff.",
                CORE,
            ),
            Place(
                "bench_operators_sigma.txt",
                "Where the time of the Laplacian with weights goes (JAX, an MLP, 64 points): "
                "identity directions against the columns of a Cholesky factor.",
                CORE,
            ),
        ),
    ),
    (
        "Sensitivity analysis",
        "Profile likelihoods and fits.",
        (
            Place(
                "profile_likelihood_lv.json",
                "Profile-likelihood intervals of the Lotka-Volterra fit of "
                "[sensitivity](sensitivity.md) against brute-force re-optimisation.",
                (*ODE, "simdiff/sensitivity"),
            ),
            Place(
                "check_decay_product_fit.txt",
                "`simdiff check` of the decay-product fit.",
                (*ODE, "simdiff/evidence"),
            ),
        ),
    ),
    (
        "Probes",
        "What the frameworks can do, one script each in `validation/benchmarks/`.",
        (
            Place(
                "probe_compile_crash.txt",
                "Which derivative constructions torch.compile compiles, per catalogue function.",
                FRAMEWORK,
            ),
            Place(
                "probe_inductor_complex_cast.txt",
                "Inductor's second derivatives through complex casts.",
                FRAMEWORK,
            ),
            Place(
                "probe_ode_compiled_loop.txt",
                "The compiled ODE loop's derivatives against eager.",
                ODE,
            ),
            Place("probe_torch_chunks.txt", "Compiled chunks of a while loop.", ODE),
            Place(
                "probe_torch_chunks_transforms.txt",
                "torch.func transforms over compiled chunks.",
                ODE,
            ),
            Place(
                "probe_torch_forward_ad.txt",
                "Forward-mode AD on torch against reverse over reverse.",
                FRAMEWORK,
            ),
            Place(
                "probe_torch_loop_hops.txt",
                "What `while_loop` and `scan` differentiate under torch.compile.",
                FRAMEWORK,
            ),
            Place("probe_torch_pde_hvp.txt", "PDE HVPs through a compiled march.", PDE),
            Place("probe_torch_pde_loop.txt", "The PDE march as a compiled while loop.", PDE),
            Place(
                "probe_torch_rosenbrock.txt",
                "The Rosenbrock ODE solver's stages on torch.",
                ODE,
            ),
            Place("probe_torch_scan.txt", "torch's scan under compile.", FRAMEWORK),
            Place(
                "probe_torch_taylor_loop.txt",
                "simdiff's Taylor arithmetic through a compiled loop.",
                ODE,
            ),
        ),
    ),
)


def places() -> dict[str, Place]:
    """Every entry's place, by output name."""
    return {p.output: p for _, _, ps in SECTIONS for p in ps}


# --------------------------------------------------------------------------- git


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def measured_at(output: str) -> str | None:
    """The commit a stored result names in its header (``-dirty`` dropped), or None."""
    text = (RESULTS / output).read_text()
    if output.endswith(".json"):
        found = re.match(r"([0-9a-f]{7,40})", str(json.loads(text).get("git", "")))
    else:
        found = re.search(r"^# git ([0-9a-f]{7,40})", text, flags=re.M)
    return found.group(1) if found else None


def _code(source: str) -> str:
    """A module's syntax tree without imports and docstrings: what a move leaves unchanged."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        kept = [n for n in body if not isinstance(n, (ast.Import, ast.ImportFrom))]
        if (
            kept
            and isinstance(kept[0], ast.Expr)
            and isinstance(kept[0].value, ast.Constant)
            and isinstance(kept[0].value.value, str)
        ):
            kept = kept[1:]
        node.body = kept or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.dump(tree)


class _Blobs:
    """File contents at commits, read through one ``git cat-file --batch`` process."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None

    def __call__(self, spec: str) -> str:
        if self._proc is None:
            self._proc = subprocess.Popen(
                ["git", "cat-file", "--batch"],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(spec.encode() + b"\n")
        self._proc.stdin.flush()
        header = self._proc.stdout.readline().split()
        if header[-1] == b"missing":
            return ""
        data = self._proc.stdout.read(int(header[-1]) + 1)[:-1]
        return data.decode(errors="replace")

    def close(self) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.close()
            self._proc.wait()
            self._proc.stdout.close()
            self._proc = None


_blob = _Blobs()
atexit.register(_blob.close)


@functools.cache
def _changed_code(commit: str) -> tuple[str, ...]:
    """The Python files (old and new paths) whose code ``commit`` changed; a move that only
    rewrites imports, docstrings or comments is not a change."""
    lines = _git("diff-tree", "-r", "-M", "--no-commit-id", "--name-status", f"{commit}^", commit)
    changed: list[str] = []
    for line in lines.splitlines():
        status, *paths = line.split("\t")
        if not paths[-1].endswith(".py") and not paths[0].endswith(".py"):
            continue
        if status[0] in "RM":
            before = _blob(f"{commit}^:{paths[0]}")
            after = _blob(f"{commit}:{paths[-1]}")
            if _code(before) == _code(after):
                continue
        changed += paths
    return tuple(changed)


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def stale(output: str) -> str | None:
    """Why the stored result is not current (the first commit after it that changed the code
    it measures), or None when it is current."""
    paths = places()[output].measures
    commit = measured_at(output)
    if not paths:
        return None
    if commit is None:
        return "its header names no commit"
    try:
        _git("cat-file", "-e", f"{commit}^{{commit}}")
    except subprocess.CalledProcessError:
        return f"its commit {commit} is not in this repository"
    later = _git("rev-list", "--reverse", f"{commit}..HEAD", "--", *paths).split()
    for c in later:
        hit = [p for p in _changed_code(c) if _under(p, paths)]
        if hit:
            more = f" and {len(hit) - 1} more" if len(hit) > 1 else ""
            return f"{hit[0]}{more} changed after it was measured"
    return None


# --------------------------------------------------------------------------- rendering


def _body(output: str) -> str:
    """The result as markdown: its tables as tables, other text as a text block, no header
    lines and no load figures."""
    text = (RESULTS / output).read_text()
    if output.endswith(".json"):
        data = {
            k: v
            for k, v in json.loads(text).items()
            if k not in ("command", "git", "started") and not k.startswith("load")
        }
        return "```json\n" + json.dumps(data, indent=2) + "\n```"
    blocks: list[tuple[bool, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("#") or re.match(r"\s*load[: ]", line):
            continue
        is_table = line.startswith("|")
        if not line.strip():
            if blocks and blocks[-1][1]:
                blocks.append((False, []))
            continue
        if not blocks or blocks[-1][0] != is_table:
            blocks.append((is_table, []))
        blocks[-1][1].append(line)
    out = []
    for is_table, lines in blocks:
        if not lines:
            continue
        if is_table:
            if len(lines) < 2 or not re.match(r"\|[-:| ]+\|$", lines[1]):
                width = lines[0].count("|") - 1
                lines = [lines[0], "|" + "---|" * width, *lines[1:]]
            out.append("\n".join(lines))
        else:
            out.append("```text\n" + "\n".join(lines) + "\n```")
    return "\n\n".join(out)


def _heading(output: str) -> str:
    return output.rsplit(".", 1)[0].replace("_", " ")


INTRO = """\
# Performance

<!-- Generated by `python -m validation.benchmarks --render-docs` from docs/results/:
edit validation/benchmarks/page.py, not this page. -->

Every table on this page is the stored output of one benchmark run
(`docs/results/`), with the command that regenerates it and the commit it was
measured at. Machine: a 2-core x86-64 CPU, float64. Ratios come from
configurations interleaved in one run (median of repeats).

No table is older than the code it describes: a result measured before a
later commit changed the code it measures is not shown; it is listed under
[To be re-measured](#to-be-re-measured) with its command. A commit that only
moves modules and rewrites their imports, docstrings or comments does not
count as a change.

```bash
.venv/bin/python -m validation.benchmarks --list           # every entry and its command
.venv/bin/python -m validation.benchmarks bench_ode_memory # one entry, by its output's name
.venv/bin/python -m validation.benchmarks --render-docs    # this page, from the stored results
```
"""


def render(commands: dict[str, str]) -> str:
    """The page: ``commands`` maps each output name to the command that regenerates it."""
    parts = [INTRO]
    todo: list[tuple[str, str, str]] = []
    for title, text, entries in SECTIONS:
        shown = []
        for p in entries:
            why = stale(p.output)
            if why is not None:
                todo.append((p.output, commands[p.output].strip(), why))
                continue
            commit = measured_at(p.output)
            at = f"commit `{commit[:10]}`" if commit else "no recorded commit"
            shown.append(
                f"### {_heading(p.output)}\n\n{p.about}\n\n"
                f"```bash\n{commands[p.output].strip()}\n```\n\n"
                f"Measured at {at}; stored output "
                f"[results/{p.output}](results/{p.output}).\n\n{_body(p.output)}\n"
            )
        if shown:
            parts.append(f"## {title}\n\n{text}\n")
            parts.extend(shown)
    parts.append("## To be re-measured\n")
    if todo:
        parts.append(
            "These stored results were measured before a change to the code they measure; "
            "their numbers are not shown until they are run again.\n"
        )
        parts.append(
            "\n".join(
                f"- [results/{name}](results/{name}) ({why}): `{cmd}`" for name, cmd, why in todo
            )
            + "\n"
        )
    else:
        parts.append("None: every stored result is current.\n")
    return "\n".join(parts)
