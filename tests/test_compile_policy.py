"""The compile policy ``compile=False | True | "auto"`` and ``method="auto"`` for Hessians.

The decision logic is tested with a stand-in compiler (fast, deterministic);
one test compiles for real (a small function) and checks that compiled and
eager derivatives agree to 1e-12 relative.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import problems
import simdiff
from problems.pes import fcc_cluster
from simdiff.backends import get_backend
from simdiff.core import compile as _compile
from simdiff.core.builders import auto_hessian_method
from simdiff.errors import OptionError, UnsupportedError
from simdiff.pes import cluster_problem, lennard_jones, morse, term_hessians


@pytest.fixture
def quad():
    return simdiff.Problem(lambda x, ops: ops.sum(x**3) + x[0] * x[1], x0=np.array([1.0, 2.0]))


class FakeCompiler:
    """Stands in for torch.compile: counts compiles; the "compiled" function fails, is
    slower (``delay``) or is faster than eager (it reuses its first result: the tests
    call it at one point)."""

    def __init__(self, fail: bool = False, delay: float = 0.0) -> None:
        self.fail, self.delay, self.compiled = fail, delay, 0

    def __call__(self, fn, fullgraph: bool = False):
        self.compiled += 1
        self.fullgraph = fullgraph
        memo = []

        def call(*args):
            if self.fail:
                raise RuntimeError("Dynamo does not support this transform")
            if self.delay:
                time.sleep(self.delay)
                return fn(*args)
            if not memo:
                memo.append(fn(*args))
            return memo[0]

        return call


@pytest.fixture
def fake(monkeypatch):
    def install(d, **kw):
        compiler = FakeCompiler(**kw)
        monkeypatch.setattr(d.backend, "compile", compiler)
        return compiler

    monkeypatch.setattr(_compile, "_MEASURED_COMPILE_S", [])
    return install


@pytest.mark.parametrize("value", ["yes", 1, 0, "True", None, "AUTO"])
def test_compile_values_outside_the_accepted_ones_are_refused(quad, value):
    with pytest.raises(OptionError, match=r"compile must be one of False, True, 'auto'; got"):
        simdiff.Derivatives(quad, backend="torch", compile=value)


def test_jax_accepts_false_and_auto_and_refuses_true(quad):
    d = simdiff.Derivatives(quad, backend="jax", compile="auto")
    np.testing.assert_allclose(d.grad(), [5.0, 13.0])
    assert d.cache_info()[0]["path"] == "jit" and d.cache_info()[0]["compile"] == "auto"
    with pytest.raises(OptionError, match="always compiles"):
        simdiff.Derivatives(quad, backend="jax", compile=True)


def test_auto_with_few_announced_calls_stays_eager(quad, fake):
    d = simdiff.Derivatives(quad, backend="torch", compile="auto").expect_calls(5)
    compiler = fake(d)
    for _ in range(5):
        d.grad()
    info = d.cache_info()[0]
    assert compiler.compiled == 0 and info["path"] == "eager"
    assert "announced calls vs break-even" in info["reason"] and info["break_even_calls"] > 5


def test_auto_with_many_announced_calls_compiles_after_measuring(quad, fake):
    d = simdiff.Derivatives(quad, backend="torch", compile="auto").expect_calls(10**9)
    compiler = fake(d)
    d.grad(), d.grad()
    assert compiler.compiled == 0  # two eager calls measure t_e first
    np.testing.assert_allclose(d.grad(), [5.0, 13.0])
    info = d.cache_info()[0]
    assert compiler.compiled == 1 and compiler.fullgraph is True
    assert info["path"] == "compiled" and info["compile_s"] >= 0 and info["compiled_s"] > 0
    assert [s for _, s in _compile._MEASURED_COMPILE_S] == [info["compile_s"]]
    assert info["compile_estimate_source"].startswith("prior: median first compile")


def test_auto_without_announcement_compiles_when_eager_time_reaches_compile_time(
    quad, fake, monkeypatch
):
    monkeypatch.setattr(_compile, "COMPILE_PRIOR_S", 1e-9)
    d = simdiff.Derivatives(quad, backend="torch", compile="auto")
    compiler = fake(d)
    for _ in range(3):
        d.hessian()
    assert compiler.compiled == 1 and d.cache_info()[0]["path"] == "compiled"
    assert "no calls announced" in d.cache_info()[0]["reason"]


def test_auto_keeps_eager_when_compiled_is_slower(quad, fake):
    d = simdiff.Derivatives(quad, backend="torch", compile="auto").expect_calls(10**9)
    compiler = fake(d, delay=0.05)
    for _ in range(4):
        np.testing.assert_allclose(d.grad(), [5.0, 13.0])
    info = d.cache_info()[0]
    assert compiler.compiled == 1 and info["path"] == "eager"
    assert "not faster than eager" in info["reason"] and info["compiled_s"] >= 0.05


def test_auto_reports_a_failed_compile_and_runs_eager(quad, fake):
    d = simdiff.Derivatives(quad, backend="torch", compile="auto").expect_calls(10**9)
    fake(d, fail=True)
    for _ in range(4):
        np.testing.assert_allclose(d.grad(), [5.0, 13.0])
    info = d.cache_info()[0]
    assert info["path"] == "eager"
    assert info["compile_error"].startswith(
        "torch.compile failed on grad: RuntimeError: Dynamo does not support"
    )


def test_true_raises_the_compile_failure_on_every_call(quad, fake):
    d = simdiff.Derivatives(quad, backend="torch", compile=True)
    fake(d, fail=True)
    for _ in range(2):
        with pytest.raises(UnsupportedError, match="torch.compile failed on grad: RuntimeError"):
            d.grad()


def test_compile_estimate_prefers_the_closest_measurement(monkeypatch):
    key = ("p", 2, "grad", (), ((2,),))
    monkeypatch.setattr(_compile, "COMPILE_PRIOR_S", 3.0)
    monkeypatch.setattr(_compile, "_MEASURED_COMPILE_S", [])
    assert _compile.compile_estimate(key)[0] == 3.0
    measured = _compile._MEASURED_COMPILE_S
    measured.append((("q", 5, "hessian", (), ((5,),)), 20.0))
    assert _compile.compile_estimate(key) == (20.0, "measured: 1 compile(s) of any callable")
    measured.append((("q", 5, "grad", (), ((5,),)), 8.0))
    assert _compile.compile_estimate(key) == (8.0, "measured: 1 compile(s) of 'grad' derivatives")
    measured.append((("p", 2, "hvp", (), ((2,),)), 1.0))
    assert _compile.compile_estimate(key) == (1.0, "measured: 1 compile(s) of this problem")
    measured.append((key, 2.0))
    assert _compile.compile_estimate(key) == (2.0, "measured: 1 compile(s) of this callable")


def test_auto_states_the_measured_estimate_of_a_second_callable(quad, fake):
    d = simdiff.Derivatives(quad, backend="torch", compile="auto").expect_calls(10**9)
    fake(d)
    for _ in range(3):
        d.grad()
    first = d.cache_info()[0]
    e = simdiff.Derivatives(quad, backend="torch", compile="auto").expect_calls(10**9)
    fake(e)
    for _ in range(3):
        e.grad()
    info = e.cache_info()[0]
    assert info["compile_estimate_s"] == first["compile_s"]
    assert info["compile_estimate_source"] == "measured: 1 compile(s) of this callable"


def test_expect_calls_rejects_bad_counts(quad):
    d = simdiff.Derivatives(quad, backend="torch", compile="auto")
    with pytest.raises(OptionError, match="non-negative integer or None; got -1"):
        d.expect_calls(-1)


@pytest.mark.parametrize(("backend", "method"), [("jax", "fwd-rev"), ("torch", "rev-rev")])
def test_auto_hessian_method_is_the_backends_and_is_reported(quad, backend, method):
    assert auto_hessian_method(get_backend(backend), quad.n, 1) == method
    d = simdiff.Derivatives(quad, backend=backend)
    np.testing.assert_allclose(d.hessian(), [[6.0, 1.0], [1.0, 12.0]])
    assert d.cache_info()[0]["method"] == method


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch._prims_common.check` is deprecated:FutureWarning")
def test_compiled_derivatives_match_eager_to_1e12():
    """One real torch.compile (a 3-input function): compiled == eager to 1e-12 relative."""
    p = problems.get("ishigami")
    x = np.array([0.3, -1.2, 2.0])
    eager = simdiff.Derivatives(p, backend="torch")
    compiled = simdiff.Derivatives(p, backend="torch", compile=True)
    want, got = eager.hessian(x), compiled.hessian(x)
    assert compiled.cache_info()[0]["path"] == "compiled"
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    jax_h = simdiff.hessian(p, x)
    np.testing.assert_allclose(got, jax_h, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch._prims_common.check` is deprecated:FutureWarning")
def test_a_compiled_hessian_keeps_its_guards_on_later_calls():
    """A compiled Hessian traced first thing in a thread (the leak guard's thread-local
    state still bare) gives the eager values on its second and third calls too, at the
    point it compiled at and at another one, instead of failing its own guards."""
    import concurrent.futures

    p = problems.get("ishigami")
    points = [np.array([0.3, -1.2, 2.0]), np.array([0.3, -1.2, 2.0]), np.array([2.0, 0.5, -1.0])]

    def compiled_calls() -> list[np.ndarray]:
        d = simdiff.Derivatives(p, backend="torch", check_finite=False, compile=True)
        out = [np.asarray(d.hessian(x, method="rev-rev")) for x in points]
        assert d.cache_info()[0]["path"] == "compiled"
        return out

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a fresh thread
        got = pool.submit(compiled_calls).result()
    eager = simdiff.Derivatives(p, backend="torch")
    for x, h in zip(points, got, strict=True):
        want = eager.hessian(x)
        np.testing.assert_allclose(h, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def _pair_energy_problem() -> simdiff.Problem:
    """Pairs of a 4-atom cluster picked by a numpy index array, weighted by a numpy constant."""
    i, j = np.triu_indices(4, k=1)
    index = np.stack([i, j], axis=1)
    weight = np.linspace(1.0, 2.0, len(index))

    def energy(x, ops):
        r = ops.take(ops.reshape(x, (4, 3)), index, axis=0)  # (pairs, 2, 3)
        d = r[:, 0, :] - r[:, 1, :]
        s = ops.sum(d * d, axis=-1)
        return ops.sum(ops.asarray(weight) * (s**-6 - s**-3))

    x0 = np.array([0, 0, 0, 1.1, 0, 0, 0, 1.2, 0, 0.1, 0.3, 1.0])
    return simdiff.Problem(energy, x0=x0, name="pairs4")


def test_numpy_array_guards_are_the_only_ones_dropped():
    from types import SimpleNamespace

    from simdiff.backends.torch import _numpy_guards_dropped

    entries = [
        SimpleNamespace(name="___from_numpy(L['fn'].index)", guard_type="TENSOR_MATCH"),
        SimpleNamespace(name="L['x']", guard_type="TENSOR_MATCH"),
        SimpleNamespace(name="___from_numpy(L['fn'].index)", guard_type="ID_MATCH"),
    ]
    assert _numpy_guards_dropped(entries) == [False, True, True]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch._prims_common.check` is deprecated:FutureWarning")
def test_numpy_constants_and_take_compile_to_one_graph_with_the_right_derivatives():
    """Two torch 2.13 failures: a numpy array in the problem made every fullgraph compile
    fail ("Guard failed on the same frame"), and a compiled rev-rev Hessian through
    index_select was zero.  Compiled == eager to 1e-12 for gradient and Hessian."""
    p = _pair_energy_problem()
    eager = simdiff.Derivatives(p, backend="torch")
    auto = simdiff.Derivatives(p, backend="torch", compile="auto").expect_calls(10**9)
    for _ in range(3):
        got = auto.grad()
    info = auto.cache_info()[0]
    assert "compile_error" not in info and info["compile_s"] > 0
    want = eager.grad()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    compiled = simdiff.Derivatives(p, backend="torch", compile=True)
    want, got = eager.hessian(method="rev-rev"), compiled.hessian(method="rev-rev")
    assert compiled.cache_info()[0]["path"] == "compiled"
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize(
    ("kind", "params", "batched", "refused"),
    [
        ("hessian", {"method": "fwd-fwd"}, False, True),
        ("hessian", {"method": "fwd-fwd"}, True, False),
        ("hessian", {"method": "fwd-rev"}, False, False),
        ("hessian", {"method": "rev-rev"}, False, False),
        ("derivative", {"order": 2}, False, True),
        ("derivative", {"order": 3}, False, True),
        ("derivative", {"order": 3}, True, False),  # claim C5's batched 3rd derivative
        ("derivative", {"order": 1}, False, False),
        ("derivative_tensor", {"order": 3}, False, True),
        ("derivative_tensor", {"order": 3}, True, False),
        ("derivative_tensor", {"order": 2}, False, False),
        ("derivative_sum_nested", {"order": 4}, False, True),  # vmapped over directions only
        ("derivative_sum_nested", {"order": 4}, True, False),
        ("biharmonic_nested", {}, False, True),
        ("biharmonic_nested", {}, True, False),
        ("hvp", {"method": "fwd-rev"}, False, False),
        ("jacobian", {"mode": "fwd"}, False, False),
        ("grad", {}, False, False),
    ],
)
@pytest.mark.parametrize("scalar", [True, False])
def test_torch_refuses_to_compile_two_forward_levels_at_one_point(
    kind, params, batched, refused, scalar
):
    """The measured rule: nested forward levels crash at one point (scalar or not), not batched."""
    reason = get_backend("torch").compile_refusal(kind, params, scalar, batched=batched)
    assert (reason is not None) == refused
    if refused:
        assert "at one point" in reason and "Batched points compile" in reason
    assert get_backend("jax").compile_refusal(kind, params, scalar, batched=batched) is None


def test_a_batched_nested_derivative_is_compiled_not_refused(quad, fake):
    """C5's construction (batched nested 3rd derivative) reaches the compiler; at one point it does not."""
    d = simdiff.Derivatives(quad, backend="torch", compile=True)
    fake(d)
    xs, vs = np.ones((5, 2)), np.ones((5, 2))
    np.testing.assert_allclose(d.derivative(3, vs, xs, method="nested"), np.full(5, 12.0))
    info = [i for i in d.cache_info() if i["kind"] == "derivative"]
    assert info[0]["path"] == "compiled" and info[0]["batched"]
    with pytest.raises(UnsupportedError, match="at one point"):
        d.derivative(3, np.ones(2), np.ones(2), method="nested")
    with pytest.raises(UnsupportedError, match="at one point"):  # directions batched, not x
        d.derivative(3, np.ones((5, 2)), np.ones(2), method="nested")


