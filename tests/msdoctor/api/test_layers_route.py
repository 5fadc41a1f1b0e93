"""``GET /api/v1/runs/{run}/ranks/{rank}/layers`` over a real pipeline: the rank's newest layer
rows (NaN as "nan", not measured as null), the alerts that named a layer, bad parameters 400."""
from __future__ import annotations

import json

import pytest

from msdoctor.api import Api, Context
from msdoctor.core.alerts.feed import AlertFeed
from msdoctor.core.pipeline import Pipeline
from msdoctor.core.views import LayersView
from msdoctor.wire import encode, make

NAMES = ["embedding", "layers.0", "layers.1", "lm_head"]


@pytest.fixture
def api(tmp_path):
    lines = [encode(make("run_start", 0, run="r", world_size=1, t=1000.0))]
    for s in range(1, 31):
        grads = [1.0, 1.0, 1000.0 if s == 20 else 1.0, 1.0]
        acts = [None, 2.0, float("nan") if s >= 25 else 2.0, None]
        lines.append(encode(make("layers", 0, run="r", step=s, t=1000.0 + s, names=NAMES,
                                 grad_norm=grads, act_max=acts)))
        lines.append(encode(make("step", 0, run="r", step=s, t=1000.0 + s, loss=2.0, lr=1e-4)))
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-0.jsonl").write_bytes(b"".join(lines))
    firing = {"alert": "GradNormSpike", "state": "firing", "severity": "warning", "run": "r",
              "rank": 0, "step": 20, "first_step": 20, "value": 1000.0, "t": 1020.0,
              "labels": {"layer": "layers.1", "first_rank": "0"}}
    (tmp_path / "alerts.jsonl").write_text(json.dumps(firing) + "\n")
    feed = AlertFeed(tmp_path / "alerts.jsonl")
    pipeline = Pipeline(tmp_path, persist=False, consumers=[feed])
    pipeline.poll_once()
    return Api(Context(pipeline.store, feed, run_dir=str(tmp_path)))


def test_layers_route_sends_the_newest_rows_and_the_named_layers(api):
    status, body = api.handle("/api/v1/runs/r/ranks/0/layers", "max_steps=12")
    assert status == 200
    json.dumps(body, allow_nan=False)
    assert body["names"] == NAMES and body["steps"] == list(range(19, 31))
    assert body["signals"]["grad_norm"][1][2] == 1000.0
    assert body["signals"]["act_max"][-1] == [None, 2.0, "nan", None]
    assert body["marks"] == [{"alert": "GradNormSpike", "state": "firing", "layers": ["layers.1"],
                              "first_step": 20, "first_rank": 0}]
    view = LayersView.from_json(body)
    assert view.first_nonfinite == 25 and view.culprits() == ("layers.1",)


def test_layers_route_refuses_bad_parameters_and_unknown_ranks(api):
    assert api.handle("/api/v1/runs/r/ranks/0/layers", "max_steps=0")[0] == 400
    assert api.handle("/api/v1/runs/r/ranks/0/layers", "max_steps=513")[0] == 400
    status, body = api.handle("/api/v1/runs/r/ranks/7/layers")
    assert status == 404 and "no rank 7" in body["error"]
