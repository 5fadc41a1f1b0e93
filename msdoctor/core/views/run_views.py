"""Run and rank read models: the sidecar's status, the runs, the ranks of a run, one rank.

Pure functions over the :class:`~msdoctor.core.state.Store` and an
:class:`~msdoctor.core.views.alert_views.AlertSource`; they copy what they return and never
change the state.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from msdoctor import __version__
from msdoctor.core.liveness import gone_after, is_gone, live_values, rank_status, run_end_of
from msdoctor.core.state import RankState, RunState, Store
from msdoctor.core.views.alert_views import AlertCounts, AlertSource, AlertView, active_of
from msdoctor.wire.errors import MsdoctorError
from msdoctor.wire.numbers import from_wire, to_wire


class NotFound(MsdoctorError, LookupError):
    """A run, rank or signal that the state does not have."""


def run_state(store: Store, run: str) -> RunState:
    state = store.runs.get(run)
    if state is None:
        raise NotFound(f"no run {run!r}; known runs: {', '.join(sorted(store.runs)) or 'none'}")
    return state


def rank_state(store: Store, run: str, rank: int) -> RankState:
    state = run_state(store, run).ranks.get(rank)
    if state is None:
        raise NotFound(f"run {run!r} has no rank {rank}")
    return state


@dataclass(frozen=True)
class StepRange:
    """The lowest and the highest last step over the ranks of a run."""

    min: int
    max: int

    def to_json(self) -> Dict[str, int]:
        return {"min": self.min, "max": self.max}


@dataclass(frozen=True)
class RunView:
    """One run: world size, config, expectations, rank count and statuses, steps, alerts."""

    run: str
    world_size: Optional[int] = None
    config: Mapping[str, Any] = field(default_factory=dict)
    expect: Mapping[str, Any] = field(default_factory=dict)
    ranks: int = 0
    status: Mapping[str, int] = field(default_factory=dict)     # status -> rank count
    last_step: Optional[StepRange] = None
    alerts: AlertCounts = AlertCounts()
    #: running ranks with no step for longer than the staleness limit (core.liveness)
    stale: int = 0
    #: None while a rank runs; else ``outcome`` (ok / failed), ``t`` and final ``statuses``
    ended: Optional[Mapping[str, Any]] = None

    @classmethod
    def of(cls, state: RunState, active: Sequence[Mapping[str, Any]],
           now: Optional[float] = None) -> "RunView":
        now = time.time() if now is None else now
        ranks = list(state.ranks.values())
        steps = [r.last_step for r in ranks if r.last_step is not None]
        statuses: Dict[str, int] = {}
        limit = gone_after(state.expect)            # once per run, not per rank
        for r in ranks:
            status = rank_status(r.status, is_gone(r.running, r.received, now, limit))
            statuses[status] = statuses.get(status, 0) + 1
        return cls(run=state.run, world_size=state.world_size, config=dict(state.config),
                   expect=dict(state.expect), ranks=len(ranks), status=statuses,
                   last_step=StepRange(min(steps), max(steps)) if steps else None,
                   alerts=AlertCounts.of(a for a in active if a.get("run") == state.run),
                   stale=sum(1 for r in ranks if r.stale(now)),
                   ended=run_end_of(ranks, now, state.expect))

    def to_json(self) -> Dict[str, Any]:
        return {"run": self.run, "world_size": self.world_size, "config": dict(self.config),
                "expect": dict(self.expect), "ranks": self.ranks, "status": dict(self.status),
                "last_step": None if self.last_step is None else self.last_step.to_json(),
                "alerts": self.alerts.to_json(), "stale": self.stale,
                "ended": None if self.ended is None else dict(self.ended)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RunView":
        steps = d.get("last_step")
        return cls(run=d["run"], world_size=d.get("world_size"), config=dict(d.get("config") or {}),
                   expect=dict(d.get("expect") or {}), ranks=int(d.get("ranks") or 0),
                   status=dict(d.get("status") or {}),
                   last_step=StepRange(steps["min"], steps["max"]) if steps else None,
                   alerts=AlertCounts.from_json(d.get("alerts") or {}),
                   stale=int(d.get("stale") or 0), ended=d.get("ended"))


def _copy(d: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    return None if d is None else dict(d)


@dataclass(frozen=True)
class RankDetail:
    """What only the one-rank view adds: end, checkpoint, stop, signals, active alerts."""

    run_end: Optional[Mapping[str, Any]] = None
    checkpoint: Optional[Mapping[str, Any]] = None
    stop: Optional[Mapping[str, Any]] = None
    signals: Tuple[str, ...] = ()
    active_alerts: Tuple[AlertView, ...] = ()


@dataclass(frozen=True)
class RankView:
    """One rank: status, last step, the latest value of every signal, counters, alerts."""

    run: str
    rank: int
    status: str = "running"
    last_step: Optional[int] = None
    t: Optional[float] = None
    age_s: Optional[float] = None           # seconds since the last step event
    latest: Mapping[str, float] = field(default_factory=dict)       # sorted by name; rates as of now
    counters: Mapping[str, int] = field(default_factory=dict)
    alerts: AlertCounts = AlertCounts()
    detail: Optional[RankDetail] = None
    stale: bool = False

    @classmethod
    def of(cls, run: str, state: RankState, active: Sequence[Mapping[str, Any]],
           now: Optional[float] = None, detail: bool = False,
           expect: Optional[Mapping[str, Any]] = None) -> "RankView":
        mine = [a for a in active if a.get("run") == run and a.get("rank") == state.rank]
        more = None
        if detail:
            more = RankDetail(run_end=_copy(state.run_end), checkpoint=_copy(state.checkpoint),
                              stop=_copy(state.stop),
                              signals=tuple(sorted(state.series)),
                              active_alerts=tuple(AlertView.of(a) for a in mine))
        now = time.time() if now is None else now
        age, stale = state.age(now), state.stale(now)
        latest = live_values(dict(sorted(dict(state.latest).items())), state.running, stale, age)
        return cls(run=run, rank=state.rank,
                   status=rank_status(state.status, state.gone(now, dict(expect or {}))),
                   last_step=state.last_step, t=state.t, age_s=age, latest=latest,
                   counters=dict(state.counters), alerts=AlertCounts.of(mine), detail=more,
                   stale=stale)

    def to_json(self) -> Dict[str, Any]:
        out = {"run": self.run, "rank": self.rank, "status": self.status,
               "last_step": self.last_step, "t": self.t, "age_s": self.age_s,
               "stale": self.stale, "latest": {k: to_wire(v) for k, v in self.latest.items()},
               "counters": dict(self.counters), "alerts": self.alerts.to_json()}
        d = self.detail
        if d is not None:
            out.update(run_end=d.run_end, checkpoint=d.checkpoint, stop=d.stop,
                       signals=list(d.signals), active_alerts=[a.to_json() for a in d.active_alerts])
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RankView":
        detail = None
        if "signals" in d:
            detail = RankDetail(run_end=d.get("run_end"), checkpoint=d.get("checkpoint"),
                                stop=d.get("stop"), signals=tuple(d.get("signals") or ()),
                                active_alerts=tuple(AlertView.from_json(a)
                                                    for a in d.get("active_alerts") or ()))
        return cls(run=d["run"], rank=int(d["rank"]), status=d.get("status", "running"),
                   last_step=d.get("last_step"), t=d.get("t"), age_s=d.get("age_s"),
                   stale=bool(d.get("stale", False)),
                   latest={k: from_wire(v) for k, v in (d.get("latest") or {}).items()},
                   counters=dict(d.get("counters") or {}),
                   alerts=AlertCounts.from_json(d.get("alerts") or {}), detail=detail)


@dataclass(frozen=True)
class RunsView:
    """Every run the state knows (``GET /runs``)."""

    runs: Tuple[RunView, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        return {"runs": [r.to_json() for r in self.runs]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RunsView":
        return cls(tuple(RunView.from_json(r) for r in d.get("runs") or ()))


@dataclass(frozen=True)
class RanksView:
    """Every rank of one run, by rank (``GET /runs/{run}/ranks``)."""

    run: str
    ranks: Tuple[RankView, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        return {"run": self.run, "ranks": [r.to_json() for r in self.ranks]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RanksView":
        return cls(d["run"], tuple(RankView.from_json(r) for r in d.get("ranks") or ()))


class Deliverer(Protocol):
    """What the status view reads of an alert deliverer."""

    receiver: str
    stats: Mapping[str, Any]


@dataclass(frozen=True)
class DeliveryView:
    """One alert receiver and its delivery counters."""

    receiver: str
    stats: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        return {"receiver": self.receiver, **dict(self.stats)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "DeliveryView":
        return cls(str(d.get("receiver", "")), {k: v for k, v in d.items() if k != "receiver"})


@dataclass(frozen=True)
class StatusView:
    """The sidecar itself: version, run directory, uptime, sizes, alerts, delivery."""

    version: str
    run_dir: str
    uptime_s: float
    runs: int
    ranks: int
    alerts: AlertCounts = AlertCounts()
    delivery: Tuple[DeliveryView, ...] = ()
    #: the bound on run ids and what it refused (``max_runs``, ``refused_events``, ...)
    ingest: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        return {"version": self.version, "run_dir": self.run_dir, "uptime_s": self.uptime_s,
                "runs": self.runs, "ranks": self.ranks, "alerts": self.alerts.to_json(),
                "delivery": [d.to_json() for d in self.delivery], "ingest": dict(self.ingest)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "StatusView":
        return cls(version=d["version"], run_dir=d["run_dir"], uptime_s=d["uptime_s"],
                   runs=d["runs"], ranks=d["ranks"], alerts=AlertCounts.from_json(d["alerts"]),
                   delivery=tuple(DeliveryView.from_json(x) for x in d.get("delivery") or ()),
                   ingest=dict(d.get("ingest") or {}))


# -- queries --------------------------------------------------------------------

def status(store: Store, source: Optional[AlertSource], deliverers: Sequence[Deliverer],
           started: float, run_dir: str) -> StatusView:
    return StatusView(
        version=__version__, run_dir=run_dir, uptime_s=time.time() - started,
        runs=len(store.runs), ranks=sum(len(r.ranks) for r in list(store.runs.values())),
        alerts=AlertCounts.of(active_of(source)),
        delivery=tuple(DeliveryView(d.receiver, dict(d.stats)) for d in deliverers),
        ingest=store.run_limit.to_json())


def runs(store: Store, source: Optional[AlertSource]) -> RunsView:
    active = active_of(source)
    return RunsView(tuple(RunView.of(r, active) for r in list(store.runs.values())))


def run(store: Store, source: Optional[AlertSource], run_id: str) -> RunView:
    return RunView.of(run_state(store, run_id), active_of(source))


def ranks(store: Store, source: Optional[AlertSource], run_id: str) -> RanksView:
    state = run_state(store, run_id)
    now = time.time()
    by_rank: Dict[Any, List[Mapping[str, Any]]] = {}     # one pass, not one per rank
    for a in active_of(source):
        if a.get("run") == run_id:
            by_rank.setdefault(a.get("rank"), []).append(a)
    return RanksView(run_id, tuple(RankView.of(run_id, state.ranks[r], by_rank.get(r, ()), now,
                                               expect=state.expect)
                                   for r in sorted(list(state.ranks))))


def rank(store: Store, source: Optional[AlertSource], run_id: str, rank_id: int) -> RankView:
    return RankView.of(run_id, rank_state(store, run_id, rank_id), active_of(source), detail=True,
                       expect=run_state(store, run_id).expect)


__all__ = ["NotFound", "StepRange", "RunView", "RankDetail", "RankView", "RunsView", "RanksView",
           "Deliverer", "DeliveryView", "StatusView", "status", "runs", "run", "ranks", "rank",
           "run_state", "rank_state"]
