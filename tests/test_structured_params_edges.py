"""Structured parameters at their edges: mixed float precisions, framework-array leaves,
labelled Hessians leaving torch.func transforms, bounds and variances given by name, and
names on the moments of a structured problem.

References are the same problem written on the flat vector (its own indices); both sides
run the same arithmetic up to the order of slicing, so ``rtol = 1e-12``.
"""

from __future__ import annotations

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import simdiff
from simdiff.backends import to_host

RTOL = 1e-12  # same arithmetic on both sides, up to the order of slicing
K0 = np.array([0.2, -0.4, 0.9])


def _core(a, k, ops):
    return a**2 * ops.sum(k**3) + ops.sum(ops.sin(k)) * a


@pytest.fixture(scope="module")
def pair():
    tree = simdiff.Problem(lambda q, ops: _core(q["a"], q["k"], ops), x0={"a": 0.7, "k": K0})
    flat = simdiff.Problem(lambda x, ops: _core(x[0], x[1:], ops), x0=np.r_[0.7, K0])
    return tree, flat


# --------------------------------------------------------------------------- precision


def test_mixed_float32_and_float64_leaves_warn_naming_the_leaf(pair):
    tree, flat = pair
    point = {"a": np.float32(0.5), "k": K0}
    with pytest.warns(simdiff.PrecisionWarning, match=r"'a' \(float32\)"):
        g = simdiff.grad(tree, point)
    # the float32 leaf is promoted: the result is the float64 one at its float32 value
    want = simdiff.grad(flat, np.r_[np.float64(np.float32(0.5)), K0])
    np.testing.assert_allclose(tree.flatten(g), want, rtol=RTOL)
    torch_point = {"a": torch.tensor(0.5, dtype=torch.float64), "k": torch.tensor(K0).float()}
    with pytest.warns(simdiff.PrecisionWarning, match=r"'k' \(float32\)"):
        simdiff.grad(tree, torch_point, backend="torch")
    with pytest.warns(simdiff.PrecisionWarning, match=r"x0 mixes float precisions.*'k'"):
        simdiff.Problem(lambda q, ops: _core(q["a"], q["k"], ops),
                        x0={"a": 0.7, "k": K0.astype(np.float32)})  # fmt: skip


def test_one_precision_and_integer_leaves_do_not_warn(pair):
    tree, _ = pair
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any PrecisionWarning fails
        simdiff.grad(tree, {"a": 1, "k": K0})  # an int leaf is exact in float64
        simdiff.grad(tree, {"a": jnp.asarray(0.5), "k": jnp.asarray(K0)})
        simdiff.Problem(lambda q, ops: q["a"] * ops.sum(q["k"]), x0={"a": 2, "k": K0})


# --------------------------------------------------------------------------- framework leaves


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_framework_leaves_in_one_call_and_back_in_the_framework(pair, backend):
    tree, flat = pair
    native = simdiff.backends.get_backend(backend)
    point = {"a": native.from_numpy(np.asarray(0.5), "float64"),
             "k": native.from_numpy(K0 + 0.1, "float64")}  # fmt: skip
    x = np.r_[0.5, K0 + 0.1]
    g = simdiff.grad(tree, point, backend=backend)
    assert native.is_native(g["a"]) and tuple(g["a"].shape) == ()
    assert native.is_native(g["k"]) and tuple(g["k"].shape) == (3,)
    np.testing.assert_allclose(native.to_numpy(tree.flatten(g)), simdiff.grad(flat, x),
                               rtol=RTOL)  # fmt: skip
    batch = {key: native.from_numpy(np.stack([native.to_numpy(v)] * 2), "float64")
             for key, v in point.items()}  # fmt: skip
    gb = simdiff.grad(tree, batch, backend=backend)
    assert tuple(gb["k"].shape) == (2, 3)
    H = simdiff.hessian(tree, point, backend=backend)
    np.testing.assert_allclose(H.to_numpy(), simdiff.hessian(flat, x), rtol=RTOL)


