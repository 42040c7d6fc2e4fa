"""The shape of simdiff/: its import graph between parts, file and class sizes, raises, comments.

The package is built in parts, lowest first (docs/contributing.md draws them)::

    errors, _log, _version
      -> backends
      -> core
      -> environment, store     (the results store: sweeps write to it)
      -> ode, pde, pes          (one level: they may import each other, without cycles)
      -> sensitivity
      -> evidence
      -> cli
    simdiff/__init__.py, simdiff/jax.py, simdiff/torch.py: the public face, may import anything

A module imports only from its own part or a lower one; no two modules import
each other, directly or around a loop; nothing inside simdiff/ imports the
package root ``simdiff`` (import the module ``simdiff.x.y`` that defines the
name).  Every import counts, those inside functions too: a delayed import
hides a cycle from the interpreter, not from the design.

The other rules here: no file over 800 lines, no class over 400, at most 10
modules directly in simdiff/, no ``raise`` of a builtin exception (raise a
:mod:`simdiff.errors` class, which carries the builtin as a second base), and
no timing or load figure in a docstring or comment (state cost as a formula,
"one VJP per column"; measured figures live in docs/performance.md, generated
from the stored benchmark results).
"""

from __future__ import annotations

import ast
import builtins
import io
import re
import tokenize
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "simdiff"

#: The parts, lowest first; a module's part is the first dotted segment under simdiff.
#: Parts on one level share a number.
LEVELS: dict[str, int] = {
    "errors": 0,
    "_log": 0,
    "_version": 0,
    "backends": 1,
    "core": 2,
    "environment": 3,
    "store": 3,
    "ode": 4,
    "pde": 4,
    "pes": 4,
    "sensitivity": 5,
    "evidence": 6,
    "cli": 7,
}
#: The public face: may import any part.
FACE = {"simdiff", "simdiff.jax", "simdiff.torch"}

MAX_FILE_LINES = 800
MAX_CLASS_LINES = 400
MAX_TOP_MODULES = 10

#: Builtin exceptions never raised in simdiff/ (SystemExit and the other BaseException-only
#: classes are control flow, not errors).
BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, Exception)
)

#: A measured figure: a duration in (milli/micro/nano)seconds, a speed-up factor, or a
#: machine load ("VJP 380 against 656 us, at load 9").
FIGURE = re.compile(
    r"\b\d+(?:\.\d+)?\s?(?:ms|us|µs|μs|ns)\b"
    r"|\b\d+(?:\.\d+)?\s?(?:s|sec|seconds|min|minutes)\b(?! ?[-=(^*/])(?=[ ,;.)\]]|$)"
    r"|\b(?:at|under) load \d|\b[Ll]oad(?: average)? (?:of )?\d|\b[Ll]oad average\b",
)


def modules() -> dict[str, Path]:
    """Every module of simdiff/ by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = modules()
#: Every module's text, read once (the checks below see one state of the tree).
SOURCES = {path: path.read_text() for path in MODULES.values()}


def part(module: str) -> str:
    """The part a module belongs to (``simdiff.core.api`` -> ``core``); the face is ``face``."""
    if module in FACE:
        return "face"
    return module.split(".")[1]


def resolve(name: str) -> str | None:
    """The simdiff module an imported dotted name denotes, or None outside simdiff."""
    if name != "simdiff" and not name.startswith("simdiff."):
        return None
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]  # an attribute of a module, not a module
    return name


def imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """``(imported simdiff module, line)`` for every import in ``path``, nested ones too."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(SOURCES[path], str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = resolve(alias.name)
                if target is not None:
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # ``from simdiff.x import y`` imports the module simdiff.x.y where there is one
                sub = f"{base}.{alias.name}"
                target = resolve(sub) if sub in MODULES else resolve(base)
                if target is not None:
                    yield target, node.lineno


def graph() -> dict[str, dict[str, int]]:
    """module -> {imported module: first line}, simdiff modules only, without self-edges."""
    out: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        edges: dict[str, int] = {}
        for target, line in imports(module, path):
            if target != module:
                edges.setdefault(target, line)
        out[module] = edges
    return out


GRAPH = graph()


