"""Follow another process's alert journal: tail ``<run_dir>/alerts.jsonl`` into an
:class:`~msdoctor.core.alerts.active.ActiveAlerts`.

The sidecar's own pipeline feeds its active set directly; this is for readers of a journal
written elsewhere (``msdoctor demo`` watching its sidecar, tools and tests reading a run
directory). After a restart the feed reads the whole file first and ends up with the same
active set; listeners get ``resume(active)`` for it instead of every old transition.
"""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional

from msdoctor.core.alerts.active import (
    HISTORY,
    KNOWN_STATES,
    ActiveAlerts,
    AlertListener,
    as_record,
)
from msdoctor.wire.files import describe, open_regular

log = logging.getLogger("msdoctor.core.alerts.feed")

MAX_READ = 4 << 20


class JournalReader:
    """Reads new complete lines of an alert journal as transition records; bad lines are
    counted (and the first one logged with file:line), never raised."""

    def __init__(self, path: os.PathLike | str, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.clock = clock
        self._offset = 0
        self._line_no = 0
        self.errors = 0
        self.restarted = False         # the file shrank or was replaced since the last read
        self._warned = False
        self._reported: Optional[str] = None

    def read_all(self) -> List[Dict[str, Any]]:
        """Every complete transition from the current position to the end."""
        records: List[Dict[str, Any]] = []
        while True:
            new = self.read()
            if not new:
                return records
            records.extend(new)

    def read(self) -> List[Dict[str, Any]]:
        """The transitions of the complete lines appended since the last call (at most
        ``MAX_READ`` bytes of them)."""
        try:
            fd = open_regular(self.path, what="a regular file (the alert journal)")
        except FileNotFoundError:
            return []
        except OSError as exc:             # a FIFO, a device, a directory, a link loop
            self._problem(describe(self.path, exc))
            return []
        self._reported = None
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(fd).st_size
            if size < self._offset:          # truncated or replaced: start over
                self._offset = self._line_no = 0
                self.restarted = True
            if size == self._offset:
                return []
            f.seek(self._offset)
            data = f.read(min(size - self._offset, MAX_READ))
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self._offset += end + 1
        new = []
        for line in data[:end].split(b"\n"):
            self._line_no += 1
            transition = self._decode(line)
            if transition is not None:
                new.append(transition)
        return new

    def _problem(self, message: str) -> None:
        """A journal that cannot be read: counted, logged once while it lasts."""
        if message != self._reported:
            self._reported = message
            self.errors += 1
            log.error("cannot read the alert journal: %s", message)

    def _decode(self, line: bytes) -> Optional[Dict[str, Any]]:
        if not line.strip():
            return None
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict) or not isinstance(obj.get("alert"), str):
                raise ValueError("expected an object with a string field 'alert'")
            if obj.get("state") not in KNOWN_STATES:
                raise ValueError(f"field 'state': expected one of {', '.join(KNOWN_STATES)}, "
                                 f"got {obj.get('state')!r}")
        except ValueError as exc:
            self.errors += 1
            if not self._warned:
                self._warned = True
                log.warning("%s:%d: skipping a bad alert transition: %s (further bad lines are "
                            "counted, not logged)", self.path, self._line_no, exc)
            return None
        return as_record(obj, self.clock)


class AlertFeed:
    """Tail ``alerts.jsonl``: the active set, recent history and listeners of new lines.

    Thread safety: one thread calls :meth:`poll` (or :meth:`on_tick`); others may read
    :meth:`active`, :meth:`history` and :meth:`counts`.
    """

    name = "alert-feed"

    def __init__(self, path: os.PathLike | str, listeners: Iterable[AlertListener] = (),
                 history: int = HISTORY, clock: Callable[[], float] = time.time) -> None:
        self.reader = JournalReader(path, clock)
        self.path = self.reader.path
        self.alerts = ActiveAlerts(listeners, history, clock)
        self.alerts.load(self.reader.read_all())

    @property
    def listeners(self) -> List[AlertListener]:
        return self.alerts.listeners

    @property
    def version(self) -> int:
        return self.alerts.version

    @property
    def errors(self) -> int:
        return self.reader.errors

    def on_tick(self, now: float, store: Any = None) -> None:
        """Read transitions appended since the last call (pipeline consumer hook)."""
        self.poll()

    def poll(self) -> List[Dict[str, Any]]:
        """Read new complete lines, tell the listeners; return the new transitions."""
        new = self.reader.read()
        if self.reader.restarted:
            self.reader.restarted = False
            self.alerts.clear()
        if new:
            self.alerts.add(new)
        return new

    def active(self) -> List[Dict[str, Any]]:
        return self.alerts.active()

    def history(self, limit: int = HISTORY) -> List[Dict[str, Any]]:
        return self.alerts.history(limit)

    def counts(self) -> Dict[str, int]:
        return self.alerts.counts()
