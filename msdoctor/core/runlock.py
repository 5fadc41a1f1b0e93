"""One sidecar per run directory: an exclusive lock on ``<run_dir>/.msdoctor/sidecar.lock``.

``msdoctor serve`` takes it before it touches anything in the run directory and holds it
for its lifetime (the kernel releases it when the process ends, ``kill -9`` included). A
second sidecar on the same directory is refused with the holder's pid: two would journal
and notify every transition twice.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Optional

from msdoctor.wire.errors import MsdoctorError
from msdoctor.wire.files import FILE_MODE, make_dir, open_regular
from msdoctor.wire.layout import state_dir

LOCK_FILE = "sidecar.lock"


class RunLocked(MsdoctorError):
    """Another process holds the run directory's lock."""


class RunLock:
    """The exclusive lock of one run directory (see the module docstring)."""

    def __init__(self, run_dir: os.PathLike | str) -> None:
        self.run_dir = Path(run_dir)
        self.path = state_dir(run_dir) / LOCK_FILE
        self._fd: Optional[int] = None

    def holder(self) -> Optional[int]:
        """The pid written by the process that holds (or last held) the lock."""
        try:
            with os.fdopen(open_regular(self.path), "rb") as fh:
                return int(fh.read(32).split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def acquire(self) -> "RunLock":
        """Take the lock or raise :class:`RunLocked` naming the holder; ``OSError`` when the
        lock file cannot be created. Nothing is changed when the lock is refused."""
        if not self.path.parent.is_dir():
            make_dir(self.path.parent)
        fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE,
                          what="a regular file (the sidecar's lock)")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = self.holder()
            who = f"pid {pid}" if pid is not None else "another process"
            raise RunLocked(f"{self.run_dir} is already watched by another msdoctor serve "
                            f"({who}, holding {self.path}); one sidecar per run directory "
                            f"(a second would journal and notify every alert twice)") from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)          # closing the descriptor drops the lock
            self._fd = None
