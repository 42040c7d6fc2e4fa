"""Structured parameters: dicts, named tuples, dataclasses and nested trees as ``x0`` and ODE params.

Every structured problem is checked against the same function written by hand
on the flat vector (its own indices, not simdiff's unflattening): the
derivatives agree to rounding (both sides run the same arithmetic in another
order of slicing, so ``rtol = 1e-12``), and come back in the input's structure.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

import simdiff
from simdiff.ode import ODEProblem

RTOL = 1e-12  # same arithmetic on both sides, up to the order of slicing
BACKENDS = ("jax", "torch")

A, B, K = 0.7, 1.3, np.array([0.2, -0.4, 0.9])


def core(a, b, k, ops):
    return a**2 * b + ops.sum(ops.sin(k)) * a + ops.sum(k**2) * b**3


P = collections.namedtuple("P", "b a k")


@dataclasses.dataclass
class D:
    k: np.ndarray
    a: float
    b: float


# name -> (x0 tree, accessor tree -> (a, b, k), flat layout x -> (a, b, k), tree from flat)
CASES = {
    "dict": (
        {"b": B, "a": A, "k": K},
        lambda q: (q["a"], q["b"], q["k"]),
        lambda x: (x[0], x[1], x[2:5]),
        lambda x: {"a": x[0], "b": x[1], "k": x[2:5]},
    ),
    "namedtuple": (
        P(B, A, K),
        lambda q: (q.a, q.b, q.k),
        lambda x: (x[1], x[0], x[2:5]),
        lambda x: P(x[0], x[1], x[2:5]),
    ),
    "dataclass": (
        D(K, A, B),
        lambda q: (q.a, q.b, q.k),
        lambda x: (x[3], x[4], x[0:3]),
        lambda x: D(x[0:3], x[3], x[4]),
    ),
    "nested": (
        {"w": {"k": K}, "s": (A, B)},
        lambda q: (q["s"][0], q["s"][1], q["w"]["k"]),
        lambda x: (x[0], x[1], x[2:5]),
        lambda x: {"s": (x[0], x[1]), "w": {"k": x[2:5]}},
    ),
}


def pair(case: str):
    """The structured problem, its hand-written flat twin, and the tree-from-flat layout."""
    x0, get, layout, tree_of = CASES[case]
    tree = simdiff.Problem(lambda q, ops: core(*get(q), ops), x0=x0, name=f"tree_{case}")
    flat_x0 = np.asarray(simdiff.ParamSpec.from_tree(x0)[1])
    flat = simdiff.Problem(lambda x, ops: core(*layout(x), ops), x0=flat_x0, name=f"flat_{case}")
    return tree, flat, tree_of


def assert_tree_close(actual, expected, rtol=RTOL):
    """Same structure (types, keys, fields) and leaves equal to ``rtol`` (of the largest leaf)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and sorted(actual) == sorted(expected)
        for key in expected:
            assert_tree_close(actual[key], expected[key], rtol)
    elif isinstance(expected, tuple):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for got, want in zip(actual, expected, strict=True):
            assert_tree_close(got, want, rtol)
    elif dataclasses.is_dataclass(expected):
        assert type(actual) is type(expected)
        for f in dataclasses.fields(expected):
            assert_tree_close(getattr(actual, f.name), getattr(expected, f.name), rtol)
    else:
        want = np.asarray(expected)
        got = np.asarray(actual)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_derivatives_come_back_in_the_structure_and_equal_the_flat_ones(case, backend):
    tree, flat, tree_of = pair(case)
    assert tree.n == flat.n == 5
    gf = simdiff.grad(flat, backend=backend)
    assert_tree_close(simdiff.grad(tree, backend=backend), tree_of(gf))
    value, g = simdiff.value_and_grad(tree, backend=backend)
    assert_tree_close(g, tree_of(gf))
    np.testing.assert_allclose(value, flat.evaluate(), rtol=RTOL)
    hf = simdiff.hessian(flat, backend=backend)
    h = simdiff.hessian(tree, backend=backend)
    assert isinstance(h, simdiff.Labelled)
    np.testing.assert_allclose(h.to_numpy(), hf, rtol=RTOL, atol=RTOL * np.abs(hf).max())
    v = np.array([0.3, -1.0, 0.5, 2.0, -0.7])
    vt = tree_of(v)
    assert_tree_close(simdiff.hvp(tree, vt, backend=backend), tree_of(hf @ v))
    assert_tree_close(simdiff.hvp(tree, v, backend=backend), tree_of(hf @ v))  # flat v too
    np.testing.assert_allclose(
        simdiff.jvp(tree, vt, backend=backend), gf @ v, rtol=RTOL, atol=RTOL * np.abs(gf).max()
    )
    x = tree_of(flat.x0 + 0.25)  # another point, given as a tree
    assert_tree_close(simdiff.grad(tree, x, backend=backend),
                      tree_of(simdiff.grad(flat, flat.x0 + 0.25, backend=backend)))  # fmt: skip


