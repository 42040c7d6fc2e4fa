"""Sparse Jacobians in the stiff solvers: colouring, compressed forward mode, LU solves.

The reference problem is a 1-D Brusselator with diffusion (Hairer & Wanner I,
II.10 / II, IV.1): ``N`` grid points, Dirichlet ends ``u = 1, v = 3``, states
``[u_1..u_N, v_1..v_N]`` (so the pattern is two bands at distance ``N``, not
banded), parameters ``(A, B, alpha)``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from scipy.integrate import solve_ivp

import simdiff
from simdiff.backends import get_ops
from simdiff.errors import InputError, InputTypeError, ShapeError
from simdiff.ode import JacobianSparsity, ODEProblem, Rodas3, Rodas5P, detect_sparsity, solve
from simdiff.ode._banded import block_tridiagonal_factor
from simdiff.ode._sparsity import colour_columns, sparse_rhs_jacobian
from simdiff.ode.solvers.rosenbrock import rhs_jacobian

EPS = np.finfo(np.float64).eps
N = 20  # 40 states
P = np.array([1.0, 3.0, 0.02])


def bruss1d(t, y, p, ops):
    n = y.shape[0] // 2
    u, v = y[:n], y[n:]
    c = p[2] * (n + 1) ** 2
    up = ops.concat([ops.ones((1,)), u, ops.ones((1,))])
    vp = ops.concat([3.0 * ops.ones((1,)), v, 3.0 * ops.ones((1,))])
    du = p[0] + u * u * v - (p[1] + 1.0) * u + c * (up[2:] - 2.0 * u + up[:-2])
    dv = p[1] * u - u * u * v + c * (vp[2:] - 2.0 * v + vp[:-2])
    return ops.concat([du, dv])


def y0_of(n: int) -> np.ndarray:
    x = np.arange(1, n + 1) / (n + 1)
    return np.concatenate([1.0 + np.sin(2 * np.pi * x), np.full(n, 3.0)])


def pattern(n: int) -> np.ndarray:
    """The exact pattern: tridiagonal blocks on the diagonal, diagonal couplings u <-> v."""
    tri = np.eye(n, dtype=bool) | np.eye(n, k=1, dtype=bool) | np.eye(n, k=-1, dtype=bool)
    eye = np.eye(n, dtype=bool)
    return np.block([[tri, eye], [eye, tri]])


def problem(n: int = N, t1: float = 1.0, solver=None, **kw) -> ODEProblem:
    return ODEProblem(
        bruss1d, y0_of(n), (0.0, t1), P, save_at=[t1],
        observable=lambda ys, ops: ops.mean(ys[-1, : ys.shape[1] // 2]),
        solver=solver or Rodas5P(rtol=1e-10, atol=1e-12, **kw),
    )  # fmt: skip


# ----------------------------------------------------------------------------- colouring


@pytest.mark.parametrize("seed", range(4))
def test_colour_groups_have_disjoint_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    mask = rng.random((60, 60)) < 0.06
    colours = colour_columns(mask)
    for c in range(colours.max() + 1):
        assert mask[:, colours == c].sum(axis=1).max() <= 1, f"colour {c} shares a row"
    assert colours.max() + 1 < 60  # compression happened


def test_colouring_of_banded_patterns_is_at_most_the_bandwidth() -> None:
    tri = JacobianSparsity.from_pattern(pattern(N)[:N, :N])
    assert (tri.n_colours, tri.lower, tri.upper) == (3, 1, 1)
    m = pattern(N)
    two = JacobianSparsity.from_pattern(scipy.sparse.csr_matrix(m))
    conflicts = ((m.T.astype(int) @ m.astype(int)) > 0).sum(axis=1) - 1
    # a row's nonzeros need distinct colours; greedy never needs more than max degree + 1
    assert m.sum(axis=1).max() <= two.n_colours <= conflicts.max() + 1
    assert two.nnz == int(m.sum())


def test_detection_finds_the_exact_pattern() -> None:
    sp = detect_sparsity(bruss1d, y0_of(N), P)
    np.testing.assert_array_equal(sp.mask(), pattern(N))
    assert sp == JacobianSparsity.from_pattern(pattern(N))
    assert hash(sp) == hash(JacobianSparsity.from_pattern(pattern(N)))


def test_sparse_jacobian_equals_the_dense_one(backend: str) -> None:
    ops = get_ops(backend)
    be = simdiff.backends.get_backend(backend)
    y = ops.asarray(y0_of(N) + 0.1 * np.cos(np.arange(2 * N)))
    p, t = ops.asarray(P), ops.asarray(0.3)
    sp = JacobianSparsity.from_pattern(pattern(N))
    J, ft = (be.to_numpy(a) for a in sparse_rhs_jacobian(bruss1d, t, y, p, ops, sp))
    Jd, ftd = (be.to_numpy(a) for a in rhs_jacobian(bruss1d, t, y, p, ops))
    # each compressed entry is one JVP whose other seeds meet structural zeros: rounding only
    np.testing.assert_allclose(J, Jd, rtol=0, atol=16 * EPS * np.abs(Jd).max())
    np.testing.assert_allclose(ft, ftd, rtol=0, atol=16 * EPS * max(1.0, np.abs(ftd).max()))


# ----------------------------------------------------------------------------- solves


def radau_mean_u(t1: float) -> float:
    ops = get_ops("numpy")
    ref = solve_ivp(
        lambda t, y: np.asarray(bruss1d(t, y, P, ops)), (0.0, t1), y0_of(N), method="Radau",
        rtol=1e-12, atol=1e-14, jac_sparsity=scipy.sparse.csr_matrix(pattern(N)),
    )  # fmt: skip
    return float(ref.y[:N, -1].mean())


def test_sparse_solve_matches_radau(backend: str) -> None:
    ref = radau_mean_u(0.5)
    d = simdiff.Derivatives(problem(N, 0.5, jac_sparsity=pattern(N), linsolve="lu"), backend)
    # Rodas5P at rtol 1e-10 against Radau at 1e-12: the global error is a few times rtol
    assert abs(float(d.value()) - ref) < 1e-8 * abs(ref)


def test_sparse_gradient_matches_the_dense_path(backend: str) -> None:
    n, kw = 3, {"rtol": 1e-6, "atol": 1e-8}

    def make(**extra):
        return simdiff.Derivatives(problem(n, 0.2, solver=Rodas3(**kw, **extra)), backend)

    g, gd = make(jac_sparsity=pattern(n), linsolve="lu").grad(), make(linsolve="inverse").grad()
    # the same discrete solution up to rounding in J and in the W solve (LU against inverse)
    np.testing.assert_allclose(g, gd, rtol=1e-9, atol=1e-12)


def test_sparse_gradient_matches_central_differences() -> None:
    n = 5
    d = simdiff.Derivatives(problem(n, 0.5, jac_sparsity="detect"), backend="jax")
    g = np.asarray(d.grad())
    fd = np.empty(3)
    for i in range(3):
        e = np.zeros(3)
        e[i] = h = 1e-4 * P[i]
        fd[i] = (float(d.value(P + e)) - float(d.value(P - e))) / (2 * h)
    # error: step-sequence changes (~rtol / h = 1e-6 relative) plus h^2 truncation
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)


def test_hvp_through_the_sparse_lu_path_matches_the_dense_inverse_path(backend: str) -> None:
    n, kw = 2, {"rtol": 1e-5, "atol": 1e-7}

    def make(**extra):
        return simdiff.Derivatives(problem(n, 0.1, solver=Rodas3(**kw, **extra)), backend)

    v = np.array([1.0, -0.5, 2.0])
    hv = make(jac_sparsity=pattern(n), linsolve="lu").hvp(v)
    hvd = make(linsolve="inverse").hvp(v)
    # second derivatives of the same discrete solution: rounding only, amplified by the steps
    np.testing.assert_allclose(hv, hvd, rtol=1e-8, atol=1e-10 * np.abs(hvd).max())


def banded_rhs(t, y, p, ops):
    """1-D Brusselator with u and v interleaved per grid point: bandwidth 2."""
    n = y.shape[0] // 2
    z = bruss1d(t, ops.concat([y[0::2], y[1::2]]), p, ops)
    return ops.reshape(ops.stack([z[:n], z[n:]], axis=-1), (-1,))


@pytest.mark.parametrize("dim", [12, 13])  # blocks of 2, the last one short for 13 // 2
def test_block_tridiagonal_solve(dim: int, rng: np.random.Generator) -> None:
    i, j = np.indices((dim, dim))
    W = np.eye(dim) - 0.3 * np.where(abs(i - j) <= 2, rng.standard_normal((dim, dim)), 0.0)
    b = rng.standard_normal(dim)
    x = block_tridiagonal_factor(W, 2, get_ops("numpy"))(b)
    # backward stable for this well-conditioned W: residual of the order of eps |W| |x|
    assert np.abs(W @ x - b).max() < 64 * EPS * (np.abs(W) @ np.abs(x)).max()


def test_block_tridiagonal_solve_differentiates_like_a_dense_solve(backend: str) -> None:
    ops, be = get_ops(backend), simdiff.backends.get_backend(backend)
    dim = 6
    i, j = np.indices((dim, dim))
    band = np.where(abs(i - j) <= 2, np.cos(i + 2.0 * j), 0.0)
    b = ops.asarray(np.sin(np.arange(dim) + 1.0))

    def f(s, banded):
        W = ops.eye(dim) - s * ops.asarray(band)
        x = block_tridiagonal_factor(W, 2, ops)(b) if banded else ops.linalg.solve(W, b)
        return ops.sum(x * x)

    def derivatives(s):  # first and second derivatives, banded then dense: one compilation
        fs = [lambda q, m=m: f(q, m) for m in (True, False)]
        return ops.stack([d(s) for g in fs for d in (be.grad(g), be.grad(be.grad(g)))])

    got = be.to_numpy(be.jit(derivatives)(ops.asarray(0.3)))
    # rounding of two elimination orders on a well-conditioned 6 x 6 W (cond about 3),
    # through two derivative levels
    np.testing.assert_allclose(got[:2], got[2:], rtol=64 * EPS * 1e3, atol=0)


def test_banded_linsolve_solution_matches_the_inverse_path() -> None:
    n, kw = 8, {"rtol": 1e-8, "atol": 1e-10}
    y0 = np.stack([y0_of(n)[:n], y0_of(n)[n:]], axis=-1).reshape(-1)
    sp = detect_sparsity(banded_rhs, y0, P)
    assert (sp.lower, sp.upper) == (2, 2)
    ys = [
        solve(banded_rhs, y0, (0.0, 0.5), P, save_at=[0.5], solver=Rodas5P(**kw, **extra))
        for extra in ({"jac_sparsity": sp, "linsolve": "banded"}, {"linsolve": "inverse"})
    ]
    # the same discrete solution: rounding in the W solves, amplified over the steps
    np.testing.assert_allclose(ys[0], ys[1], rtol=1e-10, atol=0)


def test_banded_gradient_matches_the_lu_path(backend: str) -> None:
    """The blocks of W gathered from the compressed Jacobian (no dense J or W), scanned:
    the gradient of the dense-LU path, to rounding amplified over the steps.  (rtol 1e-6:
    23 steps, half of rtol 1e-8's, for torch's eager loop; the paths agree whatever it is.)"""
    n, kw = 8, {"rtol": 1e-6, "atol": 1e-8, "h0": 1e-3}
    y0 = np.stack([y0_of(n)[:n], y0_of(n)[n:]], axis=-1).reshape(-1)
    sp = detect_sparsity(banded_rhs, y0, P)

    def grad(**extra):
        p = ODEProblem(banded_rhs, y0, (0.0, 0.5), P, save_at=[0.5],
                       observable=lambda ys, ops: ops.mean(ys[-1, 0::2]),
                       solver=Rodas5P(**kw, **extra))  # fmt: skip
        return simdiff.grad(p, backend=backend)

    banded = grad(jac_sparsity=sp, linsolve="banded")
    lu = grad(jac_sparsity=sp, linsolve="lu")
    np.testing.assert_allclose(banded, lu, rtol=1e-9, atol=1e-12 * np.abs(lu).max())


# ----------------------------------------------------------------------------- bad input


def test_wrong_shape_is_refused_naming_the_argument() -> None:
    with pytest.raises(ShapeError, match=r"jac_sparsity must have shape \(40, 40\); got shape"):
        problem(jac_sparsity=pattern(N + 1))
    with pytest.raises(ShapeError, match="jac_sparsity must have shape"):
        Rodas5P(jac_sparsity=np.ones((3, 4), dtype=bool))


def test_a_pattern_missing_a_nonzero_is_refused() -> None:
    missing = pattern(N).copy()
    missing[N + 3, 3] = False  # dv_3 / du_3 = B - 2 u v, far from zero at y0
    with pytest.raises(InputError, match="jac_sparsity misses nonzeros of df/dy"):
        problem(jac_sparsity=missing)


def test_a_given_pattern_is_checked_once_per_right_hand_side(monkeypatch) -> None:
    """Construction checks the pattern; derivative calls at other points reuse the verdict,
    a new right-hand side or pattern is checked again, and a failed check raises again."""
    from simdiff.ode import _sparsity

    calls: list[int] = []
    real = _sparsity.check_pattern
    monkeypatch.setattr(_sparsity, "check_pattern", lambda *a: calls.append(1) or real(*a))

    def rhs(t, y, p, ops):  # a right-hand side of this test only: nothing checked it yet
        return bruss1d(t, y, p, ops)

    pr = ODEProblem(rhs, y0_of(N), (0.0, 0.1), P, save_at=[0.1],
                    observable=lambda ys, ops: ops.mean(ys[-1]),
                    solver=Rodas3(jac_sparsity=pattern(N)))  # fmt: skip
    assert len(calls) == 1
    for x in (P, 1.1 * P):
        pr.check_point(x)
    assert len(calls) == 1

    def other(t, y, p, ops):
        return bruss1d(t, y, p, ops)

    pr.solver.check(other, y0_of(N), 0.0, np.array([0.1]), P)  # another rhs: checked
    assert len(calls) == 2
    missing = pattern(N).copy()
    missing[N + 3, 3] = False
    for _ in range(2):
        with pytest.raises(InputError, match="jac_sparsity misses nonzeros"):
            Rodas3(jac_sparsity=missing).check(rhs, y0_of(N), 0.0, np.array([0.1]), P)
    assert len(calls) == 4


def test_other_bad_settings_are_refused() -> None:
    with pytest.raises(InputError, match="jac_sparsity must be a .* or 'detect'; got 'auto'"):
        Rodas5P(jac_sparsity="auto")
    with pytest.raises(InputTypeError, match="jac_sparsity must be a boolean"):
        Rodas3(jac_sparsity=3)
    with pytest.raises(InputError, match="cannot be combined with an analytic jac"):
        Rodas5P(jac_sparsity=pattern(2), jac=lambda t, y, p, ops: y)
    with pytest.raises(InputError, match="linsolve must be one of"):
        Rodas5P(linsolve="qr")
    with pytest.raises(InputError, match="linsolve='banded' needs the bandwidth"):
        Rodas3(linsolve="banded")
