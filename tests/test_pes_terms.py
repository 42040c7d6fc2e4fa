"""Sum-of-terms energies: structured Hessians against dense AD Hessians (both backends),
finite differences and the all-pairs energy; cutoff neighbour lists; memory guard; bad input."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse

import simdiff
import simdiff.core.paths as paths
import simdiff.pes.hessian_layout as layout_module
import simdiff.pes.terms as terms_module
from problems.pes import fcc_cluster
from simdiff.pes import (
    cluster_energy,
    cluster_problem,
    lennard_jones,
    morse,
    pair_index,
    smooth_cutoff,
    structured_hessian,
    term_energy,
)
from simdiff.pes.term_hessians import bucket_size


def bond(r, ops):
    d = r[..., 1, :] - r[..., 0, :]
    return 2.0 * (ops.sqrt(ops.sum(d * d, axis=-1)) - 1.1) ** 2


def angle(r, ops):
    """Harmonic in cos(theta) at the middle atom."""
    a = r[..., 0, :] - r[..., 1, :]
    b = r[..., 2, :] - r[..., 1, :]
    c = ops.sum(a * b, axis=-1) / ops.sqrt(ops.sum(a * a, axis=-1) * ops.sum(b * b, axis=-1))
    return 1.5 * (c + 0.3) ** 2


def torsion(r, ops):
    """cos of the dihedral angle through the normals of the two planes."""
    b0 = r[..., 1, :] - r[..., 0, :]
    b1 = r[..., 2, :] - r[..., 1, :]
    b2 = r[..., 3, :] - r[..., 2, :]

    def cross(u, v):
        return ops.stack([u[..., 1] * v[..., 2] - u[..., 2] * v[..., 1],
                          u[..., 2] * v[..., 0] - u[..., 0] * v[..., 2],
                          u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]], axis=-1)  # fmt: skip

    n1, n2 = cross(b0, b1), cross(b1, b2)
    c = ops.sum(n1 * n2, axis=-1) / ops.sqrt(ops.sum(n1 * n1, axis=-1) * ops.sum(n2 * n2, axis=-1))
    return 0.7 * (1.0 + c)


def chain(rng, n=6):
    pos = np.cumsum(np.eye(3)[np.arange(n) % 3] + 0.1 * rng.standard_normal((n, 3)), axis=0)
    return pos


@pytest.mark.parametrize("term,k", [(bond, 2), (angle, 3), (torsion, 4)])
def test_structured_equals_dense_for_bonds_angles_torsions(backend, rng, term, k):
    pos = chain(rng)
    index = np.stack([np.arange(k) + s for s in range(6 - k + 1)])
    p = term_energy(term, index, pos)
    x = p.x0 + 0.05 * rng.standard_normal(p.n)
    hs = simdiff.hessian(p, x, backend=backend)
    hd = simdiff.hessian(p, x, backend=backend, method="fwd-rev")
    np.testing.assert_allclose(hs, hd, rtol=0, atol=1e-12 * abs(hd).max())
    # independent: central differences of the AD gradient
    h = 1e-5
    g = simdiff.grad(p, np.concatenate([x + h * np.eye(p.n), x - h * np.eye(p.n)]))
    fd = (g[: p.n] - g[p.n :]) / (2 * h)
    np.testing.assert_allclose(hs, fd, atol=1e-6 * max(1.0, abs(hd).max()))


def test_lj38_structured_equals_dense_and_other_backend(backend):
    p = cluster_problem(lennard_jones, fcc_cluster(38))
    hs = simdiff.hessian(p, backend=backend)
    hd = simdiff.hessian(p, backend=backend, method="fwd-rev")
    scale = abs(hd).max()
    np.testing.assert_allclose(hs, hd, rtol=0, atol=1e-12 * scale)
    other = "torch" if backend == "jax" else "jax"
    np.testing.assert_allclose(hs, simdiff.hessian(p, backend=other), rtol=0, atol=1e-12 * scale)


def test_energy_and_gradient_match_all_pairs_energy(backend, rng):
    pos = fcc_cluster(13) + 0.02 * rng.standard_normal((13, 3))
    p = cluster_problem(functools.partial(morse, a=1.7), pos)
    dense = simdiff.Problem(functools.partial(cluster_energy, pair=functools.partial(morse, a=1.7),
                                              n_particles=13), pos.reshape(-1))  # fmt: skip
    assert float(p.evaluate()) == pytest.approx(float(dense.evaluate()), rel=1e-14)
    np.testing.assert_allclose(simdiff.grad(p, backend=backend),
                               simdiff.grad(dense, backend=backend), atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(simdiff.hessian(p, backend=backend),
                               simdiff.hessian(dense, backend=backend), atol=1e-11)  # fmt: skip


def test_sparse_and_batched(rng):
    p = cluster_problem(lennard_jones, fcc_cluster(13))
    hs = structured_hessian(p, sparse=True)
    assert isinstance(hs, scipy.sparse.csr_array)
    np.testing.assert_allclose(hs.toarray(), simdiff.hessian(p), atol=1e-12)
    xs = p.x0 + 0.01 * rng.standard_normal((3, p.n))
    hb = simdiff.hessian(p, xs)
    assert hb.shape == (3, p.n, p.n)
    for i in range(3):
        np.testing.assert_allclose(hb[i], simdiff.hessian(p, xs[i], method="fwd-rev"), atol=1e-11)


def test_hvp_is_matrix_free_and_matches(backend, rng):
    p = cluster_problem(lennard_jones, fcc_cluster(38))
    v = rng.standard_normal(p.n)
    np.testing.assert_allclose(simdiff.hvp(p, v, backend=backend),
                               simdiff.hessian(p) @ v, rtol=1e-11, atol=1e-10)  # fmt: skip


class _Counter:
    """A call counter, declared no part of the term's definition (its fingerprint is nothing)."""

    def __init__(self):
        self.n = 0

    def __fingerprint__(self):
        return None


