"""Alerts end with their run: the real ``msdoctor serve`` over a spool that grows in real time,
a real Alertmanager and a webhook it delivers to, a real Prometheus with the fleet rules, the
TUI over the sidecar's API.

Two ranks step; rank 0's loss turns NaN (LossNonFinite fires and is delivered) and rank 1 steps
twice as slow (the fleet's MsdoctorStragglerRank fires). Then both ranks write run_end (rank 0
failed): every alert of the run ends with the reason "run ended" (journal, API, /metrics,
Alertmanager, webhook), the run reads as ended (failed, when), the fleet straggler alert stops
and stays stopped, and the history keeps what fired. A second run's rank goes silent without a
run_end: after its ``gone_after_s`` it is gone for good and its run ends the same way.
"""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from grafana.mixin import alerts
from grafana.mixin.render import render_rules
from live_spool import LiveSpool

import servers
from receiver import Receiver

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(servers.PROMETHEUS is None or servers.ALERTMANAGER is None,
                                 reason="prometheus/alertmanager not installed "
                                        "(scripts/bootstrap-system)")]

RUN = "ending-run"
REASON = "run ended"


def api(url: str, path: str) -> dict:
    return json.loads(servers.http_get(f"{url}/api/v1{path}"))


def journal(run_dir) -> list:
    path = run_dir / "alerts.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def am_active(am_url: str, name: str) -> list:
    return [a for a in json.loads(servers.http_get(f"{am_url}/api/v2/alerts"))
            if a["labels"].get("alertname") == name and a["status"]["state"] == "active"]


