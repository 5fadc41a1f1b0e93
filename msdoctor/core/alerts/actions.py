"""Rule actions beyond ``stop_training``: control files the bundled trainer carries out.

On a firing transition (not of a consequence) of a rule with one of these actions, the sidecar
writes into ``<run_dir>/control/`` (docs/checkpoints.md has the file formats):

- ``skip_batches``: ``skip.json`` gains the data of the steps from the anomaly's first step to
  the alert's step plus :data:`SKIP_MARGIN`;
- ``lower_lr``: ``lr.json``'s factor is multiplied by :data:`LR_FACTOR`;
- ``rollback``: ``rollback.json`` names the last good checkpoint (the one the alert names) and
  the batches to skip after it; that checkpoint is also protected. At most
  :data:`MAX_ROLLBACKS` per :data:`ROLLBACK_WINDOW_S` seconds and run: beyond, or without a
  checkpoint to go back to, the training is stopped instead (and the log says so);
- ``protect_checkpoint``: ``protect.json`` gains the alert's last good checkpoint.

What was done goes into the alert's record (``action_taken``, in ``alerts.jsonl``); the trainer
records what it applied as ``action`` events in its spool. Deleting a control file undoes it.
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Deque, Dict, Optional

from msdoctor.core.alerts.model import Alert
from msdoctor.core.alerts.stop import write_control, write_stop_request
from msdoctor.wire.files import read_regular
from msdoctor.wire.layout import LR_FILE, PROTECT_FILE, ROLLBACK_FILE, SKIP_FILE

log = logging.getLogger("msdoctor.core.alerts")

LR_FACTOR = 0.5
SKIP_MARGIN = 200
MAX_ROLLBACKS = 1
ROLLBACK_WINDOW_S = 3600.0
#: The actions this module carries out (``stop_training`` is :class:`StopRequester`'s).
CONTROL_ACTIONS = ("skip_batches", "lower_lr", "rollback", "protect_checkpoint")


def read_control(run_dir: os.PathLike | str, name: str) -> Dict[str, Any]:
    """A control file's JSON object, or ``{}`` when it is absent or not an object."""
    try:
        doc = json.loads(read_regular(Path(run_dir) / name, 1 << 20))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


class ActionRequester:
    """Sink, placed before the journal: carries out the control actions of firing alerts and
    notes what it did on the alert (``action_taken``)."""

    def __init__(self, run_dir: os.PathLike | str, clock: Callable[[], float] = time.time,
                 max_rollbacks: int = MAX_ROLLBACKS,
                 window_s: float = ROLLBACK_WINDOW_S) -> None:
        self.run_dir = Path(run_dir)
        self.clock = clock
        self.max_rollbacks, self.window_s = max_rollbacks, window_s
        self.rollbacks: Dict[str, Deque[float]] = {}
        self.taken = 0

    def __call__(self, alert: Alert) -> None:
        if alert.state != "firing" or alert.action not in CONTROL_ACTIONS or alert.caused_by:
            return
        do = getattr(self, "_" + alert.action)
        alert.action_taken = do(alert, self.clock())
        self.taken += 1
        log.warning("action %s for %s on run %s rank %s: %s", alert.action, alert.alert,
                    alert.run, alert.rank, alert.action_taken)

    def _base(self, alert: Alert, now: float) -> Dict[str, Any]:
        return {"v": 1, "run": alert.run, "alert": alert.alert, "rank": alert.rank,
                "step": alert.step, "reason": alert.summary or alert.alert, "t": now}

    def _skip_batches(self, alert: Alert, now: float) -> Dict[str, Any]:
        first = alert.first_step if alert.first_step is not None else alert.step
        span = {"from_step": int(first or 0), "to_step": int(alert.step or 0) + SKIP_MARGIN}
        doc = read_control(self.run_dir, SKIP_FILE)
        ranges = [r for r in doc.get("ranges") or [] if isinstance(r, dict)] \
            if doc.get("run") == alert.run else []
        ranges.append({**span, "alert": alert.alert, "reason": alert.summary, "t": now})
        write_control(self.run_dir, SKIP_FILE, {**self._base(alert, now), "ranges": ranges})
        return {"action": "skip_batches", "file": SKIP_FILE, **span}

    def _lower_lr(self, alert: Alert, now: float) -> Dict[str, Any]:
        doc = read_control(self.run_dir, LR_FILE)
        old = doc.get("factor") if doc.get("run") == alert.run else None
        old = float(old) if isinstance(old, (int, float)) and 0 < old <= 1 else 1.0
        factor = old * LR_FACTOR
        write_control(self.run_dir, LR_FILE, {**self._base(alert, now), "factor": factor})
        return {"action": "lower_lr", "file": LR_FILE, "factor": factor}

    def _protect_checkpoint(self, alert: Alert, now: float) -> Dict[str, Any]:
        good = alert.checkpoint or {}
        if not good.get("path"):
            return {"action": "protect_checkpoint", "done": False,
                    "why": "no checkpoint saved before the anomaly is known"}
        doc = read_control(self.run_dir, PROTECT_FILE)
        paths = [p for p in doc.get("paths") or [] if isinstance(p, str)]
        if good["path"] not in paths:
            paths.append(good["path"])
        write_control(self.run_dir, PROTECT_FILE, {**self._base(alert, now), "paths": paths})
        return {"action": "protect_checkpoint", "file": PROTECT_FILE, "path": good["path"]}

    def _rollback(self, alert: Alert, now: float) -> Dict[str, Any]:
        good = alert.checkpoint or {}
        recent = self.rollbacks.setdefault(alert.run, deque())
        while recent and recent[0] <= now - self.window_s:
            recent.popleft()
        why = None
        if not good.get("path"):
            why = "no checkpoint saved before the anomaly is known"
        elif len(recent) >= self.max_rollbacks:
            why = (f"{len(recent)} rollback(s) in the last {self.window_s:.0f} s already, at most "
                   f"{self.max_rollbacks}")
        if why is not None:
            reason = f"{alert.summary or alert.alert} (rollback refused: {why}; stopping)"
            write_stop_request(self.run_dir, reason, alert.alert, alert.rank, alert.step, now,
                               run=alert.run)
            log.error("run %s: %s; training stopped, an operator must decide", alert.run, reason)
            return {"action": "stop_training", "instead_of": "rollback", "why": why}
        recent.append(now)
        self._protect_checkpoint(alert, now)
        doc = {**self._base(alert, now), "to_step": int(good["step"]), "checkpoint": good["path"],
               "skip_from": int(good["step"]) + 1, "margin": SKIP_MARGIN}
        write_control(self.run_dir, ROLLBACK_FILE, doc)
        return {"action": "rollback", "file": ROLLBACK_FILE, "to_step": doc["to_step"],
                "checkpoint": good["path"], "skip_from": doc["skip_from"], "margin": SKIP_MARGIN}

    def state_dict(self) -> Dict[str, Any]:
        return {run: list(times) for run, times in self.rollbacks.items()}

    def load_state_dict(self, state: Optional[Dict[str, Any]]) -> None:
        if isinstance(state, dict):
            self.rollbacks = {str(run): deque(float(t) for t in times)
                              for run, times in state.items() if isinstance(times, list)}