def test_names_follow_jax_tree_order():
    names = {case: pair(case)[0].param_names for case in CASES}
    assert names["dict"] == ["a", "b", "k[0]", "k[1]", "k[2]"]
    assert names["namedtuple"] == ["b", "a", "k[0]", "k[1]", "k[2]"]
    assert names["dataclass"] == ["k[0]", "k[1]", "k[2]", "a", "b"]
    assert names["nested"] == ["s[0]", "s[1]", "w.k[0]", "w.k[1]", "w.k[2]"]
    spec, _ = simdiff.ParamSpec.from_tree({"w": {"b": np.zeros((2, 3))}})
    assert spec.names[-1] == "w.b[1,2]"
    jax = pytest.importorskip("jax")
    leaves = jax.tree_util.tree_leaves({"w": {"k": K}, "s": (A, B)})
    np.testing.assert_array_equal(np.concatenate([np.ravel(v) for v in leaves]),
                                  pair("nested")[0].x0)  # fmt: skip


def test_labelled_hessian_lookup_by_names_and_blocks():
    tree, flat, _ = pair("dict")
    h, hf = simdiff.hessian(tree), simdiff.hessian(flat)
    assert h.names == ("a", "b", "k[0]", "k[1]", "k[2]")
    assert float(h["a", "b"]) == pytest.approx(hf[0, 1], rel=RTOL)
    assert float(h["k[2]", "a"]) == pytest.approx(hf[4, 0], rel=RTOL)
    np.testing.assert_allclose(h["k", "a"], hf[2:5, 0], rtol=RTOL)  # a leaf's block
    np.testing.assert_allclose(h["k", "k"], hf[2:5, 2:5], rtol=RTOL, atol=RTOL * np.abs(hf).max())
    np.testing.assert_allclose(np.asarray(h), hf, rtol=RTOL)
    np.testing.assert_allclose(h[0], hf[0], rtol=RTOL)  # integer keys index the array
    text = str(h)
    assert text.splitlines()[0].split() == list(h.names)
    with pytest.raises(simdiff.NotFoundError, match="no parameter named 'c'"):
        h["a", "c"]
    with pytest.raises(simdiff.StructureError, match="takes 2 names"):
        h["a"]


def test_top_level_lists_numpy_reads_stay_flat():
    flat = simdiff.Problem(lambda x, ops: ops.sum(x**2), x0=[np.array(1.0), np.array(2.0)])
    assert flat.param_spec is None and flat.n == 2
    ragged = simdiff.Problem(lambda q, ops: ops.sum(q[0] ** 2) * q[1], x0=[np.ones(2), 3.0])
    assert ragged.param_names == ["[0][0]", "[0][1]", "[1]"]
    g = simdiff.grad(ragged, [np.ones(2), 2.0])
    assert isinstance(g, list)
    np.testing.assert_allclose(g[0], [4.0, 4.0], rtol=RTOL)
    np.testing.assert_allclose(g[1], 2.0, rtol=RTOL)


def test_flat_problems_return_plain_arrays():
    _, flat, _ = pair("dict")
    assert flat.param_spec is None
    assert type(simdiff.hessian(flat)) is np.ndarray
    assert type(simdiff.grad(flat)) is np.ndarray
    assert flat.param_names == [f"x[{i}]" for i in range(5)]