def _fresh_pair():
    """A problem of its own: its first calls build and probe the flat derivatives."""
    tree = simdiff.Problem(lambda q, ops: _core(q["a"], q["k"], ops), x0={"a": 0.7, "k": K0})
    flat = simdiff.Problem(lambda x, ops: _core(x[0], x[1:], ops), x0=np.r_[0.7, K0])
    return tree, flat


def _jax_point(a, k):
    return {"a": jnp.asarray(a, dtype=jnp.float64), "k": jnp.asarray(k, dtype=jnp.float64)}


def _numpy_point(a, k):
    return {"a": float(a), "k": np.asarray(k, dtype=np.float64)}


def _torch_point(a, k):
    return {"a": torch.as_tensor(a, dtype=torch.float64),
            "k": torch.as_tensor(np.asarray(k), dtype=torch.float64)}  # fmt: skip


#: (backend, point maker): framework leaves of each backend, and numpy leaves on each
STEADY = {
    "jax": ("jax", _jax_point),
    "jax-numpy": ("jax", _numpy_point),
    "torch": ("torch", _torch_point),
    "torch-numpy": ("torch", _numpy_point),
}


@pytest.mark.parametrize("case", sorted(STEADY))
def test_steady_tree_points_take_one_call_with_the_general_results(case):
    # JAX: framework leaves joined inside one compiled call; torch: joined in one
    # operation, the flat derivative, one split; numpy leaves on both: one host vector
    backend, make = STEADY[case]
    tree, flat = _fresh_pair()
    point, x = make(0.5, K0 + 0.1), np.r_[0.5, K0 + 0.1]
    kind = type(make(0.5, K0)["k"])
    d = simdiff.core.derivatives.cached_derivatives(tree, backend, point)
    host_calls, joined_calls = [], []  # numpy leaves: one vector on the host; torch: joined
    host_call, joined_call = d._host_call, d._joined_call
    d._host_call = lambda kind, *rest: host_calls.append(kind) or host_call(kind, *rest)
    d._joined_call = lambda kind, *rest: joined_calls.append(kind) or joined_call(kind, *rest)
    for i in range(3):  # the first call builds and probes; the later ones are steady
        g = simdiff.grad(tree, point, backend=backend)
        v, g2 = simdiff.value_and_grad(tree, point, backend=backend)
        H = simdiff.hessian(tree, point, backend=backend)
        assert isinstance(g["a"], kind) and g["a"].shape == () and g["k"].shape == (3,)
        assert isinstance(g2["k"], kind) and isinstance(H.data, kind)
        want = simdiff.grad(flat, x, backend=backend)
        np.testing.assert_allclose(to_host(tree.flatten(g)), want, rtol=RTOL)
        np.testing.assert_allclose(to_host(tree.flatten(g2)), want, rtol=RTOL)
        np.testing.assert_allclose(float(v), simdiff.value_and_grad(flat, x)[0], rtol=RTOL)
        np.testing.assert_allclose(H.to_numpy(), simdiff.hessian(flat, x), rtol=RTOL)
        steady = 3 * i  # grad, value_and_grad, hessian after the first round
        if kind is np.ndarray:
            assert len(host_calls) == steady and not d._fused and not joined_calls
        elif d.backend.fuses_wrappers:  # framework leaves: one compiled tree call each
            assert len(d._fused) == min(steady, 3) and not host_calls and not joined_calls
        else:  # an eager framework's leaves: joined, the flat derivative, split
            assert len(joined_calls) == steady and not host_calls and not d._fused
    calls = {info["kind"]: info["calls"] for info in d.cache_info()}
    assert calls == {"grad": 3, "value_and_grad": 3, "hessian": 3}  # the steady calls count


