"""ODE catalogue: initial-value problems as Problems of their parameters (simdiff.ode).

Each entry is an :class:`simdiff.ode.ODEProblem`; exact references are given
where a closed form exists (matrix exponential, damped oscillator), and
``meta["reference"]`` says how the tests check the others (forward
sensitivity equations integrated by ``scipy.integrate.solve_ivp``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from simdiff import CheckOptions
from simdiff.ode import Dopri5, FixedStep, ODEProblem, Rodas3, Rodas5P

# --------------------------------------------------------------------------- linear y' = A y

LINEAR_A = np.array([[-0.5, 1.0], [-1.0, -0.3]])
LINEAR_Y0 = np.array([1.0, 0.5])
LINEAR_TIMES = np.array([0.5, 1.0, 1.5])


def linear_rhs(t, y, p, ops):
    """y' = A y with A = p.reshape(2, 2) (row-major)."""
    return ops.stack([p[0] * y[0] + p[1] * y[1], p[2] * y[0] + p[3] * y[1]])


def _unit(k: int) -> np.ndarray:
    e = np.zeros(4)
    e[k] = 1.0
    return e.reshape(2, 2)


def _linear_value(a: np.ndarray, times: np.ndarray = LINEAR_TIMES) -> np.ndarray:
    import scipy.linalg  # here, not at import: listing the catalogue stays cheap

    A = a.reshape(2, 2)
    return np.concatenate([scipy.linalg.expm(t * A) @ LINEAR_Y0 for t in times])


def _linear_jacobian(a: np.ndarray, times: np.ndarray = LINEAR_TIMES) -> np.ndarray:
    """d y(t) / d a_k = L(tA, t E_k) y0 with L the Fréchet derivative of expm."""
    import scipy.linalg  # here, not at import: listing the catalogue stays cheap

    A = a.reshape(2, 2)
    rows = []
    for t in times:
        cols = [scipy.linalg.expm_frechet(t * A, t * _unit(k), compute_expm=False) @ LINEAR_Y0
                for k in range(4)]  # fmt: skip
        rows.append(np.stack(cols, axis=1))
    return np.concatenate(rows, axis=0)