def test_derivatives_object_structured_and_flat_views_share_compilations():
    tree, _, tree_of = pair("dict")
    d = simdiff.Derivatives(tree, backend="jax")
    g1 = d.grad()
    g2 = d.grad(tree_of(tree.x0))  # the same point as a tree: no new compilation
    assert d.compilations == 1
    assert_tree_close(g1, g2)
    raw = simdiff.Derivatives(tree, backend="jax", structured=False).grad()
    assert isinstance(raw, np.ndarray) and raw.shape == (5,)


def test_batched_tree_points():
    tree, flat, _ = pair("dict")
    xs = flat.x0 + np.linspace(0.0, 1.0, 4)[:, None]
    batch = {"a": xs[:, 0], "b": xs[:, 1], "k": xs[:, 2:5]}
    g = simdiff.grad(tree, batch)
    assert g["k"].shape == (4, 3)
    gf = simdiff.grad(flat, xs)
    np.testing.assert_allclose(g["k"], gf[:, 2:5], rtol=RTOL)
    h = simdiff.hessian(tree, batch, backend="torch")
    np.testing.assert_allclose(h["a", "b"], simdiff.hessian(flat, xs)[:, 0, 1], rtol=RTOL)


def test_inside_jax_jit_trees_of_tracers():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    tree, flat, tree_of = pair("dict")
    q = {"a": jnp.asarray(A), "b": jnp.asarray(B), "k": jnp.asarray(K)}
    g = jax.jit(lambda q: simdiff.grad(tree, q))(q)
    assert isinstance(g["k"], jax.Array)
    assert_tree_close(g, tree_of(simdiff.grad(flat)))
    h = jax.jit(lambda q: simdiff.hessian(tree, q))(q)  # a Labelled crosses jit (a pytree)
    assert isinstance(h, simdiff.Labelled)
    np.testing.assert_allclose(h.to_numpy(), simdiff.hessian(flat), rtol=RTOL)


@pytest.mark.parametrize("wrap", ["from_jax", "from_torch"])
def test_framework_wrappers_take_trees(wrap):
    if wrap == "from_jax":
        jnp = pytest.importorskip("jax").numpy
        f = lambda q: q["a"] ** 2 * jnp.sum(jnp.sin(q["k"]))  # noqa: E731
    else:
        torch = pytest.importorskip("torch")
        f = lambda q: q["a"] ** 2 * torch.sum(torch.sin(q["k"]))  # noqa: E731
    p = getattr(simdiff.Problem, wrap)(f, {"a": A, "k": K})
    g = simdiff.grad(p)
    np.testing.assert_allclose(g["a"], 2 * A * np.sum(np.sin(K)), rtol=RTOL)
    np.testing.assert_allclose(g["k"], A**2 * np.cos(K), rtol=RTOL)


def _lv_named(t, y, p, ops):
    return ops.stack([p["alpha"] * y[0] - p["beta"] * y[0] * y[1],
                      p["delta"] * y[0] * y[1] - p["gamma"] * y[1]])  # fmt: skip


def _lv_flat(t, y, p, ops):  # the same model on [alpha, beta, delta, gamma] by hand
    return ops.stack([p[0] * y[0] - p[1] * y[0] * y[1], p[2] * y[0] * y[1] - p[3] * y[1]])


LV = {"alpha": 1.1, "beta": 0.4, "gamma": 0.4, "delta": 0.1}


def _lv(rhs, params, **kw):
    return ODEProblem(rhs, [10.0, 5.0], (0.0, 3.0), params, save_at=np.linspace(0.5, 3.0, 6),
                      observable=lambda ys, ops: ops.sum(ys[:, 0]), solver="rk4",
                      n_steps=60, adjoint="direct", **kw)  # fmt: skip


def test_ode_dict_params_gradient_equals_flat():
    named = _lv(_lv_named, LV)
    flat = _lv(_lv_flat, [LV["alpha"], LV["beta"], LV["delta"], LV["gamma"]])
    assert named.param_names == ["alpha", "beta", "delta", "gamma"]
    np.testing.assert_array_equal(named.params, flat.params)
    g, gf = simdiff.grad(named, backend="torch"), simdiff.grad(flat, backend="torch")
    assert sorted(g) == sorted(LV)
    scale = np.abs(gf).max()
    for i, name in enumerate(named.param_names):
        assert float(g[name]) == pytest.approx(gf[i], rel=RTOL, abs=RTOL * scale)
    # on jax, the named problem against torch's: the same discrete solver on both, so
    # they differ by rounding accumulated over the 60 steps (1e-10 of the largest entry)
    gj = simdiff.grad(named, backend="jax")
    for name in named.param_names:
        assert float(gj[name]) == pytest.approx(float(g[name]), abs=1e-10 * scale)


