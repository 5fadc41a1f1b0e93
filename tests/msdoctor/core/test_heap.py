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
