"""The query layer: typed views with real floats, whose JSON reads back into equal views."""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Dict, List

from hypothesis import given, settings, strategies as st

from msdoctor.core import views
from msdoctor.core.pipeline import Pipeline
from msdoctor.core.views import (
    AlertCounts,
    AlertHistoryView,
    AlertsView,
    AlertView,
    DeliveryView,
    OverviewView,
    RankDetail,
    RankSeriesView,
    RanksView,
    RankView,
    RunSeriesView,
    RunsView,
    RunView,
    SeriesView,
    SparkView,
    StatusView,
    StepRange,
)
from msdoctor.wire.numbers import from_wire

from spool_factory import write_run

_NAN = object()


def plain(x: Any) -> Any:
    """``x`` with views as (type, fields), containers as tuples and NaN as one marker, so
    ``==`` compares it exactly and NaN equals NaN."""
    if dataclasses.is_dataclass(x):
        return (type(x).__name__,) + tuple(plain(getattr(x, f.name)) for f in dataclasses.fields(x))
    if isinstance(x, dict):
        return ("dict",) + tuple((plain(k), plain(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(plain(v) for v in x)
    if isinstance(x, float):
        return _NAN if math.isnan(x) else ("float", x)
    return (type(x).__name__, x)


def round_trip(view: Any) -> None:
    body = view.to_json()
    json.dumps(body, allow_nan=False)                  # strict JSON: non-finite as strings
    back = type(view).from_json(body)
    assert plain(back) == plain(view)
    assert back.to_json() == body or plain(back.to_json()) == plain(body)


# -- over a real state -------------------------------------------------------------

class Alerts:
    """A minimal alert source (the views' AlertSource protocol)."""

    def __init__(self, items: List[Dict[str, Any]]) -> None:
        self.items = items

    def active(self) -> List[Dict[str, Any]]:
        return [a for a in self.items if a["state"] in ("firing", "pending")]

    def history(self, limit: int) -> List[Dict[str, Any]]:
        return self.items[-limit:]


NAN_ALERT = {"alert": "LossNonFinite", "state": "firing", "severity": "critical", "run": "run-a",
             "rank": 1, "step": 25, "first_step": 25, "value": "nan", "summary": "Loss is nan.",
             "fix": "Use bf16.", "t": 1.0, "labels": {"team": "llm"}, "score": -math.inf}


def state(tmp_path):
    write_run(tmp_path, ranks=(0, 1, 2), steps=40, nan_at=25)
    sidecar = Pipeline(tmp_path, persist=False)
    sidecar.poll_once()
    alerts = Alerts([dict(NAN_ALERT), dict(NAN_ALERT, alert="LossSpike", state="pending",
                                               rank=2, value=7)])
    return sidecar.store, alerts


def test_views_hold_real_floats_and_their_json_has_the_wire_strings(tmp_path):
    store, alerts = state(tmp_path)
    rank = views.rank(store, alerts, "run-a", 1)
    assert math.isnan(rank.latest["loss"]) and rank.to_json()["latest"]["loss"] == "nan"
    (alert,) = rank.detail.active_alerts
    assert math.isnan(alert.value) and alert.extra == {"labels": {"team": "llm"}, "score": -math.inf}
    assert alert.to_json()["value"] == "nan" and alert.to_json()["extra"]["score"] == "-inf"
    pending = views.alerts(alerts, "pending").alerts[0]
    assert pending.value == 7 and type(pending.value) is int        # ints are kept as ints
    series = views.rank_series(store, "run-a", 1, ["loss"], since=24).series["loss"]
    assert series.steps[:2] == (24, 25) and math.isnan(series.values[1])
    overview = views.overview(store, alerts, "run-a", ["loss"], spark="loss", spark_points=4)
    assert overview.firing == (0, 1, 0) and overview.pending == (0, 0, 1)
    assert all(math.isnan(v) for v in overview.latest["loss"] + overview.spark.values[2])


def test_every_view_of_a_real_state_reads_back_from_its_json(tmp_path):
    store, alerts = state(tmp_path)

    class Deliverer:
        receiver, stats = "hook", {"sent": 3, "failed": 1}

    for view in (views.status(store, alerts, [Deliverer()], 0.0, str(tmp_path)),
                 views.runs(store, alerts), views.run(store, alerts, "run-a"),
                 views.ranks(store, alerts, "run-a"), views.rank(store, alerts, "run-a", 1),
                 views.rank_series(store, "run-a", 0, [], since=3, max_points=7),
                 views.run_series(store, "run-a", "loss", max_points=9),
                 views.overview(store, alerts, "run-a", spark="loss", spark_points=5),
                 views.overview(store, None, "run-a", ["loss", "nope"]),
                 views.alerts(alerts), views.alert_history(alerts, 10, "run-a")):
        round_trip(view)


# -- any view ----------------------------------------------------------------------

floats = st.floats(allow_nan=True, allow_infinity=True)
finite = st.floats(allow_nan=False, allow_infinity=False)
maybe = st.none() | floats
names = st.text("abcdefghij_", min_size=1, max_size=8)
texts = st.text(max_size=12).filter(lambda s: from_wire(s) is s)   # not a non-finite spelling
small = st.integers(-2**40, 2**40)
plain_json = st.dictionaries(names, small | texts | finite, max_size=3)
counts = st.builds(AlertCounts, st.integers(0, 9), st.integers(0, 9))

alert_views = st.builds(
    AlertView, alert=names, state=st.sampled_from(["firing", "pending", "resolved"]),
    severity=st.none() | names, run=st.none() | names, rank=st.none() | st.integers(0, 99),
    step=st.none() | small, first_step=st.none() | small, value=st.none() | small | floats,
    summary=st.none() | texts, cause=st.none() | texts, fix=st.none() | texts,
    runbook_url=st.none() | texts, t=maybe, active_since=maybe, caused_by=st.none() | names,
    extra=st.dictionaries(names, st.none() | small | floats | texts, max_size=3))
series_views = st.builds(SeriesView, st.lists(small, max_size=6).map(tuple),
                         st.lists(floats, max_size=6).map(tuple), st.integers(0, 10**6),
                         st.booleans())
rank_views = st.builds(
    RankView, run=names, rank=st.integers(0, 4096), status=names, last_step=st.none() | small,
    t=st.none() | finite, age_s=st.none() | finite,
    latest=st.dictionaries(names, floats, max_size=4),
    counters=st.dictionaries(names, st.integers(0, 10**9), max_size=3), alerts=counts,
    detail=st.none() | st.builds(RankDetail, st.none() | plain_json, st.none() | plain_json,
                                 st.none() | plain_json, st.lists(names, max_size=4).map(tuple),
                                 st.lists(alert_views, max_size=2).map(tuple)))
run_views = st.builds(
    RunView, run=names, world_size=st.none() | st.integers(1, 4096), config=plain_json,
    expect=plain_json, ranks=st.integers(0, 4096),
    status=st.dictionaries(names, st.integers(1, 9), max_size=3),
    last_step=st.none() | st.builds(StepRange, small, small), alerts=counts)


@st.composite
def overview_views(draw):
    n = draw(st.integers(0, 5))
    column = lambda values: st.lists(values, min_size=n, max_size=n).map(tuple)  # noqa: E731
    spark = st.none() | st.builds(SparkView, names, st.integers(0, 256),
                                  column(st.lists(floats, max_size=4).map(tuple)))
    return OverviewView(
        run=draw(names), ranks=draw(column(st.integers(0, 4096))), status=draw(column(names)),
        last_step=draw(column(st.none() | small)), age_s=draw(column(st.none() | finite)),
        latest=draw(st.dictionaries(names, column(maybe), max_size=4)),
        firing=draw(column(st.integers(0, 9))), pending=draw(column(st.integers(0, 9))),
        alerts_version=draw(names), spark=draw(spark))


any_view = st.one_of(
    alert_views, series_views, rank_views, run_views, overview_views(),
    st.builds(AlertsView, st.lists(alert_views, max_size=3).map(tuple)),
    st.builds(AlertHistoryView, st.lists(alert_views, max_size=3).map(tuple)),
    st.builds(RunsView, st.lists(run_views, max_size=3).map(tuple)),
    st.builds(RanksView, names, st.lists(rank_views, max_size=3).map(tuple)),
    st.builds(RankSeriesView, names, st.integers(0, 99), small, st.none() | small,
              st.dictionaries(names, series_views, max_size=3)),
    st.builds(RunSeriesView, names, names, small,
              st.dictionaries(st.integers(0, 99), series_views, max_size=3)),
    st.builds(StatusView, names, texts, finite, st.integers(0, 9), st.integers(0, 99), counts,
              st.lists(st.builds(DeliveryView, names, st.dictionaries(
                  names.filter(lambda k: k != "receiver"), small, max_size=3)),
                  max_size=2).map(tuple)))


@settings(max_examples=200, deadline=None)
@given(any_view)
def test_any_view_reads_back_equal_from_its_json_nan_included(view):
    round_trip(view)
