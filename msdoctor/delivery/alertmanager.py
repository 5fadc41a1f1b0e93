"""Push msdoctor alerts to a real Alertmanager (``POST /api/v2/alerts``).

Mapping: ``alertname`` = the rule, plus ``severity``, ``run``, ``rank`` and
``source="msdoctor"`` (and any extra labels given) as labels; ``summary``,
``cause``, ``fix``, ``runbook_url``, ``value`` and the steps as annotations.
Like Prometheus, only firing and resolved alerts are sent (Alertmanager has no
"pending"; an alert that was pending and went back to inactive was never sent, so its end is
not sent either). An alert marked ``caused_by`` (a consequence of another alert firing on
the same rank, see the rules' ``consequence_of``) is not sent: its cause is; if the cause
ends first, the engine journals it again as firing on its own, and that is sent. Alertmanager
forgets an alert whose ``endsAt`` has passed, so firing
alerts carry ``endsAt = now + 4 x resend_interval`` and are re-sent every
``resend_interval``; a resolved alert is sent once more with ``endsAt`` = when
it resolved.
"""
from __future__ import annotations

import math
import threading
import time
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Tuple

from msdoctor.core.alerts.active import alert_key
from msdoctor.delivery.worker import Deliverer

Key = Tuple[str, str, Optional[int]]


def rfc3339(t: float) -> str:
    """Unix seconds as RFC 3339 UTC with milliseconds."""
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def format_value(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return f"{value:.6g}"
    return "" if value is None else str(value)


class AlertmanagerDeliverer(Deliverer):
    """Send firing/resolved transitions to ``<url>/api/v2/alerts``; re-send firing ones."""

    receiver = "alertmanager"

    def __init__(self, url: str, resend_interval: float = 60.0,
                 extra_labels: Optional[Mapping[str, str]] = None,
                 generator_url: Optional[str] = None, wall_clock=time.time, **kwargs: Any) -> None:
        base = url.rstrip("/")
        if not base.endswith("/api/v2/alerts"):
            base += "/api/v2/alerts"
        super().__init__(base, **kwargs)
        self.resend_interval = float(resend_interval)
        self.extra_labels = dict(extra_labels or {})
        self.generator_url = generator_url
        self._wall = wall_clock
        self._firing: Dict[Key, Dict[str, Any]] = {}
        self._started: Dict[Key, float] = {}
        self._lock = threading.Lock()
        self._last_resend = self._clock()

    # -- the feed side ---------------------------------------------------------------
    def on_alert(self, transition: Dict[str, Any]) -> None:
        state = transition.get("state")
        if state == "pending" or transition.get("caused_by"):
            return
        key = alert_key(transition)
        with self._lock:
            before = self._firing.get(key)
            if state == "inactive" and before is None:
                return                                # it was only pending: never sent
            if state == "firing":
                self._started.setdefault(key, transition.get("active_since")
                                         or transition.get("t") or self._wall())
                self._firing[key] = transition
            else:
                self._firing.pop(key, None)
        if before is not None and self.labels(before) != self.labels(transition):
            # a label corrected while firing: Alertmanager knows the alert by its labels
            super().on_alert({**before, "state": "resolved", "t": transition.get("t")})
        super().on_alert(transition)

    def resume(self, active: List[Dict[str, Any]]) -> None:
        """A restarted sidecar: announce what is still firing (Alertmanager deduplicates)."""
        for transition in active:
            if transition.get("state") == "firing":
                self.on_alert(transition)

    def periodic(self, now: float) -> List[Dict[str, Any]]:
        if now - self._last_resend < self.resend_interval:
            return []
        self._last_resend = now
        with self._lock:
            return list(self._firing.values())

    def wake_after(self) -> float:
        return max(0.05, self.resend_interval - (self._clock() - self._last_resend))

    # -- the wire format ---------------------------------------------------------------
    def labels(self, t: Dict[str, Any]) -> Dict[str, str]:
        rule_labels = t.get("labels") if isinstance(t.get("labels"), dict) else {}
        labels = {**self.extra_labels, **{str(k): str(v) for k, v in rule_labels.items()},
                  "alertname": str(t.get("alert", "")), "source": "msdoctor"}
        for name in ("severity", "run", "rank"):
            if t.get(name) is not None and t.get(name) != "":
                labels[name] = str(t[name])
        return labels

    def to_alert(self, t: Dict[str, Any], now: float) -> Dict[str, Any]:
        key = alert_key(t)
        with self._lock:
            started = self._started.get(key) or t.get("active_since") or t.get("t") or now
            if t.get("state") != "firing":
                self._started.pop(key, None)
        annotations = {k: str(t[k]) for k in ("summary", "cause", "fix", "runbook_url")
                       if t.get(k) not in (None, "")}
        annotations["value"] = format_value(t.get("value"))
        for k in ("step", "first_step", "reason"):
            if t.get(k) is not None:
                annotations[k] = str(t[k])
        if t.get("state") == "firing":
            ends = now + 4 * self.resend_interval
        else:
            ends = max(float(t.get("t") or now), float(started))
        alert = {"labels": self.labels(t), "annotations": annotations,
                 "startsAt": rfc3339(float(started)), "endsAt": rfc3339(ends)}
        if self.generator_url:
            alert["generatorURL"] = self.generator_url
        return alert

    def payload(self, batch: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        now = self._wall()
        latest: Dict[Any, Dict[str, Any]] = {}
        for t in batch:                           # the newest transition per label set wins
            latest[(alert_key(t), tuple(sorted(self.labels(t).items())))] = t
        return [self.to_alert(t, now) for t in latest.values()]
