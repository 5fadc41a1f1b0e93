"""Two ``msdoctor serve`` sidecars (simulated nodes) scraped by one real Prometheus.

Node A holds ranks 0-1 of a 4-rank run, node B ranks 2-3; rank 0's loss turns
NaN (the real rule engine writes the alert to alerts.jsonl first) and rank 3
steps twice as slow. Prometheus scrapes both every second and evaluates a fast
copy of the generated fleet rules. The tests run in file order: the last one
kills node B.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from grafana.mixin import alerts
from grafana.mixin.render import DASHBOARDS, dashboard_queries, render_rules

import servers
from spool_factory import append_layers, write_run

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(servers.PROMETHEUS is None or servers.PROMTOOL is None,
                                 reason="prometheus/promtool not installed "
                                        "(scripts/bootstrap-system)")]

RUN = "fleet-run"


def _engine_alerts(run_dir: Path) -> None:
    """Run the real rule engine over node A's spool so alerts.jsonl holds its transitions."""
    from msdoctor.core.alerts import AlertJournal
    from msdoctor.core.engine import Engine, default_rules_dir, load_rules
    from msdoctor.core.pipeline import Pipeline

    engine = Engine(load_rules([default_rules_dir()]), sinks=[AlertJournal(run_dir)])
    Pipeline(run_dir, persist=False, consumers=[engine]).poll_once()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    node_a, node_b = tmp / "node-a", tmp / "node-b"
    # stamped ahead of the clock, so no rank goes stale while the module runs (a spool that
    # stops growing is a hung fleet: 0 tokens/s once max(10 s, 10 median steps) have passed)
    t0 = time.time() + 300.0
    write_run(node_a, run=RUN, ranks=(0, 1), world_size=4, steps=40, nan_at=30, t0=t0)
    write_run(node_b, run=RUN, ranks=(2, 3), world_size=4, steps=40, slow_rank=3, slow=2.0,
              t0=t0)
    for rank in (0, 1):
        append_layers(node_a, RUN, rank, 40, t0=t0)
    _engine_alerts(node_a)
    rules = tmp / "fleet.rules.yml"
    rules.write_text(render_rules(alerts.fast_params()))
    dead = f"http://127.0.0.1:{servers.free_port()}/hook"   # a webhook nobody answers
    with servers.sidecar(node_a, tmp, extra=["--webhook", dead]) as a, \
            servers.sidecar(node_b, tmp) as b:
        targets = [a.url.split("//")[1], b.url.split("//")[1]]
        with servers.prometheus(tmp, targets, [rules]) as prom:
            servers.wait_until(
                lambda: len(servers.prom_query(prom.url, 'up{job="msdoctor"} == 1')) == 2,
                30, what="both sidecars scraped")
            time.sleep(3)                       # a few scrapes, so rate() has points
            yield {"a": a, "b": b, "prom": prom, "tmp": tmp}


def _substitute(expr: str) -> str:
    return (expr.replace("$__rate_interval", "10s").replace("$run", RUN)
            .replace("$rank", "0"))


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_promql_expression_of_a_dashboard_returns_at_least_one_series(fleet, name):
    exprs = dashboard_queries(name)
    empty = [e for e in exprs if not servers.prom_query(fleet["prom"].url, _substitute(e))]
    assert not empty, f"{name}: queries without a series: {empty}"
    assert len(exprs) > 15


def test_promtool_check_metrics_on_a_real_scrape_prints_nothing(fleet):
    body = servers.http_get(fleet["a"].url + "/metrics")
    out = subprocess.run([servers.PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout == b"" and out.stderr == b"", out


def test_the_nan_alert_from_the_engine_is_a_firing_msdoctor_alert_series(fleet):
    series = servers.prom_query(fleet["prom"].url,
                                'msdoctor_alert{alertname="LossNonFinite",alertstate="firing"}')
    assert {s["metric"]["rank"] for s in series} == {"0", "1"}
    assert all(s["metric"]["severity"] == "critical" and s["metric"]["run"] == RUN
               for s in series)


def test_the_fleet_rules_fire_for_the_straggler_rank_only(fleet):
    firing = servers.wait_until(
        lambda: servers.prom_alerts(fleet["prom"].url, "MsdoctorStragglerRank"), 30,
        what="MsdoctorStragglerRank firing")
    assert [(a["labels"]["run"], a["labels"]["rank"]) for a in firing] == [(RUN, "3")]
    assert "steps 2.0" in firing[0]["annotations"]["summary"] or \
        "steps 1.9" in firing[0]["annotations"]["summary"]
    assert not servers.prom_alerts(fleet["prom"].url, "MsdoctorRankMissing")


def test_killing_a_sidecar_fires_sidecar_down_and_rank_missing(fleet):
    b = fleet["b"]
    b.kill()
    prom = fleet["prom"].url
    down = servers.wait_until(lambda: servers.prom_alerts(prom, "MsdoctorSidecarDown"), 30,
                              what="MsdoctorSidecarDown firing")
    assert [a["labels"]["instance"] for a in down] == [b.url.split("//")[1]]
    missing = servers.wait_until(lambda: servers.prom_alerts(prom, "MsdoctorRankMissing"), 30,
                                 what="MsdoctorRankMissing firing")
    assert missing[0]["labels"]["run"] == RUN and float(missing[0]["value"]) == 2.0