@pytest.mark.parametrize("case", sorted(STEADY))
def test_steady_tree_points_still_name_bad_points_and_non_finite_results(case):
    backend, make = STEADY[case]
    tree, _ = _fresh_pair()
    simdiff.grad(tree, make(0.5, K0), backend=backend)
    simdiff.hessian(tree, make(0.5, K0), backend=backend)
    simdiff.grad(tree, make(0.5, K0), backend=backend)  # steady: the fused path
    bad = make(0.5, [0.2, np.nan, 0.9])
    with pytest.raises(simdiff.errors.InputError, match=r"x must be finite; x\[2\] = nan"):
        simdiff.grad(tree, bad, backend=backend)
    with pytest.raises(simdiff.errors.InputError, match=r"x must be finite"):
        simdiff.hessian(tree, bad, backend=backend)
    with pytest.raises(simdiff.errors.StructureError, match=r"shape \(3,\)"):
        simdiff.grad(tree, make(0.5, np.zeros(2)), backend=backend)
    native = simdiff.backends.get_backend(backend)
    low = {"a": native.from_numpy(np.asarray(0.5), "float32"),
           "k": native.from_numpy(np.asarray(K0), "float64")}  # fmt: skip
    with pytest.warns(simdiff.PrecisionWarning, match="float32"):  # a float32 leaf: warned
        simdiff.grad(tree, low, backend=backend)
    root = simdiff.Problem(lambda q, ops: ops.sqrt(q["a"]) + ops.sum(q["k"]),
                           x0={"a": 1.0, "k": K0})  # fmt: skip
    simdiff.grad(root, make(1.0, K0), backend=backend)
    simdiff.grad(root, make(1.0, K0), backend=backend)
    with pytest.raises(simdiff.errors.NonFiniteError, match="simdiff.grad is not finite"):
        simdiff.grad(root, make(0.0, K0), backend=backend)  # d sqrt(a) / da at 0


@pytest.mark.parametrize("case", sorted(STEADY))
def test_steady_tree_points_of_a_problem_that_checks_its_points(case):
    # an RK4 solve of fixed steps checks each point's stability on the host: the steady
    # tree call checks it too, and refuses an unstable point as the general path does
    from simdiff.ode import FixedStep, ODEProblem

    backend, make = STEADY[case]

    def decay(t, y, p, ops):
        return -p["a"] * y * ops.sum(p["k"] ** 2)

    ode = ODEProblem(decay, [1.0], (0.0, 1.0), {"a": 1.0, "k": K0}, solver=FixedStep(n_steps=20),
                     observable=lambda ys, ops: ys[-1, 0])  # fmt: skip
    assert ode.checks_points
    d = simdiff.core.derivatives.cached_derivatives(ode, backend, make(1.0, K0))
    joined = []
    joined_call = d._joined_call
    d._joined_call = lambda kind, *rest: joined.append(kind) or joined_call(kind, *rest)
    for _ in range(3):
        g = simdiff.grad(ode, make(0.9, K0), backend=backend)
    ref = ode.flatten(simdiff.grad(ode, np.r_[0.9, K0], backend=backend))  # the general path
    np.testing.assert_allclose(to_host(ode.flatten(g)), ref, rtol=RTOL)
    calls = sum(info["calls"] for info in d.cache_info() if info["kind"] == "grad")
    native = type(make(1.0, K0)["k"]) is not np.ndarray  # framework leaves, not numpy ones
    fused = native and d.backend.fuses_wrappers
    assert calls == 4 and (len(d._fused) == 1) == fused
    assert len(joined) == (2 if native and not fused else 0)
    with pytest.raises(simdiff.errors.StabilityError, match="n_steps >="):
        simdiff.grad(ode, make(500.0, K0), backend=backend)


