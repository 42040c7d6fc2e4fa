"""Backend logic lives in simdiff/backends/: nothing above it branches on a backend's name.

Code outside ``simdiff/backends/`` asks the Backend or ops object for a
capability (``optional_compiler``, ``ops.eager``, ``device_of``, ``concrete``,
``block_until_ready``, ``thread_info`` ...) instead of comparing names, and it
never imports jax or torch itself.  This test reads the source (AST) and
fails naming file, line and code for each violation.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "simdiff"
NAMES = {"jax", "torch", "numpy"}
FRAMEWORKS = {"jax", "jaxlib", "torch"}
#: Files allowed to use their framework directly: the diffrax engine is JAX by nature.
ALLOWED = {"ode/diffrax_engine.py", "ode/solvers/diffrax.py"}
#: Files another branch is cleaning (issue 11: the ODE solvers); remove each entry as it lands.
PENDING: set[str] = set()
#: Names of objects whose ``.name`` is a backend or context name.
BACKENDISH = {"ops", "backend", "be", "T", "base", "src"}


def _literals(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant)}
    return set()


def _is_backend_name(node: ast.AST) -> bool:
    """``ops.name``, ``self.backend.name``, ``T.name``, ``ops.base.name`` ..."""
    if not (isinstance(node, ast.Attribute) and node.attr == "name"):
        return False
    owner = node.value
    if isinstance(owner, ast.Name):
        return owner.id in BACKENDISH
    return isinstance(owner, ast.Attribute) and owner.attr in BACKENDISH


def violations(source: str) -> list[tuple[int, str]]:
    """``(line, code)`` of every backend-name branch or direct framework use in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        bad = False
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            lits = set().union(*(_literals(o) for o in operands))
            bad = bool(lits & NAMES) or any(_is_backend_name(o) for o in operands)
        elif isinstance(node, ast.Import):
            bad = any(a.name.split(".")[0] in FRAMEWORKS for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            bad = node.level == 0 and (node.module or "").split(".")[0] in FRAMEWORKS
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            # module.startswith("torch"), sys.modules.get("jax"), importlib.import_module("jax")
            f = node.func
            modules_get = (
                f.attr == "get"
                and isinstance(f.value, ast.Attribute)
                and (f.value.attr == "modules")
            )
            if modules_get or f.attr in ("startswith", "import_module"):
                bad = any(_literals(a) & FRAMEWORKS for a in node.args)
        elif isinstance(node, ast.Subscript):  # sys.modules["torch"]
            value = node.value
            bad = (
                isinstance(value, ast.Attribute)
                and value.attr == "modules"
                and bool(_literals(node.slice) & FRAMEWORKS)
            )
        if bad:
            found.append((node.lineno, ast.unparse(node)[:100]))
    return sorted(found)


def _files() -> list[str]:
    return sorted(
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*.py")
        if not p.relative_to(ROOT).as_posix().startswith("backends/")
    )


@pytest.mark.parametrize("rel", [f for f in _files() if f not in ALLOWED | PENDING])
def test_no_backend_name_branches(rel: str) -> None:
    found = violations((ROOT / rel).read_text())
    assert not found, (
        f"simdiff/{rel} branches on backend names or imports a framework: "
        + "; ".join(f"line {line}: {code}" for line, code in found)
    )


def test_pending_and_allowed_files_exist() -> None:
    # a stale entry would silently exempt a new file of the same name
    for rel in ALLOWED | PENDING:
        assert (ROOT / rel).is_file(), rel


@pytest.mark.parametrize(
    "code",
    [
        "if ops.name == 'jax': pass",
        "if self.backend.name != 'torch': pass",
        "ok = kind in ('jax', 'torch')",
        "import torch",
        "from jax import numpy",
        "m = type(x).__module__.startswith(('jax', 'jaxlib'))",
        "t = sys.modules['torch']",
        "t = sys.modules.get('torch')",
        "same = ops.name != backend",
        "same = ops.base.name == 'taylor'",
    ],
)
def test_detector_finds(code: str) -> None:
    assert violations(code), code


@pytest.mark.parametrize(
    "code",
    [
        "if method == 'taylor': pass",
        "if backend.optional_compiler: pass",
        "x = info['torch']",
        "x = threads.get('torch')",
        "if problem.name == 'seed': pass",
        "def f(backend='jax'): pass",
        "import numpy as np",
    ],
)
def test_detector_passes(code: str) -> None:
    assert not violations(code), code
