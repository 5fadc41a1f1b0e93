"""Build a :class:`Reading` from the core's typed views (:mod:`msdoctor.core.views`).

:class:`Reader` only needs the handful of queries of :class:`Queries`, so the
HTTP source (views decoded from ``/api/v1`` JSON) and the embedded source (views
read from the core in this process) build identical snapshots.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from msdoctor.core.state import WALL_TIME
from msdoctor.core.views import (
    AlertHistoryView,
    AlertsView,
    AlertView,
    CheckpointsView,
    GoodputView,
    LayersView,
    OverviewView,
    RankSeriesView,
    RankView,
    RunsView,
    RunView,
)
from msdoctor.tui.columns import SPARK_WIDTH
from msdoctor.tui.model import (
    AlertItem,
    ChartData,
    RankRow,
    Reading,
    RunSummary,
    _median,
    by_severity,
    judge,
    worst,
)
from msdoctor.wire.errors import MsdoctorError
from msdoctor.wire.numbers import as_float

#: Signals the chart pane draws (memory picks the first of its signals that is recorded).
CHART_SIGNALS = ("loss", "grad_norm", "loss_scale", "tokens_per_s", "mem_device_bytes",
                 "mem_host_rss_bytes", WALL_TIME)
SPARK_SIGNAL = "loss"
SPARK_POINTS = SPARK_WIDTH       # the sparkline draws the last this many points: no more are sent
#: The latest values the rank table and the health judgement read (``columns.py``, ``judge``).
ROW_SIGNALS = ("loss", "grad_norm", "loss_scale", "tokens_per_s", "step_time_s",
               "data_wait_share", "mem_device_bytes", "mem_host_rss_bytes", "update_ratio")
CHART_POINTS = 400
HISTORY_LIMIT = 1000
#: Steps the layers pane fetches (it draws the newest that fit its width).
LAYER_STEPS = 240


class SourceError(MsdoctorError):
    """The data source cannot be read now (unreachable, refused, bad answer)."""


class NotFoundError(SourceError):
    """The run, rank or signal does not exist (yet): not in the state, or a 404 from the API."""


class Queries(Protocol):
    """The queries a snapshot is built from (``msdoctor.tui.queries`` answers them in
    process or over HTTP); a missing run, rank or signal raises :class:`NotFoundError`."""

    def runs(self) -> RunsView: ...

    def overview(self, run: str, signals: Sequence[str], spark: Optional[str],
                 spark_points: int) -> OverviewView: ...

    def alerts(self, run: str) -> AlertsView: ...

    def history(self, run: str, limit: int) -> AlertHistoryView: ...

    def rank(self, run: str, rank: int) -> RankView: ...

    def rank_series(self, run: str, rank: int, signals: Sequence[str],
                    max_points: int, since: int = 0) -> RankSeriesView: ...

    def checkpoints(self, run: str) -> CheckpointsView: ...

    def goodput(self, run: str) -> GoodputView: ...

    def layers(self, run: str, rank: int, max_steps: int) -> LayersView: ...


@dataclass(frozen=True)
class Request:
    """What the UI wants in the next snapshot."""

    run: Optional[str] = None               # None: the newest run
    charts: bool = False
    chart_ranks: Tuple[int, ...] = ()       # empty: the worst rank
    chart_points: int = CHART_POINTS
    chart_window: Optional[int] = None      # only the last this many steps (None: all)
    curves: bool = False                    # the charts are the overview's worst-rank curves
    spark_signal: Optional[str] = SPARK_SIGNAL   # None: no sparklines (the table is hidden)
    checkpoints: bool = False               # the checkpoints pane is open
    layers: bool = False                    # the layers pane is open (the picked or worst rank)


def alert_item(a: AlertView) -> AlertItem:
    """The TUI's alert row of an alert view."""
    return AlertItem(
        alert="?" if a.alert is None else str(a.alert),
        state="?" if a.state is None else str(a.state), severity=str(a.severity or "warning"),
        run="" if a.run is None else str(a.run),
        rank=a.rank if isinstance(a.rank, int) else None, step=a.step, first_step=a.first_step,
        value=as_float(a.value), summary=str(a.summary or ""), cause=str(a.cause or ""),
        fix=str(a.fix or ""), runbook_url=str(a.runbook_url or ""), t=as_float(a.t),
        caused_by=str(a.caused_by) if a.caused_by else None)


