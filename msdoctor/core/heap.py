"""Give the heap's free memory back to the system.

A poll of many ranks allocates and frees thousands of arrays of tens of kilobytes (each
rank's window points). glibc's allocator keeps the freed pages in the process: after
10k steps of 1024 ranks the sidecar's RSS was ~1.5x its live memory. ``malloc_trim``
returns them; elsewhere (another C library) :func:`release` does nothing.

:class:`IdleRelease` does it when a reader goes idle after reading: the pages a drain of a
large spool freed go back at its end rather than at the next snapshot (at 256 ranks x 10k
steps, 318 of the process's 769 MiB were such pages; the trim took 40 ms, 4 ms with nothing
to return).

:func:`collector_paused` keeps the cyclic garbage collector out of a snapshot's save and load:
they make and drop hundreds of thousands of containers, none in a cycle, and each
collection they set off walks the whole state (at 1024 ranks, half of the engine's save).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import time
from typing import Any, Callable, Iterator, Optional

_libc: Optional[Any] = None
_loaded = False


def _trim_function() -> Optional[Any]:
    global _libc, _loaded
    if not _loaded:
        _loaded = True
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc = libc.malloc_trim
            _libc.argtypes, _libc.restype = [ctypes.c_size_t], ctypes.c_int
        except (OSError, AttributeError):
            _libc = None
    return _libc


def release() -> bool:
    """Return the heap's free pages to the system; True if the C library could."""
    trim = _trim_function()
    if trim is None:
        return False
    return bool(trim(0))


class IdleRelease:
    """Calls :func:`release` on the first idle poll after polls that read something, at most
    once per ``every`` seconds (a live run that goes idle between its steps trims rarely)."""

    def __init__(self, every: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.clock = every, clock
        self.pending = False              # something was read since the last release
        self.last = -float("inf")
        self.count = 0                    # releases done

    def note(self, read: bool) -> bool:
        """After a poll (``read``: it read something); True when it released the heap."""
        if read:
            self.pending = True
            return False
        if not self.pending or self.clock() - self.last < self.every:
            return False
        self.now()
        return True

    def now(self) -> None:
        """Release the heap now (e.g. after a snapshot); the next idle release waits."""
        release()
        self.pending, self.last = False, self.clock()
        self.count += 1


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (reference counting still frees)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