def _expm_second(M: np.ndarray, E: np.ndarray, F: np.ndarray) -> np.ndarray:
    """D^2 expm(M)[E, F] from the exponential of a 3x3 block upper-triangular matrix.

    The top-right block of ``expm([[M, E, 0], [0, M, F], [0, 0, M]])`` is the
    ``E``-then-``F`` half of the second derivative (Najfeld & Havel 1995);
    adding the swapped term symmetrises it.
    """
    n = M.shape[0]

    def block(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        import scipy.linalg  # here, not at import: listing the catalogue stays cheap

        Z = np.zeros((3 * n, 3 * n))
        for i in range(3):
            Z[i * n : (i + 1) * n, i * n : (i + 1) * n] = M
        Z[:n, n : 2 * n], Z[n : 2 * n, 2 * n :] = X, Y
        return scipy.linalg.expm(Z)[:n, 2 * n :]

    return block(E, F) + block(F, E)


def _energy_value(a: np.ndarray) -> float:
    y = _linear_value(a, LINEAR_TIMES[-1:])
    return 0.5 * float(y @ y)


def _energy_grad(a: np.ndarray) -> np.ndarray:
    y = _linear_value(a, LINEAR_TIMES[-1:])
    return y @ _linear_jacobian(a, LINEAR_TIMES[-1:])


def _energy_hessian(a: np.ndarray) -> np.ndarray:
    import scipy.linalg  # here, not at import: listing the catalogue stays cheap

    T = float(LINEAR_TIMES[-1])
    M = T * a.reshape(2, 2)
    y = scipy.linalg.expm(M) @ LINEAR_Y0
    J = _linear_jacobian(a, LINEAR_TIMES[-1:])
    H = J.T @ J
    for k in range(4):
        for m in range(4):
            H[k, m] += y @ (_expm_second(M, T * _unit(k), T * _unit(m)) @ LINEAR_Y0)
    return H


_LINEAR_META = {
    "citation": "C. Moler, C. Van Loan, SIAM Rev. 45 (2003) 3-49 (expm); A. H. Al-Mohy, "
    "N. J. Higham, SIAM J. Matrix Anal. Appl. 30 (2009) 1639-1657 (expm_frechet); "
    "I. Najfeld, T. F. Havel, Adv. Appl. Math. 16 (1995) 321-375 (second derivative)",
    "reference": "scipy.linalg.expm / expm_frechet",
}


def _closed_form_options(solver_rtol: float, reference_rtol: float) -> CheckOptions:
    """A closed form of the continuous problem is a reference of the discrete solution to
    its global error, which accumulates over the steps to well above the local ``rtol``."""
    return CheckOptions(solver_rtol=solver_rtol, reference_rtol=reference_rtol)


def linear() -> ODEProblem:
    """y' = A y, 2x2, parameters the entries of A; trajectory at 3 times (exact by expm)."""
    return ODEProblem(
        linear_rhs, LINEAR_Y0, (0.0, 1.5), LINEAR_A.ravel(), save_at=LINEAR_TIMES,
        solver=Dopri5(rtol=1e-10, atol=1e-12, max_steps=400), name="ode_linear",
        exact={"value": _linear_value, "jacobian": _linear_jacobian},
        meta={"tags": ("ode", "small", "closed-form", "vector"), **_LINEAR_META},
        check_options=_closed_form_options(1e-10, 1e-7),
    )  # fmt: skip


def linear_energy() -> ODEProblem:
    """0.5 |y(1.5)|^2 for y' = A y: scalar, exact gradient and Hessian by expm derivatives."""
    return ODEProblem(
        linear_rhs, LINEAR_Y0, (0.0, 1.5), LINEAR_A.ravel(), save_at=LINEAR_TIMES[-1:],
        observable=lambda ys, ops: 0.5 * ops.sum(ys[-1] ** 2),
        solver=Dopri5(rtol=1e-10, atol=1e-12, max_steps=400), name="ode_linear_energy",
        exact={"value": _energy_value, "grad": _energy_grad, "hessian": _energy_hessian},
        meta={"tags": ("ode", "small", "closed-form"), **_LINEAR_META},
        check_options=_closed_form_options(1e-10, 1e-6),
    )  # fmt: skip


# --------------------------------------------------------------------------- damped oscillator

OSC_TIMES = np.array([1.0, 2.0, 3.0])


def oscillator_rhs(t, y, p, ops):
    """x'' + 2 zeta omega x' + omega^2 x = 0 as a first-order system; p = (omega, zeta)."""
    omega, zeta = p[0], p[1]
    return ops.stack([y[1], -2.0 * zeta * omega * y[1] - omega**2 * y[0]])


def oscillator_closed_form(p: np.ndarray, times: np.ndarray = OSC_TIMES) -> np.ndarray:
    """Underdamped position x(t) from x(0) = 1, x'(0) = 0 (works for complex p: complex step)."""
    omega, zeta = p[0], p[1]
    wd = omega * np.sqrt(1.0 - zeta**2)
    return np.exp(-zeta * omega * times) * (
        np.cos(wd * times) + zeta * omega / wd * np.sin(wd * times)
    )


def _oscillator_jacobian(p: np.ndarray) -> np.ndarray:
    """Complex-step derivative of the closed form: exact to rounding (no subtraction)."""
    h = 1e-30
    cols = []
    for k in range(2):
        pc = np.asarray(p, dtype=complex)
        pc[k] += 1j * h
        cols.append(oscillator_closed_form(pc).imag / h)
    return np.stack(cols, axis=1)


def oscillator() -> ODEProblem:
    """Damped harmonic oscillator, p = (omega, zeta); positions at 3 times (closed form)."""
    return ODEProblem(
        oscillator_rhs, np.array([1.0, 0.0]), (0.0, 3.0), np.array([2.0, 0.1]),
        save_at=OSC_TIMES, observable=lambda ys, ops: ys[:, 0],
        solver=Dopri5(rtol=1e-9, atol=1e-11, max_steps=300), name="ode_oscillator",
        exact={"value": oscillator_closed_form, "jacobian": _oscillator_jacobian},
        meta={"tags": ("ode", "small", "closed-form", "vector"),
              "citation": "e.g. A. P. French, Vibrations and Waves (1971), ch. 3",
              "reference": "closed form; Jacobian by complex step"},
        check_options=_closed_form_options(1e-9, 1e-6),
    )  # fmt: skip


# --------------------------------------------------------------------------- Lotka–Volterra

LV_PARAMS = np.array([1.5, 1.0, 1.0, 3.0])
LV_Y0 = np.array([1.0, 1.0])
LV_TIMES = np.linspace(0.5, 3.0, 6)
LV_SOLVER = Dopri5(rtol=1e-7, atol=1e-9, max_steps=100)  # needs <= 51 near p_true
_LV_CITE = (
    "A. J. Lotka, Elements of Physical Biology (1925); V. Volterra, Nature 118 (1926) 558; "
    "parameters from E. Hairer, S. P. Nørsett, G. Wanner, Solving ODEs I, I.16"
)


def lotka_volterra_rhs(t, y, p, ops):
    """Prey x, predator y: x' = a x - b x y, y' = d x y - g y; p = (a, b, d, g)."""
    a, b, d, g = p[0], p[1], p[2], p[3]
    return ops.stack([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]])