def test_scalar_leaves_split_in_one_call_on_each_backend():
    spec, _ = simdiff.ParamSpec.from_tree({"b": 1.0, "a": 2.0, "c": np.zeros((2, 2))})
    flat = np.arange(6.0)
    for native in (jnp.asarray, torch.as_tensor):
        tree = spec.unflatten(native(flat))
        assert float(tree["a"]) == 0.0 and float(tree["b"]) == 1.0
        np.testing.assert_array_equal(np.asarray(tree["c"]), [[2.0, 3.0], [4.0, 5.0]])
        np.testing.assert_array_equal(np.asarray(spec.flatten(tree)), flat)


@pytest.mark.parametrize("name", ["jax", "torch"])
@pytest.mark.parametrize("lead", [(), (3,)])
@pytest.mark.parametrize(
    "shapes",
    [((), (3,), (2, 2), (), (1,)), ((4, 3), (1, 3), (2, 3)), ((2, 2, 3), (1, 2, 3))],
    ids=["mixed", "rows", "blocks"],
)
def test_join_and_split_invert_each_other_on_mixed_leaves(name, lead, shapes):
    """Scalars, vectors, matrices and a length-1 vector, or leaves of one trailing shape
    (joined along their first axis on torch), batched or not: what the backend's one-op
    join and split (the structured fast path) do to the leaves and back."""
    backend = simdiff.backends.get_backend(name)
    ends = np.cumsum([0] + [int(np.prod(s)) for s in shapes])
    bounds = tuple((int(a), int(b)) for a, b in itertools.pairwise(ends))
    rng = np.random.default_rng(1)
    parts = [rng.normal(size=(*lead, *s)) for s in shapes]
    flat = backend.join([backend.from_numpy(p, "float64") for p in parts], lead)
    assert tuple(flat.shape) == (*lead, ends[-1])
    want = np.concatenate([p.reshape(*lead, -1) for p in parts], axis=-1)
    np.testing.assert_array_equal(backend.to_numpy(flat), want)
    for got, p in zip(backend.split(flat, bounds, shapes), parts, strict=True):
        assert tuple(got.shape) == p.shape
        np.testing.assert_array_equal(backend.to_numpy(got), p)


def test_host_vector_reads_float64_leaves_and_numbers_and_declines_the_rest():
    spec, _ = simdiff.ParamSpec.from_tree({"a": 1.0, "k": np.zeros(2)})
    np.testing.assert_array_equal(spec.host_vector([0.5, np.array([1.0, 2.0])]), [0.5, 1.0, 2.0])
    scalars, _ = simdiff.ParamSpec.from_tree({"a": 1.0, "b": 2.0})
    out = scalars.host_vector([3, np.float64(4.0)])
    assert out.dtype == np.float64 and out.tolist() == [3.0, 4.0]
    # not float64 of the leaf's shape: None, and the checked path names what differs
    for leaves in (
        [0.5, np.zeros(2, dtype=np.float32)],
        [0.5, np.zeros(3)],
        [0.5, np.zeros((4, 2))],
        [True, np.zeros(2)],
        [np.zeros(2), np.zeros(2)],
    ):
        assert spec.host_vector(leaves) is None, leaves  # fmt: skip


@pytest.mark.parametrize("name", ["jax", "torch"])
def test_concrete_leaves_accepts_untraced_arrays_of_the_shapes_and_dtype_only(name):
    backend = simdiff.backends.get_backend(name)
    native = [backend.from_numpy(np.asarray(0.5), "float64"),
              backend.from_numpy(np.zeros(2), "float64")]  # fmt: skip
    shapes, f64 = [(), (2,)], native[0].dtype
    assert backend.concrete_leaves(native, shapes, f64)
    assert not backend.concrete_leaves(native, [(), (3,)], f64)
    assert not backend.concrete_leaves([native[0], np.zeros(2)], shapes, f64)  # numpy leaf
    low = [backend.from_numpy(np.asarray(0.5), "float32"), native[1]]
    assert not backend.concrete_leaves(low, shapes, f64)
    if name == "jax":  # a tracer is not concrete
        seen = []
        jax.jit(lambda a: seen.append(backend.concrete_leaves([a, native[1]], shapes, f64)))(
            native[0]
        )
        assert seen == [False]
    else:  # a tensor under torch.func.grad is not concrete either

        def probe(a):
            seen.append(backend.concrete_leaves([a, native[1]], shapes, f64))
            return a * 2.0

        seen = []
        torch.func.grad(probe)(native[0])
        assert seen == [False]


