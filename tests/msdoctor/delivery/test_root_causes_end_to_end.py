"""A NaN loss pages once: a real ``msdoctor serve`` over a diverged run notifies a real
Alertmanager (and a webhook) of LossNonFinite only; GradNormNonFinite and UpdatesStalled are on
record as its consequences (journal, API, /metrics, ``status``), and ``replay`` and ``report``
agree.

Rank 0 diverges for good at step 100 (loss and gradient norm NaN, every update skipped). Rank 1
recovers its loss at step 220 but its updates stay stalled: UpdatesStalled, a consequence while
the loss was NaN, becomes an alert of its own when LossNonFinite resolves, and is sent then.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import servers
from receiver import Receiver
from spool_factory import write_diverged_run

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(servers.ALERTMANAGER is None,
                                 reason="prometheus-alertmanager not installed "
                                        "(scripts/bootstrap-system)")]

ROOT = Path(__file__).resolve().parents[3]


def msdoctor(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "msdoctor", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def journal(run_dir: Path) -> list:
    path = run_dir / "alerts.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def firing(transitions: list) -> list:
    return sorted((a["alert"], a["rank"], a["step"], a["first_step"], a.get("caused_by"))
                  for a in transitions if a.get("state", "firing") == "firing")


EXPECTED = [("GradNormNonFinite", 0, 100, 100, "LossNonFinite"),
            ("GradNormNonFinite", 1, 100, 100, "LossNonFinite"),
            ("LossNonFinite", 0, 100, 100, None), ("LossNonFinite", 1, 100, 100, None),
            ("UpdatesStalled", 0, 110, 110, "LossNonFinite"),
            ("UpdatesStalled", 1, 110, 110, "LossNonFinite"),
            ("UpdatesStalled", 1, 220, 110, None)]         # its cause ended: now its own alert
#: GradNormNonFinite on rank 1 resolves at 220 with its cause: it never stands alone.


def test_a_nan_loss_notifies_its_cause_once_and_records_the_consequences(tmp_path):
    run_dir = tmp_path / "run"
    write_diverged_run(run_dir)
    hook = Receiver()
    try:
        with servers.alertmanager(tmp_path) as am, servers.sidecar(
                run_dir, tmp_path, ["--alertmanager", am.url, "--alert-resend", "1",
                                    "--webhook", hook.url]) as sidecar:
            servers.wait_until(lambda: len(firing(journal(run_dir))) >= len(EXPECTED), 60,
                               what="the sidecar's transitions in alerts.jsonl")
            # ... and resends after them: everything queued before has been posted
            servers.wait_until(lambda: _sent(sidecar.url) >= 3, 30,
                               what="three posts to Alertmanager")
            recorded = journal(run_dir)
            active = json.loads(servers.http_get(f"{sidecar.url}/api/v1/alerts"))["alerts"]
            metrics = servers.http_get(f"{sidecar.url}/metrics").decode()
            am_alerts = json.loads(servers.http_get(
                f"{am.url}/api/v2/alerts?filter=source%3D%22msdoctor%22"))
    finally:
        hook.close()

    got = firing(recorded)
    assert got == EXPECTED, got
    ended = [(a["alert"], a["rank"], a["step"], a.get("caused_by")) for a in recorded
             if a["state"] == "resolved"]
    assert ended == [("LossNonFinite", 1, 220, None), ("GradNormNonFinite", 1, 220, "LossNonFinite")]

    # the API: what fires now, each consequence with its cause
    assert sorted((a["alert"], a["rank"], a["caused_by"]) for a in active) == [
        ("GradNormNonFinite", 0, "LossNonFinite"), ("LossNonFinite", 0, None),
        ("UpdatesStalled", 0, "LossNonFinite"), ("UpdatesStalled", 1, None)]
    # /metrics: consequences are exported with their cause as a label
    line = next(x for x in metrics.splitlines() if x.startswith("msdoctor_alert{")
                and 'alertname="UpdatesStalled"' in x and 'rank="0"' in x)
    assert 'caused_by="LossNonFinite"' in line and line.endswith(" 1.0")
    assert sum('caused_by=""' in x for x in metrics.splitlines()
               if x.startswith("msdoctor_alert{")) == 2

    # Alertmanager: the cause, and the alert that outlived its cause; never a consequence
    now_active = sorted((a["labels"]["alertname"], a["labels"]["rank"]) for a in am_alerts
                        if a["status"]["state"] == "active")
    assert now_active == [("LossNonFinite", "0"), ("UpdatesStalled", "1")], am_alerts
    assert not [a for a in am_alerts if a["labels"]["alertname"] == "GradNormNonFinite"]
    # the webhook got the same: LossNonFinite (both ranks; rank 1's resolved too) and rank 1's
    # UpdatesStalled once it stood alone
    hooked = sorted({(a["alert"], a["rank"], a["state"], a["step"])
                     for body in hook.bodies for a in body["alerts"]})
    assert hooked == [("LossNonFinite", 0, "firing", 100), ("LossNonFinite", 1, "firing", 100),
                      ("LossNonFinite", 1, "resolved", 220), ("UpdatesStalled", 1, "firing", 220)]

    # replay of the same run directory gives the same firing transitions
    replayed = json.loads(msdoctor("replay", str(run_dir), "--json").stdout)
    assert firing(replayed["alerts"]) == got
    assert replayed["summary"]["consequences"] == 4
    table = msdoctor("replay", str(run_dir)).stdout
    assert "4 of them as a consequence of another" in table
    assert table.count("↳ consequence of LossNonFinite") == 4
    # status shows the journal's active alerts, consequences marked
    status = msdoctor("status", "--run-dir", str(run_dir)).stdout
    marked = [x for x in status.splitlines() if "↳ consequence of LossNonFinite" in x]
    assert sorted(x.split()[2] for x in marked) == ["GradNormNonFinite", "UpdatesStalled"]
    # and so does the report
    page = tmp_path / "report.html"
    assert msdoctor("report", str(run_dir), "-o", str(page)).returncode == 0
    assert page.read_text().count("&#8627; consequence of LossNonFinite") == 4


def _sent(url: str) -> int:
    """Posts the sidecar's Alertmanager deliverer made (from its own /metrics)."""
    for line in servers.http_get(f"{url}/metrics").decode().splitlines():
        if line.startswith('msdoctor_alert_notifications_total{receiver="alertmanager"}'):
            return int(float(line.split()[-1]))
    return 0
