"""The queries a snapshot is built from, answered in-process or over HTTP.

Both return the typed views of :mod:`msdoctor.core.views`: :class:`CoreQueries`
reads the core directly (the embedded ``--run-dir`` source), :class:`HttpQueries`
decodes a sidecar's ``/api/v1`` JSON into the same views with ``from_json``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from msdoctor.core import views
from msdoctor.core.state import Store
from msdoctor.core.views import (
    AlertHistoryView,
    AlertSource,
    AlertsView,
    CheckpointsView,
    GoodputView,
    LayersView,
    OverviewView,
    RankSeriesView,
    RankView,
    RunsView,
)
from msdoctor.tui.reader import NotFoundError

#: ``get(path under /api/v1, query parameters) -> JSON body``; raises SourceError.
Getter = Callable[[str, Mapping[str, Any]], Dict[str, Any]]


class CoreQueries:
    """The views of a store and an alert set in this process (the caller holds the lock)."""

    def __init__(self, store: Store, alerts: Optional[AlertSource]) -> None:
        self.store = store
        self.source = alerts

    def runs(self) -> RunsView:
        return views.runs(self.store, self.source)

    def overview(self, run: str, signals: Sequence[str], spark: Optional[str],
                 spark_points: int) -> OverviewView:
        try:
            return views.overview(self.store, self.source, run, signals, spark, spark_points)
        except views.NotFound as exc:
            raise NotFoundError(str(exc)) from None

    def alerts(self, run: str) -> AlertsView:
        return views.alerts(self.source, "active", run)

    def history(self, run: str, limit: int) -> AlertHistoryView:
        return views.alert_history(self.source, limit, run)

    def rank(self, run: str, rank: int) -> RankView:
        try:
            return views.rank(self.store, self.source, run, rank)
        except views.NotFound as exc:
            raise NotFoundError(str(exc)) from None

    def checkpoints(self, run: str) -> CheckpointsView:
        try:
            return views.checkpoints(self.store, self.source, run)
        except views.NotFound as exc:
            raise NotFoundError(str(exc)) from None

    def goodput(self, run: str) -> GoodputView:
        try:
            return views.goodput(self.store, run)
        except views.NotFound as exc:
            raise NotFoundError(str(exc)) from None

    def layers(self, run: str, rank: int, max_steps: int) -> LayersView:
        try:
            return views.layers(self.store, self.source, run, rank, 0, max_steps)
        except views.NotFound as exc:
            raise NotFoundError(str(exc)) from None

    def rank_series(self, run: str, rank: int, signals: Sequence[str],
                    max_points: int, since: int = 0) -> RankSeriesView:
        try:
            return views.rank_series(self.store, run, rank, signals, since, max_points)
        except views.NotFound as exc:
            raise NotFoundError(str(exc)) from None


class HttpQueries:
    """The same views from a sidecar's ``/api/v1`` answers fetched with ``get``."""

    def __init__(self, get: Getter) -> None:
        self.get = get

    def runs(self) -> RunsView:
        return RunsView.from_json(self.get("/runs", {}))

    def overview(self, run: str, signals: Sequence[str], spark: Optional[str],
                 spark_points: int) -> OverviewView:
        return OverviewView.from_json(self.get(f"/runs/{run}/overview", {
            "signal": ",".join(signals), "spark": spark, "spark_points": spark_points}))

    def alerts(self, run: str) -> AlertsView:
        return AlertsView.from_json(self.get("/alerts", {"run": run}))

    def history(self, run: str, limit: int) -> AlertHistoryView:
        return AlertHistoryView.from_json(self.get("/alerts/history", {"run": run,
                                                                       "limit": limit}))

    def rank(self, run: str, rank: int) -> RankView:
        return RankView.from_json(self.get(f"/runs/{run}/ranks/{rank}", {}))

    def checkpoints(self, run: str) -> CheckpointsView:
        return CheckpointsView.from_json(self.get(f"/runs/{run}/checkpoints", {}))

    def goodput(self, run: str) -> GoodputView:
        return GoodputView.from_json(self.get(f"/runs/{run}/goodput", {}))

    def layers(self, run: str, rank: int, max_steps: int) -> LayersView:
        return LayersView.from_json(self.get(f"/runs/{run}/ranks/{rank}/layers",
                                             {"max_steps": max_steps}))

    def rank_series(self, run: str, rank: int, signals: Sequence[str],
                    max_points: int, since: int = 0) -> RankSeriesView:
        return RankSeriesView.from_json(self.get(f"/runs/{run}/ranks/{rank}/series", {
            "signal": ",".join(signals), "max_points": max_points, "since": since or None}))