def lotka_volterra() -> ODEProblem:
    """Lotka–Volterra, 4 parameters; trajectory at 6 times (vector, 12 outputs)."""
    return ODEProblem(
        lotka_volterra_rhs, LV_Y0, (0.0, 3.0), LV_PARAMS, save_at=LV_TIMES,
        solver=LV_SOLVER, name="lotka_volterra",
        meta={"tags": ("ode", "small", "vector"), "citation": _LV_CITE,
              "reference": "forward sensitivity equations by solve_ivp (tests)"},
    )  # fmt: skip


#: Synthetic data: the exact trajectory at the true parameters, at ``LV_TIMES`` (rows) for
#: (prey, predator).  Stored, not integrated at import, so listing the catalogue stays cheap;
#: tests/test_ode_solvers.py remakes it with ``scipy.integrate.solve_ivp`` (DOP853, rtol 1e-12).
LV_DATA = np.array([
    [1.531230779708674, 0.41015517425870585],
    [2.772850901838359, 0.2587108781415787],
    [5.074253916797112, 0.3914541093753137],
    [6.777189388281422, 2.012753711561416],
    [2.1783451738137387, 4.369232278678291],
    [0.9703304511560545, 1.9098538380596894],
])  # fmt: skip


def lv_data() -> np.ndarray:
    """A copy of the synthetic data :data:`LV_DATA`."""
    return LV_DATA.copy()


def lotka_volterra_fit() -> ODEProblem:
    """Least-squares misfit 0.5 sum (y(t_i; p) - data_i)^2 of Lotka–Volterra; minimum at p_true."""
    data = lv_data()

    def misfit(ys, ops):
        return 0.5 * ops.sum((ys - ops.asarray(data)) ** 2)

    return ODEProblem(
        lotka_volterra_rhs, LV_Y0, (0.0, 3.0), np.array([1.2, 0.8, 1.2, 2.6]), save_at=LV_TIMES,
        observable=misfit, solver=LV_SOLVER,
        name="lotka_volterra_fit",
        meta={"tags": ("ode", "small", "optimisation"), "true_params": LV_PARAMS,
              "citation": _LV_CITE, "reference": "minimum at true_params (data are noise-free)"},
    )  # fmt: skip


# --------------------------------------------------------------------------- Van der Pol


def van_der_pol_rhs(t, y, p, ops):
    """x'' - mu (1 - x^2) x' + x = 0 as a first-order system; p = (mu,)."""
    return ops.stack([y[1], p[0] * (1.0 - y[0] ** 2) * y[1] - y[0]])


_VDP_CITE = ("B. van der Pol, Phil. Mag. 2 (1926) 978; stiff test: E. Hairer, G. Wanner, "
             "Solving ODEs II, IV.1")  # fmt: skip


def van_der_pol() -> ODEProblem:
    """Van der Pol at mu = 1 (non-stiff), states at 4 times, Dopri5."""
    return ODEProblem(
        van_der_pol_rhs, np.array([2.0, 0.0]), (0.0, 2.0), np.array([1.0]),
        save_at=np.array([0.5, 1.0, 1.5, 2.0]),
        solver=Dopri5(rtol=1e-8, atol=1e-10, max_steps=300), name="van_der_pol",
        meta={"tags": ("ode", "small", "vector"), "citation": _VDP_CITE},
    )  # fmt: skip


