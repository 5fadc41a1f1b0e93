"""Read the ``/api/v1`` JSON (documented in ``docs/api.md``) into a :class:`Snapshot`.

:class:`ApiReader` only needs a ``get(path, params) -> dict`` callable, so the
HTTP source and the embedded source (which calls the same API in-process) build
identical snapshots.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from msdoctor.tui.model import (AlertItem, ChartData, RankRow, RunSummary, Snapshot, judge,
                                worst, _median)

#: Signals the chart pane draws (memory picks the first of its signals that is recorded).
CHART_SIGNALS = ("loss", "grad_norm", "loss_scale", "tokens_per_s", "mem_device_bytes",
                 "mem_host_rss_bytes")
SPARK_SIGNAL = "loss"
SPARK_POINTS = 16                # the sparkline shows the last this many points
#: The latest values the rank table and the health judgement read (``columns.py``, ``judge``).
ROW_SIGNALS = ("loss", "grad_norm", "loss_scale", "tokens_per_s", "step_time_s",
               "data_wait_share", "mem_device_bytes", "mem_host_rss_bytes", "update_ratio")
CHART_POINTS = 400
HISTORY_LIMIT = 1000


class SourceError(Exception):
    """The data source cannot be read now (unreachable, refused, bad answer)."""


class NotFoundError(SourceError):
    """A 404 from the API: the run, rank or signal does not exist (yet)."""


Getter = Callable[[str, Mapping[str, Any]], Dict[str, Any]]


@dataclass(frozen=True)
class Request:
    """What the UI wants in the next snapshot."""

    run: Optional[str] = None               # None: the newest run
    charts: bool = False
    chart_ranks: Tuple[int, ...] = ()       # empty: the worst rank
    chart_points: int = CHART_POINTS
    spark_signal: str = SPARK_SIGNAL


def number(value: Any) -> Optional[float]:
    """A JSON number or its wire string (``"nan"``, ``"inf"``, ``"-inf"``) as a float."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


_WIRE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}   # non-finite on the wire


def _value(value: Any) -> Optional[float]:
    """A wire value as a float (``"nan"`` decoded); None stays None (not recorded)."""
    return _WIRE.get(value) if type(value) is str else number(value)


def alert_item(d: Mapping[str, Any]) -> AlertItem:
    rank = d.get("rank")
    return AlertItem(
        alert=str(d.get("alert", "?")), state=str(d.get("state", "?")),
        severity=str(d.get("severity") or "warning"), run=str(d.get("run", "")),
        rank=rank if isinstance(rank, int) else None, step=d.get("step"),
        first_step=d.get("first_step"), value=number(d.get("value")),
        summary=str(d.get("summary") or ""), cause=str(d.get("cause") or ""),
        fix=str(d.get("fix") or ""), runbook_url=str(d.get("runbook_url") or ""),
        t=number(d.get("t")))


