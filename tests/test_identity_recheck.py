"""The shallow identity recheck (simdiff.core.fingerprint.Identity) watches each thing that can
change in place once, skips temporaries no one else can change, and still sees every
in-place change of what defines a problem."""

from __future__ import annotations

import numpy as np
import pytest

import simdiff
from simdiff.core.fingerprint import Identity


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


def test_a_problem_attribute_replaced_is_seen_by_its_definition_version() -> None:
    """A Problem's own attributes are watched by one counter its __setattr__ bumps."""
    p = simdiff.Problem(lambda x, ops: ops.sum(x), x0=np.ones(2))
    ident = Identity()
    first = ident.current(p)
    assert all(type(e[1]) is not dict or e[1] is not vars(p) for e in ident._watch.items)
    p.fn = lambda x, ops: 2.0 * ops.sum(x)
    second = ident.current(p)
    assert second != first
    p.x0 = np.zeros(2)
    assert ident.current(p) != second


def test_a_frozen_dataclass_state_is_not_watched_but_what_it_holds_is() -> None:
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        weights: list

    holder = Frozen([1.0, 2.0])
    p = _problem(holder, lambda h: h.weights[0])
    ident = Identity()
    first = ident.current(p)
    assert not any(e[1] is vars(holder) for e in ident._watch.items)
    holder.weights[0] = 3.0  # the list it holds changes in place
    assert ident.current(p) != first


@pytest.mark.parametrize(
    "change",
    ["grow", "shrink", "replace_equal", "reorder", "move_between_dicts", "cell", "default"],
)
def test_every_kind_of_in_place_change_is_seen(change) -> None:
    """The flat comparison (lengths, then identities in one pass) sees a sequence that grew,
    shrank, or holds an equal but distinct object, and an entry moved from one dict to
    another (same total length, same objects)."""
    a: dict = {"k": [1.0]}
    b: dict = {}
    scale = [2.0]

    def fn(x, ops, factor=1.0):
        return factor * scale[0] * a.get("k", [0.0])[0] * b.get("k", [1.0])[0] * ops.sum(x)

    p = simdiff.Problem(fn, x0=np.ones(2))
    ident = Identity()
    first = ident.current(p)
    if change == "grow":
        scale.append(3.0)
    elif change == "shrink":
        a.pop("k")
    elif change == "replace_equal":
        a["k"] = [1.0]  # equal, distinct: the new list must be the one watched
    elif change == "reorder":
        a["j"] = [1.0]
        ident = Identity()
        first = ident.current(p)
        a["k"] = a.pop("k")
    elif change == "move_between_dicts":
        b["k"] = a.pop("k")
    elif change == "cell":
        scale = [2.0]  # the closure cell now holds another list
    elif change == "default":
        fn.__defaults__ = tuple([1.0])  # an equal but distinct tuple
    assert not ident._watch.unchanged()
    if change in ("replace_equal", "reorder", "cell", "default"):
        assert ident.current(p) == first  # nothing that defines it changed ...
        a["k"][0] = 5.0 if change != "cell" else 1.0
        scale[0] = 7.0  # ... but the objects now held are the ones watched
        assert ident.current(p) != first


def test_the_cache_skips_what_no_derivative_reads_but_not_what_they_do() -> None:
    """Exact references and check options are not rechecked on every call (no derivative
    reads them; stored results are keyed by the whole fingerprint); fn's closure is."""
    scale = [1.0]
    exact_scale = [1.0]
    p = simdiff.Problem(
        lambda x, ops: scale[0] * ops.sum(x**2),
        x0=np.ones(2),
        exact={"grad": lambda x: exact_scale[0] * 2 * x},
    )
    first = simdiff.grad(p)
    np.testing.assert_allclose(first, [2.0, 2.0], rtol=1e-12)
    generation = p.cache.generation
    exact_scale[0] = 3.0
    simdiff.grad(p)
    assert p.cache.generation == generation  # nothing built was dropped
    scale[0] = 2.0
    np.testing.assert_allclose(simdiff.grad(p), [4.0, 4.0], rtol=1e-12)
    assert p.cache.generation > generation


