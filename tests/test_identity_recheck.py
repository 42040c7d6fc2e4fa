"""The shallow identity recheck (simdiff._fingerprint.Identity) watches each thing that can
change in place once, skips temporaries no one else can change, and still sees every
in-place change of what defines a problem."""

from __future__ import annotations

import numpy as np
import pytest

import simdiff
from simdiff._fingerprint import Identity


class Settings:
    """An object that says what defines it, from a dict it keeps (not a temporary)."""

    def __init__(self) -> None:
        self.table = {"scale": 2.0}

    def __fingerprint__(self) -> dict:
        return self.table


class Built:
    """An object that says what defines it with a dict built on each call."""

    def __init__(self) -> None:
        self.scale = 2.0

    def __fingerprint__(self) -> dict:
        return {"scale": self.scale}


class Plain:
    def __init__(self) -> None:
        self.weights = [1.0, 2.0]


def _problem(holder, read):
    return simdiff.Problem(lambda x, ops: read(holder) * ops.sum(x), x0=np.ones(2))


def test_a_dict_kept_and_returned_by_fingerprint_is_watched() -> None:
    s = Settings()
    p = _problem(s, lambda h: h.table["scale"])
    ident = Identity()
    first = ident.current(p)
    assert ident.current(p) == first
    s.table["scale"] = 3.0  # in place: the object's __dict__ still holds the same dict
    assert ident.current(p) != first


def test_a_dict_built_by_fingerprint_is_not_watched_but_what_it_reads_is() -> None:
    b = Built()
    p = _problem(b, lambda h: h.scale)
    ident = Identity()
    first = ident.current(p)
    watched = len(ident._watch)
    assert ident.current(p) == first and len(ident._watch) == watched
    b.scale = 3.0
    assert ident.current(p) != first


def test_an_instance_state_and_its_list_changed_in_place_are_seen() -> None:
    holder = Plain()
    p = _problem(holder, lambda h: h.weights[0])
    ident = Identity()
    first = ident.current(p)
    holder.weights[0] = 5.0
    second = ident.current(p)
    assert second != first
    holder.extra = 1  # a new attribute
    assert ident.current(p) != second


@pytest.mark.parametrize("name", ["ode_rk4_decay", "heat_diffusivity", "lj13", "seed"])
def test_nothing_is_watched_twice(name) -> None:
    """A tableau reached through two solvers, a function named by several closures: one
    entry each (the recheck on every call compares each entry)."""
    import problems

    ident = Identity()
    assert ident.current(problems.get(name)) is not None
    w = ident._watch
    keys = [(id(e[0]), id(e[1])) for e in (*w.objects, *w.items, *w.values)]
    assert len(keys) == len(set(keys))
