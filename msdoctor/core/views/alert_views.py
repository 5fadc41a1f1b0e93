"""Alert read models: one alert transition, alert counts, the active list and the history.

The views read alerts through :class:`AlertSource` (the sidecar's alert feed, or the
embedded TUI's in-memory book). Numbers are real floats here; ``to_json`` turns the
non-finite ones into the wire strings of :mod:`msdoctor.wire.numbers`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Protocol, Sequence, Tuple

from msdoctor.wire.numbers import NONFINITE_STRINGS, from_wire, to_wire

ACTIVE_STATES = ("firing", "pending")


class AlertSource(Protocol):
    """What the views read of the alert set: the active alerts and the recent transitions,
    each a plain mapping (``alert``, ``state``, ``run``, ``rank``, ``step``, ...)."""

    def active(self) -> Sequence[Mapping[str, Any]]:
        """Pending and firing alerts (the latest transition of each), oldest first."""

    def history(self, limit: int) -> Sequence[Mapping[str, Any]]:
        """The newest ``limit`` transitions, oldest first."""


def active_of(source: Optional[AlertSource]) -> Sequence[Mapping[str, Any]]:
    """The active alerts of ``source`` (none without a source)."""
    return source.active() if source is not None else []


def decode(value: Any) -> Any:
    """A stored value as the views hold it: the exact wire strings become their floats
    (anything else, ints included, is kept as it is so ``to_json`` gives it back)."""
    return NONFINITE_STRINGS.get(value, value) if type(value) is str else value


@dataclass(frozen=True)
class AlertCounts:
    """Active alerts by state."""

    firing: int = 0
    pending: int = 0

    @classmethod
    def of(cls, alerts: Iterable[Mapping[str, Any]]) -> "AlertCounts":
        counts = {"firing": 0, "pending": 0}
        for a in alerts:
            state = a.get("state")
            if state in counts:
                counts[state] += 1
        return cls(**counts)

    def to_json(self) -> Dict[str, int]:
        return {"firing": self.firing, "pending": self.pending}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "AlertCounts":
        return cls(firing=int(d.get("firing", 0)), pending=int(d.get("pending", 0)))


#: The fields every alert view has, in the order the API sends them.
ALERT_FIELDS = ("alert", "state", "severity", "run", "rank", "step", "first_step", "value",
                "summary", "cause", "fix", "runbook_url", "t", "active_since", "caused_by",
                "reason")


@dataclass(frozen=True)
class AlertView:
    """One alert transition (cause and fix included); ``extra`` holds any other field."""

    alert: Optional[str] = None
    state: Optional[str] = None
    severity: Optional[str] = None
    run: Optional[str] = None
    rank: Optional[int] = None
    step: Optional[int] = None
    first_step: Optional[int] = None
    value: Optional[float] = None
    summary: Optional[str] = None
    cause: Optional[str] = None
    fix: Optional[str] = None
    runbook_url: Optional[str] = None
    t: Optional[float] = None
    active_since: Optional[float] = None
    #: The alert firing on the same rank this one is a consequence of (not notified on its own).
    caused_by: Optional[str] = None
    #: Why it ended other than by its condition (``run ended``), else None.
    reason: Optional[str] = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> "AlertView":
        """The view of a stored transition (a feed's or the engine's dict)."""
        known = {k: decode(record.get(k)) for k in ALERT_FIELDS}
        extra = {k: decode(v) for k, v in record.items() if k not in known}
        return cls(**known, extra=extra)

    def to_json(self) -> Dict[str, Any]:
        out = {k: to_wire(getattr(self, k)) for k in ALERT_FIELDS}
        if self.extra:
            out["extra"] = {k: to_wire(v) for k, v in self.extra.items()}
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "AlertView":
        known = {k: from_wire(d.get(k)) if k in _NUMERIC else d.get(k) for k in ALERT_FIELDS}
        extra = {k: from_wire(v) for k, v in (d.get("extra") or {}).items()}
        return cls(**known, extra=extra)


_NUMERIC = frozenset(("rank", "step", "first_step", "value", "t", "active_since"))


def _alert_list(items: Any) -> Tuple[AlertView, ...]:
    return tuple(AlertView.from_json(a) for a in items or ())


@dataclass(frozen=True)
class AlertsView:
    """The active alerts (``GET /alerts``)."""

    alerts: Tuple[AlertView, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        return {"alerts": [a.to_json() for a in self.alerts]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "AlertsView":
        return cls(_alert_list(d.get("alerts")))


@dataclass(frozen=True)
class AlertHistoryView:
    """Recent alert transitions, oldest first (``GET /alerts/history``)."""

    transitions: Tuple[AlertView, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        return {"transitions": [a.to_json() for a in self.transitions]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "AlertHistoryView":
        return cls(_alert_list(d.get("transitions")))


def alerts(source: Optional[AlertSource], state: str = "active", run_id: Optional[str] = None,
           rank_id: Optional[int] = None) -> AlertsView:
    """The active alerts, or only the ``firing`` / ``pending`` ones, of a run and rank."""
    items: List[Mapping[str, Any]] = list(active_of(source))
    if state != "active":
        items = [a for a in items if a.get("state") == state]
    if run_id is not None:
        items = [a for a in items if a.get("run") == run_id]
    if rank_id is not None:
        items = [a for a in items if a.get("rank") == rank_id]
    return AlertsView(tuple(AlertView.of(a) for a in items))


def alert_history(source: Optional[AlertSource], limit: int,
                  run_id: Optional[str] = None) -> AlertHistoryView:
    """The newest ``limit`` transitions (of one run when ``run_id`` is given)."""
    items = list(source.history(limit if run_id is None else 10**9)) if source is not None else []
    if run_id is not None:
        items = [a for a in items if a.get("run") == run_id][-limit:]
    return AlertHistoryView(tuple(AlertView.of(a) for a in items))