class CountingPair:
    """A pairwise term (``of_difference``) that counts the Python calls tracing makes."""

    def __init__(self):
        self.counter = _Counter()
        self.__name__ = "counting_morse"

    @property
    def calls(self):
        return self.counter.n

    def of_difference(self, d, ops):
        self.counter.n += 1
        return morse(ops.sqrt(ops.sum(d * d, axis=-1)), ops, a=1.3)

    def __call__(self, r, ops):
        return self.of_difference(r[..., 1, :] - r[..., 0, :], ops)


def test_pairwise_blocks_equal_generic_terms_and_dense(backend, rng):
    """Pairs given twice and in both orders: the 3x3 blocks add up like the 6x6 term Hessians."""
    pos = chain(rng, 5)
    index = [[0, 1], [2, 1], [1, 2], [0, 3], [4, 2], [3, 4], [1, 0]]
    pairwise = term_energy(CountingPair(), index, pos)
    generic = term_energy(lambda r, ops: CountingPair()(r, ops), index, pos)
    assert pairwise.fn.pairwise and not generic.fn.pairwise
    x = pos.reshape(-1) + 0.05 * rng.standard_normal(15)
    h = simdiff.hessian(pairwise, x, backend=backend)
    np.testing.assert_allclose(h, simdiff.hessian(generic, x, backend=backend), rtol=0, atol=1e-12)
    np.testing.assert_allclose(h, simdiff.hessian(pairwise, x, backend=backend, method="fwd-rev"),
                               rtol=0, atol=1e-12)  # fmt: skip
    hs = structured_hessian(pairwise, x, backend=backend, sparse=True)
    np.testing.assert_array_equal(hs.toarray(), h)
    assert hs.nnz == 9 * (5 + 2 * 5)  # 5 diagonal blocks, 5 distinct pairs in both orders