def test_native_leaves_join_as_they_are_and_mixed_ones_take_the_checked_path():
    spec, _ = simdiff.ParamSpec.from_tree({"a": 1.0, "k": np.zeros(2)})
    whole, _ = simdiff.ParamSpec.from_tree({"w": np.zeros(3)})
    w = torch.arange(3.0, dtype=torch.float64)
    assert whole.flatten({"w": w}) is w  # one vector: the tensor itself, as a flat point is
    a, k = torch.tensor(1.0, dtype=torch.float64), torch.tensor([2.0, 3.0], dtype=torch.float64)
    np.testing.assert_array_equal(spec.flatten({"a": a, "k": k}).numpy(), [1.0, 2.0, 3.0])
    with pytest.raises(simdiff.errors.StructureError, match="shape"):
        spec.flatten({"a": a, "k": torch.zeros(3, dtype=torch.float64)})
    with pytest.warns(simdiff.PrecisionWarning):  # float32 meets float64: named, promoted
        out = spec.flatten({"a": a, "k": k.to(torch.float32)})
    assert out.dtype == torch.float64


# --------------------------------------------------------------------------- torch.func


def test_labelled_hessian_leaves_torch_func_vmap(pair):
    tree, flat = pair
    xs = np.stack([np.r_[0.7, K0], np.r_[0.9, K0 - 0.2]])
    batch = {"a": torch.tensor(xs[:, 0]), "k": torch.tensor(xs[:, 1:])}
    H = torch.func.vmap(lambda q: simdiff.hessian(tree, q))(batch)
    assert isinstance(H, simdiff.Labelled) and H.shape == (2, 4, 4)
    assert isinstance(H.data, torch.Tensor)
    want = simdiff.hessian(flat, xs)
    np.testing.assert_allclose(H.to_numpy(), want, rtol=RTOL)
    np.testing.assert_allclose(H["a", "k"].numpy(), want[:, 0, 1:], rtol=RTOL)


def test_labelled_hessian_leaves_jax_vmap_inside_jit(pair):
    tree, flat = pair
    xs = np.stack([np.r_[0.7, K0], np.r_[0.9, K0 - 0.2]])
    batch = {"a": jnp.asarray(xs[:, 0]), "k": jnp.asarray(xs[:, 1:])}
    H = jax.jit(jax.vmap(lambda q: simdiff.hessian(tree, q)))(batch)
    assert isinstance(H, simdiff.Labelled) and H.shape == (2, 4, 4)
    np.testing.assert_allclose(H.to_numpy(), simdiff.hessian(flat, xs), rtol=RTOL)


# --------------------------------------------------------------------------- by name


def test_per_scalar_leaf_paths_names_and_errors():
    spec, _ = simdiff.ParamSpec.from_tree({"a": 1.0, "k": np.zeros(3)})
    assert spec.per_scalar({"k": 1, "k[2]": 5, "a": 0}, "w") == [0, 1, 1, 5]
    assert spec.per_scalar({"k[0]": 2}, "w", default=None) == [None, 2, None, None]
    with pytest.raises(simdiff.NotFoundError, match=r"w: no parameter named 'b'.*leaves"):
        spec.per_scalar({"b": 1}, "w")
    with pytest.raises(simdiff.InputError, match=r"missing \['a'\]"):
        spec.per_scalar({"k": 1}, "w")


