"""Wait for the spool to change: inotify on Linux, a plain timeout elsewhere.

:class:`SpoolWaker` watches ``<run_dir>/events/`` (and ``run_dir`` until ``events/`` exists)
and :meth:`SpoolWaker.wait` returns as soon as a rank file is written, created, renamed or
removed, or after ``timeout`` seconds at the latest, so the sidecar reads a new line within
milliseconds without polling the disk in a tight loop. The watch is a hint only: the caller
polls the spool after every wake-up and after every timeout, so a missed or coalesced event
costs at most one ``timeout`` of latency, never a line.

inotify is reached through ``ctypes`` (the three libc calls ``inotify_init1``,
``inotify_add_watch``, ``read``); where it is missing (not Linux, no libc, out of watches)
:meth:`wait` sleeps the timeout, as the sidecar always did. ``MSDOCTOR_WAKE=poll`` in the
environment turns the watch off (a spool on a network filesystem written from another host
raises no inotify events here; the timeout still reads it).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from msdoctor.wire.layout import EVENTS_DIR

# <sys/inotify.h>
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x002, 0x004, 0x008
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x040, 0x080, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED = 0x400, 0x800, 0x8000
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
_CHANGES = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
            | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF)
_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED
_READ_BYTES = 64 << 10


def _libc() -> Optional[Any]:
    """libc with the inotify calls, or None (not Linux, or no such symbols)."""
    if not sys.platform.startswith("linux") or os.environ.get("MSDOCTOR_WAKE") == "poll":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


class SpoolWaker:
    """Wake on a change under ``run_dir/events`` (see the module docstring)."""

    def __init__(self, run_dir: os.PathLike | str) -> None:
        self.run_dir = Path(run_dir)
        self.events = self.run_dir / EVENTS_DIR
        self._fd = -1
        self._watching: Optional[Path] = None     # the directory watched now
        self._wd = -1
        libc = _libc()
        if libc is not None:
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd >= 0:
                self._libc, self._fd = libc, fd

    @property
    def native(self) -> bool:
        """True when changes wake :meth:`wait` (inotify); False: it sleeps the timeout."""
        return self._fd >= 0

    def wait(self, timeout: float) -> bool:
        """Return once something under ``events/`` changed (True) or after ``timeout`` s
        (False); events already queued return at once."""
        if self._fd < 0 or not self.watch():
            time.sleep(max(0.0, timeout))
            return False
        try:
            readable, _, _ = select.select([self._fd], [], [], max(0.0, timeout))
        except (OSError, ValueError):
            return False
        if not readable:
            return False
        self._drain()
        return True

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1

    def watch(self) -> bool:
        """Watch ``events/`` (or ``run_dir`` until it exists); False when neither can be.
        Called before each poll as well: a line written after the poll read its file, but
        before the first :meth:`wait`, is then not missed."""
        target = self.events if self.events.is_dir() else self.run_dir
        if self._watching == target:
            return True
        if self._wd >= 0:
            self._libc.inotify_rm_watch(self._fd, self._wd)
            self._wd, self._watching = -1, None
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(str(target)), _CHANGES)
        if wd < 0:
            if ctypes.get_errno() in (errno.ENOSPC, errno.EMFILE, errno.ENOMEM):
                self.close()                      # out of watches: sleep the timeout instead
            return False
        self._wd, self._watching = wd, target
        return True

    def _drain(self) -> None:
        """Read the queued events; forget a watch whose directory went away."""
        while True:
            try:
                data = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                return
            except OSError:
                return
            if not data:
                return
            at = 0
            while at + 16 <= len(data):         # struct inotify_event: wd, mask, cookie, len
                wd = int.from_bytes(data[at:at + 4], sys.byteorder, signed=True)
                mask = int.from_bytes(data[at + 4:at + 8], sys.byteorder)
                size = int.from_bytes(data[at + 12:at + 16], sys.byteorder)
                if wd == self._wd and mask & _GONE:
                    self._wd, self._watching = -1, None
                at += 16 + size


class PollPacer:
    """How long a poll woken by a change waits after the polls before it.

    At least ``min_gap``, and as long as the longest poll that found input since the last
    wake-up took, counted from the end of the last poll: changes that never stop take at most
    half of the sidecar's time, while a long catch-up (many quick polls back to back) delays
    the next alert by one poll's time, not by the whole catch-up's.
    """

    def __init__(self, min_gap: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_gap, self.clock = min_gap, clock
        self.longest = 0.0
        self.ended = clock()

    def polled(self, started: float, found: bool) -> None:
        """A poll that began at ``started`` (``clock`` time) ended now; ``found``: it read
        something."""
        self.ended = self.clock()
        if found:
            self.longest = max(self.longest, self.ended - started)

    def gap(self) -> float:
        """Seconds still to wait before the next poll (0: poll now); a new streak begins."""
        wait = max(self.min_gap, self.longest) - (self.clock() - self.ended)
        self.longest = 0.0
        return max(0.0, wait)