@pytest.fixture(scope="module")
def ended(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run-end")
    run_dir = tmp / "run"
    run_dir.mkdir()
    rules = tmp / "fleet.rules.yml"
    rules.write_text(render_rules(alerts.fast_params()))
    hook = Receiver()
    spool = LiveSpool(run_dir, RUN, ranks=(0, 1), slow={1: 2.0}, nan_from={0: 8})
    try:
        with servers.alertmanager(tmp) as am, \
                servers.sidecar(run_dir, tmp, ["--alertmanager", am.url, "--alert-resend", "1",
                                               "--webhook", hook.url]) as sidecar, \
                servers.prometheus(tmp, [sidecar.url.split("//")[1]], [rules]) as prom:
            servers.wait_until(lambda: am_active(am.url, "LossNonFinite"), 60,
                               what="LossNonFinite in Alertmanager")
            straggler = servers.wait_until(
                lambda: servers.prom_alerts(prom.url, "MsdoctorStragglerRank"), 60,
                what="MsdoctorStragglerRank firing in Prometheus")
            spool.end(0, "failed")
            spool.end(1, "completed")
            servers.wait_until(lambda: api(sidecar.url, f"/runs/{RUN}")["ended"], 30,
                               what="the run ended in the API")
            servers.wait_until(
                lambda: not servers.prom_alerts(prom.url, "MsdoctorStragglerRank"), 30,
                what="MsdoctorStragglerRank no longer firing")
            time.sleep(3)                 # three more evaluations of the fleet rules
            yield {"sidecar": sidecar.url, "am": am.url, "prom": prom.url, "hook": hook,
                   "run_dir": run_dir, "straggler": straggler}
    finally:
        spool.close()
        hook.close()


def test_the_run_reads_as_ended_failed_with_when(ended):
    run = api(ended["sidecar"], f"/runs/{RUN}")
    assert run["ended"]["outcome"] == "failed"
    assert run["ended"]["statuses"] == {"failed": 1, "completed": 1}
    assert time.time() - 120 < run["ended"]["t"] <= time.time()
    assert run["alerts"] == {"firing": 0, "pending": 0}


def test_every_alert_of_the_run_ended_with_the_reason_run_ended(ended):
    recorded = journal(ended["run_dir"])
    fired = {(a["alert"], a["rank"]) for a in recorded if a["state"] in ("firing", "pending")}
    assert ("LossNonFinite", 0) in fired
    last = {}
    for a in recorded:
        last[(a["alert"], a["rank"])] = a
    assert all(a["state"] in ("resolved", "inactive") for a in last.values()), last
    assert last[("LossNonFinite", 0)]["state"] == "resolved"
    assert last[("LossNonFinite", 0)]["reason"] == REASON
    assert api(ended["sidecar"], "/alerts")["alerts"] == []
    metrics = servers.http_get(ended["sidecar"] + "/metrics").decode()
    assert not [x for x in metrics.splitlines() if x.startswith("msdoctor_alert{")]


def test_the_history_keeps_what_fired_and_why_it_ended(ended):
    history = api(ended["sidecar"], f"/alerts/history?run={RUN}")["transitions"]
    nan = [a for a in history if a["alert"] == "LossNonFinite" and a["rank"] == 0]
    assert [a["state"] for a in nan] == ["firing", "resolved"]
    assert nan[-1]["reason"] == REASON


def test_alertmanager_and_the_webhook_hear_the_end(ended):
    servers.wait_until(lambda: not am_active(ended["am"], "LossNonFinite"), 30,
                       what="LossNonFinite resolved in Alertmanager")
    sent = [a for body in ended["hook"].bodies for a in body["alerts"]
            if a["alert"] == "LossNonFinite" and a["rank"] == 0]
    assert [a["state"] for a in sent][-1] == "resolved" and sent[-1]["reason"] == REASON


def test_the_fleet_straggler_rule_stops_when_both_ranks_finished(ended):
    assert [a["labels"]["rank"] for a in ended["straggler"]] == ["1"]
    assert not servers.prom_alerts(ended["prom"], "MsdoctorStragglerRank")
    assert not servers.prom_query(ended["prom"], 'ALERTS{alertname="MsdoctorStragglerRank"}')
    # the ended ranks' last step times are still exported: only the gate keeps it quiet
    assert len(servers.prom_query(ended["prom"], "msdoctor_step_duration_seconds")) == 2


def test_the_tui_shows_the_run_ended_and_its_alerts_as_history(ended):
    asyncio.run(_tui_checks(ended["sidecar"]))


async def _tui_checks(url: str) -> None:
    from msdoctor.tui.app import DoctorApp
    from msdoctor.tui.source import HttpSource

    app = DoctorApp(HttpSource(url), poll=False)
    async with app.run_test(size=(140, 30)):
        assert await app.refresh_data()
        header = str(app.query_one("#run-header").render())
        assert "ended failed" in header
        reading = app.reading
        assert not reading.active
        assert ("LossNonFinite", 0) in {(a.alert, a.rank) for a in reading.resolved}


def test_a_run_whose_rank_goes_silent_ends_once_it_is_gone_for_good(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spool = LiveSpool(run_dir, "silent-run", ranks=(0,), nan_from={0: 3},
                      expect={"gone_after_s": 3})
    try:
        with servers.sidecar(run_dir, tmp_path) as sidecar:
            servers.wait_until(lambda: api(sidecar.url, "/alerts")["alerts"], 60,
                               what="LossNonFinite firing")
            spool.silence(0)                  # killed: no run_end, no heartbeat
            run = servers.wait_until(lambda: api(sidecar.url, "/runs/silent-run")["ended"], 60,
                                     what="the silent run ended")
            assert run == {"outcome": "failed", "t": run["t"], "statuses": {"gone": 1}}
            assert api(sidecar.url, "/runs/silent-run/ranks/0")["status"] == "gone"
            servers.wait_until(lambda: not api(sidecar.url, "/alerts")["alerts"], 30,
                               what="its alert ended")
    finally:
        spool.close()
    last = journal(run_dir)[-1]
    assert (last["alert"], last["state"], last["reason"]) == ("LossNonFinite", "resolved", REASON)
