"""The committed dashboards and fleet rules are exactly what grafana/mixin generates,
and every query names a metric the exporter really exposes."""
import json
import re

import pytest

from grafana.mixin import render_all
from grafana.mixin.render import DASHBOARDS, dashboard_json
from msdoctor.exporter import names

METRIC = re.compile(r"\b(msdoctor_[a-z_]+|msdoctor:[a-z_:]+)\b")


def queries(dashboard: dict) -> list:
    """Every PromQL expression of a dashboard: panel targets and annotations."""
    out = [a["expr"] for a in dashboard["annotations"]["list"] if a.get("expr")]
    for panel in dashboard["panels"]:
        out.extend(t["expr"] for t in panel.get("targets", []))
    return out


def test_every_committed_file_equals_what_the_generator_produces_now():
    stale = [str(path) for path, text in render_all().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    assert not stale, f"run `.venv/bin/python grafana/build.py`; out of date: {stale}"


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_metric_a_dashboard_queries_is_in_the_exporter_name_table(name):
    exprs = queries(dashboard_json(name))
    assert len(exprs) >= 10
    used = {m for e in exprs for m in METRIC.findall(e)}
    unknown = sorted(u for u in used if u not in names.BY_SAMPLE_NAME and ":" not in u)
    assert not unknown, f"{name} queries metrics /metrics does not expose: {unknown}"


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_a_dashboard_has_datasource_run_and_rank_variables_and_uses_them(name):
    d = dashboard_json(name)
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert {"run", "rank"} <= set(variables)
    for panel in d["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
    assert any("$rank" in e for e in queries(d)) and any("$run" in e for e in queries(d))


def test_panel_ids_are_unique_and_the_fleet_overview_covers_the_issue_list():
    d = dashboard_json("msdoctor-fleet.json")
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    text = json.dumps(d)
    for metric in ("msdoctor_loss", "msdoctor_device_tokens_per_second",
                   "msdoctor_step_duration_seconds", "msdoctor_data_wait_ratio",
                   "msdoctor_device_memory_bytes", "msdoctor_loss_scale", "msdoctor_grad_norm",
                   "msdoctor_alert"):
        assert metric in text
    assert d["annotations"]["list"][0]["expr"].startswith("msdoctor_alert{")


def test_provisioning_points_grafana_at_prometheus_and_at_the_dashboards_folder():
    import yaml

    from grafana.mixin.render import ROOT

    ds = yaml.safe_load((ROOT / "grafana/provisioning/datasources/msdoctor.yaml").read_text())
    assert ds["datasources"][0]["type"] == "prometheus"
    dash = yaml.safe_load((ROOT / "grafana/provisioning/dashboards/msdoctor.yaml").read_text())
    assert "dashboards" in dash["providers"][0]["options"]["path"]
