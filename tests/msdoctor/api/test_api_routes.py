"""/api/v1 over a real sidecar state and a real alert feed: runs, ranks with latest
values, series since step K (downsampled on request), alerts with their fixes."""
from __future__ import annotations

import json

import pytest

from msdoctor.api import openapi

from api_fixtures import FIRING
from spool_factory import append_steps


def get(api, path, query=""):
    status, body = api.handle(path, query)
    json.dumps(body, allow_nan=False)          # always valid JSON: NaN travels as "nan"
    return status, body


def test_runs_list_world_size_config_step_range_and_alert_counts(env):
    api, _, _ = env
    status, body = get(api, "/api/v1/runs")
    assert status == 200
    (run,) = body["runs"]
    assert run["run"] == "run-a" and run["world_size"] == 3 and run["ranks"] == 3
    assert run["config"]["precision"] == "fp16" and run["expect"]["step_time_s"] == 0.5
    assert run["last_step"] == {"min": 40, "max": 40} and run["alerts"] == {"firing": 1,
                                                                             "pending": 0}


def test_ranks_show_latest_values_counters_and_their_alerts(env):
    api, sc, _ = env
    status, body = get(api, "/api/v1/runs/run-a/ranks")
    ranks = body["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2]
    assert ranks[1]["latest"]["loss"] == "nan" and ranks[1]["alerts"]["firing"] == 1
    assert ranks[0]["alerts"]["firing"] == 0
    assert ranks[0]["latest"]["grad_norm"] == sc.store.runs["run-a"].ranks[0].latest["grad_norm"]
    assert ranks[0]["counters"]["steps"] == 40 and ranks[0]["status"] == "running"
    status, one = get(api, "/api/v1/runs/run-a/ranks/1")
    assert one["active_alerts"][0]["fix"] == FIRING["fix"] and "loss" in one["signals"]


def test_series_since_step_k_return_only_the_new_points(env):
    api, sc, tmp_path = env
    _, body = get(api, "/api/v1/runs/run-a/ranks/0/series", "signal=loss,step_time_s&since=38")
    assert body["series"]["loss"]["steps"] == [38, 39, 40]
    assert body["series"]["loss"]["values"] == ["nan", "nan", "nan"]
    assert len(body["series"]["step_time_s"]["values"]) == 3
    append_steps(tmp_path, "run-a", 0, first=41, count=2)
    sc.poll_once()
    _, body = get(api, "/api/v1/runs/run-a/ranks/0/series", "signal=grad_norm&since=41")
    assert body["series"]["grad_norm"]["steps"] == [41, 42] and body["last_step"] == 42


def test_series_are_downsampled_on_request_and_keep_the_first_nan(env):
    api, _, _ = env
    _, body = get(api, "/api/v1/runs/run-a/series", "signal=loss&max_points=8")
    s = body["ranks"]["0"]
    assert s["points"] == 40 and s["downsampled"] and len(s["steps"]) <= 8
    assert 25 in s["steps"] and s["values"][s["steps"].index(25)] == "nan"
    assert set(body["ranks"]) == {"0", "1", "2"}


def test_alerts_come_with_cause_fix_and_runbook_and_can_be_filtered(env):
    api, _, _ = env
    _, body = get(api, "/api/v1/alerts")
    (alert,) = body["alerts"]
    assert alert["fix"] == FIRING["fix"] and alert["cause"] == FIRING["cause"]
    assert alert["runbook_url"] == FIRING["runbook_url"] and alert["value"] == "nan"
    assert get(api, "/api/v1/alerts", "state=pending")[1]["alerts"] == []
    assert get(api, "/api/v1/alerts", "rank=0")[1]["alerts"] == []
    assert len(get(api, "/api/v1/alerts/history", "limit=5")[1]["transitions"]) == 1


@pytest.mark.parametrize("path, query, status, message", [
    ("/api/v1/runs/nope", "", 404, "no run 'nope'; known runs: run-a"),
    ("/api/v1/runs/run-a/ranks/9", "", 404, "run 'run-a' has no rank 9"),
    ("/api/v1/runs/run-a/ranks/0/series", "signal=bogus", 404, "no signal 'bogus'"),
    ("/api/v1/runs/run-a/ranks/0/series", "since=ten", 400,
     "'since': expected an integer, got 'ten'"),
    ("/api/v1/runs/run-a/ranks/0/series", "max_points=0", 400,
     "'max_points': expected an integer between 1 and 100000, got 0"),
    ("/api/v1/runs/run-a/series", "", 400, "expected exactly one signal name, got 0"),
    ("/api/v1/alerts", "state=resolved", 400, "expected one of active, firing, pending"),
    ("/api/v1/alerts", "state=a&state=b", 400, "given 2 times"),
    ("/api/v1/nothing", "", 404, "no such endpoint"),
    ("/api/v2/runs", "", 404, "the API lives under /api/v1/"),
])
def test_bad_requests_say_what_is_wrong_and_what_is_expected(env, path, query, status, message):
    api, _, _ = env
    got_status, body = get(api, path, query)
    assert got_status == status and message in body["error"]


def _check(schema, value, schemas, where):
    """Check required keys and basic types against the OpenAPI component schemas."""
    if "$ref" in schema:
        schema = schemas[schema["$ref"].rsplit("/", 1)[1]]
    if value is None:
        assert schema.get("nullable"), f"{where}: null not allowed"
        return
    kind = schema.get("type")
    if kind == "object":
        assert isinstance(value, dict), where
        for key in schema.get("required", []):
            assert key in value, f"{where}: missing {key!r}"
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                _check(sub, value[key], schemas, f"{where}.{key}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                _check(extra, item, schemas, f"{where}.{key}")
    elif kind == "array":
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            _check(schema["items"], item, schemas, f"{where}[{i}]")
    elif kind == "integer":
        assert isinstance(value, int), where
    elif kind == "string":
        assert isinstance(value, str), where


@pytest.mark.parametrize("path, query", [
    ("/api/v1/status", ""), ("/api/v1/runs", ""), ("/api/v1/runs/run-a", ""),
    ("/api/v1/runs/run-a/ranks", ""), ("/api/v1/runs/run-a/ranks/1", ""),
    ("/api/v1/runs/run-a/ranks/1/series", "max_points=10"),
    ("/api/v1/runs/run-a/ranks/1/layers", ""),
    ("/api/v1/runs/run-a/series", "signal=loss"), ("/api/v1/alerts", ""),
    ("/api/v1/runs/run-a/overview", "spark=loss"),
    ("/api/v1/alerts/history", "")])
def test_every_response_matches_its_documented_schema(env, path, query):
    api, _, _ = env
    doc = openapi()
    template = next(p for p in doc["paths"] if p.count("/") == path.count("/") and all(
        a == b or a.startswith("{") for a, b in zip(p.split("/"), path.split("/"))))
    schema = doc["paths"][template]["get"]["responses"]["200"]["content"]["application/json"]
    _check(schema["schema"], get(api, path, query)[1], doc["components"]["schemas"], path)


def test_the_committed_openapi_document_is_current():
    from pathlib import Path

    committed = Path(__file__).resolve().parents[3] / "docs" / "api.openapi.json"
    assert json.loads(committed.read_text()) == openapi(), \
        "regenerate docs/api.openapi.json from msdoctor.api.openapi.openapi()"