def test_minimize_and_least_squares_take_bounds_by_name():
    q = simdiff.Problem(lambda p, ops: (p["u"] - 1.0) ** 2 + ops.sum((p["w"] + 2.0) ** 2),
                        x0={"u": 0.0, "w": np.zeros(2)})  # fmt: skip
    res = simdiff.minimize(q, bounds={"u": (None, 0.5), "w": (-1.0, 1.0), "w[1]": (-3.0, 0.0)})
    np.testing.assert_allclose(q.flatten(res.params), [0.5, -1.0, -2.0], atol=1e-7)
    with pytest.raises(simdiff.NotFoundError, match="no parameter named 'v'"):
        simdiff.minimize(q, bounds={"v": (0.0, 1.0)})
    r = simdiff.Problem(lambda p, ops: ops.stack([p["u"] - 3.0, 2.0 * (p["s"] - 1.0)]),
                        x0={"u": 0.0, "s": 0.0})  # fmt: skip
    fit = simdiff.least_squares(r, bounds={"u": (-1.0, 2.0)})
    np.testing.assert_allclose(r.flatten(fit.params), [1.0, 2.0], atol=1e-7)  # order s, u


def test_dgsm_distributions_by_leaf_path():
    q = simdiff.Problem(lambda p, ops: p["u"] + ops.sum(p["w"] * np.array([2.0, 3.0])),
                        x0={"u": 0.0, "w": np.zeros(2)})  # fmt: skip
    r = simdiff.sensitivity.dgsm(
        q, {"w": ("uniform", 0.0, 1.0), "u": ("uniform", 0.0, 1.0)}, n_samples=64, n_bootstrap=0
    )
    np.testing.assert_allclose(r.nu, [1.0, 4.0, 9.0], rtol=RTOL)  # (df/dx_i)^2 exactly
    assert r.names == ["u", "w[0]", "w[1]"]


def test_moments_carry_names_and_split_the_first_order_variance(pair):
    tree, flat = pair
    var = {"a": 0.01, "k": 0.02, "k[2]": 0.03}
    m = simdiff.sensitivity.moments(tree, {"a": 0.7, "k": K0}, var)
    mf = simdiff.sensitivity.moments(flat, np.r_[0.7, K0], np.array([0.01, 0.02, 0.02, 0.03]))
    assert m.mean == pytest.approx(mf.mean, rel=RTOL)
    assert m.variance == pytest.approx(mf.variance, rel=RTOL)
    assert m.names == ["a", "k[0]", "k[1]", "k[2]"]
    g = simdiff.grad(flat, np.r_[0.7, K0])
    np.testing.assert_allclose(m.gradient, g, rtol=RTOL)
    np.testing.assert_allclose(m.variance_contributions, g**2 * [0.01, 0.02, 0.02, 0.03],
                               rtol=RTOL)  # fmt: skip
    assert m.variance_contributions.sum() == pytest.approx(m.variance_terms["gradient"], rel=1e-12)
    assert m.tree("variance_contributions")["k"].shape == (3,)
    text = str(m).splitlines()
    assert text[0].startswith("mean ") and text[2].split()[0] == "a"


def test_the_concrete_array_type_is_right_when_first_read_inside_jit():
    # the type is read once and cached: read first under jax.jit, it must still be the
    # concrete array's (a tracer's type cached there refused every concrete leaf after)
    from simdiff.backends import jax as jax_backend

    jax_backend._concrete_type.cache_clear()
    seen = []
    jax.jit(lambda a: seen.append(jax_backend._concrete_type()) or a)(jax.numpy.ones(2))
    assert seen == [type(jax.numpy.ones(2))]
    backend = simdiff.backends.get_backend("jax")
    assert backend.concrete_leaves([jax.numpy.ones(2)], [(2,)], jax.numpy.ones(2).dtype)