def test_ode_both_and_y0_structures():
    both = _lv(_lv_named, LV, wrt="both")
    assert both.param_names[-2:] == ["y0[0]", "y0[1]"]
    assert both.param_names[0] == "params.alpha"
    g = simdiff.grad(both, backend="torch")
    assert sorted(g) == ["params", "y0"] and g["y0"].shape == (2,)
    y0 = _lv(_lv_named, LV, wrt="y0")  # the input is y0: flat, the rhs still gets the dict
    assert y0.param_spec is None and simdiff.grad(y0, backend="torch").shape == (2,)


def _table_rows(text):
    """``{name: [numbers...]}`` of a printed result table (the header and message dropped)."""
    rows = {}
    for line in text.splitlines()[1:]:
        name, *cells = line.split()
        try:
            rows[name] = [float(c) for c in cells]
        except ValueError:  # the message line under the table
            continue
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_lotka_volterra_fit_by_name_prints_the_flat_results(backend):
    """The fit of docs/sensitivity.md, shortened to t = 6 as in docs/parameters.md, with named
    parameters and on the flat vector, on one backend: the same estimates, standard errors
    and intervals, the named table labelled by the names.  RK4 takes 30 steps here (the page
    takes 120; named against flat is the point, not the integration error): torch's eager
    Jacobians and Hessians cost in proportion to the steps, JAX's compilations do not."""
    truth = {"alpha": 1.0, "beta": 0.1, "delta": 0.075, "gamma": 1.5}
    times, sigma, order = np.arange(1.0, 7.0), 0.5, ["alpha", "beta", "delta", "gamma"]

    def lv(rhs, params, observable=None):
        return ODEProblem(rhs, [10.0, 5.0], (0.0, 6.0), params, save_at=times, solver="rk4",
                          n_steps=30, observable=observable)  # fmt: skip

    data = lv(_lv_named, truth).evaluate() + sigma * np.random.default_rng(1).standard_normal(12)

    def residuals(ys, ops):
        return (ops.reshape(ys, (-1,)) - ops.asarray(data)) / sigma

    def nll(ys, ops):
        return 0.5 * ops.sum(residuals(ys, ops) ** 2)

    start = {"alpha": 1.05, "beta": 0.095, "delta": 0.078, "gamma": 1.45}
    flat_start = [start[k] for k in order]
    fits, laps = {}, {}
    for kind, rhs, x0 in (("named", _lv_named, start), ("flat", _lv_flat, flat_start)):
        fits[kind] = simdiff.least_squares(lv(rhs, x0, residuals), backend=backend,
                                           xtol=1e-12, ftol=1e-12)  # fmt: skip
        laps[kind] = simdiff.sensitivity.laplace(lv(rhs, x0, nll), fits[kind].x, backend=backend)
    # the same arithmetic in the same order on both sides: the fits differ by the rounding
    # the optimiser's stopping tests let through (xtol 1e-12), the rest follows from them
    np.testing.assert_allclose(fits["named"].x, fits["flat"].x, rtol=1e-8)
    assert sorted(fits["named"].params) == order and fits["named"].names == order
    named, flat = laps["named"], laps["flat"]
    assert named.positive_definite and flat.positive_definite
    for field in ("std_errors", "ci", "covariance"):
        np.testing.assert_allclose(getattr(named, field), getattr(flat, field), rtol=1e-7)
    rows, flat_rows = _table_rows(str(named)), _table_rows(str(flat))
    assert list(rows) == order and list(flat_rows) == ["x[0]", "x[1]", "x[2]", "x[3]"]
    assert str(named).splitlines()[0].split() == ["estimate", "std_error", "95%", "low", "95%",
                                                  "high"]  # fmt: skip
    for name, flat_name in zip(rows, flat_rows, strict=True):  # 6 significant digits printed
        np.testing.assert_allclose(rows[name], flat_rows[flat_name], rtol=2e-6)
    se = named.tree("std_errors")
    assert se["gamma"] == pytest.approx(flat.std_errors[3], rel=1e-7)
    # the intervals contain the truth (docs/parameters.md's table)
    for i, name in enumerate(order):
        assert named.ci[0, i] < truth[name] < named.ci[1, i]


