"""A progress bar on stderr for long replays (only on a terminal, or when asked), drawn by
``rich.progress``."""
from __future__ import annotations

import sys
from typing import Any, Optional, TextIO

#: Inputs smaller than this finish too fast for a bar to help.
MIN_BYTES = 16 << 20


class ProgressBar:
    """``update(nbytes)`` as input is consumed, ``close()`` at the end; ``done`` counts the
    bytes either way. Enabled by default only for a large input with a terminal on ``stream``.
    Off a terminal (``enabled=True`` with output to a file) the bar is printed once, when it
    closes."""

    def __init__(self, total: int, enabled: Optional[bool] = None, stream: Optional[TextIO] = None,
                 label: str = "reading") -> None:
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = total >= MIN_BYTES and getattr(self.stream, "isatty", lambda: False)()
        self.enabled = bool(enabled)
        self.total = max(1, total)
        self.done = 0
        self._progress: Any = None
        if self.enabled:
            self._start(label)

    def _start(self, label: str) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
            DownloadColumn(binary_units=True), TransferSpeedColumn(), TimeRemainingColumn(),
            console=Console(file=self.stream), refresh_per_second=10)
        self._task = self._progress.add_task(label, total=self.total)
        self._progress.start()

    def update(self, nbytes: int) -> None:
        self.done += nbytes
        if self._progress is not None:
            self._progress.update(self._task, completed=min(self.done, self.total))

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
