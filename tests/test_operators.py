"""Laplacian, biharmonic and collapsed contractions: exact values, nested AD, simulators, errors.

References: closed forms (polynomials), the trace of the nested (jacfwd of
jacrev) Hessian, the nested Laplacian of the Laplacian, and the exact Hessian
of the heat equation's mode problem.  Tolerances: 1e-10 relative (float64
chains; the reference and the operator round differently at ~1e-14).
"""

from __future__ import annotations

import numpy as np
import pytest

import problems.ode
import problems.pde
import simdiff
from simdiff.backends.taylor import TaylorArray
from simdiff.core.operator_builders import biharmonic_directions, covariance_factor
from simdiff.errors import OptionError, ShapeError, SimdiffError
from simdiff.pde import Grid, burgers_equation, solve

RNG = np.random.default_rng(3)
N = 4
X = RNG.normal(size=N) * 0.5
SIGMA = (lambda a: a @ a.T)(RNG.normal(size=(N, N)))
W1 = RNG.normal(size=(3, N))
W2 = RNG.normal(size=3)


def _mlp(x, ops):
    return ops.sum(ops.tanh(ops.matmul(ops.asarray(W1), x) + 0.1) * ops.asarray(W2)) + ops.sum(
        ops.sin(x) * x**2
    )


MLP = simdiff.Problem(_mlp, x0=X, name="mlp")


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


