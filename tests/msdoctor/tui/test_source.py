"""The data sources over real state: the embedded core, and a real sidecar HTTP endpoint."""
from __future__ import annotations

import contextlib
import http.client
import math
import time
from pathlib import Path

import pytest

from msdoctor.core.engine import default_rules_dir, load_rules
from msdoctor.core.pipeline import Pipeline
from msdoctor.http.wiring import Endpoint
from msdoctor.tui.app import DoctorApp
from msdoctor.tui.columns import SPARK_WIDTH
from msdoctor.tui.ranktable import RankTable
from msdoctor.tui.reader import Request, SourceError
from msdoctor.tui.source import EmbeddedSource, HttpSource
from msdoctor.wire import encode

import spool_factory
from servers import free_port

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def nan_run(tmp_path: Path) -> Path:
    """4 ranks, 50 steps, the loss NaN from step 30 on every rank."""
    run_dir = tmp_path / "run"
    spool_factory.write_run(run_dir, ranks=range(4), steps=50, nan_at=30, t0=1_000_000.0)
    return run_dir


class LiveSidecar:
    """serve's wiring in-process: the pipeline with its journal (alerts.jsonl) + /api/v1;
    restartable."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir, self.port = run_dir, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.endpoint = Endpoint(run_dir, listen=f"127.0.0.1:{self.port}")
        self.sidecar = Pipeline(run_dir, rules=load_rules([default_rules_dir()]), journal=True,
                                persist=False)
        while self.sidecar.poll_once():
            pass

    def start(self) -> "LiveSidecar":
        self.endpoint.start(self.sidecar.store, self.sidecar.alerts, lock=self.sidecar.lock)
        return self

    def stop(self) -> None:
        self.endpoint.stop()
        self.endpoint.server = None


@contextlib.contextmanager
def live(run_dir: Path):
    side = LiveSidecar(run_dir).start()
    try:
        yield side
    finally:
        if side.endpoint.server is not None:
            side.stop()


def test_the_embedded_source_runs_the_rules_and_shows_the_nan_alert_with_its_fix(nan_run):
    snap = EmbeddedSource(nan_run).fetch(Request(charts=True))
    assert snap.run.run == "run-a" and snap.run.step == 50 and snap.run.total_steps == 1000
    assert [r.rank for r in snap.ranks] == [0, 1, 2, 3]
    assert all(math.isnan(r.values["loss"]) and r.health == "bad" for r in snap.ranks)
    nan_alerts = [a for a in snap.active if a.alert == "LossNonFinite"]
    assert {a.rank for a in nan_alerts} == {0, 1, 2, 3}
    assert all(a.state == "firing" and a.step == 30 and a.fix for a in nan_alerts)
    assert snap.charts is not None and (30, "LossNonFinite", "critical") in snap.charts.markers
    steps, values = snap.charts.series["loss"][snap.charts.ranks[0]]
    assert steps[0] == 1 and steps[-1] == 50 and math.isnan(values[-1])


def test_the_embedded_source_writes_nothing_into_the_run_directory(nan_run):
    before = sorted(p.relative_to(nan_run) for p in nan_run.rglob("*"))
    EmbeddedSource(nan_run).fetch(Request(charts=True))
    assert sorted(p.relative_to(nan_run) for p in nan_run.rglob("*")) == before


def test_the_http_source_reads_the_same_snapshot_as_the_embedded_one(nan_run):
    embedded = EmbeddedSource(nan_run).fetch(Request(charts=True, chart_ranks=(1, 2)))
    with live(nan_run) as side:
        http = HttpSource(side.url)
        remote = http.fetch(Request(charts=True, chart_ranks=(1, 2)))
    assert http.run_dir is not None and http.run_dir.resolve() == nan_run.resolve()  # logs here
    assert [(r.rank, r.last_step, r.health, r.alerts) for r in remote.ranks] == \
        [(r.rank, r.last_step, r.health, r.alerts) for r in embedded.ranks]
    assert sorted((a.alert, a.rank, a.state, a.fix) for a in remote.active) == \
        sorted((a.alert, a.rank, a.state, a.fix) for a in embedded.active)
    assert remote.charts.markers == embedded.charts.markers
    assert remote.charts.series["loss"][2][0] == embedded.charts.series["loss"][2][0]
    assert remote.charts.series["t"][2] == embedded.charts.series["t"][2]    # wall times


def test_one_fetch_asks_all_its_questions_over_one_connection_and_keeps_none_open(
        nan_run, monkeypatch):
    opened = []
    connect = http.client.HTTPConnection.connect

    def counted(conn: http.client.HTTPConnection) -> None:
        opened.append(conn)
        connect(conn)

    monkeypatch.setattr(http.client.HTTPConnection, "connect", counted)
    with live(nan_run) as side:
        source = HttpSource(side.url)
        asked = []
        get = source.reader.queries.get
        source.reader.queries.get = lambda path, params: asked.append(path) or get(path, params)
        snap = source.fetch(Request(charts=True, chart_ranks=(1,)))
        assert len(asked) >= 6 and len(opened) == 1 and source._conn is None
        assert [r.rank for r in snap.ranks] == [0, 1, 2, 3]
        source.fetch()
        assert len(opened) == 2 and source._conn is None


def test_an_unreachable_url_is_a_source_error_naming_the_address():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(SourceError, match="cannot reach the sidecar at " + url):
        HttpSource(url, timeout=1.0).fetch()


def test_a_bad_url_is_refused_with_the_expected_form():
    with pytest.raises(ValueError, match="expected http://HOST:PORT"):
        HttpSource("ftp://example")


async def _wait(pilot, check, timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.1)


@pytest.mark.slow
async def test_the_tui_shows_a_banner_while_the_sidecar_is_down_and_reconnects(nan_run):
    side = LiveSidecar(nan_run).start()
    app = DoctorApp(HttpSource(side.url, timeout=1.0), refresh_s=0.25, retry_s=0.25)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await _wait(pilot, lambda: app.reading is not None, what="the first snapshot")
            assert len(app.query_one(RankTable).rows) == 4
            banner = app.query_one("#banner")
            assert not banner.display
            side.stop()
            await _wait(pilot, lambda: app.error is not None, what="the banner")
            await pilot.pause()
            assert banner.display and side.url in str(banner.render())
            assert len(app.query_one(RankTable).rows) == 4      # the last data stays
            side.start()                                         # same port, restarted
            await _wait(pilot, lambda: app.error is None, what="the reconnect")
            await pilot.pause()
            assert not banner.display
    finally:
        if side.endpoint.server is not None:
            side.stop()


@pytest.mark.slow
async def test_the_tui_opens_on_an_unreachable_url_with_a_banner_and_a_hint():
    url = f"http://127.0.0.1:{free_port()}"
    app = DoctorApp(HttpSource(url, timeout=0.5), refresh_s=0.25, retry_s=0.25)
    async with app.run_test(size=(80, 24)) as pilot:
        await _wait(pilot, lambda: app.error is not None, what="the banner")
        await pilot.pause()
        assert "cannot reach the sidecar at " + url in str(app.query_one("#banner").render())
        empty = str(app.query_one("#empty").render())
        assert "msdoctor serve --run-dir" in empty and "msdoctor tui --run-dir" in empty


def test_the_sparkline_gets_the_last_8_losses_of_every_rank_the_points_it_draws(tmp_path):
    run_dir = tmp_path / "run"
    spool_factory.write_run(run_dir, ranks=range(3), steps=40, t0=1_000_000.0)
    source = EmbeddedSource(run_dir)
    snap = source.fetch()
    for row in snap.ranks:
        series = source.sidecar.store.runs["run-a"].ranks[row.rank].series["loss"]
        assert row.spark == tuple(series.values[-8:].tolist())
    line = encode(spool_factory.step("run-a", 1, 41, 1_000_100.0, loss=math.nan))
    with spool_factory.rank_file(run_dir, 1).open("ab") as f:
        f.write(line)
    row = source.fetch().ranks[1]
    assert len(row.spark) == 8 == SPARK_WIDTH and math.isnan(row.spark[-1])
    assert row.spark[:-1] == snap.ranks[1].spark[1:]


def test_alerts_are_fetched_again_only_when_the_feed_changed(nan_run):
    source = EmbeddedSource(nan_run)
    queries = _record_queries(source)
    first = source.fetch()
    assert "alerts" in queries and "history" in queries
    queries.clear()
    again = source.fetch()
    assert queries == ["runs", "overview"] and again.active == first.active
    source.feed({"alert": "StragglerRank", "state": "firing", "severity": "warning",
                 "run": "run-a", "rank": 2, "step": 50, "summary": "slow", "t": 5.0})
    queries.clear()
    snap = source.fetch()
    assert "alerts" in queries
    assert "StragglerRank" in next(r for r in snap.ranks if r.rank == 2).alerts


def _record_queries(source) -> list:
    """The names of the queries the source's reader makes, in order, from now on."""
    names: list = []
    queries = source.reader.queries
    for name in ("runs", "overview", "alerts", "history", "rank", "rank_series"):
        method = getattr(queries, name)
        setattr(queries, name, lambda *a, _m=method, _n=name, **k: names.append(_n) or _m(*a, **k))
    return names
