"""The suite compiles with most of XLA's optimisations off; users' programs compile with them on.

tests/conftest.py switches ``jax_disable_most_optimizations`` on for the test
session (XLA's backend at optimisation level 0, LLVM's expensive passes off),
and tests/_xla.py has XLA:CPU generate their code the cheaper way (older
emitters, one LLVM module): the suite spends much of its time in XLA compiling
one program per derivative.  These tests hold the programs a user gets (full optimisation) to
the ones the rest of the suite checks, on one problem of each simulator kind
and each derivative program shape (an ODE step loop with its compiler options,
a Rosenbrock solve, a pair potential's Hessian, a PDE's HVP, a Taylor series),
at tolerances from the length of each computation: the two compiles may
contract, reorder and fuse differently, never compute something else.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.monitoring
import numpy as np
import pytest
from _numerics import path_rtol
from _xla import CHEAP_CODEGEN, most_optimisations_off
from jax._src import compiler

import problems
import simdiff

_COMPILES: list[float] = []


def _on_event(event: str, duration: float, **kwargs: Any) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES.append(duration)


jax.monitoring.register_event_duration_secs_listener(_on_event)


def _compiled(off: bool, compute: Callable[[], Any]) -> np.ndarray:
    """``compute()`` on fresh problems with the optimisations ``off`` or on; it must compile."""
    jax.clear_caches()  # the catalogue's potentials are jitted once per process
    n = len(_COMPILES)
    with most_optimisations_off(off):
        out = np.asarray(compute(), dtype=float)
    assert len(_COMPILES) > n, "nothing compiled: the comparison would be vacuous"
    return out


def test_the_suite_compiles_with_most_optimisations_off() -> None:
    """Unless JAX_DISABLE_MOST_OPTIMIZATIONS=0 asks for a fully optimised run; processes the
    tests start see the same setting (a dask worker's sweep is compared bit for bit)."""
    off = os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] != "0"
    assert jax.config.values["jax_disable_most_optimizations"] is off
    child = subprocess.run(
        [sys.executable, "-c", "import jax; print(jax.config.values['jax_disable_most_optimizations'])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert child.stdout.strip() == str(off)
    overrides = compiler.get_compile_options(1, 1).env_option_overrides
    assert all((item in overrides) is off for item in CHEAP_CODEGEN)


@pytest.mark.xla_optimised
def test_a_test_marked_xla_optimised_compiles_as_users_do() -> None:
    assert jax.config.values["jax_disable_most_optimizations"] is False
    overrides = compiler.get_compile_options(1, 1).env_option_overrides
    assert not any(item in overrides for item in CHEAP_CODEGEN)


def _ode_adaptive() -> np.ndarray:
    p = problems.get("ode_linear_energy")  # an adaptive step loop (STEP_LOOP_OPTIONS)
    return np.ravel(simdiff.Derivatives(p, "jax").grad())


def _ode_stiff() -> np.ndarray:
    p = problems.get("van_der_pol_stiff")  # a Rosenbrock solve: LU of W every step
    return np.ravel(simdiff.Derivatives(p, "jax").jacobian())


def _pes() -> np.ndarray:
    return np.ravel(simdiff.Derivatives(problems.get("lj13"), "jax").hessian())


def _pde() -> np.ndarray:
    p = problems.get("heat_modes")
    return np.ravel(simdiff.Derivatives(p, "jax").hvp(np.linspace(-1.0, 1.0, p.n)))


def _taylor() -> np.ndarray:
    p = problems.get("ode_oscillator")
    return np.ravel(simdiff.Derivatives(p, "jax").taylor(4, np.ones(p.n)))


#: (computation, roundings along its longest path: steps (accepted and rejected) times the
#: roundings of one step's stages, or the terms summed into one entry)
CASES = {
    "ode-dopri5-grad": (_ode_adaptive, 49 * 150),  # 47 + 2 steps, 7 stages
    "ode-rosenbrock-jacobian": (_ode_stiff, 42 * 300),  # 41 + 1 steps, solves of W
    "pes-lj13-hessian": (_pes, 12 * 40),  # 12 pair terms into each entry
    "pde-heat-hvp": (_pde, 1_000),
    "taylor-ode-order-4": (_taylor, 123 * 150 * 5),  # 120 + 3 steps, 5 coefficients
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_optimised_programs_agree_with_the_suites(case: str) -> None:
    compute, roundings = CASES[case]
    unoptimised = _compiled(True, compute)
    optimised = _compiled(False, compute)
    assert np.all(np.isfinite(optimised))
    scale = np.max(np.abs(unoptimised))
    np.testing.assert_allclose(
        optimised, unoptimised, rtol=path_rtol(roundings), atol=path_rtol(roundings) * scale
    )
