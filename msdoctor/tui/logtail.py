"""Follow the log files of a run directory safely: regular files only, bounded reads, and
every line made printable (a log is input: it must not drive the terminal).

:class:`LogTail` follows one file from its last ``TAIL_BYTES``; :class:`LogFollower` finds the
run's logs (:func:`msdoctor.wire.layout.log_files`) and follows the one picked. Both are
called from the app's worker thread, never from the UI thread.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from msdoctor.core.format import printable
from msdoctor.wire.files import describe, open_regular
from msdoctor.wire.layout import log_files

#: Most bytes read from a file per refresh (and the tail shown when a file is opened).
TAIL_BYTES = 64 * 1024
#: Longest line kept whole; longer ones are cut and marked.
LINE_CHARS = 2000


def _lines(data: bytes) -> List[str]:
    out = []
    for raw in data.split(b"\n"):
        text = printable(raw.decode("utf-8", "replace").rstrip("\r"))
        out.append(text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + " …(cut)")
    return out


@dataclass
class LogTail:
    """The new complete lines of one file at each :meth:`read`."""

    path: Path
    offset: int = -1                  # -1: not read yet (start from the last TAIL_BYTES)
    identity: Tuple[int, int] = (0, 0)
    partial: bytes = b""

    def read(self) -> Tuple[List[str], bool]:
        """(new lines, whether the view must start over: a new, truncated or replaced file).
        Raises OSError (NotRegularFile included) when the path cannot be read as a log."""
        fd = open_regular(self.path)
        try:
            info = os.fstat(fd)
            identity = (info.st_dev, info.st_ino)
            reset = self.offset < 0 or identity != self.identity or info.st_size < self.offset
            notes: List[str] = []
            if reset:
                self.identity, self.partial = identity, b""
                self.offset = max(0, info.st_size - TAIL_BYTES)
                if self.offset:
                    notes.append(f"… the last {TAIL_BYTES // 1024} KiB of {info.st_size} bytes")
            elif info.st_size - self.offset > TAIL_BYTES:
                skipped = info.st_size - TAIL_BYTES - self.offset
                notes.append(f"… {skipped} bytes skipped (written faster than shown)")
                self.offset, self.partial = info.st_size - TAIL_BYTES, b""
            os.lseek(fd, self.offset, os.SEEK_SET)
            data = os.read(fd, min(TAIL_BYTES, max(0, info.st_size - self.offset)))
        finally:
            os.close(fd)
        first_partial = bool(notes) and self.offset > 0 and not self.partial
        self.offset += len(data)
        data = self.partial + data
        complete, newline, self.partial = data.rpartition(b"\n")
        if len(self.partial) > TAIL_BYTES:              # a line without end: show what came
            complete, self.partial = data, b""
        lines = _lines(complete) if complete or newline else []
        if first_partial and lines:
            lines = lines[1:]                           # began mid-line
        return notes + lines, reset


@dataclass
class LogChunk:
    """What the log pane shows after one poll."""

    files: List[Path] = field(default_factory=list)
    current: Optional[Path] = None
    lines: List[str] = field(default_factory=list)
    reset: bool = False
    problem: str = ""


class LogFollower:
    """The log files of ``run_dir`` and the tail of the one picked (the first by default)."""

    def __init__(self, run_dir: Optional[Path]) -> None:
        self.run_dir = run_dir
        self.files: List[Path] = []
        self.current: Optional[Path] = None
        self.tail: Optional[LogTail] = None
        self._problem = ""

    def pick(self, step: int) -> None:
        """Follow the next (``step`` 1) or previous (-1) file; the next poll shows it."""
        if not self.files:
            return
        i = self.files.index(self.current) if self.current in self.files else 0
        self.current = self.files[(i + step) % len(self.files)]

    def poll(self) -> LogChunk:
        if self.run_dir is None:
            return LogChunk()
        self.files = log_files(self.run_dir)
        if self.current not in self.files:
            self.current = self.files[0] if self.files else None
        if self.current is None:
            return LogChunk(files=self.files)
        if self.tail is None or self.tail.path != self.current:
            self.tail = LogTail(self.current)
        try:
            lines, reset = self.tail.read()
        except OSError as exc:
            problem = describe(self.current, exc)
            reset, self.tail = problem != self._problem, None
            self._problem = problem
            return LogChunk(self.files, self.current, [], reset, printable(problem))
        self._problem = ""
        return LogChunk(self.files, self.current, lines, reset)
