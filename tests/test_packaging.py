"""The distribution: package list, no sys.path edits, and the wheel working outside the checkout."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Modules of validation/ that the library imports (the bench_* and plot scripts are run).
LIBRARY_VALIDATION = ("__init__", "catalogue", "literature", "simulators", "claims/*")
# Run from the checkout, never shipped: validation/benchmarks/ (bench_* and probe_* scripts).
UNSHIPPED = (ROOT / "validation" / "benchmarks",)


def _packages_on_disk() -> set[str]:
    found = set()
    for prefix, top in (("simdiff", ROOT / "simdiff"),
                        ("simdiff.problems", ROOT / "problems"),
                        ("simdiff.validation", ROOT / "validation")):  # fmt: skip
        for init in top.rglob("__init__.py"):
            if any(init.is_relative_to(u) for u in UNSHIPPED):
                continue
            rel = init.parent.relative_to(top).parts
            found.add(".".join((prefix, *rel)))
    return found


def test_the_package_list_ships_every_package_of_the_tree() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert set(setuptools["packages"]) == _packages_on_disk()
    assert setuptools["package-dir"] == {
        "simdiff.problems": "problems",
        "simdiff.validation": "validation",
    }


def _shipped_modules() -> list[str]:
    """Every module of the distribution: the package list mapped onto the tree."""
    setuptools = PYPROJECT["tool"]["setuptools"]
    dirs = setuptools["package-dir"]
    modules = []
    for package in setuptools["packages"]:
        top = next((k for k in sorted(dirs, key=len, reverse=True) if package.startswith(k)), None)
        rel = (
            package.split(".") if top is None else [dirs[top], *package[len(top) + 1 :].split(".")]
        )
        folder = ROOT.joinpath(*[r for r in rel if r])
        modules += [f"{package}.{f.stem}" for f in sorted(folder.glob("*.py"))]
    return modules


def test_the_distribution_ships_no_benchmark_or_probe_module() -> None:
    modules = _shipped_modules()
    assert "simdiff.validation.catalogue" in modules  # the report's catalogue run ships
    assert "simdiff.validation.claims.speed" in modules
    stray = [m for m in modules if re.search(r"\.(bench|probe)_|\.benchmarks\b", m)]
    assert stray == []
    # Every benchmark and probe script of the tree lives in validation/benchmarks/.
    loose = sorted(p.name for p in (ROOT / "validation").rglob("*.py")
                   if re.match(r"(bench|probe)_", p.name) and p.parent != UNSHIPPED[0])  # fmt: skip
    assert loose == []


def test_the_library_never_edits_sys_path() -> None:
    edit = re.compile(r"sys\.path\s*(\.(insert|append|extend)|\+?=)")
    files = [*(ROOT / "simdiff").rglob("*.py"), *(ROOT / "problems").glob("*.py")]
    files += [p for m in LIBRARY_VALIDATION for p in (ROOT / "validation").glob(f"{m}.py")]
    offenders = [str(p.relative_to(ROOT)) for p in files if edit.search(p.read_text())]
    assert offenders == []


USER = """
import numpy as np
import simdiff

def _f(x, ops):
    return ops.sum(ops.sin(x) * x**2)

problem = simdiff.Problem(_f, x0=np.array([0.3, 0.8, -0.5]), name="mine")
"""


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    assert "Traceback" not in out.stderr, out.stderr
    return out.stdout + out.stderr


@pytest.mark.slow
def test_the_wheel_works_outside_the_repository(tmp_path: Path) -> None:
    """Build the wheel, install it into a fresh venv, run list, check and report elsewhere."""
    src = tmp_path / "src"  # a copy: building in the checkout would write build/ there
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src)
    for name in ("simdiff", "problems", "validation"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w",
          str(tmp_path / "dist"), str(src)], tmp_path, env)  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("simdiff-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = sorted(
            n[: -len(".py")].replace("/", ".") for n in zf.namelist() if n.endswith(".py")
        )
    assert in_wheel == sorted(_shipped_modules())  # nothing from validation/benchmarks/
    # A fresh venv that sees this environment's dependencies (a .pth line adds the
    # directory; the .pth files inside it, such as an editable simdiff, are not run).
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, env=env,
    ).stdout.strip()  # fmt: skip
    # Also every other directory on this interpreter's path but the checkout's own: where the
    # dependencies come in through a .pth of paths (a venv over a system's packages).
    sited = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], *sys.path]
    outer = list(dict.fromkeys(
        p for p in sited if p and Path(p).is_dir() and Path(p).resolve() not in (ROOT, ROOT / "tests")
    ))  # fmt: skip
    Path(purelib, "outer-site-packages.pth").write_text("\n".join(outer) + "\n")
    _run([*pip, "--python", str(python), "install", "--no-deps", "--no-index",
          "--ignore-installed", str(wheel)], tmp_path, env)  # fmt: skip
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "mymodule.py").write_text(USER)
    where = _run([str(python), "-c", "import simdiff.problems as p, simdiff.validation as v; "
                  "print(p.__file__, v.__file__)"], work, env)  # fmt: skip
    assert where.count(purelib) == 2, where  # the installed copies, not the checkout's
    simdiff = str(venv / "bin" / "simdiff")
    assert "rosenbrock4" in _run([simdiff, "list"], work, env)
    out = _run([simdiff, "check", "mymodule:problem", "--derivatives", "grad,hessian"], work, env)
    assert "PASS" in out
    # The catalogue and the claims package import from the wheel; running claims is
    # test_cli's and the validation tests' job (each costs tens of seconds).
    _run([simdiff, "report", "--quick", "--problems", "seed", "--claims", "", "--out", "res"],
         work, env)  # fmt: skip
    text = (work / "res" / "report.md").read_text()
    assert "seed" in text and "simdiff report --quick" in text
    assert "complete" in _run([simdiff, "show", "res/store"], work, env)
