"""An injected NaN loss goes spool -> sidecar -> real rule engine -> alerts.jsonl -> feed
-> AlertmanagerDeliverer -> a real Alertmanager, and is read back from its API."""
from __future__ import annotations

import json
import time

import pytest

from msdoctor.core.alerts.feed import AlertFeed
from msdoctor.core.pipeline import Pipeline
from msdoctor.delivery import AlertmanagerDeliverer

import servers
from spool_factory import write_run

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(servers.ALERTMANAGER is None,
                                 reason="prometheus-alertmanager not installed "
                                        "(scripts/bootstrap-system)")]


def am_alerts(url, name):
    body = json.loads(servers.http_get(f"{url}/api/v2/alerts?filter=alertname%3D%22{name}%22"))
    return body


def test_a_nan_loss_arrives_in_alertmanager_with_its_fix_and_resolves(tmp_path):
    from msdoctor.core.alerts import AlertJournal
    from msdoctor.core.engine import Engine, default_rules_dir, load_rules

    run_dir = tmp_path / "run"
    write_run(run_dir, run="nan-run", ranks=(0, 1), steps=30, nan_at=20)
    with servers.alertmanager(tmp_path) as am:
        deliverer = AlertmanagerDeliverer(am.url, resend_interval=1.0).start()
        feed = AlertFeed(run_dir / "alerts.jsonl", [deliverer])
        engine = Engine(load_rules([default_rules_dir()]), sinks=[AlertJournal(run_dir)])
        sidecar = Pipeline(run_dir, persist=False, consumers=[engine, feed])
        try:
            sidecar.poll_once()
            alerts = servers.wait_until(lambda: am_alerts(am.url, "LossNonFinite"), 20,
                                        what="LossNonFinite in Alertmanager")
            assert sorted(a["labels"]["rank"] for a in alerts) == ["0", "1"]
            alert = alerts[0]
            assert alert["labels"]["run"] == "nan-run" and alert["labels"]["severity"] == "critical"
            assert alert["labels"]["source"] == "msdoctor"
            assert alert["status"]["state"] == "active"
            assert "nan" in alert["annotations"]["summary"].lower()
            assert alert["annotations"]["fix"] and alert["annotations"]["cause"]
            assert alert["annotations"]["runbook_url"].endswith("#lossnonfinite")
            # Alertmanager has them before the deliverer has read its answer and counted them
            servers.wait_until(lambda: deliverer.stats["sent"] >= 2, 20, what="2 alerts counted sent")
            assert deliverer.stats["failed"] == 0

            # a resolved transition (as the engine writes it) ends the alert in Alertmanager
            with (run_dir / "alerts.jsonl").open("a") as f:
                for line in (run_dir / "alerts.jsonl").read_text().splitlines():
                    t = json.loads(line)
                    if t["alert"] == "LossNonFinite" and t["rank"] == 0:
                        f.write(json.dumps({**t, "state": "resolved", "t": time.time()}) + "\n")
                        break
            sidecar.poll_once()
            servers.wait_until(
                lambda: [a["labels"]["rank"] for a in am_alerts(am.url, "LossNonFinite")
                         if a["status"]["state"] == "active"] == ["1"], 20,
                what="rank 0's alert resolved in Alertmanager")
            time.sleep(1.5)                                  # a resend does not revive it
            active = [a["labels"]["rank"] for a in am_alerts(am.url, "LossNonFinite")
                      if a["status"]["state"] == "active"]
            assert active == ["1"]
        finally:
            deliverer.close()


def test_a_dead_alertmanager_is_counted_and_ingest_goes_on(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, run="r", ranks=(0,), steps=5)
    (run_dir / "alerts.jsonl").write_text("")
    deliverer = AlertmanagerDeliverer(f"http://127.0.0.1:{servers.free_port()}",
                                      backoff=0.01, max_attempts=2).start()
    feed = AlertFeed(run_dir / "alerts.jsonl", [deliverer])
    sidecar = Pipeline(run_dir, persist=False, consumers=[feed])
    try:
        with (run_dir / "alerts.jsonl").open("a") as f:
            f.write(json.dumps({"alert": "A", "state": "firing", "severity": "warning",
                                "run": "r", "rank": 0, "summary": "s", "t": time.time()}) + "\n")
        start = time.perf_counter()
        sidecar.poll_once()
        assert time.perf_counter() - start < 0.5
        assert sidecar.store.runs["r"].ranks[0].last_step == 5
        servers.wait_until(lambda: deliverer.stats["failed"] >= 2, 10, what="failures counted")
    finally:
        deliverer.close()
