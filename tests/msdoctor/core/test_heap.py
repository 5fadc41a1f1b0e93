"""Freed heap pages go back to the system."""
from __future__ import annotations

import os

import numpy as np
import pytest

from msdoctor.core import heap


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_pages_freed_under_a_live_array_are_returned_by_release():
    if not heap.release():
        pytest.skip("the C library has no malloc_trim")
    arrays = [np.ones(5000) for _ in range(4000)]      # 40 KB each: from the heap, not mmap
    pinned = np.ones(5000)                               # above them: the heap cannot shrink
    del arrays[:]
    before = rss_bytes()
    assert heap.release()
    assert before - rss_bytes() > 100 * 2**20           # most of the 160 MB freed
    assert pinned.sum() == 5000


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_heap_is_released_on_the_first_idle_poll_after_reading_and_not_again_while_idle():
    clock = Clock()
    idle = heap.IdleRelease(every=2.0, clock=clock)
    assert not idle.note(False)                       # nothing read yet
    assert not idle.note(True) and not idle.note(True)
    assert idle.note(False)
    clock.t += 10
    assert not idle.note(False) and idle.count == 1   # still idle: nothing new to give back


def test_idle_releases_are_at_most_one_per_interval():
    clock = Clock()
    idle = heap.IdleRelease(every=2.0, clock=clock)
    idle.note(True)
    assert idle.note(False)
    clock.t += 1.0
    idle.note(True)
    assert not idle.note(False)                       # 1 s after the last one
    clock.t += 1.5
    assert idle.note(False) and idle.count == 2       # the pending one, once the interval passed


def test_a_snapshot_release_counts_as_the_last_release():
    clock = Clock()
    idle = heap.IdleRelease(every=2.0, clock=clock)
    idle.note(True)
    idle.now()
    assert not idle.note(False)                       # the snapshot just gave the pages back