def test_sensitivity_results_carry_names():
    t = np.linspace(0.0, 1.0, 6)
    data = 2.0 * np.exp(-0.5 * t)
    fit = simdiff.Problem(
        lambda q, ops: q["amp"] * ops.exp(-q["rate"] * ops.asarray(t)) - ops.asarray(data),
        x0={"amp": 1.0, "rate": 1.0},
    )
    res = simdiff.least_squares(fit)
    assert res.names == ["amp", "rate"]
    assert res.params["amp"] == pytest.approx(2.0, rel=1e-8)
    assert res.params["rate"] == pytest.approx(0.5, rel=1e-8)
    assert res.table().split()[:3] == ["estimate", "amp", "2.0"]
    fim = simdiff.sensitivity.fisher_information(fit, res.params, sigma=0.01)
    assert fim.names == ["amp", "rate"]
    cov = fim.labelled("covariance")
    assert cov["amp", "rate"] == pytest.approx(fim.covariance[0, 1], rel=RTOL)
    lines = str(fim).splitlines()
    assert lines[0].split() == ["F_ii", "std_error"]
    assert lines[1].split()[0] == "amp" and lines[2].split()[0] == "rate"
    se = fim.tree("std_errors")
    assert se["rate"] == pytest.approx(fim.std_errors[1], rel=RTOL)


def test_laplace_table_and_flat_default_names():
    q = simdiff.Problem(lambda x, ops: 2.0 * x["u"] ** 2 + 0.5 * x["v"] ** 2,
                        x0={"u": 0.0, "v": 0.0})  # fmt: skip
    r = simdiff.sensitivity.laplace(q)
    assert r.tree("std_errors") == {"u": pytest.approx(0.5), "v": pytest.approx(1.0)}
    assert str(r).splitlines()[0].split()[:2] == ["estimate", "std_error"]
    flat = simdiff.Problem(lambda x, ops: 2.0 * x[0] ** 2, x0=np.zeros(1))
    assert simdiff.sensitivity.laplace(flat).names == ["x[0]"]


@pytest.mark.parametrize(
    "x0, error, match",
    [
        ({"a": "one"}, simdiff.DTypeError, r"x0\['a'\] must be a real float"),
        ({"a": 1.0, "z": np.array([1j])}, simdiff.DTypeError, r"x0\['z'\].*complex"),
        ({"flag": True}, simdiff.DTypeError, "bool"),
        ({}, simdiff.StructureError, "at least one parameter"),
        ({"a": np.zeros(0)}, simdiff.StructureError, "at least one parameter"),
        ({"a": np.inf}, simdiff.InputError, r"x0\['a'\] = inf"),
    ],
)
def test_bad_structures_are_refused_at_construction(x0, error, match):
    with pytest.raises(error, match=match) as info:
        simdiff.Problem(lambda q, ops: 0.0, x0=x0)
    assert isinstance(info.value, simdiff.SimdiffError)


def test_mismatched_structures_are_refused():
    tree, _, _ = pair("dict")
    with pytest.raises(simdiff.StructureError, match=r"leaves \['a', 'b', 'k'\]"):
        simdiff.hvp(tree, {"a": 1.0, "b": 0.0})
    with pytest.raises(simdiff.StructureError, match=r"v\['k'\] must have shape \(3,\)"):
        simdiff.hvp(tree, {"a": 1.0, "b": 0.0, "k": np.zeros(2)})
    with pytest.raises(simdiff.StructureError, match="same leading batch axis"):
        simdiff.grad(tree, {"a": np.ones(2), "b": 1.0, "k": np.ones((2, 3))})
    with pytest.raises(simdiff.StructureError):
        simdiff.ode.ODEProblem(_lv_named, [1.0, 1.0], (0.0, 1.0), {})
    assert issubclass(simdiff.StructureError, simdiff.ShapeError)


