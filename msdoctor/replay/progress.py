"""A one-line progress bar on stderr for long replays (only on a terminal, or when asked)."""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

#: Inputs smaller than this finish too fast for a bar to help.
MIN_BYTES = 16 << 20


class ProgressBar:
    """``update(nbytes)`` as input is consumed; redraws at most 10 times a second."""

    def __init__(self, total: int, enabled: Optional[bool] = None, stream: Optional[TextIO] = None,
                 label: str = "reading") -> None:
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = total >= MIN_BYTES and getattr(self.stream, "isatty", lambda: False)()
        self.enabled = bool(enabled)
        self.total = max(1, total)
        self.done = 0
        self.label = label
        self.started = time.perf_counter()
        self._drawn = 0.0

    def update(self, nbytes: int) -> None:
        self.done += nbytes
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._drawn >= 0.1 or self.done >= self.total:
            self._drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        share = min(1.0, self.done / self.total)
        width = 30
        filled = int(share * width)
        rate = self.done / max(1e-9, now - self.started) / 2**20
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                          f"{share:4.0%} {self.done / 2**20:,.0f}/{self.total / 2**20:,.0f} MiB "
                          f"{rate:,.0f} MiB/s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()