def van_der_pol_stiff() -> ODEProblem:
    """Van der Pol at mu = 1000 (stiff: Jacobian eigenvalue about -3000 at the start), Rodas3."""
    return ODEProblem(
        van_der_pol_rhs, np.array([2.0, 0.0]), (0.0, 1.0), np.array([1000.0]),
        save_at=np.array([0.5, 1.0]),
        solver=Rodas3(rtol=1e-5, atol=1e-8, max_steps=200), name="van_der_pol_stiff",
        meta={"tags": ("ode", "small", "stiff", "vector"), "citation": _VDP_CITE},
    )  # fmt: skip


# --------------------------------------------------------------------------- Lorenz-63


def lorenz_rhs(t, y, p, ops):
    """Lorenz (1963): p = (sigma, rho, beta)."""
    s, r, b = p[0], p[1], p[2]
    return ops.stack([s * (y[1] - y[0]), y[0] * (r - y[2]) - y[1], y[0] * y[1] - b * y[2]])


def lorenz63() -> ODEProblem:
    """Lorenz-63 at the classical parameters on a short horizon (t <= 0.5), 2 saved states."""
    return ODEProblem(
        lorenz_rhs, np.array([1.0, 1.0, 1.0]), (0.0, 0.5), np.array([10.0, 28.0, 8.0 / 3.0]),
        save_at=np.array([0.25, 0.5]),
        solver=Dopri5(rtol=1e-7, atol=1e-9, max_steps=200), name="lorenz63",
        meta={"tags": ("ode", "small", "vector", "chaotic"),
              "citation": "E. N. Lorenz, J. Atmos. Sci. 20 (1963) 130-141"},
    )  # fmt: skip


# --------------------------------------------------------------------------- Robertson


def robertson_rhs(t, y, p, ops):
    """Robertson's kinetics with log rate constants p = ln(k1, k2, k3)."""
    k1, k2, k3 = ops.exp(p[0]), ops.exp(p[1]), ops.exp(p[2])
    r1, r2, r3 = k1 * y[0], k2 * y[1] ** 2, k3 * y[1] * y[2]
    return ops.stack([-r1 + r3, r1 - r2 - r3, r2])


ROBERTSON_K = np.array([0.04, 3.0e7, 1.0e4])


def robertson() -> ODEProblem:
    """Robertson (1966) stiff kinetics, parameters ln k; states at t = 0.4, 4, 40, Rodas3."""
    return ODEProblem(
        robertson_rhs, np.array([1.0, 0.0, 0.0]), (0.0, 40.0), np.log(ROBERTSON_K),
        save_at=np.array([0.4, 4.0, 40.0]),
        solver=Rodas3(rtol=1e-4, atol=1e-8, max_steps=200), name="robertson",
        meta={"tags": ("ode", "small", "stiff", "vector"),
              "citation": "H. H. Robertson, in Numerical Analysis (1966) 178-182; E. Hairer, "
              "G. Wanner, Solving ODEs II, IV.1 and IV.10",
              "literature": {"y(40)": [0.7158270687, 9.185534764e-6, 0.2841637457]}},
    )  # fmt: skip


# --------------------------------------------------------------------------- HIRES


def hires_rhs(t, y, p, ops):
    """HIRES (Schäfer 1975; Hairer & Wanner II, IV.10): 8 species, rate constants p (12)."""
    y1, y2, y3, y4, y5, y6, y7, y8 = (y[i] for i in range(8))
    k = [p[i] for i in range(12)]
    return ops.stack([
        -k[0] * y1 + k[1] * y2 + k[2] * y3 + k[3],
        k[0] * y1 - k[4] * y2,
        -k[5] * y3 + k[1] * y4 + k[6] * y5,
        k[2] * y2 + k[0] * y3 - k[7] * y4,
        -k[8] * y5 + k[1] * y6 + k[1] * y7,
        -k[9] * y6 * y8 + k[10] * y4 + k[0] * y5 - k[1] * y6 + k[10] * y7,
        k[9] * y6 * y8 - k[11] * y7,
        -k[9] * y6 * y8 + k[11] * y7,
    ])  # fmt: skip