def test_no_recompilation_within_a_bucket(rng):
    """Neighbour lists of different lengths in one bucket run the same compiled Hessian."""
    term = CountingPair()
    pos = fcc_cluster(38)
    index = pair_index(pos, 1.6)
    assert bucket_size(150) == bucket_size(140) == 160
    traced = []
    for m in (150, 140):
        p = term_energy(term, index[:m], pos)
        before = term.calls
        h = simdiff.hessian(p)
        traced.append(term.calls - before)  # Python calls of the term: tracing only
        np.testing.assert_allclose(h, simdiff.hessian(p, method="fwd-rev"), rtol=0, atol=1e-12)
    assert traced[0] > 0 and traced[1] == 0


def test_non_finite_term_hessian_names_the_term():
    p = cluster_problem(lennard_jones, fcc_cluster(4))
    x = p.x0.copy()
    x[6:9] = x[3:6]  # atoms 1 and 2 coincide
    with pytest.raises(simdiff.NonFiniteError, match=r"term \d+ \(atoms \[1, 2\]\)"):
        simdiff.hessian(p, x)


@pytest.fixture(scope="module")
def cut_cluster():
    pair = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.5)
    pos = fcc_cluster(75)
    return pair, pos, cluster_problem(pair, pos)


def test_cutoff_list_is_exact_within_the_skin(cut_cluster, backend, rng):
    pair, pos, p = cut_cluster
    n_all = len(pair_index(pos))
    assert p.fn.n_terms < 0.6 * n_all
    full = simdiff.Problem(functools.partial(cluster_energy, pair=pair, n_particles=75),
                           pos.reshape(-1))  # fmt: skip
    x = p.x0 + 0.5 * p.fn.max_shift * rng.uniform(-1, 1, p.n)
    assert float(p.evaluate(x)) == pytest.approx(float(full.evaluate(x)), rel=1e-13)
    v = rng.standard_normal(p.n)
    hv = simdiff.hessian(p, x, backend=backend) @ v  # structured, from the list
    np.testing.assert_allclose(hv, simdiff.hvp(full, v, x, backend=backend), atol=1e-11)


def test_stale_neighbour_list_is_never_silently_used(cut_cluster):
    """A list that does not follow the atoms: NaN from fn itself (traced), a clear error from
    every evaluation boundary (evaluate, grad, Hessian)."""
    pair, pos, _ = cut_cluster
    p = cluster_problem(pair, pos, rebuild=False)
    x = p.x0.copy()
    x[7] += 1.5 * p.fn.max_shift
    assert np.isnan(float(p.fn(x, simdiff.get_ops("numpy"))))
    for call in (p.evaluate, lambda x: simdiff.grad(p, x), lambda x: simdiff.hessian(p, x)):
        with pytest.raises(simdiff.errors.NeighbourListError, match="atom 2 has moved"):
            call(x)


