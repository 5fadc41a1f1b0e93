"""A real MindSpore training run, the real sidecar, a real Prometheus: the dashboards have data.

The toy network trains on the CPU with the loss-scale train cell, a baseline throughput, and an
inf input at its last step (an overflowed, skipped step with a NaN loss: a firing alert);
``msdoctor serve`` tails its spool while it trains and pushes alerts to a real Alertmanager;
Prometheus scrapes the sidecar.
Every PromQL expression of the committed dashboards must return a series, except the ones for
signals this backend cannot produce (device memory reads 0 on CPU, so the hooks omit it), which
are listed here by name.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grafana.mixin.render import DASHBOARDS, dashboard_queries

import servers

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(servers.PROMETHEUS is None,
                                 reason="prometheus not installed (scripts/bootstrap-system)")]

ROOT = Path(__file__).resolve().parents[3]
#: What a CPU run cannot show: MindSpore reports no device memory there. And what a run that
#: has ended no longer has: its alerts ended with it ("run ended"), so no msdoctor_alert series
#: (tests/msdoctor/exporter/test_real_prometheus.py covers those panels on a live fleet).
CPU_ABSENT = ("msdoctor_device_memory", "msdoctor_alert{")


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real-scrape")
    run_dir = tmp / "run"
    run_dir.mkdir()
    with servers.alertmanager(tmp) as am, \
            servers.sidecar(run_dir, tmp, extra=["--alertmanager", am.url]) as sidecar:
        training = subprocess.run(
            [sys.executable, "-m", "trainer_hooks.toy", "--run-dir", str(run_dir), "--steps", "60",
             "--loss-scale", "--per-layer", "--inject-nan-at", "60", "--expect-tokens-per-s", "20000"],
            cwd=tmp, capture_output=True, text=True, timeout=300,
            env=dict(os.environ, PYTHONPATH=str(ROOT), GLOG_v="3"))
        assert training.returncode == 0, training.stderr[-2000:]
        with servers.prometheus(tmp, [sidecar.url.split("//")[1]]) as prom:
            servers.wait_until(
                lambda: servers.prom_query(prom.url, "msdoctor_last_step >= 60"), 30,
                what="the last step scraped")
            time.sleep(3)                    # a few scrapes, so rate() has points
            yield {"prom": prom, "run": _run_id(prom.url), "alertmanager": am,
                   "run_dir": run_dir, "sidecar": sidecar.url}


def _run_id(url: str) -> str:
    series = servers.prom_query(url, "msdoctor_last_step")
    return series[0]["metric"]["run"]


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_every_dashboard_query_has_data_from_a_real_training_run(scraped, name):
    exprs = dashboard_queries(name)
    empty = []
    for expr in exprs:
        query = (expr.replace("$__rate_interval", "10s").replace("$run", scraped["run"])
                 .replace("$rank", "0"))
        if not servers.prom_query(scraped["prom"].url, query):
            empty.append(expr)
    unexplained = [e for e in empty if not any(absent in e for absent in CPU_ABSENT)]
    assert not unexplained, f"{name}: queries without a series on a real CPU run: {unexplained}"
    assert len(exprs) - len(empty) > 15


def test_the_skipped_overflow_step_of_the_real_run_is_counted_in_prometheus(scraped):
    series = servers.prom_query(scraped["prom"].url, "msdoctor_overflow_steps_total")
    assert series and float(series[0]["value"][1]) >= 1


def test_the_real_runs_nan_alert_went_to_the_real_alertmanager_and_ended_with_the_run(scraped):
    import json

    journal = [json.loads(line) for line in
               (scraped["run_dir"] / "alerts.jsonl").read_text().splitlines()]
    nan = [a for a in journal if a["alert"] == "LossNonFinite"]
    assert [a["state"] for a in nan] == ["firing", "resolved"], nan
    assert "bf16" in nan[0]["fix"] and nan[1]["reason"] == "run ended"
    status = json.loads(servers.http_get(scraped["sidecar"] + "/api/v1/status"))
    sent = {d["receiver"]: d.get("sent", 0) for d in status["delivery"]}
    assert sent.get("alertmanager", 0) >= 2, status       # the firing one, then its end
    url = scraped["alertmanager"].url + "/api/v2/alerts"
    servers.wait_until(lambda: not [a for a in json.loads(servers.http_get(url))
                                    if a["labels"].get("alertname") == "LossNonFinite"
                                    and a["status"]["state"] == "active"], 30,
                       what="LossNonFinite no longer active in Alertmanager")
