"""Series read models: the points of one signal since a step, downsampled on request."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from msdoctor.core.downsample import minmax
from msdoctor.core.state import RankState, Store
from msdoctor.core.views.run_views import NotFound, rank_state, run_state
from msdoctor.wire.numbers import from_wire, to_wire_list

#: Most points a series request may ask for.
MAX_POINTS_LIMIT = 100_000


@dataclass(frozen=True)
class SeriesView:
    """One signal of one rank: steps and values (NaN where the value was not finite),
    how many points there were, and whether they were downsampled."""

    steps: Tuple[int, ...] = ()
    values: Tuple[float, ...] = ()
    points: int = 0
    downsampled: bool = False

    @classmethod
    def of(cls, state: RankState, signal: str, since: int,
           max_points: Optional[int]) -> "SeriesView":
        series = state.series.get(signal)
        if series is None:
            raise NotFound(f"rank {state.rank} has no signal {signal!r}; it has: "
                           f"{', '.join(sorted(state.series)) or 'none'}")
        steps, values = series.since(since)
        total = int(steps.shape[0])
        if max_points is not None and total > max_points:
            steps, values = minmax(steps, values, max_points)
        return cls(tuple(steps.tolist()), tuple(values.astype("float64").tolist()), total,
                   int(steps.shape[0]) < total)

    def to_json(self) -> Dict[str, Any]:
        return {"steps": list(self.steps), "values": to_wire_list(self.values),
                "points": self.points, "downsampled": self.downsampled}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SeriesView":
        return cls(tuple(d.get("steps") or ()), tuple(_floats(d.get("values") or ())),
                   int(d.get("points") or 0), bool(d.get("downsampled")))


def _floats(values: Sequence[Any]) -> list:
    """Wire values as floats (``"nan"`` decoded, None read as NaN)."""
    out = []
    for v in values:
        v = from_wire(v)
        out.append(float("nan") if v is None else float(v))
    return out


@dataclass(frozen=True)
class RankSeriesView:
    """Some signals of one rank since a step (``GET /runs/{run}/ranks/{rank}/series``)."""

    run: str
    rank: int
    since: int = 0
    last_step: Optional[int] = None
    series: Mapping[str, SeriesView] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        return {"run": self.run, "rank": self.rank, "since": self.since,
                "last_step": self.last_step,
                "series": {name: s.to_json() for name, s in self.series.items()}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RankSeriesView":
        return cls(d["run"], int(d["rank"]), d.get("since", 0), d.get("last_step"),
                   {name: SeriesView.from_json(s) for name, s in (d.get("series") or {}).items()})


@dataclass(frozen=True)
class RunSeriesView:
    """One signal on every rank that records it (``GET /runs/{run}/series``)."""

    run: str
    signal: str
    since: int = 0
    ranks: Mapping[int, SeriesView] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        return {"run": self.run, "signal": self.signal, "since": self.since,
                "ranks": {str(r): s.to_json() for r, s in self.ranks.items()}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RunSeriesView":
        return cls(d["run"], d["signal"], d.get("since", 0),
                   {int(r): SeriesView.from_json(s) for r, s in (d.get("ranks") or {}).items()})


def rank_series(store: Store, run_id: str, rank_id: int, signals: Sequence[str], since: int = 0,
                max_points: Optional[int] = None) -> RankSeriesView:
    """The asked signals of one rank (all of them when none is asked)."""
    state = rank_state(store, run_id, rank_id)
    wanted = list(signals) or sorted(state.series)
    return RankSeriesView(run_id, rank_id, since, state.last_step,
                          {s: SeriesView.of(state, s, since, max_points) for s in wanted})


def run_series(store: Store, run_id: str, signal: str, since: int = 0,
               max_points: Optional[int] = None) -> RunSeriesView:
    """One signal on every rank of a run that records it."""
    state = run_state(store, run_id)
    out = {}
    for r in sorted(list(state.ranks)):
        rank = state.ranks[r]
        if signal in rank.series:
            out[r] = SeriesView.of(rank, signal, since, max_points)
    if not out:
        raise NotFound(f"no rank of run {run_id!r} has signal {signal!r}")
    return RunSeriesView(run_id, signal, since, out)
