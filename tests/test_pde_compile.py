"""simdiff.pde under torch.compile: Dynamo traces a whole solve (no graph break), and the
compiled derivatives equal the eager ones.

What made PDE problems untraceable before (docs/performance.md, "PDE derivatives on torch"): numpy
finiteness checks in ``Grid`` (a branch on a traced value), numpy arithmetic on the ETDRK4
coefficients inside the problem function (``ndarray.dtype``), and ``np.fft.rfftfreq``, which
Dynamo's numpy emulation computes in float32.
"""

from __future__ import annotations

import numpy as np
import pytest

import problems
import simdiff
from simdiff.pde import Grid, burgers, kuramoto_sivashinsky

torch = pytest.importorskip("torch")


def _small_problems() -> dict[str, simdiff.Problem]:
    ks = Grid((32,), (32 * np.pi,))
    bg = Grid((16,), (2 * np.pi,))
    return {
        "ks_field": kuramoto_sivashinsky(ks, t_final=1.0, n_steps=4, stepper="etdrk4"),
        "burgers_nu": burgers(bg, t_final=0.2, n_steps=3, stepper="etdrk4", wrt="params"),
        "heat_modes": problems.get("heat_modes"),
        "heat_diffusivity": problems.get("heat_diffusivity"),
    }


@pytest.mark.parametrize("name", ["ks_field", "heat_modes"])
def test_dynamo_traces_the_value_function_whole(name):
    """fullgraph=True raises on any graph break; backend="eager" runs what Dynamo captured."""
    p = _small_problems()[name]
    ops = simdiff.get_ops("torch")
    x = torch.as_tensor(p.x0)
    torch._dynamo.reset()
    traced = torch.compile(lambda y: p.fn(y, ops), fullgraph=True, backend="eager")
    np.testing.assert_allclose(float(traced(x)), float(p.fn(x, ops)), rtol=1e-14)


@pytest.mark.parametrize("name", ["burgers_nu", "heat_diffusivity"])
def test_a_traced_operator_breaks_the_graph_at_as_complex(name):
    """L depends on the input: as_complex breaks the graph on purpose (Inductor's wrong second
    derivative through the cast); the rest of the solve traces up to it."""
    p = _small_problems()[name]
    ops = simdiff.get_ops("torch")
    torch._dynamo.reset()
    traced = torch.compile(lambda y: p.fn(y, ops), fullgraph=True, backend="eager")
    with pytest.raises(Exception, match="complex"):
        traced(torch.as_tensor(p.x0))


def test_wavenumbers_are_numpys_and_exact_under_dynamo():
    """Grid.wavenumbers equals numpy's fftfreq/rfftfreq bit for bit, also traced."""
    g = Grid((6, 9), (2.0, 3.0))
    kx, ky = g.wavenumbers()
    assert np.array_equal(kx, 2 * np.pi * np.fft.fftfreq(6, g.spacings[0]))
    assert np.array_equal(ky, 2 * np.pi * np.fft.rfftfreq(9, g.spacings[1]))
    torch._dynamo.reset()

    def f(x):
        return x * torch.from_numpy(Grid((9,), (3.0,)).wavenumbers()[0])

    x = torch.ones(5, dtype=torch.float64)
    traced = torch.compile(f, fullgraph=True, backend="eager")(x)
    assert torch.equal(traced, f(x))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Torchinductor does not support code generation for complex")
def test_compiled_pde_gradient_and_hvp_equal_eager():
    """Derivatives(compile=True) on a KS problem: Inductor compiles it, values to 1e-12.

    Two ETDRK4 steps on 16 points (the graph, and Inductor's time, grow with the steps; 16
    points against 32 took a quarter off the build)."""
    p = kuramoto_sivashinsky(Grid((16,), (16 * np.pi,)), t_final=0.5, n_steps=2, stepper="etdrk4")
    v = np.random.default_rng(0).standard_normal(p.n)
    eager = simdiff.Derivatives(p, "torch")
    compiled = simdiff.Derivatives(p, "torch", compile=True)
    for kind, call in (("grad", lambda d: d.grad()), ("hvp", lambda d: d.hvp(v))):
        e, c = call(eager), call(compiled)
        np.testing.assert_allclose(c, e, rtol=1e-12, atol=1e-12 * np.abs(e).max(), err_msg=kind)
    assert {i["path"] for i in compiled.cache_info()} == {"compiled"}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Torchinductor does not support code generation for complex")
def test_compiled_second_derivative_through_a_traced_operator_is_exact():
    """heat_diffusivity: L depends on the diffusivity, so as_complex runs on a traced value;
    Inductor got the compiled Hessian 0.75x wrong through a bare real-to-complex cast."""
    p = problems.get("heat_diffusivity")
    compiled = simdiff.Derivatives(p, "torch", compile=True)
    np.testing.assert_allclose(compiled.hessian(), p.exact["hessian"](p.x0), rtol=1e-10)
    np.testing.assert_allclose(compiled.hvp(np.ones(1)), p.exact["hessian"](p.x0)[0], rtol=1e-10)
    assert {i["path"] for i in compiled.cache_info()} == {"compiled"}