# leaves of every plan torch's split has: scalars (one unbind), one trailing shape (rows),
# mixed shapes (one split and reshapes)
SPLIT_TREES = {
    "scalars": {"a": 0.3, "b": -1.2, "c": 0.8},
    "rows": {"A": np.arange(12.0).reshape(4, 3) / 7, "B": np.arange(6.0).reshape(2, 3) / 5},
    "mixed": {"a": 0.3, "k": np.array([0.2, -0.4]), "m": np.arange(6.0).reshape(2, 3) / 9},
}


@pytest.mark.parametrize("name", sorted(SPLIT_TREES))
def test_torch_split_leaves_equal_slices_in_values_and_derivatives(name):
    spec, flat = simdiff.ParamSpec.from_tree(SPLIT_TREES[name])
    ops = simdiff.backends.get_backend("torch").ops("float64")
    base = simdiff.backends.OpsBase.split_leaves  # one slice per leaf: the reference

    def energy(split):
        def f(x):
            parts = split(x)
            return sum(((k + 1.0) * torch.sin(p) * p).sum() for k, p in enumerate(parts))

        return f

    new = energy(lambda x: ops.split_leaves(x, spec._bounds, spec.shapes))
    old = energy(lambda x: base(ops, x, spec._bounds, spec.shapes))
    x = torch.as_tensor(flat + 0.1)
    for got, want in zip(ops.split_leaves(x, spec._bounds, spec.shapes),
                         base(ops, x, spec._bounds, spec.shapes), strict=True):  # fmt: skip
        assert got.shape == want.shape and torch.equal(got, want)
    g_new, g_old = torch.func.grad(new)(x), torch.func.grad(old)(x)
    np.testing.assert_allclose(g_new.numpy(), g_old.numpy(), rtol=RTOL)
    h_new, h_old = torch.func.hessian(new)(x), torch.func.hessian(old)(x)
    np.testing.assert_allclose(h_new.numpy(), h_old.numpy(), rtol=RTOL, atol=RTOL)
    batch = torch.stack([x, 2 * x])  # a batched result: leaves (2, *shape)
    for part, (a, b), shape in zip(spec.unflatten(batch).values(), spec._bounds, spec.shapes,
                                   strict=True):  # fmt: skip
        assert torch.equal(part, batch[:, a:b].reshape(2, *shape))


def test_torch_concat_of_adjacent_leaves_is_a_view_of_the_point_with_cat_values():
    # leaves of one trailing shape put back together (per-species positions): the point's
    # block as one view, equal to torch.cat in values, gradients and Hessians
    spec, flat = simdiff.ParamSpec.from_tree(SPLIT_TREES["rows"])
    ops = simdiff.backends.get_backend("torch").ops("float64")

    def energy(join):
        def f(x):
            r = join(ops.split_leaves(x, spec._bounds, spec.shapes))
            return (torch.sin(r) * r[:, :1] ** 2).sum()

        return f

    x = torch.as_tensor(flat + 0.1)
    a, b = ops.split_leaves(x, spec._bounds, spec.shapes)
    whole = ops.concat([a, b])
    assert whole._base is x and torch.equal(whole, torch.cat([a, b]))
    assert torch.equal(ops.concat([a[1:], b]), torch.cat([a[1:], b]))  # a block: a view too
    assert ops.concat([a[1:], b])._base is x
    for parts in ([b, a], [a, a], [a[:, :2], b[:, :2]], [a, b.clone()]):  # not adjacent: cat
        got = ops.concat(parts)
        assert got._base is None and torch.equal(got, torch.cat(parts))
    assert ops.concat([a, b]) is ops.concat([a, b])  # all the leaves, in order: the point
    view, cat = energy(ops.concat), energy(lambda parts: torch.cat(parts))
    xg = x.clone().requires_grad_(True)
    (g_view,) = torch.autograd.grad(view(xg), xg)
    (g_cat,) = torch.autograd.grad(cat(xg), xg)
    torch.testing.assert_close(g_view, g_cat, rtol=RTOL, atol=0)
    torch.testing.assert_close(torch.func.hessian(view)(x), torch.func.hessian(cat)(x),
                               rtol=RTOL, atol=RTOL)  # fmt: skip


