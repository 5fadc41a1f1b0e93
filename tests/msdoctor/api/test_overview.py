"""/api/v1/runs/{run}/overview over a real sidecar state and a real alert feed: every rank
in parallel arrays, only the signals asked for, a sparkline tail, an alerts version."""
from __future__ import annotations

import json

import pytest

from api_fixtures import FIRING
from spool_factory import append_steps


def get(api, query=""):
    status, body = api.handle("/api/v1/runs/run-a/overview", query)
    json.dumps(body, allow_nan=False)          # strict JSON: NaN travels as "nan"
    return status, body


def test_every_rank_comes_in_arrays_aligned_with_the_rank_list(env):
    api, sc, _ = env
    status, body = get(api)
    assert status == 200 and body["ranks"] == [0, 1, 2]
    assert body["status"] == ["running"] * 3 and body["last_step"] == [40, 40, 40]
    assert body["latest"]["loss"] == ["nan", "nan", "nan"]
    state = sc.store.runs["run-a"].ranks[2]
    assert body["latest"]["grad_norm"][2] == state.latest["grad_norm"]
    assert set(body["latest"]) == set(state.latest)          # all signals by default
    assert body["alerts"] == {"firing": [0, 1, 0], "pending": [0, 0, 0]}
    assert all(isinstance(age, float) for age in body["age_s"]) and "spark" not in body


def test_only_the_signals_asked_for_are_sent_and_unrecorded_ones_are_null(env):
    api, _, _ = env
    _, body = get(api, "signal=loss,micro_steps")
    assert set(body["latest"]) == {"loss", "micro_steps"}
    assert body["latest"]["micro_steps"] == [None, None, None]


def test_the_sparkline_is_the_last_points_of_each_rank(env):
    api, sc, tmp_path = env
    append_steps(tmp_path, "run-a", 0, first=41, count=2)
    sc.poll_once()
    _, body = get(api, "spark=grad_norm&spark_points=4")
    spark = body["spark"]
    assert spark["signal"] == "grad_norm" and spark["points"] == 4
    series = sc.store.runs["run-a"].ranks[0].series["grad_norm"]
    assert spark["values"][0] == series.values[-4:].tolist()     # steps 39..42
    assert [len(v) for v in spark["values"]] == [4, 4, 4]
    _, body = get(api, "spark=loss&spark_points=3")
    assert body["spark"]["values"][1] == ["nan"] * 3
    _, body = get(api, "spark=micro_steps")
    assert body["spark"]["values"] == [[], [], []]


def test_the_alerts_version_changes_only_when_the_feed_does(env):
    api, sc, tmp_path = env
    first = get(api)[1]["alerts_version"]
    append_steps(tmp_path, "run-a", 0, first=41, count=1)
    sc.poll_once()
    assert get(api)[1]["alerts_version"] == first
    with (tmp_path / "alerts.jsonl").open("a") as f:
        f.write(json.dumps({**FIRING, "state": "inactive", "t": 2.0}) + "\n")
    sc.poll_once()
    _, body = get(api)
    assert body["alerts_version"] != first and body["alerts"]["firing"] == [0, 0, 0]


@pytest.mark.parametrize("path, query, status, message", [
    ("/api/v1/runs/nope/overview", "", 404, "no run 'nope'; known runs: run-a"),
    ("/api/v1/runs/run-a/overview", "spark_points=999", 400,
     "'spark_points': expected an integer between 0 and 256, got 999"),
    ("/api/v1/runs/run-a/overview", "spark=loss&spark=grad_norm", 400, "given 2 times"),
])
def test_bad_overview_requests_say_what_is_wrong(env, path, query, status, message):
    api, _, _ = env
    got_status, body = api.handle(path, query)
    assert got_status == status and message in body["error"]
