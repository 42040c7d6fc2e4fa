"""Normal modes (rigid-body projection, frequencies, units, lowest modes by eigsh), cubic and
quartic force constants, stationarity warnings."""

from __future__ import annotations

import numpy as np
import pytest
from _shared import shared_problem

import simdiff
from problems.pes import fcc_cluster
from simdiff.pes import (
    cluster_problem,
    cubic_force_constants,
    find_minimum,
    internal_basis,
    lennard_jones,
    mass_weighted_hessian,
    normal_modes,
    quartic_force_constants,
    rigid_body_basis,
    smooth_cutoff,
    wavenumber_factor,
)


@pytest.fixture(scope="module")
def lj13_min():
    p = shared_problem("lj13")
    return p, find_minimum(p).x


def test_morse_dimer_frequency_is_analytic(backend):
    p = shared_problem("morse-dimer")
    d = p.x0.reshape(2, 3)
    u = (d[1] - d[0]) / np.linalg.norm(d[1] - d[0])
    r0 = p.meta["minimum_distance"]
    x = np.concatenate([d[0], d[0] + r0 * u])  # at the minimum, masses 1 and 2
    nm = normal_modes(p, x, backend=backend)
    assert nm.n_rigid == 5
    np.testing.assert_allclose(nm.frequencies, [p.meta["harmonic_frequency"]], rtol=1e-12)
    # the stretch: atoms move against each other, centre of mass fixed
    disp = nm.displacements[:, 0].reshape(2, 3)
    np.testing.assert_allclose(disp[0] * 1.0 + disp[1] * 2.0, 0.0, atol=1e-14)


def test_lj13_minimum_has_six_zero_modes_and_no_negative(lj13_min, backend):
    p, x = lj13_min
    lam = np.linalg.eigvalsh(simdiff.hessian(p, x, backend=backend))
    scale = np.abs(lam).max()
    assert np.sum(np.abs(lam) < 1e-7 * scale) == 6
    assert lam.min() > -1e-7 * scale
    nm = normal_modes(p, x, backend=backend)
    assert nm.n_rigid == 6 and nm.frequencies.shape == (33,)
    assert nm.frequencies.min() > 1.0  # the softest icosahedral LJ13 mode is well above zero
    # projection removes the near-zero modes; the remaining spectrum is the full one's
    full = np.linalg.eigvalsh(mass_weighted_hessian(simdiff.hessian(p, x), np.ones(39)))
    np.testing.assert_allclose(np.sort(nm.eigenvalues), full[6:], rtol=1e-8)


def test_icosahedral_degeneracies(lj13_min):
    """I_h symmetry: the 33 LJ13 frequencies form degenerate groups of sizes 1, 3, 4 and 5."""
    p, x = lj13_min
    w = normal_modes(p, x).frequencies
    groups = np.split(w, np.flatnonzero(np.diff(w) > 1e-6 * w.max()) + 1)
    assert sum(len(g) for g in groups) == 33
    assert {len(g) for g in groups} <= {1, 3, 4, 5}


def test_normal_modes_jax_torch_agree(lj13_min):
    p, x = lj13_min
    wj = normal_modes(p, x, backend="jax").frequencies
    wt = normal_modes(p, x, backend="torch").frequencies
    np.testing.assert_allclose(wj, wt, rtol=1e-10)