def test_torch_concat_of_all_split_leaves_is_the_point_inside_transforms_too():
    # inside a function, leaves of one trailing shape carry the point they were split from:
    # their concatenation (all, in order) is that tensor with no operation, also inside
    # torch.func transforms (wrapped tensors); a subset, another order, or leaves split at
    # the boundary (results given to the caller) are concatenated as they are
    rows = np.arange(21.0).reshape(7, 3) / 7
    spec, flat = simdiff.ParamSpec.from_tree({"A": rows[:4], "B": rows[4:6], "C": rows[6:]})
    ops = simdiff.backends.get_backend("torch").ops("float64")
    seen = []

    def energy(x):
        a, b, c = spec.unflatten(x, ops).values()
        whole = ops.concat([a, b, c])
        seen.append(whole.shape == (7, 3) and whole is ops.concat([a, b, c]))
        return (torch.sin(whole) * whole[:, :1] ** 2).sum() + (c * a[:1]).sum()

    def reference(x):
        a, b, c = (x[:12].reshape(4, 3), x[12:18].reshape(2, 3), x[18:].reshape(1, 3))
        whole = torch.cat([a, b, c])
        return (torch.sin(whole) * whole[:, :1] ** 2).sum() + (c * a[:1]).sum()

    x = torch.as_tensor(flat + 0.1)
    a, b, c = spec.unflatten(x, ops).values()
    for parts in ([b, a, c], [a, b], [a, c, b]):  # not all, or not in order: concatenated
        got = ops.concat(parts)
        assert got is not x and torch.equal(got, torch.cat(parts))
    torch.testing.assert_close(torch.func.grad(energy)(x), torch.func.grad(reference)(x),
                               rtol=RTOL, atol=0)  # fmt: skip
    torch.testing.assert_close(torch.func.hessian(energy)(x), torch.func.hessian(reference)(x),
                               rtol=RTOL, atol=RTOL)  # fmt: skip
    batch = torch.stack([x, 2 * x])
    torch.testing.assert_close(torch.func.vmap(torch.func.grad(energy))(batch),
                               torch.func.vmap(torch.func.grad(reference))(batch),
                               rtol=RTOL, atol=0)  # fmt: skip
    assert seen and all(seen)
    leaves = spec.unflatten(x)  # the boundary's split of a result: not marked
    assert not any(hasattr(v, "_simdiff_rows") for v in leaves.values())
    assert ops.concat(list(leaves.values())) is not x


def test_steady_torch_tree_call_at_leaves_that_require_grad_stays_differentiable():
    # the joined call runs the flat derivative at the joined point, which an outer autograd
    # level tracks: the gradient is differentiated again w.r.t. the caller's leaves, on the
    # first (general) call and on the steady ones alike
    tree = simdiff.Problem(lambda q, ops: q["a"] ** 2 * ops.sum(ops.sin(q["k"])),
                           x0={"a": 0.7, "k": K0})  # fmt: skip
    d = simdiff.core.derivatives.cached_derivatives(tree, "torch", {"a": 0.7, "k": K0})
    joined = []
    joined_call = d._joined_call
    d._joined_call = lambda kind, *rest: joined.append(kind) or joined_call(kind, *rest)
    for _ in range(3):
        a = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
        k = torch.tensor(K0, dtype=torch.float64, requires_grad=True)
        g = simdiff.grad(tree, {"a": a, "k": k}, backend="torch")
        da, dk = torch.autograd.grad(g["a"], [a, k])  # d/da of 2 a sum(sin k)
        np.testing.assert_allclose(float(da), 2 * np.sin(K0).sum(), rtol=RTOL)
        np.testing.assert_allclose(dk.numpy(), 2 * 0.7 * np.cos(K0), rtol=RTOL)
    assert joined == ["grad", "grad"]
