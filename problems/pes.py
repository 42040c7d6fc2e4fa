"""Potential-energy surfaces: Lennard-Jones clusters, LJ and Morse dimers, Müller–Brown.

Literature values and citations live in ``meta``; the dimers and the
Müller–Brown surface carry analytic derivatives in ``exact`` (written here in
numpy, independently of :mod:`simdiff.pes`).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

import simdiff
from simdiff.pes import MULLER_BROWN_PARAMS, cluster_problem, lennard_jones, morse, muller_brown

CCD = (
    "D. J. Wales and J. P. K. Doye, J. Phys. Chem. A 101, 5111 (1997); "
    "Cambridge Cluster Database, https://www-wales.ch.cam.ac.uk/CCD.html"
)
MB = "K. Müller and L. D. Brown, Theor. Chim. Acta 53, 75 (1979)"

#: Global-minimum energies of LJ_N in reduced units (Cambridge Cluster Database).
LJ_GLOBAL_MINIMA = {7: -16.505384, 13: -44.326801, 38: -173.928427}

# --------------------------------------------------------------------------- dimers


def _dimer_parts(x):
    d = x[3:] - x[:3]
    r = float(np.linalg.norm(d))
    return d / r, r


def _dimer_value(x, radial):
    return radial(_dimer_parts(x)[1], 0)


def _dimer_grad(x, radial):
    u, r = _dimer_parts(x)
    return np.concatenate([-radial(r, 1) * u, radial(r, 1) * u])


def _dimer_hessian(x, radial):
    u, r = _dimer_parts(x)
    uu = np.outer(u, u)
    k = radial(r, 2) * uu + radial(r, 1) / r * (np.eye(3) - uu)
    return np.block([[k, -k], [-k, k]])


def _dimer_exact(radial):
    """value / grad / Hessian of E(|r1 - r0|), x = (r0, r1) flat (6,); ``radial(r, k)`` = E^(k)(r).

    Module-level functions bound with ``functools.partial``, so the problems pickle.
    """
    return {"value": functools.partial(_dimer_value, radial=radial),
            "grad": functools.partial(_dimer_grad, radial=radial),
            "hessian": functools.partial(_dimer_hessian, radial=radial)}  # fmt: skip


def _lj_radial(r, k):
    return [4.0 * (r**-12 - r**-6), 4.0 * (-12.0 * r**-13 + 6.0 * r**-7),
            4.0 * (156.0 * r**-14 - 42.0 * r**-8)][k]  # fmt: skip


def lj_dimer() -> simdiff.Problem:
    """LJ dimer at r = 1.05 (reduced units); exact Hessian from E'(r) and E''(r)."""
    return cluster_problem(
        lennard_jones,
        [[0.0, 0.0, 0.0], [0.6, 0.7, -0.5]],
        name="lj-dimer",
        exact=_dimer_exact(_lj_radial),
        meta={
            "tags": ("pes", "small", "closed-form"),
            "minimum_distance": 2 ** (1 / 6),
            "minimum_energy": -1.0,
            "citation": "J. E. Lennard-Jones, Proc. R. Soc. Lond. A 106, 463 (1924)",
        },
    )


MORSE = {"D": 0.75, "a": 1.8, "r0": 1.2}


def _morse_radial(r, k):
    D, a, r0 = MORSE["D"], MORSE["a"], MORSE["r0"]
    u = np.exp(-a * (r - r0))
    return [D * (u * u - 2 * u), 2 * a * D * (u - u * u), 2 * a * a * D * (2 * u * u - u)][k]


def morse_dimer() -> simdiff.Problem:
    """Morse dimer (D=0.75, a=1.8, r0=1.2), masses 1 and 2; exact Hessian, harmonic frequency."""
    D, a = MORSE["D"], MORSE["a"]
    mu = 1.0 * 2.0 / 3.0
    return cluster_problem(
        functools.partial(morse, **MORSE),
        [[0.1, -0.2, 0.0], [0.9, 0.5, 0.6]],
        masses=[1.0, 2.0],
        name="morse-dimer",
        exact=_dimer_exact(_morse_radial),
        meta={
            "tags": ("pes", "small", "closed-form"),
            "params": dict(MORSE),
            "minimum_distance": MORSE["r0"],
            "minimum_energy": -D,
            "harmonic_frequency": float(np.sqrt(2 * D * a * a / mu)),
            "cubic_constant_r": -6.0 * D * a**3,
            "citation": "P. M. Morse, Phys. Rev. 34, 57 (1929)",
        },
    )


