"""Read the ``/api/v1`` JSON (documented in ``docs/api.md``) into a :class:`Snapshot`.

:class:`ApiReader` only needs a ``get(path, params) -> dict`` callable, so the
HTTP source and the embedded source (which calls the same API in-process) build
identical snapshots.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

from msdoctor.tui.model import (AlertItem, ChartData, RankRow, RunSummary, Snapshot, judge,
                                worst, _median)

#: Signals the chart pane draws (memory picks the first of its signals that is recorded).
CHART_SIGNALS = ("loss", "grad_norm", "loss_scale", "tokens_per_s", "mem_device_bytes",
                 "mem_host_rss_bytes")
SPARK_SIGNAL = "loss"
SPARK_POINTS = 16                # the sparkline shows about the last this many steps
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


def _float(value: Any) -> float:
    """A wire number as a float (NaN when it is not one)."""
    v = number(value)
    return math.nan if v is None else v


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
        self._sparks: Dict[Tuple[str, str], list] = {}   # (run, signal) -> [last step, rings]

    def read(self, request: Request = Request()) -> Snapshot:
        runs = self.get("/runs", {}).get("runs", [])
        names = tuple(str(r["run"]) for r in runs)
        if not runs:
            return Snapshot(source=self.label, empty_hint=self.empty_hint)
        run_view = next((r for r in runs if r["run"] == request.run), runs[-1])
        run = str(run_view["run"])
        active = tuple(alert_item(a) for a in self.get("/alerts", {"run": run}).get("alerts", []))
        history = self._history(run)
        active_keys = {a.key for a in active}
        resolved = self._resolved(history, active_keys)
        ranks = self.get(f"/runs/{run}/ranks", {}).get("ranks", [])
        spark = self._spark(run, request.spark_signal, ranks)
        rows = judge([self._row(r, active, spark.get(r["rank"], ())) for r in ranks])
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

    def _spark(self, run: str, signal: str, ranks: Sequence[Mapping[str, Any]]) -> Dict[int, tuple]:
        """The last ``SPARK_POINTS`` values of ``signal`` per rank, fetched incrementally:
        after the first read only the steps since the previous refresh are asked for."""
        steps = [r["last_step"] for r in ranks if isinstance(r.get("last_step"), int)]
        if not steps:
            return {}
        newest = max(steps)
        key = (run, signal)
        cache = self._sparks.get(key)
        if cache is None or newest < cache[0]:           # first read, or the run went back
            cache = self._sparks[key] = [newest - SPARK_POINTS, {}]
        since = cache[0] + 1
        rings: Dict[int, Deque[float]] = cache[1]
        if since <= newest:
            try:
                body = self.get(f"/runs/{run}/series", {"signal": signal, "since": since,
                                                         "max_points": SPARK_POINTS})
            except NotFoundError:
                body = {}
            for rank, series in body.get("ranks", {}).items():
                ring = rings.get(int(rank))
                if ring is None:
                    ring = rings[int(rank)] = deque(maxlen=SPARK_POINTS)
                ring.extend(v if type(v) is float else _float(v)
                            for v in series.get("values", ()))
            cache[0] = newest
        return {rank: tuple(ring) for rank, ring in rings.items()}

    @staticmethod
    def _row(view: Mapping[str, Any], active: Sequence[AlertItem], spark: tuple) -> RankRow:
        rank = int(view["rank"])
        mine = [a for a in active if a.rank == rank]
        values = {k: x if type(x) is float else _float(x)
                  for k, x in view.get("latest", {}).items()}
        return RankRow(
            rank=rank, status=str(view.get("status") or "running"), last_step=view.get("last_step"),
            age_s=number(view.get("age_s")), values=values,
            firing=sum(1 for a in mine if a.state == "firing"),
            pending=sum(1 for a in mine if a.state == "pending"),
            critical=sum(1 for a in mine if a.state == "firing" and a.severity == "critical"),
            spark=spark, alerts=tuple(sorted({a.alert for a in mine})))

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
