"""Append events to the rank's spool file from a background thread, never blocking training.

``emit`` is a ``put_nowait`` onto a bounded queue (when the queue is full the
event is dropped and counted), and sets a flag the writer waits on when it is not set
yet. A daemon writer thread sleeps until then (or until a heartbeat is due), takes at
most one batch per ``flush_s`` (20 ms; a step slower than that is written at once),
encodes it and appends it to ``<run_dir>/events/rank-<N>.jsonl`` with one ``write`` of
complete lines: a line reaches the file within ``flush_s`` of its ``emit``, and an idle
writer does not wake. When
the file cannot be written (unwritable directory, disk full, file size limit,
the directory deleted under it) the batch is dropped and counted, a warning is
issued once, the partial tail is truncated away, and opening is retried every
``retry_s``. The writer also appends a ``heartbeat`` every ``heartbeat_s``, so the
sidecar can tell a live-but-stuck process from a dead one.

Counters (read them any time): ``emitted`` (calls to ``emit``), ``written``
(those events now in the file), ``dropped`` (those lost), ``io_errors`` (failed
opens or writes), ``heartbeats`` (heartbeat lines written). After ``close``,
``emitted == written + dropped``.
"""
from __future__ import annotations

import atexit
import errno
import os
import queue
import threading
import time
from typing import Any, Dict, List, Optional

from trainer_hooks.guard import Guard
from trainer_hooks.wire import encode, make, rank_file


def spool_path(run_dir: str, rank: int) -> str:
    """The spool file of ``rank`` under ``run_dir``."""
    return str(rank_file(run_dir, rank))


def _last_byte(path: str, size: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, 1, size - 1)
    finally:
        os.close(fd)


