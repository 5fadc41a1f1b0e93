"""A live sidecar reads a new line when it is written, not at its next timed poll."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from trainer_hooks.emitter import Emitter
from trainer_hooks.wire import make

import servers
from spool_factory import write_run

POLL = 600.0        # the timed poll never comes during the test: only a wake-up reads the line
LIVENESS = 120.0


def last_step(sidecar: servers.Server) -> float:
    """The rank's last step as the sidecar exports it (-1 before it has one)."""
    for line in servers.http_get(sidecar.url + "/metrics").decode().splitlines():
        if line.startswith("msdoctor_last_step{") and 'run="wake"' in line:
            return float(line.rsplit(" ", 1)[1])
    return -1.0


def nan_alerts(run_dir: Path) -> list:
    path = run_dir / "alerts.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [a for a in map(json.loads, lines) if a["alert"] == "LossNonFinite"]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux only")
def test_a_nan_step_emitted_during_a_long_poll_interval_is_alerted_without_waiting(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, run="wake", ranks=[0], steps=30, heartbeat=False)
    with servers.sidecar(run_dir, tmp_path, ["--poll", str(POLL)]) as sidecar:
        servers.wait_until(lambda: last_step(sidecar) == 30, LIVENESS,
                           what="the first poll reading steps 1-30")
        assert nan_alerts(run_dir) == []
        emitter = Emitter(str(run_dir), 0, run="wake")
        emitter.emit(make("step", 0, run="wake", step=31, loss=float("nan"), grad_norm=1.0))
        emitter.close()
        alerts = servers.wait_until(lambda: nan_alerts(run_dir), LIVENESS,
                                    what="LossNonFinite for the appended step")
    assert [(a["state"], a["step"]) for a in alerts] == [("firing", 31)]
