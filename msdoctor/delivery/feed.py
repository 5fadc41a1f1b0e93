"""The feed of alert transitions: tail ``<run_dir>/alerts.jsonl``, keep the active set.

The rule engine appends one JSON object per transition (``alert``, ``state``,
``severity``, ``run``, ``rank``, ``step``, ``first_step``, ``value``,
``summary``, ``cause``, ``fix``, ``runbook_url``, usually ``t``). That file is
the durable contract, so everything downstream (``msdoctor_alert`` on
``/metrics``, ``/api/v1/alerts``, Alertmanager and webhook delivery) reads it
instead of reaching into the engine. After a restart the feed replays the file
and ends up with the same active set.

:class:`AlertFeed` is a sidecar consumer (``on_tick``); listeners get every new
transition through ``on_alert(transition)``.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Deque, Dict, Iterable, List, Optional, Protocol, Tuple

from msdoctor.wire.numbers import from_wire

log = logging.getLogger("msdoctor.core.alerts.feed")

ACTIVE_STATES = ("pending", "firing")
#: Transition states the feed understands; anything else ends the alert.
KNOWN_STATES = ("pending", "firing", "resolved", "inactive")
HISTORY = 1000
MAX_READ = 4 << 20

Key = Tuple[str, str, Optional[int]]   # (alertname, run, rank)


class AlertListener(Protocol):
    def on_alert(self, transition: Dict[str, Any]) -> None:
        """Receive one new transition (must not block)."""


def alert_key(transition: Dict[str, Any]) -> Key:
    """Identity of an alert instance: (alertname, run, rank)."""
    rank = transition.get("rank")
    return (str(transition.get("alert", "")), str(transition.get("run", "")),
            rank if isinstance(rank, int) else None)


def _number(value: Any) -> Any:
    """A value read back from ``alerts.jsonl``: wire strings become floats again."""
    return from_wire(value)


class AlertFeed:
    """Tail ``alerts.jsonl``; track active alerts and recent history; notify listeners.

    Thread safety: the sidecar thread calls :meth:`on_tick`; HTTP threads call
    :meth:`active` and :meth:`history`, which return copies under a lock.
    """

    name = "alert-feed"

    def __init__(self, path: os.PathLike | str, listeners: Iterable[AlertListener] = (),
                 history: int = HISTORY, clock=time.time) -> None:
        self.path = Path(path)
        self.listeners: List[AlertListener] = list(listeners)
        self.clock = clock
        self._offset = 0
        self._line_no = 0
        self._active: Dict[Key, Dict[str, Any]] = {}
        self._history: Deque[Dict[str, Any]] = deque(maxlen=history)
        self._lock = threading.Lock()
        self.errors = 0
        self._warned = False
        self._replay()

    def _replay(self) -> None:
        """Read what is already in the file (a restarted sidecar) without re-announcing it
        as new; listeners with ``resume(active)`` get the active set instead."""
        while self._read(notify=False):
            pass
        active = self.active()
        for listener in self.listeners:
            resume = getattr(listener, "resume", None)
            if resume is not None and active:
                resume(active)

    # -- reading ----------------------------------------------------------
    def on_tick(self, now: float, store: Any = None) -> None:
        """Read transitions appended since the last call."""
        self.poll()

    def poll(self) -> List[Dict[str, Any]]:
        """Read new complete lines, tell the listeners; return the new transitions."""
        return self._read(notify=True)

    def _read(self, notify: bool) -> List[Dict[str, Any]]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self._offset:          # truncated or replaced: start over
            self._offset = self._line_no = 0
            with self._lock:
                self._active.clear()
                self._history.clear()
        if size == self._offset:
            return []
        with self.path.open("rb") as f:
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
        self._apply(new)
        if notify:
            for transition in new:
                for listener in self.listeners:
                    listener.on_alert(transition)
        return new

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
        obj["value"] = _number(obj.get("value"))
        obj.setdefault("t", self.clock())
        return obj

    def _apply(self, transitions: List[Dict[str, Any]]) -> None:
        with self._lock:
            for transition in transitions:
                key = alert_key(transition)
                self._history.append(transition)
                if transition["state"] in ACTIVE_STATES:
                    previous = self._active.get(key)
                    if previous is not None and "active_since" in previous:
                        transition["active_since"] = previous["active_since"]
                    else:
                        transition["active_since"] = transition.get("t")
                    self._active[key] = transition
                else:
                    self._active.pop(key, None)

    # -- views ------------------------------------------------------------
    def active(self) -> List[Dict[str, Any]]:
        """Pending and firing alerts (latest transition of each), oldest first."""
        with self._lock:
            return [dict(a) for a in self._active.values()]

    def history(self, limit: int = HISTORY) -> List[Dict[str, Any]]:
        """The newest ``limit`` transitions, oldest first."""
        with self._lock:
            items = list(self._history)
        return [dict(a) for a in items[-limit:]] if limit > 0 else []

    def counts(self) -> Dict[str, int]:
        """Active alerts by state."""
        with self._lock:
            states = [a["state"] for a in self._active.values()]
        return {state: states.count(state) for state in ACTIVE_STATES}

