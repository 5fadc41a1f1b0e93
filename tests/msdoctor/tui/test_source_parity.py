"""The embedded source (core views in-process) and the HTTP source (the same views decoded
from /api/v1 JSON) show the same snapshot of the same state, NaN included."""
from __future__ import annotations

import dataclasses
import math
import time

import pytest

from msdoctor.api import Api, Context
from msdoctor.exporter.collector import StoreCollector
from msdoctor.http.server import SidecarServer
from msdoctor.tui.model import Reading
from msdoctor.tui.reader import Request
from msdoctor.tui.source import EmbeddedSource, HttpSource

import spool_factory

pytestmark = pytest.mark.timeout(120)


def comparable(snap: Reading) -> str:
    """The snapshot without what is not data (the source's name, the rows' age, which is
    read at a different instant): its repr compares everything else, NaN included."""
    rows = tuple(dataclasses.replace(r, age_s=None) for r in snap.ranks)
    return repr(dataclasses.replace(snap, source="", empty_hint="", ranks=rows))


@pytest.fixture
def embedded(tmp_path):
    run_dir = tmp_path / "run"
    # stamped ahead of the clock: a stale rank's step time is its age, read at each instant
    spool_factory.write_run(run_dir, ranks=range(4), steps=50, nan_at=30, t0=time.time() + 600)
    source = EmbeddedSource(run_dir)
    source.fetch()
    source.feed({"alert": "LossSpike", "state": "firing", "severity": "warning",
                 "run": "run-a", "rank": 3, "step": 29, "value": math.inf, "t": 7.0,
                 "summary": "loss spike", "labels": {"team": "llm"}})
    return source


@pytest.fixture
def served(embedded):
    """The embedded source's own store and alert book, served on /api/v1."""
    store = embedded.sidecar.store
    api = Api(Context(store, embedded.feed, run_dir=str(embedded.run_dir)))
    server = SidecarServer(StoreCollector(store), api, listen="127.0.0.1:0",
                           lock=embedded.sidecar.lock).start()
    yield HttpSource(server.url)
    server.stop()


@pytest.mark.parametrize("request_", [
    Request(), Request(charts=True), Request(charts=True, chart_ranks=(0, 3), chart_points=9),
    Request(run="run-a", spark_signal="grad_norm"), Request(run="nope", charts=True,
                                                            chart_ranks=(7,))],
    ids=["overview", "charts-worst-rank", "charts-two-ranks", "spark-grad-norm", "unknown"])
def test_the_http_source_shows_exactly_the_embedded_snapshot(embedded, served, request_):
    local = embedded.fetch(request_)
    remote = served.fetch(request_)
    assert comparable(remote) == comparable(local)
    assert local.ranks and any(math.isnan(r.values["loss"]) for r in remote.ranks)
    spike = next(a for a in remote.active if a.alert == "LossSpike")
    assert spike.value == math.inf and spike.rank == 3