#: H2 Morse parameters in eV and Angstrom (De, a, re), masses in amu.
H2 = {"D": 4.7446, "a": 1.9426, "r0": 0.74144}
H2_CITATION = ("K. P. Huber and G. Herzberg, Molecular Spectra and Molecular Structure IV: "
               "Constants of Diatomic Molecules (1979): De = 4.7446 eV, re = 0.74144 A, "
               "we = 4401.21 cm^-1; Morse a = 1.9426 A^-1")  # fmt: skip


def morse_h2() -> simdiff.Problem:
    """H2 as a Morse dimer (eV, Angstrom, amu): a real-units check of the cm^-1 conversion."""
    return cluster_problem(
        functools.partial(morse, **H2),
        [[0.0, 0.0, 0.0], [0.0, 0.0, H2["r0"]]],
        masses=[1.00782503, 1.00782503],
        name="morse-h2",
        # x0 is the minimum (for the harmonic wavenumber), where the gradient is zero up to
        # rounding: check a stretched, tilted bond instead
        check_options=simdiff.CheckOptions(x=(0.01, -0.02, 0.0, 0.03, 0.01, 1.05 * H2["r0"])),
        meta={
            "tags": ("pes", "small"),
            "units": {"energy": "eV", "length": "angstrom", "mass": "amu"},
            "harmonic_wavenumber_cm": 4401.21,
            "rtol_wavenumber": 2e-3,
            "citation": H2_CITATION,
        },
    )


# --------------------------------------------------------------------------- LJ clusters

R_NN = 2 ** (1 / 6)  # LJ pair-minimum distance


def pentagonal_bipyramid() -> np.ndarray:
    """LJ7 start: pentagonal bipyramid with nearest-neighbour distances near 2**(1/6)."""
    rho = R_NN / (2 * np.sin(np.pi / 5))
    h = np.sqrt(R_NN**2 - rho**2)
    ring = [
        [rho * np.cos(2 * np.pi * k / 5), rho * np.sin(2 * np.pi * k / 5), 0.0] for k in range(5)
    ]
    return np.array([*ring, [0.0, 0.0, h], [0.0, 0.0, -h]])


def icosahedron(perturb: float = 0.05, seed: int = 13) -> np.ndarray:
    """LJ13 start: centred icosahedron (radius 1.1) with a seeded random perturbation."""
    phi = (1 + np.sqrt(5)) / 2
    v = []
    for s1, s2 in itertools.product((-1.0, 1.0), repeat=2):
        v += [[0.0, s1, s2 * phi], [s1, s2 * phi, 0.0], [s2 * phi, 0.0, s1]]
    v = np.array(v) / np.sqrt(1 + phi**2) * 1.1
    pos = np.vstack([np.zeros(3), v])
    return pos + perturb * np.random.default_rng(seed).standard_normal(pos.shape)


def fcc_cluster(n: int, spacing: float = 1.1) -> np.ndarray:
    """The ``n`` fcc lattice sites nearest an octahedral hole, nearest-neighbour ``spacing``.

    ``n = 38`` gives the truncated octahedron (6 + 8 + 24 sites), the LJ38
    global minimum; other ``n`` give compact fcc fragments (benchmark geometries).
    Ties at the last shell are broken by a fixed lexicographic order.
    """
    k = int(np.ceil(n ** (1 / 3))) + 3
    g = np.array([p for p in itertools.product(range(-k, k + 1), repeat=3) if sum(p) % 2 == 0])
    rel = g - np.array([1, 0, 0])
    d2 = (rel**2).sum(axis=1)
    order = np.lexsort((rel[:, 2], rel[:, 1], rel[:, 0], d2))
    return rel[order[:n]] * (spacing / np.sqrt(2.0))


