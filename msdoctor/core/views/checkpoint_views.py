"""The checkpoints of a run, each marked poisoned (saved while an anomaly lasted) or the last
good one an alert named (``/api/v1/runs/{run}/checkpoints``, the TUI's and the report's lists),
and the run's goodput (``/api/v1/runs/{run}/goodput``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from msdoctor.core import checkpoints as ckpt
from msdoctor.core.alerts.active import HISTORY
from msdoctor.core.state import Store
from msdoctor.core.views.alert_views import AlertSource
from msdoctor.core.views.run_views import run_state
from msdoctor.wire.numbers import from_wire, to_wire


@dataclass(frozen=True)
class CheckpointView:
    """One saved checkpoint of one rank."""

    rank: int
    step: int
    path: Optional[str] = None
    t: Optional[float] = None
    size_bytes: Optional[int] = None
    save_s: Optional[float] = None
    poisoned_by: Optional[str] = None     # the alert whose anomaly it was saved during
    last_good: bool = False               # the one an alert named to resume from

    def to_json(self) -> Dict[str, Any]:
        return {"rank": self.rank, "step": self.step, "path": self.path, "t": self.t,
                "size_bytes": self.size_bytes, "save_s": to_wire(self.save_s),
                "poisoned_by": self.poisoned_by, "last_good": self.last_good}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CheckpointView":
        save_s = d.get("save_s")
        return cls(rank=int(d["rank"]), step=int(d["step"]), path=d.get("path"), t=d.get("t"),
                   size_bytes=d.get("size_bytes"),
                   save_s=None if save_s is None else from_wire(save_s),
                   poisoned_by=d.get("poisoned_by"), last_good=bool(d.get("last_good")))


@dataclass(frozen=True)
class CheckpointsView:
    """The checkpoints of a run, by rank then step."""

    run: str
    checkpoints: Tuple[CheckpointView, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        return {"run": self.run, "checkpoints": [c.to_json() for c in self.checkpoints]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CheckpointsView":
        return cls(d["run"], tuple(CheckpointView.from_json(c) for c in d.get("checkpoints") or ()))


def records_of(source: Optional[AlertSource]) -> List[Mapping[str, Any]]:
    """The transitions the marks are judged from: the recent history and the active set."""
    if source is None:
        return []
    return list(source.history(HISTORY)) + list(source.active())


def marked(run_id: str, per_rank: Mapping[int, Sequence[Mapping[str, Any]]],
           records: Sequence[Mapping[str, Any]]) -> Tuple[CheckpointView, ...]:
    """Every rank's checkpoints marked against the anomalies of that rank."""
    out: List[CheckpointView] = []
    for r in sorted(per_rank):
        spans = ckpt.poisoning(records, run_id, r)
        for c in ckpt.mark(per_rank[r], spans):
            out.append(CheckpointView(rank=r, step=int(c["step"]), path=c.get("path"),
                                      t=c.get("t"), size_bytes=c.get("size_bytes"),
                                      save_s=c.get("save_s"), poisoned_by=c["poisoned_by"],
                                      last_good=c["last_good"]))
    return tuple(out)


def checkpoints(store: Store, source: Optional[AlertSource], run_id: str) -> CheckpointsView:
    state = run_state(store, run_id)
    per_rank = {r: list(s.checkpoints) for r, s in list(state.ranks.items())}
    return CheckpointsView(run_id, marked(run_id, per_rank, records_of(source)))


@dataclass(frozen=True)
class GoodputView:
    """Productive time over wall time of a run and the badput by cause (``msdoctor.core.goodput``)."""

    run: str
    wall_s: float = 0.0
    productive_s: float = 0.0
    ratio: Optional[float] = None
    badput_s: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, run: str, summary: Mapping[str, Any]) -> "GoodputView":
        return cls(run, float(summary["wall_s"]), float(summary["productive_s"]),
                   summary.get("ratio"), dict(summary.get("badput_s") or {}))

    def to_json(self) -> Dict[str, Any]:
        return {"run": self.run, "wall_s": self.wall_s, "productive_s": self.productive_s,
                "ratio": self.ratio, "badput_s": dict(self.badput_s)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "GoodputView":
        return cls.of(d["run"], d)


def goodput(store: Store, run_id: str) -> GoodputView:
    return GoodputView.of(run_id, run_state(store, run_id).goodput.summary())


__all__ = ["CheckpointView", "CheckpointsView", "GoodputView", "checkpoints", "goodput", "marked"]
