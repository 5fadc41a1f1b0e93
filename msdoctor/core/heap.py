"""Give the heap's free memory back to the system.

A poll of many ranks allocates and frees thousands of arrays of tens of kilobytes (each
rank's window points). glibc's allocator keeps the freed pages in the process: after
10k steps of 1024 ranks the sidecar's RSS was ~1.5x its live memory. ``malloc_trim``
returns them; elsewhere (another C library) :func:`release` does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any, Optional

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