class LJEnergyNumpy:
    """LJ cluster energy in plain numpy, independent of simdiff.pes.

    ``LJEnergyNumpy(n_atoms)(x)`` takes ``x`` of shape ``(3 n_atoms, ...)``:
    trailing axes are independent points, as ``scipy.differentiate`` requires.
    """

    def __init__(self, n_atoms: int) -> None:
        self.n_atoms = n_atoms

    def __call__(self, x):
        i, j = np.triu_indices(self.n_atoms, 1)
        pos = x.reshape(self.n_atoms, 3, *x.shape[1:])
        d = pos[i] - pos[j]
        s6 = 1.0 / np.sum(d * d, axis=1) ** 3
        return np.sum(4 * (s6 * s6 - s6), axis=0)


def lj_cluster(n: int, positions: np.ndarray, tags: tuple[str, ...]) -> simdiff.Problem:
    meta = {"tags": ("pes", *tags), "units": "reduced (epsilon = sigma = m = 1)", "citation": CCD}
    if n in LJ_GLOBAL_MINIMA:
        meta["global_minimum_energy"] = LJ_GLOBAL_MINIMA[n]
        meta["literature_rtol"] = 1e-6  # the quoted energies' precision, not a check tolerance
    else:
        meta["note"] = "compact fcc fragment for benchmarks; not the global minimum"
    exact = {"value": LJEnergyNumpy(n)}
    return cluster_problem(lennard_jones, positions, name=f"lj{n}", exact=exact, meta=meta)


# --------------------------------------------------------------------------- Müller–Brown


def _mb_terms(x):
    p = {k: np.asarray(v) for k, v in MULLER_BROWN_PARAMS.items()}
    dx, dy = x[0] - p["x0"], x[1] - p["y0"]
    w = p["A"] * np.exp(p["a"] * dx**2 + p["b"] * dx * dy + p["c"] * dy**2)
    gu = np.stack([2 * p["a"] * dx + p["b"] * dy, p["b"] * dx + 2 * p["c"] * dy])  # (2, 4)
    return p, w, gu


def _mb_value(x):
    return float(np.sum(_mb_terms(x)[1]))


def _mb_grad(x):
    _, w, gu = _mb_terms(x)
    return gu @ w


def _mb_hessian(x):
    p, w, gu = _mb_terms(x)
    h = np.einsum("k,ik,jk->ij", w, gu, gu)
    h += np.array(
        [[np.sum(w * 2 * p["a"]), np.sum(w * p["b"])], [np.sum(w * p["b"]), np.sum(w * 2 * p["c"])]]
    )
    return h


def muller_brown_entry() -> simdiff.Problem:
    """Müller–Brown surface with analytic derivatives and its literature stationary points."""
    return muller_brown(
        (-0.5, 1.5),
        exact={
            "value": _mb_value,
            "grad": _mb_grad,
            "hessian": _mb_hessian,
        },
        meta={
            "tags": ("pes", "small", "closed-form"),
            "citation": MB,
            # (x, y, V) as quoted in the literature, 3 decimals in x, y and 2 in V
            "minima": [
                (-0.558, 1.442, -146.70),
                (0.623, 0.028, -108.17),
                (-0.050, 0.467, -80.77),
            ],
            "saddles": [(-0.822, 0.624, -40.66), (0.212, 0.293, -72.25)],
            "atol_position": 1e-3,
            "atol_energy": 1e-2,
        },
    )


ENTRIES = {
    "lj-dimer": lj_dimer,
    "morse-dimer": morse_dimer,
    "morse-h2": morse_h2,
    "lj7": lambda: lj_cluster(7, pentagonal_bipyramid() * 1.02, ("small",)),
    "lj13": lambda: lj_cluster(13, icosahedron(), ("small",)),
    "lj38": lambda: lj_cluster(38, fcc_cluster(38), ("large",)),
    "lj75": lambda: lj_cluster(75, fcc_cluster(75), ("large",)),
    "lj150": lambda: lj_cluster(150, fcc_cluster(150), ("large",)),
    "muller-brown": muller_brown_entry,
}
