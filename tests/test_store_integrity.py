"""Damaged store entries are never served: checksums, keys, and a complete run that accepts repairs.

A flipped bit in a stored array, two entry files swapped, and an entry deleted after a
truncation: reading raises :class:`~simdiff.StoreError` naming the file, and a sweep resumed
over such an entry recomputes that chunk (on both backends) and returns the right values.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

import simdiff
from simdiff.store import Store, _entry_file, checksum

PTS = np.array([[1.0, 2.0], [2.0, 3.0], [0.5, 1.5], [3.0, 1.0]])


def _problem() -> simdiff.Problem:
    return simdiff.Problem(lambda x, ops: ops.sum(x**2) * x[0], x0=np.ones(2), name="cubic")


def _exact_value(p: np.ndarray) -> np.ndarray:
    return np.sum(p**2, axis=1) * p[:, 0]


def _chunk_files(store: Path, run: str) -> list[Path]:
    out = []
    for f in sorted((store / "runs" / run / "entries").glob("*.h5")):
        with h5py.File(f, "r") as h:
            if h.attrs["kind"] == "chunk":
                out.append(f)
    return out


def _flip_one_bit(path: Path, dataset: str) -> None:
    """Flip the lowest bit of the first byte of ``dataset``'s raw data in the file itself."""
    with h5py.File(path, "r") as h:
        offset = h[dataset].id.get_offset()
    assert offset is not None  # contiguous storage
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 1
    path.write_bytes(bytes(raw))


def test_checksum_sees_name_dtype_shape_and_bytes() -> None:
    a = {"v": np.arange(4.0)}
    assert checksum(a) == checksum({"v": np.arange(4.0)})
    assert checksum(a) != checksum({"w": np.arange(4.0)})
    assert checksum(a) != checksum({"v": np.arange(4.0).astype(np.float32)})
    assert checksum(a) != checksum({"v": np.arange(4.0).reshape(2, 2)})
    flipped = np.arange(4.0)
    flipped.view(np.uint8)[0] ^= 1
    assert checksum(a) != checksum({"v": flipped})


def test_a_flipped_bit_is_a_store_error_naming_the_file(tmp_path: Path) -> None:
    db = Store(tmp_path / "s")
    run = db.start_run("t", {})
    db.put(run, "p", "k", "c", {"note": 1}, arrays={"v": np.array([4.316, 1.0])})
    (f,) = (tmp_path / "s" / "runs" / run / "entries").glob("*.h5")
    _flip_one_bit(f, "v")
    with pytest.raises(simdiff.StoreError, match=f"{f.name}.*checksum"):
        db.get(run, "p", "k", "c")
    with pytest.raises(simdiff.StoreError, match="checksum"):
        db.entries(run)
    # without arrays the record is still readable (nothing array-valued is served)
    assert db.get(run, "p", "k", "c", arrays=False)["record"] == {"note": 1}


def test_an_entry_under_another_keys_name_is_refused(tmp_path: Path) -> None:
    db = Store(tmp_path / "s")
    run = db.start_run("t", {})
    db.put(run, "p", "k", "a", {}, arrays={"v": np.array([1.0])})
    db.put(run, "p", "k", "b", {}, arrays={"v": np.array([2.0])})
    fa, fb = (tmp_path / "s" / "runs" / run / "entries" / n for n in _names(db, run))
    da, dbytes = fa.read_bytes(), fb.read_bytes()
    fa.write_bytes(dbytes)
    fb.write_bytes(da)
    with pytest.raises(simdiff.StoreError, match="where .*'a'.* belongs"):
        db.get(run, "p", "k", "a")
    with pytest.raises(simdiff.StoreError, match="has another name"):
        db.entries(run)


def _names(db: Store, run: str) -> list[str]:
    return [_entry_file("p", "k", c) for c in ("a", "b")]


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_resumed_sweep_recomputes_a_chunk_with_a_flipped_bit(tmp_path: Path, backend) -> None:
    store = tmp_path / "s"
    p = _problem()
    first = simdiff.sweep(p, PTS, ("value",), chunk_size=2, store=store, backend=backend)
    np.testing.assert_allclose(first["value"], _exact_value(PTS), rtol=1e-13)
    files = _chunk_files(store, first.run)
    assert len(files) == 2
    _flip_one_bit(files[0], "value")
    again = simdiff.sweep(p, PTS, ("value",), chunk_size=2, store=store, backend=backend)
    assert (again.chunks_resumed, again.chunks_computed) == (1, 1)
    np.testing.assert_allclose(again["value"], _exact_value(PTS), rtol=1e-13)
    assert np.all(again.status == 0)
    # the repaired entry is whole again: a third sweep resumes both chunks
    third = simdiff.sweep(p, PTS, ("value",), chunk_size=2, store=store, backend=backend)
    assert (third.chunks_resumed, third.chunks_computed) == (2, 0)
    np.testing.assert_allclose(third["value"], _exact_value(PTS), rtol=1e-13)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_swapped_chunk_files_are_recomputed_not_served(tmp_path: Path, backend) -> None:
    store = tmp_path / "s"
    p = _problem()
    first = simdiff.sweep(p, PTS, ("value",), chunk_size=2, store=store, backend=backend)
    f0, f1 = _chunk_files(store, first.run)
    b0, b1 = f0.read_bytes(), f1.read_bytes()
    f0.write_bytes(b1)
    f1.write_bytes(b0)
    again = simdiff.sweep(p, PTS, ("value",), chunk_size=2, store=store, backend=backend)
    assert (again.chunks_resumed, again.chunks_computed) == (0, 2)
    np.testing.assert_allclose(again["value"], _exact_value(PTS), rtol=1e-13)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_deleted_entry_of_a_complete_run_is_recomputed_and_kept(tmp_path: Path, backend) -> None:
    """The StoreError for a truncated entry says to delete the file; after that, resuming works."""
    store = tmp_path / "s"
    p = _problem()
    first = simdiff.sweep(p, PTS, ("value",), chunk_size=2, store=store, backend=backend)
    f0 = _chunk_files(store, first.run)[0]
    f0.write_bytes(f0.read_bytes()[:100])  # truncated: refused with advice to delete it
    with pytest.raises(simdiff.StoreError, match="delete this file"):
        Store(store).entries(first.run)
    f0.unlink()
    again = simdiff.sweep(p, PTS, ("value",), chunk_size=2, store=store, backend=backend)
    assert (again.chunks_resumed, again.chunks_computed) == (1, 1)
    np.testing.assert_allclose(again["value"], _exact_value(PTS), rtol=1e-13)
    third = simdiff.sweep(p, PTS, ("value",), chunk_size=2, store=store, backend=backend)
    assert (third.chunks_resumed, third.chunks_computed) == (2, 0)


def test_a_complete_run_still_refuses_a_new_or_intact_entry(tmp_path: Path) -> None:
    db = Store(tmp_path / "s")
    run = db.start_run("t", {})
    db.put(run, "p", "k", "c", {}, arrays={"v": np.array([1.0])})
    db.finish_run(run)
    with pytest.raises(simdiff.StoreError, match="complete and closed"):
        db.put(run, "p", "k", "c", {}, arrays={"v": np.array([2.0])})
    with pytest.raises(simdiff.StoreError, match="complete and closed"):
        db.put(run, "p", "k", "c", {}, arrays={"v": np.array([2.0])}, repair=True)
    with pytest.raises(simdiff.StoreError, match="complete and closed"):
        db.put(run, "p", "k", "new", {}, arrays={"v": np.array([2.0])})
    assert db.get(run, "p", "k", "c")["arrays"]["v"][0] == 1.0
