"""Validation of the parts of a sum of terms: the index of atoms, the positions, the term.

:func:`check_index` and :func:`term_positions` check arrays; :func:`check_term`
evaluates the term function in numpy, on all terms and on one, and refuses a
function whose terms are coupled (the structured Hessian of
:mod:`simdiff.pes.terms` assumes each term depends on its own atoms only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simdiff.backends import get_backend
from simdiff.errors import InputError, InvalidIndexError, ShapeError

__all__ = ["check_index", "check_term", "term_positions"]


def check_index(index: Any, n_particles: int, what: str = "index") -> np.ndarray:
    """Validate an index array of atoms per term; return it as int64 of shape ``(m, k)``.

    Raises
    ------
    ShapeError
        Not of shape ``(m, k)`` with ``k >= 1``.
    InvalidIndexError
        Not integers, an atom out of ``0..n_particles-1``, or one atom twice in a term;
        the message names the term (row) and the atom.

    Examples
    --------
    >>> check_index([[0, 1], [1, 2]], 3).tolist()
    [[0, 1], [1, 2]]
    >>> check_index([[0, 1], [2, 2]], 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    simdiff.errors.InvalidIndexError: index: term 1 has atom 2 twice (atoms [2, 2]); the atoms ...
    """
    a = np.asarray(index)
    if a.ndim != 2 or a.shape[1] < 1:
        raise ShapeError(f"{what} must have shape (m, k): m terms of k atoms; got shape {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        else:
            raise InvalidIndexError(f"{what} must hold integer atom numbers; got dtype {a.dtype}")
    a = a.astype(np.int64)
    bad = np.argwhere((a < 0) | (a >= n_particles))
    if bad.size:
        t, j = (int(v) for v in bad[0])
        raise InvalidIndexError(
            f"{what}: term {t} refers to atom {a[t, j]} ({what}[{t}, {j}]), out of range for "
            f"{n_particles} atoms (valid 0..{n_particles - 1})"
        )
    if a.shape[1] > 1 and a.shape[0]:
        s = np.sort(a, axis=1)
        rep = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
        if rep.size:
            t = int(rep[0])
            atom = int(s[t, 1:][s[t, 1:] == s[t, :-1]][0])
            raise InvalidIndexError(
                f"{what}: term {t} has atom {atom} twice (atoms {a[t].tolist()}); the atoms "
                "of a term must be distinct"
            )
    return a


def term_positions(positions: Any, dim: int) -> np.ndarray:
    """Validate the start geometry of a sum of terms: finite, shape ``(N, dim)`` (or flat).

    Raises
    ------
    ShapeError
        Not of shape ``(N, dim)`` or ``(N * dim,)`` with ``N >= 1``.
    InputError
        A non-finite coordinate (the message names the particle).
    """
    a = np.asarray(positions, dtype=np.float64)
    if a.ndim == 1 and a.size % dim == 0:
        a = a.reshape(-1, dim)
    if a.ndim != 2 or a.shape[1] != dim or a.shape[0] == 0:
        raise ShapeError(f"positions must have shape (N, {dim}) or ({dim}N,) with N >= 1; got "
                         f"shape {np.shape(positions)}")  # fmt: skip
    if not np.all(np.isfinite(a)):
        i = int(np.flatnonzero(~np.isfinite(a).all(axis=1))[0])
        raise InputError(f"positions must be finite; particle {i} is at {a[i]}")
    return a


def check_term(term: Callable[[Any, Any], Any], index: np.ndarray, positions: np.ndarray) -> None:
    """Evaluate ``term`` in numpy on all terms and on one; raise :class:`InputError` if it fails.

    The term must return shape ``(m,)`` for ``r`` of shape ``(m, k, dim)``,
    shape ``()`` for one term's ``(k, dim)``, and finite energies at ``positions``.
    """
    if index.shape[0] == 0:
        return
    ops = get_backend("numpy").ops()
    name = getattr(term, "__name__", repr(term))
    r = positions[index]
    with np.errstate(all="ignore"):  # non-finite energies are reported below, by term
        e = np.asarray(term(r, ops))
        one = np.asarray(term(r[0], ops))
    if e.shape != (index.shape[0],):
        raise InputError(
            f"term function {name} must return one energy per term: for r of shape {r.shape} "
            f"(m terms, k atoms, dim) it returned shape {e.shape}, expected ({index.shape[0]},)"
        )
    if one.shape != ():
        raise InputError(
            f"term function {name} must return a scalar for one term: term 0 (atoms "
            f"{index[0].tolist()}) gave shape {one.shape}; index r with r[..., i, :] and reduce "
            "with axis=-1"
        )
    bad = np.flatnonzero(~np.isfinite(e))
    if bad.size:
        t = int(bad[0])
        raise InputError(
            f"term function {name} is not finite at the given positions: term {t} (atoms "
            f"{index[t].tolist()}) has energy {e[t]}"
        )
    _check_independent(term, index, r, e, ops, name)


def _check_independent(term: Callable[[Any, Any], Any], index: np.ndarray, r: np.ndarray,
                       e: np.ndarray, ops: Any, name: str) -> None:  # fmt: skip
    """Refuse a term function whose terms are coupled (it reduces over the term axis).

    The structured Hessian assumes that term ``t`` depends on ``r[t]`` alone.
    Every pair of terms is probed, with ``2 ceil(log2 m)`` evaluations: for
    each bit ``b`` of the term number, the inputs of the terms whose bit
    ``b`` is 1 (then 0) are moved (by ``1e-3 (1 + |r|)`` in a random
    direction), and the energies of the others must not change.  Two
    different terms differ in some bit, so in one of these evaluations one
    is moved and the other is not: a term that reads another's input (a
    sum, mean, max or any other reduction over the term axis, or a shift
    along it) changes by more than ``16 eps max|e|`` (rounding of the same
    elementwise operations), and :class:`InputError` names both terms.
    """
    m = index.shape[0]
    if m < 2:
        return
    rng = np.random.default_rng(20261203)
    tol = 16 * np.finfo(np.float64).eps * max(float(np.max(np.abs(e))), 1e-300)
    numbers = np.arange(m)
    for bit in range(int(m - 1).bit_length()):
        for value in (1, 0):
            moving = ((numbers >> bit) & 1) == value
            moved = r.copy()
            step = 1e-3 * (1.0 + np.abs(r[moving])) * rng.uniform(-1.0, 1.0, r[moving].shape)
            moved[moving] += step
            with np.errstate(all="ignore"):
                e1 = np.asarray(term(moved, ops), dtype=np.float64)
            change = np.where(moving, 0.0, np.abs(e1 - e))
            s = int(np.argmax(change))
            if change[s] > tol:
                # the moved term that reads: the one whose own move changes term s
                t = _culprit(term, r, e, ops, s, np.flatnonzero(moving), tol, rng)
                raise InputError(
                    f"term function {name} couples its terms: moving the atoms of term {t} "
                    f"(atoms {index[t].tolist()}) changed the energy of term {s} (atoms "
                    f"{index[s].tolist()}) by {change[s]:.3g}. Each term must depend on its own "
                    "atoms only (no sum, mean or other reduction over the term axis, axis 0 of "
                    "r[..., k, dim]); reduce over axis=-1 within a term, or write the coupled "
                    "energy as a simdiff.Problem"
                )


def _culprit(term: Callable[[Any, Any], Any], r: np.ndarray, e: np.ndarray, ops: Any, s: int,
             moved: np.ndarray, tol: float, rng: np.random.Generator) -> int:  # fmt: skip
    """A term among ``moved`` whose input, moved alone, changes term ``s`` (by halving)."""
    while len(moved) > 1:
        half = moved[: len(moved) // 2]
        trial = r.copy()
        trial[half] += 1e-3 * (1.0 + np.abs(r[half])) * rng.uniform(-1.0, 1.0, r[half].shape)
        with np.errstate(all="ignore"):
            changed = abs(float(np.asarray(term(trial, ops), dtype=np.float64)[s]) - e[s]) > tol
        moved = half if changed else moved[len(moved) // 2 :]
    return int(moved[0])