def test_rigid_body_basis_sizes():
    line = np.array([[0.0, 0, 0], [1, 0, 0], [2.5, 0, 0]])
    assert rigid_body_basis(line).shape == (9, 5)
    assert rigid_body_basis(np.zeros((1, 3))).shape == (3, 3)
    tri = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0]])
    b = rigid_body_basis(tri, np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(b.T @ b, np.eye(6), atol=1e-13)
    assert rigid_body_basis(tri, periodic=True).shape == (9, 3)
    q = internal_basis(b)
    np.testing.assert_allclose(q.T @ b, 0.0, atol=1e-13)


def test_masses_scale_frequencies(backend):
    pos = [[0.0, 0, 0], [1.12, 0, 0], [0.5, 0.95, 0.05]]
    p1 = cluster_problem(lennard_jones, pos)
    p4 = cluster_problem(lennard_jones, pos, masses=4.0)
    x = find_minimum(p1).x
    w1 = normal_modes(p1, x, backend=backend).frequencies
    np.testing.assert_allclose(normal_modes(p4, x, backend=backend).frequencies, w1 / 2,
                               rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(normal_modes(p1, x, backend=backend, masses=[4.0] * 3).frequencies,
                               w1 / 2, rtol=1e-12)  # fmt: skip


def test_wavenumber_factors():
    # sqrt(eV / (A^2 amu)) and sqrt(Eh / (a0^2 amu)) in cm^-1 (CODATA 2018)
    assert wavenumber_factor("eV", "angstrom") == pytest.approx(521.4709, rel=1e-6)
    assert wavenumber_factor("hartree", "bohr") == pytest.approx(5140.487, rel=1e-6)
    with pytest.raises(ValueError, match="unknown energy unit 'J'"):
        wavenumber_factor("J")


def test_bad_masses_for_normal_modes():
    p = shared_problem("lj-dimer")
    with pytest.raises(ValueError, match="masses must be finite and positive"):
        normal_modes(p, masses=[1.0, -1.0])
    with pytest.raises(simdiff.ShapeError, match="masses must have shape"):
        normal_modes(p, masses=[1.0, 1.0, 1.0])


# --------------------------------------------------------------------------- cubic


def test_cubic_morse_stretch_analytic(backend):
    p = shared_problem("morse-dimer")
    d = np.array([0.3, -0.4, 1.2])
    d /= np.linalg.norm(d)
    x = np.concatenate([np.zeros(3), p.meta["minimum_distance"] * d])
    u = np.concatenate([np.zeros(3), d])  # moving atom 1 along the bond: dr = dt
    phi = cubic_force_constants(p, x, u, backend=backend)
    assert phi.shape == (1, 1, 1)
    assert phi[0, 0, 0] == pytest.approx(p.meta["cubic_constant_r"], rel=1e-12)


def test_cubic_matches_derivative_tensor_trimer(backend):
    p = cluster_problem(lennard_jones, [[0.0, 0, 0], [1.1, 0.1, 0], [0.4, 1.0, 0.2]])
    t3 = simdiff.derivative_tensor(p, 3, backend=backend)
    L = np.random.default_rng(2).standard_normal((9, 4))
    ref = np.einsum("abc,ai,bj,ck->ijk", t3, L, L, L)
    phi = cubic_force_constants(
        p, p.x0, L, backend=backend, method="taylor", chunk=3, gtol=np.inf
    )  # any point
    np.testing.assert_allclose(phi, ref,
                               rtol=1e-11, atol=1e-9)  # fmt: skip


def test_cubic_against_finite_differences_of_ad_hessian(lj13_min, backend):
    p, x = lj13_min
    nm = normal_modes(p, x)
    L = nm.displacements[:, ::4]  # 9 of the 33 modes
    phi = cubic_force_constants(p, x, L, backend=backend, method="taylor")
    step = 1e-4
    fd = np.stack([L.T @ (simdiff.hessian(p, x + step * L[:, k]) -
                          simdiff.hessian(p, x - step * L[:, k])) @ L / (2 * step)
                   for k in range(L.shape[1])], axis=2)  # fmt: skip
    np.testing.assert_allclose(phi, fd, atol=1e-6 * np.abs(phi).max())
    # symmetric in all three indices
    np.testing.assert_allclose(phi, phi.transpose(1, 0, 2), atol=1e-10 * np.abs(phi).max())
    np.testing.assert_allclose(phi, phi.transpose(2, 1, 0), atol=1e-10 * np.abs(phi).max())


def test_cubic_diagonal_matches_nested_directional_derivative(lj13_min, backend):
    p, x = lj13_min
    L = normal_modes(p, x).displacements[:, :3]
    phi = cubic_force_constants(p, x, L, backend=backend)
    for k in range(3):
        d3 = simdiff.derivative(p, 3, L[:, k], x, backend=backend, method="nested")
        assert float(d3) == pytest.approx(phi[k, k, k], rel=1e-9, abs=1e-9)


def test_cubic_taylor_equals_hessian_jvp_for_all_modes(lj13_min, backend):
    """Every phi_ijk of LJ13 (all 33 modes): Taylor-mode polarisation against jvp of the Hessian."""
    p, x = lj13_min
    L = normal_modes(p, x).displacements
    phi = cubic_force_constants(p, x, L, backend=backend, method="taylor", chunk=1000)
    ref = cubic_force_constants(p, x, L, backend=backend, method="hessian-jvp")
    np.testing.assert_allclose(phi, ref, rtol=0, atol=1e-10 * np.abs(ref).max())
    for perm in [(1, 0, 2), (2, 1, 0), (0, 2, 1)]:
        np.testing.assert_array_equal(phi, phi.transpose(perm))


def test_cubic_bad_modes():
    p = shared_problem("lj-dimer")
    with pytest.raises(simdiff.ShapeError, match=r"modes must have shape \(6, m\)"):
        cubic_force_constants(p, p.x0, np.ones((5, 2)))
    with pytest.raises(ValueError, match="chunk must be a positive integer"):
        cubic_force_constants(p, p.x0, np.ones(6), chunk=0)
    with pytest.raises(ValueError, match="method must be 'auto', 'taylor' or 'hessian-jvp'"):
        cubic_force_constants(p, p.x0, np.ones(6), method="jvp")


def test_h2_harmonic_wavenumber_in_real_units(backend):
    """Morse H2 in eV / Angstrom / amu reproduces the spectroscopic we = 4401.21 cm^-1."""
    p = shared_problem("morse-h2")
    nm = normal_modes(p, backend=backend)
    assert nm.n_rigid == 5
    (nu,) = nm.wavenumbers(energy="eV", length="angstrom")
    assert nu == pytest.approx(p.meta["harmonic_wavenumber_cm"], rel=p.meta["rtol_wavenumber"])
    # same number from the analytic Morse curvature 2 D a^2 and the reduced mass
    D, a = 4.7446, 1.9426
    mu = 1.00782503 / 2
    assert nu == pytest.approx(np.sqrt(2 * D * a * a / mu) * wavenumber_factor(), rel=1e-12)


# --------------------------------------------------------------------------- large systems, quartic


def test_lowest_modes_by_eigsh_match_dense(lj13_min):
    p, x = lj13_min
    full = normal_modes(p, x)
    low = normal_modes(p, x, k=7)
    assert low.n_rigid == 6 and low.frequencies.shape == (7,)
    np.testing.assert_allclose(low.frequencies, full.frequencies[:7], rtol=1e-9)
    # eigenvectors: same span as the dense ones (degenerate groups), orthogonal to rigid motion
    proj = full.modes[:, :9].T @ low.modes
    np.testing.assert_allclose(np.linalg.norm(proj, axis=0), 1.0, atol=1e-8)
    with pytest.raises(simdiff.errors.InputError, match=r"k must be an integer in 1\.\.32"):
        normal_modes(p, x, k=33)


def test_lowest_modes_recover_a_copy_of_a_degenerate_mode_that_lanczos_missed(
    lj13_min, monkeypatch
):
    """ARPACK's Lanczos can return one copy of a degenerate eigenvalue too few (LJ38's
    lowest triple was found twice on one machine's rounding): its first answer here drops
    one copy of LJ13's lowest group and returns the next mode instead; normal_modes must
    find the missing copy and still give the dense k lowest."""
    import scipy.sparse.linalg

    p, x = lj13_min
    full = normal_modes(p, x)
    real = scipy.sparse.linalg.eigsh
    calls = []

    def missing_a_copy(op, k, **kwargs):
        calls.append(k)
        lam, v = real(op, k=k + 1, **kwargs)
        if len(calls) > 1:
            return real(op, k=k, **kwargs)
        order = np.argsort(lam)
        keep = np.delete(order, 1)  # the lowest group's second copy is not found
        return lam[keep], v[:, keep]

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", missing_a_copy)
    low = normal_modes(p, x, k=7)
    assert len(calls) >= 2  # the search for a missed mode ran
    np.testing.assert_allclose(low.frequencies, full.frequencies[:7], rtol=1e-9)
    proj = full.modes[:, :9].T @ low.modes
    np.testing.assert_allclose(np.linalg.norm(proj, axis=0), 1.0, atol=1e-8)


def test_lowest_modes_of_cutoff_cluster_use_sparse_hessian(rng):
    pos = fcc_cluster(150)
    p = cluster_problem(smooth_cutoff(lennard_jones, r_on=2.0, r_cut=2.5), pos)
    low = normal_modes(p, k=5, gtol=np.inf)
    dense = normal_modes(p, gtol=np.inf)
    np.testing.assert_allclose(low.eigenvalues, dense.eigenvalues[:5], rtol=1e-8, atol=1e-10)


def test_stationarity_warning_states_gradient():
    p = shared_problem("lj-dimer")
    with pytest.warns(simdiff.errors.StationarityWarning, match=r"\|grad E\(x\)\| = 12\.2"):
        normal_modes(p)
    with pytest.warns(simdiff.errors.StationarityWarning, match="cubic force constants"):
        cubic_force_constants(p, p.x0, np.ones(6))


def test_quartic_against_finite_differences_of_hessian(lj13_min, backend):
    """phi_iijj = d^2/dt^2 L_i^T H(x + t L_j) L_i, by central differences of the AD Hessian."""
    p, x = lj13_min
    L = normal_modes(p, x).displacements[:, [0, 5, 20, 32]]
    phi = quartic_force_constants(p, x, L, backend=backend)
    h = 2e-3

    def q(t):
        return np.stack([L.T @ simdiff.hessian(p, x + t * L[:, j]) @ L for j in range(4)])

    qp, q0, qm = q(h), q(0.0), q(-h)
    fd = np.einsum("jii->ij", (qp - 2 * q0 + qm) / h**2)  # fd[i, j] = phi_iijj
    np.testing.assert_allclose(phi, fd, rtol=2e-5, atol=1e-4 * abs(phi).max())
    np.testing.assert_allclose(phi, phi.T, rtol=1e-10)