HIRES_K = np.array([1.71, 0.43, 8.32, 0.0007, 8.75, 10.03, 0.035, 1.12, 1.745, 280.0, 0.69, 1.81])
HIRES_Y0 = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0057])
HIRES_T = 321.8122
#: The test set's reference solution at t = 321.8122 (RADAU5 at tight tolerance).
HIRES_REFERENCE = (
    0.7371312573325668e-3, 0.1442485726316185e-3, 0.5888729740967575e-4,
    0.1175651343283149e-2, 0.2386356198831331e-2, 0.6238968252742796e-2,
    0.2849998395185769e-2, 0.2850001604814231e-2,
)  # fmt: skip
#: rtol 1e-6, atol 1e-8, first step 0.03.  The automatic first step (3.2e-4 here) makes
#: that step's error estimate rounding noise (local error ~1e-18), so the next step size,
#: and with it y8(T) to ~3e-9, depended on each backend's rounding (JAX against torch);
#: from h0 = 0.03 the values agree to 1e-13, the gradients to 9e-11 (measured; within the
#: rounding noise ``simdiff.check`` measures for this gradient, ~3e-9).
HIRES_SOLVER = Rodas5P(rtol=1e-6, atol=1e-8, max_steps=1000, h0=0.03)


def sensitivities(
    rhs: Callable, jac_y: Callable, jac_p: Callable, y0: np.ndarray, x: np.ndarray,
    times: np.ndarray, method: str, rtol: float, atol: float, newton_jac: bool = False,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``y(t_i)`` and ``dy(t_i)/dx`` from ``S' = J_y S + J_x``, ``S(0) = 0`` by ``solve_ivp``.

    ``newton_jac``: give an implicit method the block-diagonal part of the augmented
    system's Jacobian, ``diag(J_y, J_y kron I)`` (the Newton iteration's matrix; the
    solution does not depend on it), instead of its finite differences.
    """
    n, m = len(y0), len(x)

    def aug(t: float, z: np.ndarray) -> np.ndarray:
        y, S = z[:n], z[n:].reshape(n, m)
        return np.concatenate([rhs(t, y, x, np), (jac_y(y, x) @ S + jac_p(y, x)).ravel()])

    def jac(t: float, z: np.ndarray) -> np.ndarray:
        jy = jac_y(z[:n], x)
        return scipy.linalg.block_diag(jy, np.kron(jy, np.eye(m)))

    import scipy.integrate  # here, not at import: listing the catalogue stays cheap
    import scipy.linalg

    z0 = np.concatenate([y0, np.zeros(n * m)])
    sol = scipy.integrate.solve_ivp(aug, (0.0, float(times[-1])), z0, method=method, rtol=rtol,
                                    atol=atol, t_eval=times,
                                    **({"jac": jac} if newton_jac else {}))  # fmt: skip
    assert sol.success, sol.message
    zs = sol.y.T
    return zs[:, :n], zs[:, n:].reshape(len(times), n, m)


def hires_jacobians(y: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(df/dy, df/dk)`` of HIRES, by hand."""
    jy = np.zeros((8, 8))
    jy[0, :3] = -k[0], k[1], k[2]
    jy[1, :2] = k[0], -k[4]
    jy[2, 2:5] = -k[5], k[1], k[6]
    jy[3, 1:4] = k[2], k[0], -k[7]
    jy[4, 4:7] = -k[8], k[1], k[1]
    jy[5, 3:8] = k[10], k[0], -k[9] * y[7] - k[1], k[10], -k[9] * y[5]
    jy[6, 5:8] = k[9] * y[7], -k[11], k[9] * y[5]
    jy[7, 5:8] = -k[9] * y[7], k[11], -k[9] * y[5]
    jk = np.zeros((8, 12))
    jk[0, :4] = -y[0], y[1], y[2], 1.0
    jk[1, [0, 4]] = y[0], -y[1]
    jk[2, [5, 1, 6]] = -y[2], y[3], y[4]
    jk[3, [2, 0, 7]] = y[1], y[2], -y[3]
    jk[4, [8, 1]] = -y[4], y[5] + y[6]
    jk[5, [9, 10, 0, 1]] = -y[5] * y[7], y[3] + y[6], y[4], -y[5]
    jk[6, [9, 11]] = y[5] * y[7], -y[6]
    jk[7, [9, 11]] = -y[5] * y[7], y[6]
    return jy, jk


#: The references of ``hires``: LSODA (SciPy) on the forward sensitivity equations at rtol
#: 1e-12, which agrees with BDF at rtol 1e-12 to 4e-12 (relative) in every element of the
#: gradient, and with the test set's y8(T) to 6e-13.
HIRES_REFERENCE_RTOL = 1e-12