def _ode_problem(max_steps: int, exact_scale: list) -> object:
    from simdiff.ode import ODEProblem

    return ODEProblem(
        lambda t, y, p, ops: -p[0] * y, [1.0], (0.0, 1.0), [2.0],
        observable=lambda ys, ops: ys[-1, 0], solver="dopri5", rtol=1e-6, atol=1e-9,
        max_steps=max_steps, exact={"value": lambda x: exact_scale[0] * np.exp(-x[0])},
    )  # fmt: skip


def test_an_ode_fn_naming_its_problem_watches_the_settings_not_the_exact_references() -> None:
    """An ODE's fn names its problem: the cache's view (the problem less its exact references)
    is hashed once, so the exact references are not watched; a setting replaced after the
    first check is seen on the next."""
    exact_scale = [1.0]
    p = _ode_problem(50, exact_scale)
    generation = p.cache.refresh()  # what every derivative call runs first
    watched = p.cache._identity.watch
    assert watched is not None
    assert not any(e[1] is p.exact for e in watched.items)
    exact_scale[0] = 2.0
    assert p.cache.refresh() == generation
    p.solver = _ode_problem(500, exact_scale).solver  # another max_steps
    assert p.cache.refresh() > generation


def test_a_term_energy_attribute_replaced_is_seen_by_its_definition_version() -> None:
    """A TermEnergy's own attributes are one counter (its __setattr__), not a dict of them."""
    from simdiff.pes import term_energy

    def bond(r, ops):
        d = r[..., 1, :] - r[..., 0, :]
        return (ops.sum(d * d, axis=-1) - 1.0) ** 2

    pos = np.array([[0.0, 0.0, 0.0], [1.1, 0.0, 0.0], [0.0, 1.2, 0.0]])
    p = term_energy(bond, np.array([[0, 1], [1, 2]]), pos)
    g = simdiff.grad(p)
    watched = p.cache._identity.watch
    assert watched is not None and not any(e[1] is vars(p.fn) for e in watched.items)
    p.fn.term = lambda r, ops: 2.0 * bond(r, ops)  # the term, replaced
    np.testing.assert_allclose(simdiff.grad(p), 2.0 * g, rtol=1e-12)


def test_the_evaluation_state_is_rechecked_on_every_call() -> None:
    """``fn.version`` (a neighbour list rebuilt) drops what was built on the next call, also
    where nothing else about fn is watched (a function's own attributes)."""

    def fn(x, ops):
        return ops.sum(x**2)

    fn.version = 0  # type: ignore[attr-defined]
    p = simdiff.Problem(fn, x0=np.ones(2))
    simdiff.grad(p)
    generation = p.cache.generation
    simdiff.grad(p)
    assert p.cache.generation == generation
    fn.version = 1  # type: ignore[attr-defined]
    simdiff.grad(p)
    assert p.cache.generation == generation + 1


def test_a_versioned_instance_is_watched_by_its_counter_and_hashed_without_it() -> None:
    """A Versioned instance (a pair term) is one counter in the recheck, not its class and
    attributes; the counter is not part of its fingerprint (two equal terms set up by
    different numbers of assignments are the same)."""
    from simdiff.core.fingerprint import fingerprint
    from simdiff.pes import lennard_jones
    from simdiff.pes.cluster import PairTerm

    a, b = PairTerm(lennard_jones), PairTerm(lennard_jones)
    b.box = None  # one assignment more: another counter, the same definition
    pa = _problem(a, lambda h: 1.0)
    assert fingerprint(pa) == fingerprint(_problem(b, lambda h: 1.0))
    ident = Identity()
    first = ident.current(pa)
    assert not any(e[1] is vars(a) for e in ident._watch.items)
    a.box = np.eye(3) * 10.0  # replaced after the first check
    assert ident.current(pa) != first
