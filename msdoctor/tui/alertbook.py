"""In-memory alert transitions for the embedded TUI (the engine's sink).

Offers the two reads ``msdoctor.core.views`` makes of the sidecar's alert feed,
``active()`` and ``history(limit)``, with the same semantics: the latest
pending/firing transition of each (alert, run, rank) is active, anything else
ends it.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, List, Optional, Tuple

ACTIVE_STATES = ("pending", "firing")
Key = Tuple[str, str, Optional[int]]


class AlertBook:
    """Collects alert transitions (``Alert`` objects or dicts) handed to it."""

    name = "alert-book"

    def __init__(self, history: int = 1000) -> None:
        self._active: Dict[Key, Dict[str, Any]] = {}
        self._history: Deque[Dict[str, Any]] = deque(maxlen=history)
        self.version = 0                # counts transitions: the API's alerts_version

    def __call__(self, transition: Any) -> None:
        self.add(transition)

    def add(self, transition: Any) -> None:
        d = transition.to_dict() if hasattr(transition, "to_dict") else dict(transition)
        rank = d.get("rank")
        key = (str(d.get("alert", "")), str(d.get("run", "")), rank if isinstance(rank, int) else None)
        self._history.append(d)
        self.version += 1
        if d.get("state") in ACTIVE_STATES:
            previous = self._active.get(key)
            d["active_since"] = previous.get("active_since") if previous else d.get("t")
            self._active[key] = d
        else:
            self._active.pop(key, None)

    def active(self) -> List[Dict[str, Any]]:
        return [dict(a) for a in self._active.values()]

    def history(self, limit: int = 1000) -> List[Dict[str, Any]]:
        items = list(self._history)
        return [dict(a) for a in items[-limit:]] if limit > 0 else []
