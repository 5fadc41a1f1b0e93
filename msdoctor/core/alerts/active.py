"""The one active-alert set: what is pending or firing now, the recent transitions, and the
listeners told of each new one.

The engine hands every transition to it (it is an engine sink); a restarted sidecar first
loads the journal's transitions into it, so it holds the same set as before the restart. The
HTTP API, ``/metrics``, the TUI and the deliverers all read this set.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, Iterable, List, Mapping, Optional, Protocol, Tuple

from msdoctor.wire.numbers import from_wire

ACTIVE_STATES = ("pending", "firing")
#: Transition states an alert record may have; anything else is not a transition.
KNOWN_STATES = ("pending", "firing", "resolved", "inactive")
HISTORY = 1000

Key = Tuple[str, str, Optional[int]]   # (alertname, run, rank)


class AlertListener(Protocol):
    def on_alert(self, transition: Dict[str, Any]) -> None:
        """Receive one new transition (must not block)."""


def alert_key(transition: Mapping[str, Any]) -> Key:
    """Identity of an alert instance: (alertname, run, rank)."""
    rank = transition.get("rank")
    return (str(transition.get("alert", "")), str(transition.get("run", "")),
            rank if isinstance(rank, int) and not isinstance(rank, bool) else None)


def as_record(transition: Any, clock: Callable[[], float] = time.time) -> Dict[str, Any]:
    """A transition (an ``Alert`` or its JSON object) as the record the set keeps: the JSON
    object of ``alerts.jsonl`` with ``value`` as a float and ``t`` always present."""
    d = transition.to_dict() if hasattr(transition, "to_dict") else dict(transition)
    d["value"] = from_wire(d.get("value"))
    if d.get("t") is None:
        d["t"] = clock()
    return d


class ActiveAlerts:
    """The latest pending/firing transition of each (alert, run, rank), the newest
    ``history`` transitions, and the listeners of new ones.

    Thread safety: one thread adds (the pipeline's); readers (HTTP threads) get copies
    under a lock.
    """

    name = "alerts"

    def __init__(self, listeners: Iterable[AlertListener] = (), history: int = HISTORY,
                 clock: Callable[[], float] = time.time) -> None:
        self.listeners: List[AlertListener] = list(listeners)
        self.clock = clock
        self._active: Dict[Key, Dict[str, Any]] = {}
        self._history: Deque[Dict[str, Any]] = deque(maxlen=history)
        self._lock = threading.Lock()
        self.version = 0                  # counts transitions taken in

    def __call__(self, transition: Any) -> None:
        """Engine sink: take one transition and tell the listeners."""
        self.add([as_record(transition, self.clock)])

    def add(self, records: List[Dict[str, Any]], notify: bool = True) -> None:
        """Take transitions (records, see :func:`as_record`) in order."""
        with self._lock:
            for record in records:
                key = alert_key(record)
                self._history.append(record)
                self.version += 1
                if record.get("state") in ACTIVE_STATES:
                    previous = self._active.get(key)
                    record["active_since"] = (previous.get("active_since") if previous is not None
                                              else record.get("t"))
                    self._active[key] = record
                else:
                    self._active.pop(key, None)
        if notify:
            for record in records:
                for listener in self.listeners:
                    listener.on_alert(record)

    def load(self, records: List[Dict[str, Any]]) -> None:
        """Take transitions recorded before (a restart) without announcing them as new;
        listeners with ``resume(active)`` get the resulting active set instead."""
        self.add(records, notify=False)
        active = self.active()
        for listener in self.listeners:
            resume = getattr(listener, "resume", None)
            if resume is not None and active:
                resume(active)

    def clear(self) -> None:
        with self._lock:
            self._active.clear()
            self._history.clear()

    # -- reads ----------------------------------------------------------------
    def active(self) -> List[Dict[str, Any]]:
        """Pending and firing alerts (latest transition of each), oldest first."""
        with self._lock:
            return [dict(a) for a in self._active.values()]

    def firing(self) -> List[Dict[str, Any]]:
        return [a for a in self.active() if a.get("state") == "firing"]

    def history(self, limit: int = HISTORY) -> List[Dict[str, Any]]:
        """The newest ``limit`` transitions, oldest first."""
        with self._lock:
            items = list(self._history)
        return [dict(a) for a in items[-limit:]] if limit > 0 else []

    def counts(self) -> Dict[str, int]:
        """Active alerts by state."""
        with self._lock:
            states = [a.get("state") for a in self._active.values()]
        return {state: states.count(state) for state in ACTIVE_STATES}