def cycles(g: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(found)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --------------------------------------------------------------------------- the graph


def test_every_module_has_a_part() -> None:
    unknown = sorted({part(m) for m in MODULES} - {*LEVELS, "face"})
    assert not unknown, f"parts without a level in LEVELS (add them, or move the module): {unknown}"


def test_no_import_cycle() -> None:
    found = cycles(GRAPH)
    described = []
    for comp in found:
        members = set(comp)
        edges = [
            f"{a} -> {b} (line {line})"
            for a in comp
            for b, line in sorted(GRAPH[a].items())
            if b in members
        ]
        described.append("; ".join(edges))
    assert not found, "import cycles:\n  " + "\n  ".join(described)


def test_no_import_against_the_parts_order() -> None:
    bad = []
    for module, edges in sorted(GRAPH.items()):
        src = part(module)
        if src == "face":
            continue
        for target, line in sorted(edges.items()):
            dst = part(target)
            if dst == "face" or LEVELS.get(dst, -1) > LEVELS.get(src, -1):
                bad.append(f"{rel(MODULES[module])}:{line}: {src} imports {dst} ({target})")
    assert not bad, "imports from a lower part to a higher one:\n  " + "\n  ".join(bad)


def test_nothing_inside_imports_the_package_root() -> None:
    bad = [
        f"{rel(MODULES[m])}:{line}"
        for m, edges in sorted(GRAPH.items())
        if m != "simdiff"
        for target, line in edges.items()
        if target == "simdiff"
    ]
    assert not bad, (
        "imports of the package root `simdiff` (import simdiff.x.y instead):\n  " + "\n  ".join(bad)
    )


def test_the_graph_sees_nested_and_from_imports() -> None:
    """The parser itself: a nested import and ``from package import module`` are edges."""
    assert "simdiff.backends" in GRAPH["simdiff"]  # from simdiff import backends as backends
    assert "simdiff.evidence.check.run" in GRAPH["simdiff.cli"]  # inside a function
    assert resolve("simdiff.core.problem.Problem") == "simdiff.core.problem"
    assert resolve("numpy") is None
    assert cycles({"a": {"b": 1}, "b": {"a": 1}, "c": {"a": 1}}) == [["a", "b"]]


# --------------------------------------------------------------------------- sizes


def test_no_file_over_800_lines() -> None:
    long = {
        rel(p): n for p in MODULES.values() if (n := len(SOURCES[p].splitlines())) > MAX_FILE_LINES
    }
    assert not long, f"files over {MAX_FILE_LINES} lines: {long}"


def test_no_class_over_400_lines() -> None:
    long = {}
    for path in MODULES.values():
        for node in ast.walk(ast.parse(SOURCES[path])):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                n = node.end_lineno - node.lineno + 1
                if n > MAX_CLASS_LINES:
                    long[f"{rel(path)}:{node.lineno} {node.name}"] = n
    assert not long, f"classes over {MAX_CLASS_LINES} lines: {long}"


def test_few_modules_directly_in_simdiff() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules directly in simdiff/: {top}"


def test_version_in_one_place() -> None:
    tree = ast.parse((PACKAGE / "_version.py").read_text())
    __version__ = next(
        n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
    )
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["version"] == __version__


# --------------------------------------------------------------------------- raises


def builtin_raises(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(SOURCES[path])):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id in BUILTIN_EXCEPTIONS:
                yield f"{rel(path)}:{node.lineno}: raise {exc.id}"


def test_no_raise_of_a_builtin_exception() -> None:
    bad = [hit for p in MODULES.values() for hit in builtin_raises(p)]
    assert not bad, "raise a simdiff.errors class instead:\n  " + "\n  ".join(bad)


# --------------------------------------------------------------------------- figures


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of every comment and every string statement (docstrings) in ``path``."""
    source = SOURCES[path]
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for i, text in enumerate(node.value.value.splitlines()):
                yield node.lineno + i, text


def figures(text: str) -> list[str]:
    return [m.group(0) for m in FIGURE.finditer(text)]


@pytest.mark.parametrize(
    ("text", "hit"),
    [
        ("VJP 380 against 656 us, at load 9", True),
        ("one call took 1.2 ms", True),
        ("12.5 µs per element", True),
        ("(load average 3.1)", True),
        ("measured under load 4", True),
        ("the first call costs 40 s on this machine", True),
        ("one VJP per column", False),
        ("``ms`` is the millisecond", False),
        ("integrate to t = 2 s-1", False),
        ("the 3 loads of a truss", False),
        ("time steps of 1e-3", False),
        ("``1 + 3 S + S`` coefficient vectors", False),
    ],
)
def test_the_figure_pattern(text: str, hit: bool) -> None:
    assert bool(figures(text)) is hit, (text, figures(text))


def test_no_timing_or_load_figure_in_docstrings_or_comments() -> None:
    bad = [
        f"{rel(path)}:{line}: {found}"
        for path in MODULES.values()
        for line, text in prose(path)
        if (found := figures(text))
    ]
    assert not bad, (
        "timing or load figures in docstrings/comments (state the cost as a formula and "
        "point to docs/performance.md):\n  " + "\n  ".join(bad)
    )