@functools.lru_cache(maxsize=8)
def _hires_sensitivities(x: tuple[float, ...]) -> tuple[float, np.ndarray]:
    k = np.exp(np.asarray(x))
    ys, S = sensitivities(hires_rhs, lambda y, k: hires_jacobians(y, k)[0],
                          lambda y, k: hires_jacobians(y, k)[1], HIRES_Y0, k,
                          np.array([HIRES_T]), "LSODA", HIRES_REFERENCE_RTOL,
                          1e-4 * HIRES_REFERENCE_RTOL, newton_jac=True)  # fmt: skip
    return float(ys[-1, 7]), S[-1, 7] * k  # d y8 / d ln k = (d y8 / d k) k


def _hires_at(x: np.ndarray) -> tuple[float, np.ndarray]:
    return _hires_sensitivities(tuple(np.asarray(x, dtype=np.float64).tolist()))


def _hires_value(x: np.ndarray) -> float:
    return _hires_at(x)[0]


def _hires_grad(x: np.ndarray) -> np.ndarray:
    return _hires_at(x)[1].copy()  # a copy: the cached array stays the reference


def hires_log_rhs(t, y, p, ops):
    """HIRES with log rate constants p = ln k (finite-difference steps stay relative)."""
    return hires_rhs(t, y, ops.exp(p), ops)


def hires() -> ODEProblem:
    """HIRES, y8(321.8122) as a function of the 12 log rate constants ln k, Rodas5P."""
    return ODEProblem(
        hires_log_rhs, HIRES_Y0, (0.0, HIRES_T), np.log(HIRES_K), save_at=np.array([HIRES_T]),
        observable=lambda ys, ops: ys[-1, 7], solver=HIRES_SOLVER, name="hires",
        exact={"value": _hires_value, "grad": _hires_grad},
        check_options=CheckOptions(solver_rtol=HIRES_SOLVER.rtol, reference_rtol=1e-9),
        meta={"tags": ("ode", "small", "stiff"),
              "citation": "E. Schäfer, J. Math. Biol. 2 (1975) 41-56; E. Hairer, G. Wanner, "
              "Solving ODEs II, IV.10; F. Mazzia, C. Magherini, Test Set for IVP Solvers "
              "(release 2.4, 2008), problem HIRES",
              "literature": {"y(321.8122)": list(HIRES_REFERENCE)}},
    )  # fmt: skip


RK4_DECAY_STEPS = 20


def _rk4_decay_poly() -> np.poly1d:
    """RK4's discrete solution of y' = -k y, y(0) = 1, after N steps of h = 1/N: R(-k/N)^N in k."""
    n = RK4_DECAY_STEPS
    z = np.poly1d([-1.0 / n, 0.0])  # z = -k h
    r = 1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24
    return r**n


def rk4_decay() -> ODEProblem:
    """y' = -k y by fixed-step RK4 (20 steps): the discrete solution is a polynomial in k, exact."""
    poly = _rk4_decay_poly()
    return ODEProblem(
        lambda t, y, p, ops: -p[0] * y, np.array([1.0]), (0.0, 1.0), np.array([2.0]),
        observable=lambda ys, ops: ys[-1, 0], solver=FixedStep(n_steps=RK4_DECAY_STEPS),
        name="ode_rk4_decay",
        exact={
            "value": lambda k: poly(k[0]),
            "grad": lambda k: np.array([poly.deriv(1)(k[0])]),
            "hessian": lambda k: np.array([[poly.deriv(2)(k[0])]]),
            "derivative": lambda k, order, v: poly.deriv(order)(k[0]) * v[0] ** order
            if order
            else poly(k[0]),
        },
        meta={"tags": ("ode", "small", "closed-form"),
              "reference": "RK4 stability polynomial R(z) = 1 + z + z^2/2 + z^3/6 + z^4/24; "
              "the discrete solution after N steps is R(-k/N)^N"},
    )  # fmt: skip


_FACTORIES = {
    "ode_linear": linear,
    "ode_linear_energy": linear_energy,
    "ode_oscillator": oscillator,
    "ode_rk4_decay": rk4_decay,
    "lotka_volterra": lotka_volterra,
    "lotka_volterra_fit": lotka_volterra_fit,
    "van_der_pol": van_der_pol,
    "van_der_pol_stiff": van_der_pol_stiff,
    "lorenz63": lorenz63,
    "robertson": robertson,
    "hires": hires,
}
ENTRIES = dict(_FACTORIES)
