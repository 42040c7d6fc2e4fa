"""Planted errors: the detection power simdiff.check states, on both backends.

An error is planted in the AD result only, with the ``x - stop_gradient(x)``
trick: the term is zero in value (so the numpy function SciPy differences is
unchanged) and adds ``delta`` to one element of the gradient or the Hessian.

Stated power (docstring of ``simdiff.check``): against exact references a
relative error of 1e-8 in any element >= 1e-3 of the array's largest is
caught; against finite differences, 1e-5; a near-zero gradient wrong by 100%
is caught.  Each test also checks the unplanted problem passes, so it can fail.

The catalogue sweep (below) plants relative errors of 100%, 10% and 1% into
each element of each comparison ``check`` made on four catalogue problems and
asserts none is passed: each fails or is declared inconclusive.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

import simdiff
from simdiff.evidence.check.run import check
from simdiff.evidence.check.tolerance import Comparison, compare_arrays

A = np.array([1.0, 1e-1, 1e-2, 1.2e-3])  # element scales: the last is ~1e-3 of the first
B = np.array([1.0, 0.5, 2.0, 1.5])
X0 = np.array([0.3, -0.2, 0.1, 0.25])


def _g(x: np.ndarray) -> np.ndarray:
    return A * B * np.exp(B * x)


def _h(x: np.ndarray) -> np.ndarray:
    return np.diag(A * B**2 * np.exp(B * x))


def planted(kind: str, k: int, rel: float) -> simdiff.Problem:
    """sum A exp(B x), with element k of the gradient or Hessian off by ``rel`` (relative)."""
    size = _g(X0)[k] if kind == "grad" else _h(X0)[k, k]

    def fn(x, ops):
        f = ops.sum(ops.asarray(A) * ops.exp(ops.asarray(B) * x))
        d = x[k] - ops.stop_gradient(x[k])
        plant = d if kind == "grad" else 0.5 * d * d
        return f + rel * size * plant

    exact = {"value": lambda x: np.sum(A * np.exp(B * x)), "grad": _g, "hessian": _h}
    return simdiff.Problem(fn, x0=X0, name=f"planted-{kind}{k}", exact=exact)


def _verdict(res, kind: str, reference: str) -> str:
    (e,) = [e for e in res.entries if e.derivative == kind and e.reference == reference]
    return e.verdict


@pytest.mark.parametrize("kind", ["grad", "hessian"])
@pytest.mark.parametrize("k", [0, 3])
def test_exact_reference_catches_1e_8(backend: str, kind: str, k: int) -> None:
    assert np.abs(_g(X0)[3]) >= 1e-3 * np.max(np.abs(_g(X0)))
    clean = check(planted(kind, k, 0.0), derivatives=(kind,), backends=(backend,))
    assert _verdict(clean, kind, "exact") == "pass", str(clean)
    res = check(planted(kind, k, 1e-8), derivatives=(kind,), backends=(backend,))
    assert _verdict(res, kind, "exact") == "fail", str(res)
    assert res.verdict == "fail"


@pytest.mark.parametrize("kind", ["grad", "hessian"])
@pytest.mark.parametrize("k", [0, 3])
def test_finite_differences_catch_1e_5(backend: str, kind: str, k: int) -> None:
    clean = check(planted(kind, k, 0.0), derivatives=(kind,), backends=(backend,))
    assert _verdict(clean, kind, "scipy-fd") == "pass", str(clean)
    p = planted(kind, k, 1e-5)
    p.exact.clear()  # finite differences alone
    res = check(p, derivatives=(kind,), backends=(backend,))
    assert _verdict(res, kind, "scipy-fd") == "fail", str(res)


@pytest.mark.parametrize("reference", ["scipy-fd", "exact"])
def test_near_zero_gradient_wrong_by_100_percent_is_caught(backend: str, reference: str) -> None:
    # f = 1 + |x - c|^2 near its minimum: the gradient is ~1e-9, far below 1.
    c = np.array([0.7, -0.4, 0.2])
    x0 = c + 1e-9 * np.array([1.0, -2.0, 1.5])

    def make(factor: float) -> simdiff.Problem:
        def fn(x, ops):
            r = x - ops.asarray(c)
            d = x - ops.stop_gradient(x)
            return 1.0 + ops.sum(r * r) + factor * ops.sum(ops.stop_gradient(2.0 * r) * d)

        return simdiff.Problem(fn, x0=x0, exact={"grad": lambda x: 2.0 * (x - c)})

    clean = check(make(0.0), derivatives=("grad",), backends=(backend,))
    assert _verdict(clean, "grad", reference) == "pass", str(clean)
    res = check(make(1.0), derivatives=("grad",), backends=(backend,))  # AD gives 2x the gradient
    assert _verdict(res, "grad", reference) == "fail", str(res)


# --------------------------------------------------------------------------- catalogue sweep
#
# The comparisons simdiff.check made on every catalogue problem with n <= 40 (stiff and
# nonstiff ODEs, potential-energy surfaces, PDEs, closed forms), both backends, every
# derivative kind that applies (validation.check_comparisons.plan): recorded by
# `python -m validation.check_comparisons tests/data/check_comparisons.json` (an hour) and
# replayed through compare_arrays here with an error planted in one element of the AD
# result (seconds).

DATA = Path(__file__).parent / "data" / "check_comparisons.json"
PLANTS = (1.0, 0.1, 0.01)


def _read_only(a: list | None, dtype: type) -> np.ndarray | None:
    if a is None:
        return None
    out = np.asarray(a, dtype=dtype)
    out.setflags(write=False)
    return out


@functools.cache
def _stored() -> list[dict]:
    """The recorded comparisons, their arrays converted once (read-only: a test plants into
    a copy); the sweeps below compare each element thousands of times."""
    rows = json.loads(DATA.read_text())["comparisons"]
    for c in rows:
        for key in ("got", "ref", "err", "gap"):
            c[key] = _read_only(c[key], np.float64)
        c["converged"] = _read_only(c["converged"], bool)
    return rows


def _compare(c: dict, got: np.ndarray | None = None, **kw) -> Comparison:
    return compare_arrays(
        c["got"] if got is None else got, c["ref"], rtol=c["rtol"], err=c["err"],
        converged=c["converged"], fscale=c["fscale"], gap=c["gap"], **kw,
    )  # fmt: skip


def _label(c: dict) -> str:
    return f"{c['problem']} {c['derivative']}/{c['backend']} vs {c['reference']}"


def test_the_recorded_sweep_covers_the_problem_kinds_and_both_backends() -> None:
    from validation.check_comparisons import plan

    rows = _stored()
    want = plan()
    assert {c["problem"] for c in rows} == set(want), "re-record: the catalogue changed"
    assert {c["backend"] for c in rows} == {"jax", "torch"}
    for name, kinds in want.items():  # every derivative kind of every problem
        got = {c["derivative"].split(".")[0] for c in rows if c["problem"] == name}
        assert {k for k in kinds if k != "derivative"} <= got, (name, got)
    assert any(
        c["reference"].startswith("scipy-fd") and c["gap"] is not None and c["gap"].size > 0
        for c in rows
    )  # a tight solve


def test_unplanted_comparisons_pass() -> None:
    """Every recorded comparison passes, or is inconclusive as a whole (a gradient at a
    minimum, morse-h2's: every element at the rounding level); none fails."""
    verdicts = []
    for c in _stored():
        res = _compare(c)
        assert res.verdict == c["verdict"] in ("pass", "inconclusive"), (_label(c), res.message)
        verdicts.append(res.verdict)
    assert verdicts.count("pass") > 10 * verdicts.count("inconclusive")


@pytest.mark.parametrize("delta", PLANTS)
def test_a_planted_error_in_any_element_never_passes(delta: float) -> None:
    # At resolution r = delta / 2 an element passes only when tol_i < r |ref_i|; an error
    # delta |ref_i| then exceeds tol_i + |got_i - ref_i| (<= 2 tol_i): it fails, or the
    # element is declared inconclusive. Never a pass, in every element of every comparison.
    caught = inconclusive = 0
    for c in _stored():
        got, ref = np.asarray(c["got"], float), np.asarray(c["ref"], float)
        for k in np.ndindex(ref.shape):
            if ref[k] == 0.0:
                continue  # a relative error of a zero is zero
            bad = got.copy()
            bad[k] += delta * ref[k]
            res = _compare(c, bad, resolve=delta / 2)
            assert res.elements is not None and res.elements[k] != "pass", (_label(c), k)
            assert res.verdict != "pass" or res.elements[k] == "inconclusive", (_label(c), k)
            caught += res.elements[k] == "fail"
            inconclusive += res.elements[k] == "inconclusive"
            if (
                delta == 1.0
                and c["verdict"] == "pass"
                and abs(ref[k]) >= 1e-6 * np.max(np.abs(ref))
            ):
                # a 100% error fails wherever the element is above the rounding level
                # (robertson's intermediate species, ~1e-5 of the others, included)
                assert res.elements[k] == "fail", (_label(c), k, res.message)
    assert caught > inconclusive > 0  # structural and rounding-level zeros are inconclusive


def test_at_the_default_resolution_a_100_percent_error_fails_or_is_inconclusive() -> None:
    for c in _stored():
        got, ref = np.asarray(c["got"], float), np.asarray(c["ref"], float)
        for k in np.ndindex(ref.shape):
            bad = got.copy()
            bad[k] += ref[k] if ref[k] != 0.0 else 1.0
            res = _compare(c, bad)
            assert res.elements is not None and res.elements[k] != "pass", (_label(c), k)
            assert res.verdict == "fail" or res.n_inconclusive > 0, _label(c)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_robertson_jvp_with_the_intermediate_species_doubled_fails(backend: str) -> None:
    # y2 (~1e-5) is five orders below y1 and y3: under an absolute floor of 1e-2 of the
    # largest element it passed doubled. Elements 1, 4, 7 are y2 at t = 0.4, 4, 40.
    (c,) = [
        c for c in _stored()
        if c["problem"] == "robertson" and c["derivative"] == "jvp"
        and c["backend"] == backend and c["reference"] == "scipy-fd"
    ]  # fmt: skip
    got = np.asarray(c["got"], float)
    bad = got.copy()
    bad[[1, 4, 7]] *= 2.0
    res = _compare(c, bad)
    assert res.verdict == "fail" and res.n_fail == 3, res
    assert _compare(c).verdict == "pass"