def test_a_refused_compile_raises_under_true_and_runs_eager_under_auto(quad):
    d = simdiff.Derivatives(quad, backend="torch", compile=True)
    with pytest.raises(UnsupportedError, match="can crash the process in torch"):
        d.hessian(method="fwd-fwd")
    d = simdiff.Derivatives(quad, backend="torch", compile="auto").expect_calls(10**9)
    for _ in range(4):
        np.testing.assert_allclose(d.hessian(method="fwd-fwd"), [[6.0, 1.0], [1.0, 12.0]])
    info = d.cache_info()[0]
    assert info["path"] == "eager" and "can crash the process" in info["compile_error"]


@pytest.mark.parametrize(("n", "m"), [(2, 1), (114, 1), (3, 3), (4, 12)])
def test_the_compiled_torch_hessian_is_rev_rev_and_reported(quad, fake, n, m):
    """The compiled-path rule: the one method that compiled on every entry measured."""
    assert auto_hessian_method(get_backend("torch"), n, m, compiled=True) == "rev-rev"
    d = simdiff.Derivatives(quad, backend="torch", compile=True)
    fake(d)
    np.testing.assert_allclose(d.hessian(), [[6.0, 1.0], [1.0, 12.0]])
    assert d.cache_info()[0]["method"] == "rev-rev" and d.cache_info()[0]["path"] == "compiled"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch._prims_common.check` is deprecated:FutureWarning")
def test_the_batched_nested_third_derivative_compiles_and_matches_eager():
    """Claim C5's construction on the real torch.compile: compiled, and equal to eager to 1e-12."""
    p = problems.get("seed")
    xs = np.linspace(-2.0, 2.0, 64)[:, None]
    vs = np.ones_like(xs)
    want = simdiff.Derivatives(p, backend="torch").derivative(3, vs, xs, method="nested")
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    got = d.derivative(3, vs, xs, method="nested")
    assert d.cache_info()[0]["path"] == "compiled" and "compile_error" not in d.cache_info()[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


# ------------------------------------------------------------------ structured PES Hessians


class PassThrough:
    """Stands in for torch.compile: counts compiles and calls, runs the function itself."""

    def __init__(self) -> None:
        self.compiled = self.calls = 0

    def __call__(self, fn, fullgraph: bool = False):
        self.compiled += 1

        def call(*args):
            self.calls += 1
            return fn(*args)

        return call


@pytest.fixture
def pieces(monkeypatch):
    """Fresh term-sum problems (no computation shared with other tests), a LJ-5 cluster."""
    fresh = term_hessians.RecentlyUsed(term_hessians._SHARED_MAX)
    monkeypatch.setattr(term_hessians, "_SHARED", fresh)
    monkeypatch.setattr(_compile, "_MEASURED_COMPILE_S", [])
    pos = fcc_cluster(5)
    p = cluster_problem(lennard_jones, pos)
    x = p.x0 + 0.01 * np.random.default_rng(3).standard_normal(p.n)
    return p, x


def _structured(d):
    return [r for r in d.cache_info() if r.get("method") == "structured"]


def test_the_policy_reaches_the_term_hessians(pieces, monkeypatch):
    """compile=True compiles the term-Hessian computation of the structured Hessian."""
    p, x = pieces
    compiler = PassThrough()
    monkeypatch.setattr(get_backend("torch"), "compile", compiler)
    want = simdiff.Derivatives(p, backend="torch").hessian(x)
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    got = d.hessian(x)
    assert compiler.compiled == 1 and compiler.calls == 1
    np.testing.assert_array_equal(got, want)
    (info,) = _structured(d)
    assert info["path"] == "compiled" and info["compile"] is True
    assert info["kind"] == "hessian" and info["piece_kind"] == "hvp" and info["calls"] == 1
    plain = simdiff.Derivatives(p, backend="torch")
    plain.hessian(x)
    assert _structured(plain)[0]["path"] == "eager" and compiler.compiled == 1


def test_auto_keeps_the_term_hessians_eager_for_few_announced_calls(pieces, monkeypatch):
    p, x = pieces
    compiler = PassThrough()
    monkeypatch.setattr(get_backend("torch"), "compile", compiler)
    few = simdiff.Derivatives(p, backend="torch", compile="auto").expect_calls(2)
    for _ in range(3):
        few.hessian(x)
    (info,) = _structured(few)
    assert compiler.compiled == 0 and info["path"] == "eager"
    assert "announced calls" in info["reason"] and info["calls"] == 3


def test_auto_compiles_the_term_hessians_when_announced_calls_pay(pieces, fake):
    p, x = pieces
    many = simdiff.Derivatives(p, backend="torch", compile="auto").expect_calls(10**9)
    compiler = fake(many)  # faster than eager (it replays its first result): kept
    paths = []
    for _ in range(4):
        many.hessian(x)
        paths.append(_structured(many)[0]["path"])
    assert compiler.compiled == 1 and paths == ["eager", "eager", "compiled", "compiled"]


def test_a_failed_compile_of_the_term_hessians_is_reported(pieces, fake):
    p, x = pieces
    d = simdiff.Derivatives(p, backend="torch", compile="auto").expect_calls(10**9)
    fake(d, fail=True)
    want = simdiff.Derivatives(p, backend="torch").hessian(x)
    for _ in range(3):
        np.testing.assert_array_equal(d.hessian(x), want)
    (info,) = _structured(d)
    assert info["path"] == "eager" and "Dynamo does not support" in info["compile_error"]
    strict = simdiff.Derivatives(p, backend="torch", compile=True)
    with pytest.raises(UnsupportedError, match="Dynamo does not support"):
        strict.hessian(x)


def test_jax_term_hessians_are_jitted_once_whatever_the_policy(pieces):
    p, x = pieces
    a = simdiff.Derivatives(p, backend="jax")
    b = simdiff.Derivatives(p, backend="jax", compile="auto")
    np.testing.assert_array_equal(a.hessian(x), b.hessian(x))
    (ia,), (ib,) = _structured(a), _structured(b)
    assert ia["path"] == ib["path"] == "jit"
    assert ib["shared_calls"] == 2  # one computation (one trace) served both


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch._prims_common.check` is deprecated:FutureWarning")
def test_compiled_term_hessians_match_eager_to_1e12(pieces):
    """A real torch.compile of the term Hessians: compiled == eager == JAX to 1e-12.

    A Morse cluster at the LJ-5 geometry: the same term-Hessian piece as Lennard-Jones's
    (an HVP of the sum of pair terms), whose Inductor build takes a tenth of the CPU time
    of LJ's (2 s against 25 s: Inductor inlines the powers of LJ's second derivative)."""
    _, x = pieces
    p = cluster_problem(morse, fcc_cluster(5))
    want = simdiff.Derivatives(p, backend="torch").hessian(x)
    d = simdiff.Derivatives(p, backend="torch", compile=True)
    got = d.hessian(x)
    assert _structured(d)[0]["path"] == "compiled"
    tol = 1e-12 * np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)
    np.testing.assert_allclose(got, simdiff.hessian(p, x), rtol=0, atol=tol)