class ApiReader:
    """Build snapshots from ``/api/v1`` answers fetched with ``get``."""

    def __init__(self, get: Getter, label: str, empty_hint: str = "") -> None:
        self.get = get
        self.label = label
        self.empty_hint = empty_hint
        self._alerts: Dict[str, tuple] = {}    # run -> (alerts_version, active, history, resolved)

    def read(self, request: Request = Request()) -> Snapshot:
        runs = self.get("/runs", {}).get("runs", [])
        names = tuple(str(r["run"]) for r in runs)
        if not runs:
            return Snapshot(source=self.label, empty_hint=self.empty_hint)
        run_view = next((r for r in runs if r["run"] == request.run), runs[-1])
        run = str(run_view["run"])
        view = self.get(f"/runs/{run}/overview", {
            "signal": ",".join(ROW_SIGNALS), "spark": request.spark_signal,
            "spark_points": SPARK_POINTS})
        active, history, resolved = self._alert_lists(run, view.get("alerts_version"))
        rows = judge(self._rows(view, active))
        summary = self._summary(run_view, rows, active)
        charts = None
        if request.charts:
            picked = request.chart_ranks or ((summary.worst_rank,) if summary.worst_rank is not None
                                             else ())
            charts = self._charts(run, picked, request.chart_points, history)
        return Snapshot(source=self.label, runs=names, run=summary, ranks=tuple(rows),
                        active=active, resolved=resolved, charts=charts,
                        empty_hint="" if rows else self.empty_hint)

    # -- parts -----------------------------------------------------------------
    def _alert_lists(self, run: str, version: Optional[str]) -> tuple:
        """Active alerts, history and resolved alerts of ``run``, fetched again only when
        the overview's ``alerts_version`` says the feed changed."""
        cached = self._alerts.get(run)
        if cached is not None and version is not None and cached[0] == version:
            return cached[1:]
        active = tuple(alert_item(a) for a in self.get("/alerts", {"run": run}).get("alerts", []))
        history = self._history(run)
        resolved = self._resolved(history, {a.key for a in active})
        self._alerts[run] = (version, active, history, resolved)
        return active, history, resolved

    def _history(self, run: str) -> List[AlertItem]:
        body = self.get("/alerts/history", {"run": run, "limit": HISTORY_LIMIT})
        return [alert_item(a) for a in body.get("transitions", [])]

    @staticmethod
    def _resolved(history: Sequence[AlertItem], active: set) -> Tuple[AlertItem, ...]:
        """Alerts whose latest transition ended them (newest first), not active again.

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
            shown = fired.get(key, a)
            done.append(replace(shown, state="resolved", t=a.t))
        return tuple(sorted(done, key=lambda a: -(a.t or 0.0)))

    @staticmethod
    def _rows(view: Mapping[str, Any], active: Sequence[AlertItem]) -> List[RankRow]:
        """One row per rank from the overview's parallel arrays."""
        mine: Dict[Optional[int], List[AlertItem]] = {}
        for a in active:
            mine.setdefault(a.rank, []).append(a)
        columns = [(name, [v if type(v) is float or v is None else _value(v) for v in values])
                   for name, values in (view.get("latest") or {}).items()]
        spark = (view.get("spark") or {}).get("values") or ()
        rows = []
        for i, (rank, status, step, age) in enumerate(zip(
                view.get("ranks", ()), view.get("status", ()), view.get("last_step", ()),
                view.get("age_s", ()))):
            values = {}
            for name, column in columns:
                v = column[i]
                if v is not None:
                    values[name] = v
            theirs = mine.get(rank, ())
            points = spark[i] if i < len(spark) else ()
            rows.append(RankRow(
                rank=int(rank), status=str(status or "running"), last_step=step,
                age_s=number(age), values=values,
                firing=sum(1 for a in theirs if a.state == "firing"),
                pending=sum(1 for a in theirs if a.state == "pending"),
                critical=sum(1 for a in theirs if a.state == "firing"
                             and a.severity == "critical"),
                spark=tuple(v if type(v) is float else _WIRE.get(v, math.nan) for v in points),
                alerts=tuple(sorted({a.alert for a in theirs})) if theirs else ()))
        return rows

    @staticmethod
    def _summary(view: Mapping[str, Any], rows: Sequence[RankRow],
                 active: Sequence[AlertItem]) -> RunSummary:
        config = view.get("config") or {}
        steps = view.get("last_step") or {}
        step = steps.get("max") if isinstance(steps, dict) else None
        total = config.get("total_steps")
        total = int(total) if isinstance(total, (int, float)) and total > 0 else None
        times = [r.values["step_time_s"] for r in rows
                 if math.isfinite(r.values.get("step_time_s", math.nan))]
        step_time = _median(times)
        tps = [r.values["tokens_per_s"] for r in rows if r.status == "running"
               and math.isfinite(r.values.get("tokens_per_s", math.nan))]
        elapsed, estimated = number(view.get("elapsed_s")), False   # if the API ever sends it
        if elapsed is None and step_time is not None and step is not None:
            elapsed, estimated = step * step_time, True
        eta = None
        if total is not None and step is not None and step_time is not None and step < total:
            eta = (total - step) * step_time
        bad = worst(rows)
        return RunSummary(
            run=str(view["run"]), model=str(config.get("model") or ""),
            world_size=view.get("world_size"), ranks=int(view.get("ranks") or len(rows)),
            step=step, total_steps=total, elapsed_s=elapsed, elapsed_estimated=estimated,
            tokens_per_s=sum(tps) if tps else None, eta_s=eta,
            firing=sum(1 for a in active if a.state == "firing"),
            pending=sum(1 for a in active if a.state == "pending"),
            statuses=dict(view.get("status") or {}), precision=str(config.get("precision") or ""),
            worst_rank=bad.rank if bad is not None and bad.health in ("bad", "warn", "stale")
            else None)

    def _charts(self, run: str, ranks: Sequence[int], points: int,
                history: Sequence[AlertItem]) -> ChartData:
        series: Dict[str, Dict[int, tuple]] = {}
        for rank in ranks:
            try:
                body = self.get(f"/runs/{run}/ranks/{rank}/series",
                                {"signal": ",".join(self._have(run, rank)), "max_points": points})
            except NotFoundError:
                continue
            for name, s in body.get("series", {}).items():
                values = [number(v) for v in s.get("values", [])]
                series.setdefault(name, {})[rank] = (
                    list(s.get("steps", [])), [math.nan if v is None else v for v in values])
        markers = tuple(sorted({(a.step, a.alert, a.severity) for a in history
                                if a.state == "firing" and isinstance(a.step, int)
                                and (a.rank is None or a.rank in ranks)}))
        return ChartData(ranks=tuple(ranks), series=series, markers=markers)

    def _have(self, run: str, rank: int) -> List[str]:
        """The chart signals this rank records (one cheap request per rank and refresh)."""
        body = self.get(f"/runs/{run}/ranks/{rank}", {})
        signals = set(body.get("signals") or body.get("latest", {}).keys())
        return [s for s in CHART_SIGNALS if s in signals] or ["loss"]
