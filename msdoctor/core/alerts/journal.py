"""``<run_dir>/alerts.jsonl``: the durable history of alert transitions, one JSON object a line.

Each transition is appended with one ``os.write`` on an ``O_APPEND`` descriptor, so a
line is either all there or (a writer killed mid-call) a torn tail without its
newline. Opening a journal cuts such a torn tail off (and says so) before the first
append, so every line of the file stays a complete JSON object.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

from msdoctor.core.alerts.model import Alert
from msdoctor.wire.errors import MsdoctorError
from msdoctor.wire.files import open_regular, problem_with
from msdoctor.wire.layout import ALERTS_FILE

log = logging.getLogger("msdoctor.core.alerts")

#: What identifies a recorded transition when a restarted engine re-evaluates events:
#: (alert, run, rank, state, step, first_step). ``t`` and ``value`` are left out
#: (clock-driven transitions carry the wall clock).
Key = Tuple[Any, ...]


def transition_key(d: Dict[str, Any]) -> Key:
    return (d.get("alert"), d.get("run"), d.get("rank"), d.get("state"), d.get("step"),
            d.get("first_step"))


def repair_torn_tail(path: Path) -> int:
    """Cut an incomplete last line (no ``\\n``) off ``path``; return the bytes removed."""
    try:
        fd = open_regular(path, os.O_RDWR, what=JOURNAL)
    except FileNotFoundError:
        return 0
    with os.fdopen(fd, "rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        keep, block = 0, 1 << 16
        pos = size
        while pos > 0:                      # find the last newline, from the end
            start = max(0, pos - block)
            fh.seek(start)
            data = fh.read(pos - start)
            k = data.rfind(b"\n")
            if k >= 0:
                keep = start + k + 1
                break
            pos = start
        fh.truncate(keep)
        return size - keep


class JournalError(MsdoctorError):
    """The alert journal's path holds something that is not a regular file."""


#: What ``alerts.jsonl`` must be, in the words of the error messages.
JOURNAL = "a regular file (the alert journal, one JSON transition a line) or nothing"


class AlertJournal:
    """Appends each transition as one complete line (written with a single ``write``).

    Constructing it changes nothing on disk: a torn tail is cut off before the first append
    (or the first :meth:`size`). Raises :class:`JournalError` when something other than a
    regular file stands at its path (a FIFO, a device, a directory, a symbolic link loop).
    """

    def __init__(self, run_dir: os.PathLike | str, filename: str = ALERTS_FILE) -> None:
        self.path = Path(run_dir) / filename
        self.written = 0
        self._repaired = False
        problem = problem_with(self.path, JOURNAL)
        if problem is not None:
            raise JournalError(problem)

    def _repair(self) -> None:
        if self._repaired:
            return
        self._repaired = True
        try:
            removed = repair_torn_tail(self.path)
        except OSError as exc:
            log.warning("%s: cannot check for a torn last line: %s", self.path, exc)
            removed = 0
        if removed:
            log.warning("%s: removed a torn last line (%d bytes without a newline, left by a "
                        "writer that was killed mid-append)", self.path, removed)

    def __call__(self, alert: Alert) -> None:
        self.append(alert)

    def size(self) -> int:
        """Bytes in the journal now (0 if it does not exist yet)."""
        self._repair()
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def append(self, alert: Alert) -> None:
        self._repair()
        data = (json.dumps(alert.to_dict(), ensure_ascii=False, allow_nan=False) + "\n").encode()
        fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644, JOURNAL)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        self.written += 1

    def recorded_since(self, offset: int) -> List[Tuple[int, Key]]:
        """(byte offset, key) of each complete transition line at or after ``offset``."""
        try:
            fd = open_regular(self.path, what=JOURNAL)
        except FileNotFoundError:
            return []
        with os.fdopen(fd, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
        out, pos = [], offset
        for line in data.split(b"\n")[:-1]:
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                out.append((pos, transition_key(obj)))
            pos += len(line) + 1
        return out


class Replayed:
    """Transitions already in the journal that a restarted engine will emit again.

    After a crash the engine resumes from its last snapshot and re-evaluates the events
    read after it, so it re-finds the transitions it appended in between. Those are
    matched (as a multiset, in any order) and suppressed, so each is notified once.
    """

    def __init__(self, entries: List[Tuple[int, Key]]) -> None:
        self.offsets: Dict[Key, List[int]] = {}
        for offset, key in entries:
            self.offsets.setdefault(key, []).append(offset)
        self.suppressed = 0

    def __len__(self) -> int:
        return sum(map(len, self.offsets.values()))

    def take(self, key: Key) -> bool:
        """True (and forget one) when ``key`` was already recorded."""
        offsets = self.offsets.get(key)
        if not offsets:
            return False
        offsets.pop(0)
        if not offsets:
            del self.offsets[key]
        self.suppressed += 1
        return True


def read_alerts(run_dir: os.PathLike | str, filename: str = ALERTS_FILE) -> List[Dict[str, Any]]:
    """The transitions recorded in ``run_dir`` (complete lines only)."""
    path = Path(run_dir) / filename
    try:
        fd = open_regular(path, what=JOURNAL)
    except FileNotFoundError:
        return []
    with os.fdopen(fd, "rb") as fh:
        text = fh.read().decode("utf-8")
    out = []
    for line in text.splitlines(keepends=True):
        if line.endswith("\n") and line.strip():
            out.append(json.loads(line))
    return out
