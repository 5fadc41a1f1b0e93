"""Warn once, count the rest: how hook code reports its own trouble without hurting training."""
from __future__ import annotations

import threading
import warnings
from typing import Dict


class HookWarning(RuntimeWarning):
    """Something in the training doctor's hooks went wrong; training continues."""


class Guard:
    """Counts problems by key and issues one :class:`HookWarning` per key.

    Thread-safe; never raises (a failure to warn is swallowed too).
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.counts: Dict[str, int] = {}
        self._lock = threading.Lock()

    def report(self, key: str, message: str) -> bool:
        """Count a problem under ``key``; warn the first time. Returns True if it warned."""
        with self._lock:
            seen = self.counts.get(key, 0)
            self.counts[key] = seen + 1
        if seen:
            return False
        try:
            warnings.warn(f"{self.owner}: {message} (warned once; training continues)",
                          HookWarning, stacklevel=3)
        except Exception:  # noqa: BLE001 - e.g. warnings turned into errors by a filter
            pass
        return True

    def total(self) -> int:
        """Problems counted so far, over all keys."""
        with self._lock:
            return sum(self.counts.values())
