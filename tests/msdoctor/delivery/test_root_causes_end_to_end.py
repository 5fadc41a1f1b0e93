"""A NaN loss pages once: a real ``msdoctor serve`` over a diverged run notifies a real
Alertmanager (and a webhook) of LossNonFinite only; GradNormNonFinite and UpdatesStalled are on
record as its consequences (journal, API, /metrics, ``status``), and ``replay`` agrees.

Rank 0 diverges for good at step 100 (loss and gradient norm NaN, every update skipped). Rank 1
recovers its loss at step 220 but its updates stay stalled: UpdatesStalled, a consequence while
the loss was NaN, becomes an alert of its own when LossNonFinite resolves, and is sent then.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from msdoctor.wire import encode, make

import servers
from receiver import Receiver

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(servers.ALERTMANAGER is None,
                                 reason="prometheus-alertmanager not installed "
                                        "(scripts/bootstrap-system)")]

ROOT = Path(__file__).resolve().parents[3]
STEPS, NAN_AT, RECOVER_AT = 300, 100, {0: None, 1: 220}


def write_diverged_run(run_dir: Path) -> None:
    """Two bf16 ranks; loss and gradient norm NaN from NAN_AT (rank 1 recovers at 220), the
    sampled update ratio 0 from NAN_AT on (the optimizer skips non-finite steps)."""
    t0 = time.time() - STEPS * 0.5
    for rank in (0, 1):
        lines = [encode(make("run_start", rank, run="diverged", world_size=2, t=t0,
                             config={"precision": "bf16"}))]
        for n in range(1, STEPS + 1):
            recover = RECOVER_AT[rank]
            bad = n >= NAN_AT and (recover is None or n < recover)
            fields = dict(loss=math.nan if bad else 2.0 + 8.0 / math.sqrt(n),
                          grad_norm=math.nan if bad else 1.0, loss_scale=1.0, overflow=bad,
                          lr=3e-4, tokens=8192.0, step_time_s=0.5, data_wait_s=0.005)
            if n % 10 == 0:
                fields["update_ratio"] = 0.0 if n >= NAN_AT else 1e-3
            lines.append(encode(make("step", rank, run="diverged", step=n, t=t0 + 0.5 * n,
                                     **fields)))
        lines.append(encode(make("run_end", rank, run="diverged", status="failed", step=STEPS,
                                 t=t0 + 0.5 * STEPS)))
        path = run_dir / "events" / f"rank-{rank}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(lines))


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
            ("UpdatesStalled", 0, 190, 190, "LossNonFinite"),
            ("UpdatesStalled", 1, 190, 190, "LossNonFinite"),
            ("UpdatesStalled", 1, 220, 190, None)]         # its cause ended: now its own alert
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


def _sent(url: str) -> int:
    """Posts the sidecar's Alertmanager deliverer made (from its own /metrics)."""
    for line in servers.http_get(f"{url}/metrics").decode().splitlines():
        if line.startswith('msdoctor_alert_notifications_total{receiver="alertmanager"}'):
            return int(float(line.split()[-1]))
    return 0
