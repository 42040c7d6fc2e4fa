"""simdiff.evidence._memory.release_free_memory: what C7's memory probe calls before it measures."""

from __future__ import annotations

import ctypes

import pytest

from simdiff.evidence._memory import release_free_memory, rss

MB = 2**20


def test_freed_heap_memory_stays_resident_until_it_is_released() -> None:
    """Freed blocks inside the C heap stay resident (a later measurement would see them
    reused, not allocated); released, the resident set shrinks by about their size."""
    if rss() < 0 or not release_free_memory():
        pytest.skip("needs /proc/self/statm and glibc's malloc_trim")
    # 120 MB of heap in 100 KB blocks, touched; every other one is freed, so each freed
    # block lies between two live ones (never the heap's top, which free() gives back)
    blocks = [bytearray(b"x" * 100_000) for _ in range(1200)]
    keepers = blocks[1::2]
    held = rss()
    del blocks[::2], blocks
    freed = rss()
    assert held - freed < 20 * MB  # most of the freed 60 MB is still resident
    release_free_memory()
    assert freed - rss() > 40 * MB  # and goes back to the system when released
    del keepers


@pytest.mark.parametrize("error", [OSError, AttributeError, TypeError])
def test_without_malloc_trim_nothing_is_released(monkeypatch, error) -> None:
    """No glibc (AttributeError: no ``malloc_trim``), no C library (OSError), or no
    ``CDLL(None)`` at all (TypeError, as on Windows): False, not an exception."""

    def unavailable(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise error("not here")

    monkeypatch.setattr(ctypes, "CDLL", unavailable)
    assert release_free_memory() is False