def test_chunked_dense_hessian_within_memory_budget(monkeypatch):
    p = cluster_problem(lennard_jones, fcc_cluster(13))
    full = simdiff.hessian(p, method="rev-rev")
    need = p.fn.dense_hessian_bytes(p.n)
    monkeypatch.setattr(paths, "memory_budget", lambda: need // 7)
    np.testing.assert_allclose(simdiff.hessian(p, method="fwd-rev", backend="torch"), full,
                               atol=1e-12)  # fmt: skip
    monkeypatch.setattr(paths, "memory_budget", lambda: need // 1000)
    with pytest.raises(simdiff.errors.MemoryBudgetError, match="method='structured'") as info:
        simdiff.hessian(p, method="fwd-rev")
    assert isinstance(info.value, MemoryError)
    np.testing.assert_allclose(simdiff.hessian(p), full, atol=1e-12)  # structured still works


@pytest.mark.parametrize("cut", [False, True], ids=["all-pairs", "cutoff"])
def test_public_sparse_equals_dense_and_dense_ad(backend, rng, cut):
    """simdiff.hessian(p, sparse=True) / Derivatives.hessian(sparse=True): a csr_array equal to
    the dense structured Hessian and to the dense AD Hessian (runs of pairs and single pairs)."""
    pair = smooth_cutoff(lennard_jones, r_on=1.4, r_cut=1.8) if cut else lennard_jones
    pos = fcc_cluster(40) + 0.02 * rng.standard_normal((40, 3))
    p = cluster_problem(pair, pos)
    layout = p.fn.pair_layout()
    assert layout.distinct and layout.short.size > 0 and layout.run_start.size > 0  # both paths
    hd = simdiff.hessian(p, backend=backend)
    hs = simdiff.hessian(p, backend=backend, sparse=True)
    assert isinstance(hs, scipy.sparse.csr_array) and hs.shape == (120, 120)
    ad = simdiff.hessian(p, backend=backend, method="fwd-rev")
    scale = np.abs(ad).max()
    np.testing.assert_allclose(hd, ad, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(hs.toarray(), hd, rtol=0, atol=1e-12 * scale)
    np.testing.assert_array_equal(hd, hd.T)
    d = simdiff.Derivatives(p, backend=backend)
    np.testing.assert_array_equal(d.hessian(sparse=True).toarray(), hs.toarray())
    if cut:  # only blocks of interacting pairs are stored
        assert hs.nnz == 9 * (40 + 2 * p.fn.n_terms)
    assert hs.has_canonical_format  # rows in order, sorted columns, no duplicates
    hs.check_format(full_check=True)
    hs.data[:] = 0.0  # the result is the caller's: changing it leaves the cached structure
    hs.indices[:] = 0
    hs.indptr[1:] = 0
    again = simdiff.hessian(p, backend=backend, sparse=True)
    np.testing.assert_allclose(again.toarray(), hd, rtol=0, atol=1e-12 * scale)


def test_pair_runs_split_across_batches(monkeypatch, rng):
    """Runs of pairs cut by batch boundaries, pairs shuffled and reversed: same Hessian."""
    monkeypatch.setattr(terms_module, "PAIR_CHUNK", 16)
    monkeypatch.setattr(terms_module, "TERM_CHUNK", 32)  # the sparse path's batches
    pos = fcc_cluster(30) + 0.02 * rng.standard_normal((30, 3))
    p = cluster_problem(lennard_jones, pos)
    ad = simdiff.hessian(p, method="fwd-rev")
    scale = np.abs(ad).max()
    index = pair_index(pos)[rng.permutation(435)]
    flip = rng.random(435) < 0.5
    index[flip] = index[flip, ::-1]
    q = term_energy(p.fn.term, index, pos)
    assert p.fn.pair_layout().run_start.size > 0 and q.fn.pair_layout().run_start.size == 0
    for problem in (p, q):
        h = simdiff.hessian(problem)
        np.testing.assert_allclose(h, ad, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(simdiff.hessian(problem, sparse=True).toarray(), h,
                                   rtol=0, atol=1e-12 * scale)  # fmt: skip


def test_sparse_bad_requests():
    plain = simdiff.Problem(lambda x, ops: ops.sum(x**4), np.ones(3), name="quartic")
    with pytest.raises(simdiff.UnsupportedError, match="sparse=True needs .* 'quartic' has none"):
        simdiff.hessian(plain, sparse=True)
    with pytest.raises(simdiff.UnsupportedError, match="sparse=True needs"):
        simdiff.hessian(plain, method="structured", sparse=True)
    p = cluster_problem(lennard_jones, fcc_cluster(4))
    with pytest.raises(simdiff.errors.OptionError, match="method='fwd-rev' is the dense AD"):
        simdiff.hessian(p, method="fwd-rev", sparse=True)
    with pytest.raises(simdiff.errors.OptionError, match="sparse must be True or False"):
        simdiff.Derivatives(p).hessian(sparse="yes")
    with pytest.raises(simdiff.ShapeError, match="one Hessian"):
        simdiff.hessian(p, np.stack([p.x0, p.x0]), sparse=True)
    for err in (simdiff.UnsupportedError, simdiff.errors.OptionError, simdiff.ShapeError):
        assert issubclass(err, simdiff.SimdiffError)


def test_structured_method_needs_structure():
    p = simdiff.Problem(lambda x, ops: ops.sum(x**4), np.ones(3))
    with pytest.raises(simdiff.UnsupportedError, match="method='structured'"):
        simdiff.hessian(p, method="structured")


@pytest.mark.parametrize(
    "index,match",
    [
        ([[0, 1], [1, 5]], r"term 1 refers to atom 5 \(index\[1, 1\]\), out of range for 4 atoms"),
        ([[0, 1], [-1, 2]], r"term 1 refers to atom -1"),
        ([[0, 1], [2, 2]], r"term 1 has atom 2 twice"),
        ([[0.5, 1]], "integer atom numbers"),
    ],
)
def test_bad_index(index, match):
    with pytest.raises(simdiff.errors.InvalidIndexError, match=match) as info:
        term_energy(bond, index, np.eye(4, 3) * 2)
    assert isinstance(info.value, IndexError)


def test_bad_index_shape():
    with pytest.raises(simdiff.ShapeError, match=r"shape \(m, k\)"):
        term_energy(bond, [0, 1], np.eye(4, 3))


def test_term_returning_non_scalar():
    def per_atom(r, ops):
        return ops.sum(r * r, axis=-1)  # (..., k): one value per atom, not per term

    with pytest.raises(
        simdiff.errors.InputError, match=r"returned shape \(2, 2\), expected \(2,\)"
    ):
        term_energy(per_atom, [[0, 1], [1, 2]], np.eye(3) * 2)

    def unbatched(r, ops):
        return ops.sum(r * r)  # sums over all terms

    with pytest.raises(simdiff.errors.InputError, match="one energy per term"):
        term_energy(unbatched, [[0, 1], [1, 2]], np.eye(3) * 2)


def test_term_not_finite_names_term():
    with pytest.raises(
        simdiff.errors.InputError, match=r"term 1 \(atoms \[1, 2, 3\]\) has energy nan"
    ):
        term_energy(angle, [[0, 1, 2], [1, 2, 3]], np.array([[0.0, 1, 0], [0, 0, 0], [1, 0, 0],
                                                            [1.0, 0, 0]]))  # fmt: skip


def test_cutoff_beyond_half_box():
    """The minimum-image list refuses it naming the vector; cluster_problem sums image pairs."""
    pair = smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.5)
    with pytest.raises(simdiff.errors.InputError, match=r"r_cut <= min\(box\) / 2"):
        simdiff.pes.NeighbourList(pair, box=4.0)
    assert type(cluster_problem(pair, fcc_cluster(4), box=4.0).fn).__name__ == "ImagePairEnergy"


@pytest.mark.parametrize("tile", [9, 48, 384])
def test_dense_lower_triangle_mirrored_or_written_block_by_block(monkeypatch, rng, tile):
    """Many pairs: the lower triangle copied from the upper one in tiles; few pairs: -B^T
    written per pair; both give the same matrix, bit for bit, equal to the dense AD Hessian."""
    monkeypatch.setattr(layout_module, "MIRROR_TILE", tile)
    pos = fcc_cluster(100) + 0.02 * rng.standard_normal((100, 3))
    for pair in (lennard_jones, smooth_cutoff(lennard_jones, r_on=1.2, r_cut=1.5)):
        p = cluster_problem(pair, pos)
        layout = p.fn.pair_layout()
        assert layout.mirror == (pair is lennard_jones)  # all pairs / nearest neighbours
        want = simdiff.hessian(p)
        ad = simdiff.hessian(p, method="fwd-rev")
        np.testing.assert_allclose(want, ad, rtol=0, atol=1e-12 * np.abs(ad).max())
        np.testing.assert_array_equal(want, want.T)
        layout.mirror = not layout.mirror
        np.testing.assert_array_equal(simdiff.hessian(p), want)