class Reader:
    """Build snapshots from the answers of ``queries``."""

    def __init__(self, queries: Queries, label: str, empty_hint: str = "") -> None:
        self.queries = queries
        self.label = label
        self.empty_hint = empty_hint
        self._alerts: Dict[str, tuple] = {}    # run -> (alerts_version, active, history, resolved)
        self._alert_cells: Tuple[Any, Dict[Optional[int], tuple]] = (None, {})

    def read(self, request: Request = Request()) -> Reading:
        runs = self.queries.runs().runs
        names = tuple(str(r.run) for r in runs)
        if not runs:
            return Reading(source=self.label, empty_hint=self.empty_hint)
        run_view = next((r for r in runs if r.run == request.run), runs[-1])
        run = str(run_view.run)
        view = self.queries.overview(run, ROW_SIGNALS, request.spark_signal, SPARK_POINTS)
        active, history, resolved = self._alert_lists(run, view.alerts_version)
        rows = judge(self._rows(view, self._cells(active)))
        summary = replace(self._summary(run_view, rows, active), goodput=self._goodput(run))
        charts = None
        fallback = summary.worst_rank if summary.worst_rank is not None else \
            (worst(rows).rank if rows else None)    # type: ignore[union-attr]
        if request.charts:
            picked = request.chart_ranks or ((fallback,) if fallback is not None else ())
            charts = self._charts(run, picked, request.chart_points, history,
                                  request.chart_window)
        kept = self._checkpoints(run) if request.checkpoints else None
        layer_rank = self._layer_rank(request, active, fallback)
        layers = self._layers(run, layer_rank) if request.layers and layer_rank is not None \
            else None
        return Reading(source=self.label, runs=names, run=summary, ranks=tuple(rows),
                        active=active, resolved=resolved, charts=charts, checkpoints=kept,
                        layers=layers,
                        empty_hint="" if rows else self.empty_hint)

    # -- parts -----------------------------------------------------------------
    def _goodput(self, run: str) -> Optional[float]:
        """The run's goodput ratio (None: not known yet, or a sidecar without it)."""
        try:
            return self.queries.goodput(run).ratio
        except SourceError:
            return None

    @staticmethod
    def _layer_rank(request: Request, active: Sequence[AlertItem],
                    fallback: Optional[int]) -> Optional[int]:
        """The rank the layers pane shows: the picked one, else the worst."""
        if request.chart_ranks:
            return request.chart_ranks[0]
        return fallback

    def _layers(self, run: str, rank: int) -> Optional[LayersView]:
        try:
            return self.queries.layers(run, rank, LAYER_STEPS)
        except SourceError:
            return None

    def _checkpoints(self, run: str) -> Optional[tuple]:
        try:
            return tuple(self.queries.checkpoints(run).checkpoints)
        except SourceError:
            return None

    def _alert_lists(self, run: str, version: Optional[str]) -> tuple:
        """Active alerts, history and resolved alerts of ``run``, fetched again only when
        the overview's ``alerts_version`` says the feed changed."""
        cached = self._alerts.get(run)
        if cached is not None and version is not None and cached[0] == version:
            return cached[1:]
        active = tuple(alert_item(a) for a in self.queries.alerts(run).alerts)
        history = self._history(run)
        resolved = self._resolved(history, {a.key for a in active})
        self._alerts[run] = (version, active, history, resolved)
        return active, history, resolved

    def _history(self, run: str) -> List[AlertItem]:
        return [alert_item(a) for a in self.queries.history(run, HISTORY_LIMIT).transitions]

    @staticmethod
    def _resolved(history: Sequence[AlertItem], active: set) -> Tuple[AlertItem, ...]:
        """Alerts whose latest transition ended them (newest first), not active again; an
        alert that was pending and never fired is not among them.

        Each is shown as it read while firing (its summary, value and step then), since
        the text rendered at resolution describes the recovered value."""
        latest: Dict[Any, AlertItem] = {}
        fired: Dict[Any, AlertItem] = {}
        for a in history:
            latest[a.key] = a
            if a.state == "firing":
                fired[a.key] = a
        done = []
        for key, a in latest.items():
            if key in active or a.state in ("pending", "firing"):
                continue
            if a.state == "inactive" and key not in fired:      # only ever pending
                continue
            shown = fired.get(key, a)
            done.append(replace(shown, state="resolved", t=a.t))
        return tuple(sorted(done, key=lambda a: -(a.t or 0.0)))

    def _cells(self, active: Sequence[AlertItem]) -> Dict[Optional[int], tuple]:
        """Each rank's alert cell (names, severities, firing, pending, critical), kept while
        the reader hands out the same active list (it does until the alerts change); ranks
        with the same alerts share one cell."""
        if self._alert_cells[0] is active:
            return self._alert_cells[1]
        mine: Dict[Optional[int], List[AlertItem]] = {}
        for a in active:
            mine.setdefault(a.rank, []).append(a)
        shared: Dict[tuple, tuple] = {}
        cells: Dict[Optional[int], tuple] = {}
        for rank, theirs in mine.items():
            key = tuple([(a.alert, a.severity, a.state) for a in theirs])
            cell = shared.get(key)
            if cell is None:
                cell = shared[key] = (*by_severity(theirs),
                                      sum(1 for a in theirs if a.state == "firing"),
                                      sum(1 for a in theirs if a.state == "pending"),
                                      sum(1 for a in theirs if a.state == "firing"
                                          and a.severity == "critical"))
            cells[rank] = cell
        self._alert_cells = (active, cells)
        return cells

    @staticmethod
    def _rows(view: OverviewView, cells: Mapping[Optional[int], tuple]) -> List[RankRow]:
        """One row per rank from the overview's parallel columns and the alert cells of
        :meth:`_cells` (this runs for every rank on every refresh: one pass)."""
        none: tuple = ((), (), 0, 0, 0)
        names = list(view.latest)
        columns = [[v if type(v) is float or v is None else as_float(v) for v in values]
                   for values in view.latest.values()]
        n = len(view.ranks)
        spark = list(view.spark.values) if view.spark is not None else []
        spark += [()] * (n - len(spark))
        stale = [bool(x) for x in view.stale] + [False] * (n - len(view.stale))
        rows = []
        for rank, status, step, age, points, old, values in zip(
                view.ranks, view.status, view.last_step, view.age_s, spark, stale,
                zip(*columns) if columns else [()] * n):
            alert_names, severities, firing, pending, critical = cells.get(rank, none)
            rows.append(RankRow(
                rank=int(rank), status=str(status or "running"), last_step=step,
                age_s=age if type(age) is float else as_float(age),
                values={k: v for k, v in zip(names, values) if v is not None},
                firing=firing, pending=pending, critical=critical,
                spark=tuple(points), stale=old, alerts=alert_names, severities=severities))
        return rows

    @staticmethod
    def _summary(view: RunView, rows: Sequence[RankRow],
                 active: Sequence[AlertItem]) -> RunSummary:
        config = view.config or {}
        step = view.last_step.max if view.last_step is not None else None
        total = config.get("total_steps")
        total = int(total) if isinstance(total, (int, float)) and total > 0 else None
        times = [r.values["step_time_s"] for r in rows
                 if math.isfinite(r.values.get("step_time_s", math.nan))]
        step_time = _median(times)
        tps = [r.values["tokens_per_s"] for r in rows if r.status == "running" and not r.stale
               and math.isfinite(r.values.get("tokens_per_s", math.nan))]
        elapsed, estimated = None, False
        if step_time is not None and step is not None:
            elapsed, estimated = step * step_time, True
        eta = None
        if total is not None and step is not None and step_time is not None and step < total:
            eta = (total - step) * step_time
        bad = worst(rows)
        return RunSummary(
            run=str(view.run), model=str(config.get("model") or ""),
            world_size=view.world_size, ranks=int(view.ranks or len(rows)),
            step=step, total_steps=total, elapsed_s=elapsed, elapsed_estimated=estimated,
            tokens_per_s=sum(tps) if tps else None, eta_s=eta,
            firing=sum(1 for a in active if a.state == "firing"),
            pending=sum(1 for a in active if a.state == "pending"),
            statuses=dict(view.status), precision=str(config.get("precision") or ""),
            worst_rank=bad.rank if bad is not None and bad.health in ("bad", "warn", "stale")
            else None, ended=view.ended)

    def _charts(self, run: str, ranks: Sequence[int], points: int,
                history: Sequence[AlertItem], window: Optional[int] = None) -> ChartData:
        series: Dict[str, Dict[int, tuple]] = {}
        until: Optional[float] = None
        since = 0
        for rank in ranks:
            try:
                view = self.queries.rank(run, rank)
                if window and view.last_step is not None:
                    since = max(0, view.last_step - window + 1)
                body = self.queries.rank_series(run, rank, self._have(view), points, since)
            except NotFoundError:
                continue
            if view.t is not None and math.isfinite(view.t):
                until = view.t if until is None else max(until, view.t)
            for name, s in body.series.items():
                series.setdefault(name, {})[rank] = (list(s.steps), list(s.values))
        markers = tuple(sorted({(a.step, a.alert, a.severity) for a in history
                                if a.state == "firing" and isinstance(a.step, int)
                                and (a.rank is None or a.rank in ranks)
                                and (not window or a.step >= since)}))
        return ChartData(ranks=tuple(ranks), series=series, markers=markers, until=until,
                         window=window)

    @staticmethod
    def _have(view: RankView) -> List[str]:
        """The chart signals a rank records."""
        signals = set(view.detail.signals if view.detail is not None and view.detail.signals
                      else view.latest)
        return [s for s in CHART_SIGNALS if s in signals] or ["loss"]