def test_torch_leaves_in_torch_tensors_out():
    torch = pytest.importorskip("torch")
    tree, flat, _ = pair("dict")
    q = {key: torch.tensor(v, dtype=torch.float64) for key, v in (("a", A), ("b", B), ("k", K))}
    g = simdiff.grad(tree, q, backend="torch")
    assert isinstance(g["k"], torch.Tensor) and g["k"].shape == (3,)
    np.testing.assert_allclose(g["k"].numpy(), simdiff.grad(flat)[2:5], rtol=RTOL)
    with pytest.warns(simdiff.PrecisionWarning, match="float32"):  # as for a flat float32 x
        simdiff.grad(tree, {key: v.float() for key, v in q.items()}, backend="torch")


class Pair:
    """A class JAX knows as a pytree node (not a dict, tuple or dataclass)."""

    def __init__(self, left, right):
        self.left, self.right = left, right


@pytest.mark.parametrize("backend", BACKENDS)
def test_registered_jax_pytree_node(backend):
    jax = pytest.importorskip("jax")
    try:
        jax.tree_util.register_pytree_node(
            Pair, lambda p: ((p.left, p.right), None), lambda _, kids: Pair(*kids)
        )
    except ValueError:  # registered by the other parametrisation
        pass
    p = simdiff.Problem(lambda q, ops: q.left**2 * ops.sum(q.right), x0=Pair(A, K))
    assert p.param_names == ["[0]", "[1][0]", "[1][1]", "[1][2]"]
    g = simdiff.grad(p, backend=backend)
    assert isinstance(g, Pair)
    np.testing.assert_allclose(g.left, 2 * A * K.sum(), rtol=RTOL)
    np.testing.assert_allclose(g.right, A**2 * np.ones(3), rtol=RTOL)


def _pickled_model(q, ops):
    return q["a"] ** 2 * ops.sum(q["k"])


def test_structured_problems_pickle_and_fingerprint():
    import pickle

    from simdiff.store import fingerprint

    p = simdiff.Problem(_pickled_model, x0={"a": A, "k": K})
    q = pickle.loads(pickle.dumps(p))
    assert q.param_names == p.param_names
    assert fingerprint(p) is not None and fingerprint(q) == fingerprint(p)
    other = simdiff.Problem(_pickled_model, x0={"a": A, "k": K[:2]})  # another structure
    assert fingerprint(other) != fingerprint(p)
    assert_tree_close(simdiff.grad(q), simdiff.grad(p))


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_vector_leaf(backend):
    tree = simdiff.Problem(lambda q, ops: core(q["w"][0], q["w"][1], q["w"][2:], ops),
                           x0={"w": np.array([A, B, *K])})  # fmt: skip
    flat = simdiff.Problem(lambda x, ops: core(x[0], x[1], x[2:], ops), x0=tree.x0)
    g = simdiff.grad(tree, {"w": tree.x0 + 0.1}, backend=backend)
    np.testing.assert_allclose(g["w"], simdiff.grad(flat, tree.x0 + 0.1), rtol=RTOL)
    h = simdiff.hessian(tree, backend=backend)
    hf = simdiff.hessian(flat)
    np.testing.assert_allclose(h["w", "w"], hf, rtol=RTOL, atol=RTOL * np.abs(hf).max())


def test_pde_parameters_label_the_results():
    from simdiff.pde import Grid, diffusion_equation, pde_problem

    g = Grid((16,), (2 * np.pi,))
    p = pde_problem(diffusion_equation(), g, np.sin(g.coords()[0]), t_final=1.0, n_steps=4,
                    stepper="etdrk4", wrt="params")  # fmt: skip
    assert p.param_names == ["diffusivity"]
    assert type(simdiff.grad(p)) is np.ndarray  # a flat problem: its results unchanged
    assert simdiff.sensitivity.local_sensitivity(p).names == ["diffusivity"]


