"""Every rank of a run in one columnar view (``GET /api/v1/runs/{run}/overview``).

What a rank table needs per refresh, for all ranks at once and in arrays (one
entry per rank, in the order of ``ranks``) rather than one object per rank:
status, last step, age (since the last step event) and whether the rank is stale
(:mod:`msdoctor.core.liveness`), the latest value of the asked signals (None when a
rank never recorded one; rates as of now, so 0 on a stale or ended rank), the run's
totals over its live ranks, alert counts, and the last few points of one signal
for a sparkline. ``alerts_version`` changes whenever the alert set changes, so
a poller can skip the alert lists while it stays the same.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from msdoctor.core.liveness import RATE_SIGNALS, gone_after, is_gone, rank_status, stale_step_time
from msdoctor.core.state import RankState, Store
from msdoctor.core.views.alert_views import AlertSource, active_of
from msdoctor.core.views.run_views import run_state
from msdoctor.wire.numbers import NONFINITE_STRINGS, from_wire, to_wire

#: Most sparkline points per rank a request may ask for.
MAX_SPARK_POINTS = 256


def alerts_version(source: Optional[AlertSource],
                   active: Optional[Sequence[Mapping[str, Any]]] = None) -> str:
    """A token that changes whenever the source's active set or history changes.

    Uses the source's ``version`` counter when it has one, else a fingerprint of its
    newest transition and its active count (every change appends a transition)."""
    if source is None:
        return "none"
    version = getattr(source, "version", None)
    if version is not None:
        return f"v{version}"
    last = source.history(1)
    newest = last[-1] if last else {}
    active = source.active() if active is None else active
    keys = ("t", "alert", "run", "rank", "state", "step", "value")
    return "f" + "|".join(str(newest.get(k)) for k in keys) + f"|{len(active)}"


#: The exact wire strings (what the API writes), looked up before the lenient decoder.
_EXACT = {**NONFINITE_STRINGS}


def _column(values: Sequence[Any]) -> List[Any]:
    """JSON-safe copy: floats that are not finite become their wire strings, None stays None
    (numpy finds them: only those entries are looked at one by one)."""
    out = list(values)
    if not out:
        return out
    found = np.flatnonzero(~np.isfinite(np.array(out, dtype=np.float64)))   # None reads NaN
    for i in found.tolist():
        if out[i] is not None:
            out[i] = to_wire(out[i])
    return out


def _floats(values: Sequence[Any]) -> Tuple[Any, ...]:
    """A decoded column: wire strings back to floats, None kept (inline tests: this runs
    for every value of every rank on every refresh)."""
    return tuple([v if type(v) is float or v is None else _EXACT.get(v) or from_wire(v)
                  for v in values])


@dataclass(frozen=True)
class SparkView:
    """The last ``points`` values of ``signal`` per rank (empty where not recorded)."""

    signal: str
    points: int
    values: Tuple[Tuple[float, ...], ...] = ()

    @classmethod
    def of(cls, states: Sequence[RankState], signal: str, points: int) -> "SparkView":
        if points <= 0:
            return cls(signal, points, tuple(() for _ in states))
        parts = []
        for state in states:
            series = state.series.get(signal)
            parts.append(series.values[-points:] if series is not None else np.empty(0))
        flat = np.concatenate(parts).tolist() if parts else []
        out, i = [], 0
        for part in parts:
            n = int(part.shape[0])
            out.append(tuple(flat[i:i + n]))
            i += n
        return cls(signal, points, tuple(out))

    def to_json(self) -> Dict[str, Any]:
        flat = _column([v for values in self.values for v in values])   # one pass, not per rank
        out, i = [], 0
        for values in self.values:
            out.append(flat[i:i + len(values)])
            i += len(values)
        return {"signal": self.signal, "points": self.points, "values": out}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SparkView":
        lists = d.get("values") or ()
        flat = _floats([v for values in lists for v in values])    # one pass, not per rank
        out, i = [], 0
        for values in lists:
            out.append(flat[i:i + len(values)])
            i += len(values)
        return cls(d["signal"], int(d["points"]), tuple(out))


@dataclass(frozen=True)
class OverviewView:
    """Every rank of a run as parallel tuples (see the module docstring)."""

    run: str
    ranks: Tuple[int, ...] = ()
    status: Tuple[str, ...] = ()
    last_step: Tuple[Optional[int], ...] = ()
    age_s: Tuple[Optional[float], ...] = ()
    latest: Mapping[str, Tuple[Optional[float], ...]] = field(default_factory=dict)
    firing: Tuple[int, ...] = ()
    pending: Tuple[int, ...] = ()
    alerts_version: str = "none"
    spark: Optional[SparkView] = None
    stale: Tuple[bool, ...] = ()
    #: sums over the live ranks: ``tokens_per_s``; counts ``running`` and ``stale``
    totals: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {
            "run": self.run, "ranks": list(self.ranks), "status": list(self.status),
            "last_step": list(self.last_step), "age_s": list(self.age_s),
            "latest": {name: _column(column) for name, column in self.latest.items()},
            "alerts": {"firing": list(self.firing), "pending": list(self.pending)},
            "alerts_version": self.alerts_version, "stale": list(self.stale),
            "totals": dict(self.totals),
        }
        if self.spark is not None:
            body["spark"] = self.spark.to_json()
        return body

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "OverviewView":
        alerts = d.get("alerts") or {}
        spark = d.get("spark")
        return cls(
            run=d["run"], ranks=tuple(d.get("ranks") or ()), status=tuple(d.get("status") or ()),
            last_step=tuple(d.get("last_step") or ()), age_s=tuple(d.get("age_s") or ()),
            latest={name: _floats(column) for name, column in (d.get("latest") or {}).items()},
            firing=tuple(alerts.get("firing") or ()), pending=tuple(alerts.get("pending") or ()),
            alerts_version=str(d.get("alerts_version", "none")),
            spark=SparkView.from_json(spark) if spark else None,
            stale=tuple(d.get("stale") or ()), totals=dict(d.get("totals") or {}))


def overview(store: Store, source: Optional[AlertSource], run_id: str, signals: Sequence[str] = (),
             spark: Optional[str] = None, spark_points: int = 16,
             now: Optional[float] = None) -> OverviewView:
    """Every rank of ``run_id``: the asked signals (all recorded ones when none is asked),
    and a sparkline of ``spark`` when given."""
    state = run_state(store, run_id)
    ids = sorted(list(state.ranks))
    states = [state.ranks[r] for r in ids]
    now = time.time() if now is None else now
    active = active_of(source)
    firing = dict.fromkeys(ids, 0)
    pending = dict.fromkeys(ids, 0)
    for a in active:
        if a.get("run") == run_id and a.get("rank") in firing:
            counts = firing if a.get("state") == "firing" else pending
            if a.get("state") in ("firing", "pending"):
                counts[a["rank"]] += 1
    names = list(signals) or sorted(set().union(*(s.latest for s in states)))
    limit = gone_after(state.expect)            # once per request, not per rank
    # list comprehensions: this runs for every rank on every refresh
    ages = [None if s.step_t is None else now - s.step_t for s in states]
    stale = [s.stale(now) for s in states]
    live = [s.status == "running" and not x for s, x in zip(states, stale)]
    latest = {name: [s.latest.get(name) for s in states] for name in names}
    for name, column in latest.items():
        if name in RATE_SIGNALS:
            latest[name] = [v if ok or v is None else 0.0 for v, ok in zip(column, live)]
        elif name == "step_time_s":
            latest[name] = [stale_step_time(v, a) if x and v is not None and a is not None else v
                            for v, a, x in zip(column, ages, stale)]
    tps = [s.latest.get("tokens_per_s") for s, ok in zip(states, live) if ok]
    totals = {"tokens_per_s": float(sum(v for v in tps if v is not None and v == v)),
              "running": float(sum(live)), "stale": float(sum(stale))}
    return OverviewView(
        run=run_id, ranks=tuple(ids),
        status=tuple([rank_status(s.status, is_gone(s.running, s.received, now, limit))
                      for s in states]),
        last_step=tuple([s.last_step for s in states]), age_s=tuple(ages),
        latest={name: tuple(column) for name, column in latest.items()},
        firing=tuple([firing[r] for r in ids]), pending=tuple([pending[r] for r in ids]),
        alerts_version=alerts_version(source, active),
        spark=SparkView.of(states, spark, spark_points) if spark else None,
        stale=tuple(stale), totals=totals)