@pytest.fixture(autouse=True)
def _fresh_rng(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test draws from a generator of its own: what it draws does not depend on which
    of this module's tests ran before it in the process (xdist's work stealing splits a
    module between workers, so that order changes from run to run)."""
    monkeypatch.setitem(globals(), "RNG", np.random.default_rng(1003))


@pytest.mark.parametrize("backend", ["jax", "torch"])
@pytest.mark.parametrize("method", ["collapsed", "taylor", "nested"])
def test_laplacian_matches_trace_of_hessian(backend, method):
    H = simdiff.hessian(MLP, backend="jax")
    lap = simdiff.laplacian(MLP, method=method, backend=backend)
    assert _rel(lap, np.trace(H)) < 1e-10
    lap_w = simdiff.laplacian(MLP, weights=SIGMA, method=method, backend=backend)
    assert _rel(lap_w, np.trace(SIGMA @ H)) < 1e-10


def test_laplacian_batched_factor_diagonal_and_numpy():
    xs = RNG.normal(size=(5, N))
    H = simdiff.hessian(MLP, xs)
    L = RNG.normal(size=(N, 2))
    got = simdiff.laplacian(MLP, xs, factor=L)
    assert got.shape == (5,)
    assert _rel(got, np.einsum("bij,ij->b", H, L @ L.T)) < 1e-10
    diag = np.array([1.0, 0.0, 2.0, 0.5])
    want = np.einsum("bii,i->b", H, diag)
    assert _rel(simdiff.laplacian(MLP, xs, weights=diag, backend="torch"), want) < 1e-10
    assert _rel(simdiff.laplacian(MLP, xs, weights=np.diag(diag), backend="numpy"), want) < 1e-10


def test_derivatives_methods_take_directions_first():
    d = simdiff.Derivatives(MLP, backend="jax")
    V = RNG.normal(size=(3, N))
    w = np.array([1.0, -2.0, 0.5])
    ref = sum(w[i] * float(simdiff.derivative(MLP, 3, V[i], X)) for i in range(3))
    assert _rel(d.derivative_sum(3, V, X, weights=w), ref) < 1e-10
    assert _rel(d.derivative_sum(3, V, X, weights=w, method="nested"), ref) < 1e-10
    assert _rel(d.laplacian(X), np.trace(d.hessian(X))) < 1e-10


def test_derivative_sum_vector_valued_and_groups():
    p = simdiff.Problem(lambda x, ops: ops.stack([x[0] ** 2 * x[1], ops.exp(x[0] + x[1])]),
                        x0=np.array([0.3, -0.2]))  # fmt: skip
    V = np.array([[1.0, 1.0], [1.0, -1.0]])
    got = simdiff.derivative_sum(p, 3, V, weights=np.eye(2), backend="torch")
    e = np.exp(0.1)
    np.testing.assert_allclose(got, [[6.0, 8.0 * e], [-6.0, 0.0]], rtol=1e-12, atol=1e-12)


def test_biharmonic_exact_polynomial_and_nested():
    # f = x0^2 x1^2 + x0^4 + x2^3 x0: Delta^2 f = 2*4 + 24 = 32 everywhere.
    p = simdiff.Problem(lambda x, ops: x[0] ** 2 * x[1] ** 2 + x[0] ** 4 + x[2] ** 3 * x[0],
                        x0=np.array([0.4, -0.3, 0.2]))  # fmt: skip
    for method in ("collapsed", "taylor", "nested"):
        assert _rel(simdiff.biharmonic(p, method=method), 32.0) < 1e-12, method
    assert _rel(simdiff.biharmonic(p, backend="torch"), 32.0) < 1e-12
    # metric Sigma = diag(2, 1, 1): 2*2*4... sum_ij s_i s_j f_iijj = 4*24 + 2*2*4 = 112
    assert _rel(simdiff.biharmonic(p, weights=np.array([2.0, 1.0, 1.0])), 112.0) < 1e-12


def test_biharmonic_of_mlp_matches_nested_on_both_backends():
    ref = simdiff.biharmonic(MLP, method="nested", backend="jax")
    for backend in ("jax", "torch"):
        assert _rel(simdiff.biharmonic(MLP, backend=backend), ref) < 1e-10
    refw = simdiff.biharmonic(MLP, weights=SIGMA, method="nested")
    assert _rel(simdiff.biharmonic(MLP, weights=SIGMA, backend="torch"), refw) < 1e-10


def test_biharmonic_directions_polarise():
    V, w = biharmonic_directions(np.eye(3))
    assert V.shape == (9, 3)
    T = RNG.normal(size=(3, 3, 3, 3))
    T = sum(np.transpose(T, p) for p in _perms4()) / 24.0  # a symmetric 4-tensor
    got = sum(wi * np.einsum("abcd,a,b,c,d->", T, v, v, v, v) for v, wi in zip(V, w, strict=True))
    assert abs(got - np.einsum("aabb->", T)) < 1e-12


def _perms4():
    import itertools

    return list(itertools.permutations(range(4)))


# --------------------------------------------------------------------------- simulators


@pytest.fixture(scope="module")
def lotka_volterra():
    p = problems.ode.lotka_volterra_fit()  # adaptive Dormand-Prince: lax.scan / Python loop
    return p, np.trace(simdiff.hessian(p, backend="torch"))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_laplacian_through_ode_solver(backend, lotka_volterra):
    p, trace = lotka_volterra
    assert _rel(simdiff.laplacian(p, backend=backend), trace) < 1e-10


def test_laplacian_through_pde_solver_exact():
    p = problems.pde.heat_modes()
    exact = np.trace(p.exact["hessian"](p.x0))
    assert _rel(simdiff.laplacian(p), exact) < 1e-10
    assert _rel(simdiff.laplacian(p, backend="torch"), exact) < 1e-10


def test_laplacian_of_burgers_functional_wrt_initial_field():
    grid = Grid((16,), (2 * np.pi,))
    xs = grid.coords()[0]

    def fn(u0, ops):
        u = solve(burgers_equation(), grid, u0, ops, t_final=0.2, n_steps=8, stepper="etdrk4",
                  params={"viscosity": 0.2})  # fmt: skip
        return 0.5 * ops.mean(u * u * u)

    p = simdiff.Problem(fn, x0=np.sin(xs) + 0.3, name="burgers16")
    ref = np.trace(simdiff.hessian(p))
    assert _rel(simdiff.laplacian(p), ref) < 1e-10
    assert _rel(simdiff.laplacian(p, backend="torch"), ref) < 1e-10


# --------------------------------------------------------------------------- stochastic


@pytest.mark.parametrize("distribution", ["rademacher", "gaussian"])
def test_hutchinson_is_unbiased(distribution):
    exact = np.trace(SIGMA @ simdiff.hessian(MLP))
    ests = [
        simdiff.stochastic_laplacian(
            MLP, weights=SIGMA, num_samples=8, distribution=distribution, seed=s
        )
        for s in range(300)
    ]
    values = np.array([float(e.value) for e in ests])
    se = np.sqrt(np.mean([float(e.variance) for e in ests]) / len(ests))
    assert abs(values.mean() - exact) < 5.0 * se
    # the reported variance is the variance of the estimate: compare with the spread
    ratio = np.var(values, ddof=1) / np.mean([float(e.variance) for e in ests])
    assert 0.7 < ratio < 1.4


def test_stochastic_biharmonic_is_unbiased_on_both_backends():
    exact = float(simdiff.biharmonic(MLP, method="nested"))
    ests = [simdiff.stochastic_biharmonic(MLP, num_samples=16, seed=s) for s in range(200)]
    values = np.array([float(e.value) for e in ests])
    se = np.sqrt(np.mean([float(e.variance) for e in ests]) / len(ests))
    assert abs(values.mean() - exact) < 5.0 * se
    t = simdiff.stochastic_biharmonic(MLP, num_samples=16, seed=7, backend="torch")
    j = simdiff.stochastic_biharmonic(MLP, num_samples=16, seed=7)
    assert _rel(t.samples, j.samples) < 1e-10


# --------------------------------------------------------------------------- errors


def test_bad_weights_and_problems_raise_named_errors():
    with pytest.raises(OptionError, match="symmetric"):
        simdiff.laplacian(MLP, weights=SIGMA + np.triu(np.ones((N, N)), 1))
    with pytest.raises(OptionError, match="positive semi-definite; its smallest eigenvalue"):
        simdiff.laplacian(MLP, weights=-SIGMA)
    with pytest.raises(
        ShapeError, match=r"weights must have shape \(4, 4\) or \(4,\); got \(3, 3\)"
    ):
        simdiff.laplacian(MLP, weights=np.eye(3))
    with pytest.raises(OptionError, match="diagonal of Sigma"):
        simdiff.laplacian(MLP, weights=np.array([1.0, -1.0, 1.0, 1.0]))
    with pytest.raises(ShapeError, match=r"factor must have shape \(4, r\)"):
        simdiff.laplacian(MLP, factor=np.ones((3, 2)))
    with pytest.raises(OptionError, match="not both"):
        simdiff.laplacian(MLP, weights=SIGMA, factor=np.eye(N))
    with pytest.raises(OptionError, match="must be finite"):
        simdiff.laplacian(MLP, weights=np.full((N, N), np.nan))
    vec = simdiff.Problem(lambda x, ops: x**2, x0=np.ones(2), name="vec")
    with pytest.raises(ShapeError, match="laplacian needs a scalar-valued problem; 'vec'"):
        simdiff.laplacian(vec)
    with pytest.raises(ShapeError, match="biharmonic needs a scalar-valued"):
        simdiff.stochastic_biharmonic(vec)
    with pytest.raises(OptionError, match="unknown operator method 'fwd'"):
        simdiff.laplacian(MLP, method="fwd")
    with pytest.raises(OptionError, match="unknown distribution"):
        simdiff.stochastic_laplacian(MLP, distribution="normal")
    with pytest.raises(OptionError, match="num_samples must be >= 2"):
        simdiff.stochastic_laplacian(MLP, num_samples=1)
    with pytest.raises(ShapeError, match=r"directions must have shape \(D, 4\)"):
        simdiff.derivative_sum(MLP, 2, np.ones((2, 3)))
    with pytest.raises(ShapeError, match=r"weights must have shape \(2,\) or \(G, 2\)"):
        simdiff.derivative_sum(MLP, 2, np.ones((2, 4)), weights=np.ones(3))
    with pytest.raises(OptionError, match="order must be an integer >= 1"):
        simdiff.derivative_sum(MLP, 0, np.ones((2, 4)))


def test_op_without_collapsed_rule_is_a_simdiff_error():
    def fn(x, ops):  # erf only where the collapsed context runs it
        return ops.sum(ops.erf(x) if isinstance(x, TaylorArray) else x)

    p = simdiff.Problem(fn, x0=np.ones(2), name="erf")
    with pytest.raises(SimdiffError, match=r"ops\.erf .*collapsed taylor"):
        simdiff.laplacian(p, backend="numpy")


def test_covariance_factor_drops_null_directions():
    L = covariance_factor(3, weights=np.diag([4.0, 0.0, 1.0]))
    assert L.shape == (2, 3)
    np.testing.assert_allclose(L.T @ L, np.diag([4.0, 0.0, 1.0]), atol=1e-14)


def test_covariance_factor_is_kept_per_sigma(monkeypatch):
    """Repeated calls with the same Sigma (equal contents, new objects) factor it once."""
    calls = []
    eigh = np.linalg.eigh
    monkeypatch.setattr(np.linalg, "eigh", lambda a: calls.append(1) or eigh(a))
    S = SIGMA + 1e-3 * np.arange(N)[:, None] * np.arange(N)[None]  # not used by other tests
    first = covariance_factor(N, weights=S)
    again = covariance_factor(N, weights=S.copy())
    assert len(calls) == 1 and again is first and not first.flags.writeable
    np.testing.assert_allclose(first.T @ first, S, atol=1e-12)
    ref = simdiff.laplacian(MLP, weights=S)  # the cached factor, through the API
    assert len(calls) == 1
    other = covariance_factor(N, weights=2.0 * S)
    assert len(calls) == 2
    np.testing.assert_allclose(other.T @ other, 2.0 * S, atol=1e-12)
    assert _rel(simdiff.laplacian(MLP, weights=2.0 * S), 2.0 * ref) < 1e-12
    for _ in range(2):  # a bad Sigma is refused every time, never kept
        with pytest.raises(OptionError, match="positive semi-definite"):
            covariance_factor(N, weights=-S)


@pytest.mark.parametrize("backend", ["jax", "torch", "numpy"])
def test_directions_are_transferred_once_and_follow_their_contents(backend, monkeypatch):
    """Equal directions reuse the backend array; a changed array of the caller is seen."""
    d = simdiff.Derivatives(MLP, backend=backend)
    sent = []
    orig = d.backend.from_numpy

    def counted(a, *rest):  # host arrays only (to_backend passes backend arrays too)
        if isinstance(a, np.ndarray):
            sent.append(a.shape)
        return orig(a, *rest)

    monkeypatch.setattr(d.backend, "from_numpy", counted)
    V = np.eye(N)
    first = d.derivative_sum(2, V)
    n_first = sent.count((N, N))
    again = d.derivative_sum(2, V.copy())
    host = backend == "numpy"  # numpy arrays are its native arrays: nothing to transfer
    assert host or sent.count((N, N)) == n_first == 1
    assert float(again) == float(first)
    V[0] *= 2.0  # the caller changes its array: D^2 f[2 e_0] = 4 H_00
    H = np.asarray(simdiff.hessian(MLP, X, backend="jax"))
    assert _rel(d.derivative_sum(2, V), np.trace(H) + 3.0 * H[0, 0]) < 1e-10
    assert host or sent.count((N, N)) == 2
    assert float(d.derivative_sum(2, np.eye(N))) == float(first)  # the kept copy is unchanged
