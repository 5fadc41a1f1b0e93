"""A snapshot written by a forked child while the sidecar polls on.

Writing the state of 1024 ranks takes ~0.8 s of Python and numpy; done in line, the sidecar
reads nothing and raises no alert for that long. :class:`ForkedWrite` forks instead (as
Redis' ``BGSAVE`` does): the child sees the state as it was at the fork (copy-on-write),
writes it and exits; the parent pays the fork (page tables: tens of ms for a GiB) and polls
on. At most one child runs; its outcome is collected without blocking
(:meth:`ForkedWrite.outcome`). A child that outlives its time limit is killed and counted
as a failed save. Where ``os.fork`` is missing, or ``MSDOCTOR_SNAPSHOT_FORK=0``, callers
write in line.

Invariants: the child never returns into the caller's code (``os._exit`` always); it runs
only ``write`` and never touches the parent's files but the snapshot's own temporary file.
"""
from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from typing import Callable, Optional

log = logging.getLogger("msdoctor.sidecar")
#: environment switch: "0" writes snapshots in line (no fork)
ENV = "MSDOCTOR_SNAPSHOT_FORK"
#: a child gets at least this long, or 20 times the last save, before it is killed
MIN_LIMIT_S = 120.0
_MAX_MESSAGE = 4000


def available() -> bool:
    """Whether snapshots can be written by a forked child here."""
    return hasattr(os, "fork") and os.environ.get(ENV, "1") != "0"


@dataclass
class Outcome:
    """How a child's save ended: ``error`` is None when it was written."""

    error: Optional[str]
    seconds: float
    pid: int
    killed: bool = False


class ForkedWrite:
    """At most one forked child writing a snapshot."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.pid: Optional[int] = None
        self._pipe = -1
        self._started = 0.0
        self._limit = MIN_LIMIT_S
        self.refused = 0                    # forks that failed (the save was written in line)

    @property
    def running(self) -> bool:
        return self.pid is not None

    def start(self, write: Callable[[], object], describe: Callable[[BaseException], str],
              limit_s: float = MIN_LIMIT_S) -> bool:
        """Fork; the child runs ``write`` and exits (``describe`` words what it raised).
        False when no child could be made (no memory, no process or file slot left): the
        caller writes in line; the first such failure is logged."""
        assert self.pid is None, "one snapshot child at a time"
        try:
            read_end, write_end = os.pipe()
        except OSError as exc:
            return self._not_forked(exc)
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(read_end)
            os.close(write_end)
            return self._not_forked(exc)
        if pid == 0:                                    # the child
            code, message = 3, b"the snapshot child stopped before it finished"
            try:
                os.close(read_end)
                write()
                code, message = 0, b""
            except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit
                code, message = 2, describe(exc).encode("utf-8", "replace")
            finally:
                try:
                    os.write(write_end, message[:_MAX_MESSAGE])
                finally:
                    os._exit(code)
        os.close(write_end)
        self.pid, self._pipe = pid, read_end
        self._started, self._limit = self.clock(), max(MIN_LIMIT_S, float(limit_s))
        return True

    def _not_forked(self, exc: OSError) -> bool:
        if not self.refused:
            log.warning("cannot fork to write the snapshot (%s: %s); writing it in line "
                        "(further failures are counted, not logged)", type(exc).__name__, exc)
        self.refused += 1
        return False

    def outcome(self, wait: bool = False) -> Optional[Outcome]:
        """The child's outcome once it has ended (``wait``: block until then), else None.
        A child past its time limit is killed and reported as failed."""
        if self.pid is None:
            return None
        pid, status = os.waitpid(self.pid, 0 if wait else os.WNOHANG)
        if pid == 0:
            if self.clock() - self._started <= self._limit:
                return None
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            return self._ended(f"the snapshot child ran over its {self._limit:.0f} s limit and "
                               "was killed", killed=True)
        code = os.waitstatus_to_exitcode(status)
        message = self._message()
        if code == 0:
            return self._ended(None)
        return self._ended(message or f"the snapshot child exited with status {code}")

    def _message(self) -> str:
        chunks = []
        while True:
            data = os.read(self._pipe, 65536)
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks).decode("utf-8", "replace")

    def _ended(self, error: Optional[str], killed: bool = False) -> Outcome:
        assert self.pid is not None
        done = Outcome(error, self.clock() - self._started, self.pid, killed)
        os.close(self._pipe)
        self.pid, self._pipe = None, -1
        return done