class Emitter:
    """Non-blocking JSON-lines appender for one rank (see the module docstring)."""

    def __init__(self, run_dir: str, rank: int, queue_size: int = 8192, *,
                 heartbeat_s: float = 10.0, flush_s: float = 0.02, retry_s: float = 5.0,
                 run: Optional[str] = None, max_batch: int = 4096) -> None:
        self.run_dir, self.rank, self.run = str(run_dir), int(rank), run
        self.path = spool_path(self.run_dir, self.rank)
        self.heartbeat_s, self.flush_s, self.retry_s = heartbeat_s, flush_s, retry_s
        self.max_batch = max_batch
        self.emitted = self.written = self.io_errors = self.heartbeats = 0
        self._dropped_queue = 0  # counted by the training thread
        self._dropped_io = 0  # counted by the writer thread
        self.last_step: Optional[int] = None
        self.guard = Guard(f"msdoctor emitter ({self.path})")
        self._queue: "queue.Queue[Dict[str, Any]]" = queue.Queue(maxsize=max(1, queue_size))
        self._fd: Optional[int] = None
        self._identity: Optional[tuple] = None  # (st_dev, st_ino) of the open file
        self._retry_at = 0.0
        self._next_heartbeat = time.monotonic() + heartbeat_s
        self._closing = threading.Event()
        self._pending = threading.Event()   # set by emit (and close): the writer has work
        self._batch_at = time.monotonic()   # when the writer last took a batch
        self._closed = False
        self._flushed = threading.Condition()
        self._open()  # the setup check: fails loudly (once) and early, never raises
        self._thread = threading.Thread(target=self._run, name=f"msdoctor-emitter-{rank}", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (``emit`` then drops)."""
        return self._closed

    @property
    def dropped(self) -> int:
        """Events lost: queue full, emitted after close, unencodable, or not writable."""
        return self._dropped_queue + self._dropped_io

    # -- training-thread side -------------------------------------------------------------

    def emit(self, event: Dict[str, Any]) -> bool:
        """Queue ``event`` for writing; False (and counted as dropped) if it cannot be queued."""
        self.emitted += 1
        try:
            step = event.get("step")
            if step is not None:
                self.last_step = step
            if self._closed:
                self._dropped_queue += 1
                return False
            self._queue.put_nowait(event)
            if not self._pending.is_set():     # after the put: the writer drains after clearing
                self._pending.set()
        except queue.Full:
            self._dropped_queue += 1
            self.guard.report("queue-full", f"event queue full ({self._queue.maxsize}); "
                                            "dropping events until the writer catches up")
            return False
        except Exception:  # noqa: BLE001 - emit must never raise (e.g. not a dict)
            self._dropped_queue += 1
            return False
        return True

    def flush(self, timeout: float = 2.0) -> bool:
        """Wait (at most ``timeout`` s) until everything queued so far is written or dropped."""
        deadline = time.monotonic() + timeout
        target = self.emitted
        with self._flushed:
            while self.written + self.dropped < target and self._thread.is_alive():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._flushed.wait(min(remaining, self.flush_s))
        return self.written + self.dropped >= target

    def close(self, timeout: float = 2.0) -> None:
        """Write what is queued, stop the writer (bounded by ``timeout``); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        self._pending.set()
        try:
            self._thread.join(timeout)
            atexit.unregister(self.close)
        except Exception:  # noqa: BLE001
            pass

    # -- writer-thread side ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            due = self._next_heartbeat - time.monotonic()
            if self._pending.wait(max(0.0, due)) and not self._closing.is_set():
                # at most one batch per flush_s: wait out the rest since the last one
                self._closing.wait(max(0.0, self._batch_at + self.flush_s - time.monotonic()))
            closing = self._closing.is_set()
            self._pending.clear()
            self._batch_at = time.monotonic()
            if closing:
                self._retry_at = 0.0  # one last attempt to open before giving up
            try:
                self._drain()
                if time.monotonic() >= self._next_heartbeat and not closing:
                    self._heartbeat()
            except Exception as exc:  # noqa: BLE001 - the writer must survive anything
                self.guard.report("writer", f"writer error: {exc!r}")
            with self._flushed:
                self._flushed.notify_all()
            if closing:
                return

    def _drain(self) -> None:
        while True:
            batch: List[Dict[str, Any]] = []
            try:
                while len(batch) < self.max_batch:
                    batch.append(self._queue.get_nowait())
            except queue.Empty:
                pass
            if not batch:
                return
            self._write_events(batch)

    def _write_events(self, batch: List[Dict[str, Any]]) -> None:
        lines: List[bytes] = []
        for event in batch:
            try:
                lines.append(encode(event))
            except Exception as exc:  # noqa: BLE001 - one bad event must not lose the batch
                self._dropped_io += 1
                self.guard.report("encode", f"cannot encode a {event.get('type')!r} event: {exc}")
        if lines:
            if self._append(b"".join(lines)):
                self.written += len(lines)
            else:
                self._dropped_io += len(lines)

    def _heartbeat(self) -> None:
        self._next_heartbeat = time.monotonic() + self.heartbeat_s
        event = make("heartbeat", self.rank, t=time.time(), run=self.run,
                     step=self.last_step, dropped=self.dropped)
        if self._append(encode(event)):
            self.heartbeats += 1

    def _open(self) -> bool:
        """Open (creating the directory) the spool file for appending; False on failure."""
        self._close_fd()
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            # O_NONBLOCK: a FIFO planted at the path must fail, not hang the training thread
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
            info = os.fstat(fd)
            self._fd, self._identity = fd, (info.st_dev, info.st_ino)
            if info.st_size and _last_byte(self.path, info.st_size) != b"\n":
                self._write_all(fd, b"\n")  # end a torn line left by an earlier crash
            return True
        except OSError as exc:
            self._fail("open", exc)
            return False

    def _close_fd(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd, self._identity = None, None

    def _fail(self, what: str, exc: OSError) -> None:
        self.io_errors += 1
        self._close_fd()
        self._retry_at = time.monotonic() + self.retry_s
        reason = errno.errorcode.get(exc.errno or 0, "") if isinstance(exc, OSError) else ""
        self.guard.report("io", f"cannot {what} the spool file {self.path!r} ({reason} {exc}); "
                                f"dropping events and retrying every {self.retry_s:g} s")

    def _usable(self) -> bool:
        """True when the open file is still the one at ``self.path`` (reopen if it vanished)."""
        if self._fd is None:
            return time.monotonic() >= self._retry_at and self._open()
        try:
            info = os.stat(self.path)
            if (info.st_dev, info.st_ino) == self._identity:
                return True
        except OSError:
            pass
        self.guard.report("vanished", f"spool file {self.path!r} was removed or replaced; reopening")
        return self._open()

    def _append(self, data: bytes) -> bool:
        """Append complete lines; on failure cut any partial tail and return False."""
        if not self._usable():
            return False
        fd = self._fd
        assert fd is not None
        try:
            start = os.fstat(fd).st_size
        except OSError as exc:
            self._fail("stat", exc)
            return False
        try:
            self._write_all(fd, data)
            return True
        except OSError as exc:
            try:
                os.ftruncate(fd, start)  # never leave a torn line behind
            except OSError:
                pass
            self._fail("write", exc)
            return False

    @staticmethod
    def _write_all(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            if written <= 0:
                raise OSError(errno.EIO, "short write")
            view = view[written:]