def test_vector_output_jacobian_and_hessian_keep_the_output_axes():
    f = lambda q, ops: ops.stack([q["a"] * ops.sum(q["k"]), q["a"] ** 2])  # noqa: E731
    p = simdiff.Problem(f, x0={"a": A, "k": K})
    jac = simdiff.jacobian(p)
    assert jac["k"].shape == (2, 3) and jac["a"].shape == (2,)
    np.testing.assert_allclose(jac["a"], [K.sum(), 2 * A], rtol=RTOL)
    h = simdiff.hessian(p)
    assert h.shape == (2, 4, 4)
    np.testing.assert_allclose(h["a", "a"], [0.0, 2.0], atol=RTOL)
    np.testing.assert_allclose(h["k", "a"], [np.ones(3), np.zeros(3)], atol=RTOL)


def test_minimize_and_dgsm_by_name():
    q = simdiff.Problem(lambda x, ops: (x["u"] - 1.0) ** 2 + 3.0 * (x["v"] + 2.0) ** 2,
                        x0={"u": 0.0, "v": 0.0})  # fmt: skip
    res = simdiff.minimize(q)
    assert res.names == ["u", "v"]
    assert res.params["u"] == pytest.approx(1.0, abs=1e-8)
    assert res.params["v"] == pytest.approx(-2.0, abs=1e-8)
    dists = {"v": ("uniform", 0.0, 1.0), "u": ("uniform", 0.0, 1.0)}  # any order of names
    r = simdiff.sensitivity.dgsm(q, dists, n_samples=64, n_bootstrap=0)
    assert r.names == ["u", "v"]
    assert r.tree("nu")["v"] > r.tree("nu")["u"]
    assert str(r).splitlines()[1].split()[0] == "u"
    with pytest.raises(simdiff.InputError, match="one per input"):
        simdiff.sensitivity.dgsm(q, {"u": ("uniform", 0.0, 1.0)}, n_samples=64)


def test_function_face_of_a_structured_problem_composes_with_jax():
    jax = pytest.importorskip("jax")
    import simdiff.jax as sj

    tree, flat, tree_of = pair("dict")
    q = {"a": jax.numpy.asarray(A), "b": jax.numpy.asarray(B), "k": jax.numpy.asarray(K)}
    g = jax.jit(sj.grad(tree))(q)
    assert_tree_close(g, tree_of(simdiff.grad(flat)))
    batch = {key: jax.numpy.stack([v, v + 0.1]) for key, v in q.items()}
    h = jax.jit(jax.vmap(sj.hessian(tree)))(batch)  # a Labelled crosses vmap: (2, 5, 5)
    assert isinstance(h, simdiff.Labelled) and h.shape == (2, 5, 5)
    hf = simdiff.hessian(flat, np.stack([flat.x0, flat.x0 + 0.1]))
    np.testing.assert_allclose(h["a", "b"], hf[:, 0, 1], rtol=RTOL)
    v = tree_of(np.arange(5.0))
    hv = jax.jit(sj.hvp(tree))(v, q)
    assert_tree_close(hv, tree_of(simdiff.hessian(flat) @ np.arange(5.0)))


def test_inside_torch_func_a_traced_leaf_picks_torch():
    torch = pytest.importorskip("torch")
    tree, flat, _ = pair("dict")
    rest = {"b": torch.tensor(B, dtype=torch.float64), "k": torch.tensor(K)}

    def grad_a(a):  # backend=None: the traced leaf says torch
        return simdiff.grad(tree, {"a": a, **rest})["a"]

    a = torch.tensor([A, A + 0.1], dtype=torch.float64)
    got = torch.func.vmap(grad_a)(a)
    want = simdiff.grad(flat, np.stack([flat.x0, flat.x0 + np.array([0.1, 0, 0, 0, 0])]))
    np.testing.assert_allclose(got.numpy(), want[:, 0], rtol=RTOL)


@pytest.mark.parametrize("method", ["taylor", "nested"])
def test_directional_derivatives_take_tree_directions(method):
    tree, flat, tree_of = pair("dict")
    v = np.array([0.3, -1.0, 0.5, 2.0, -0.7])
    got = simdiff.derivative(tree, 3, tree_of(v), method=method)
    want = simdiff.derivative(flat, 3, v, method=method)
    np.testing.assert_allclose(got, want, rtol=RTOL)
    c = simdiff.taylor(tree, 2, tree_of(v))
    np.testing.assert_allclose(c, simdiff.taylor(flat, 2, v), rtol=RTOL)
