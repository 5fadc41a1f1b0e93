"""The shipped rules fire by name on each fault's real run (``msdoctor replay RUN_DIR --json``).

Separate from the spool-level tests: these need the engine, the shipped rules and the replay
command. Faults whose rules need windows far longer than a CI run (LossScaleStuck: 3000 steps,
JobHung: 900 s, MemoryGrowth: ~1200 steps, LossOscillating: > 600 steps) are checked at the spool
level only (test_faults.py).
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("msdoctor.commands.replay") is None,
                       reason="msdoctor replay is not written yet"),
]

ROOT = Path(__file__).resolve().parents[3]


def replay(run_dir: Path) -> list:
    """Alerts of ``msdoctor replay --json`` as dicts with ``alertname``, ``severity``, ``step``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    data = json.loads(done.stdout)
    raw = data.get("alerts", data) if isinstance(data, dict) else data
    found = []
    for alert in raw:
        labels = alert.get("labels") or {}
        found.append({
            "alertname": alert.get("alertname") or alert.get("alert") or alert.get("rule")
            or labels.get("alertname"),
            "severity": alert.get("severity") or labels.get("severity"),
            "step": alert.get("first_step", alert.get("step")),
        })
    return found


def fired(run_dir: Path, name: str) -> list:
    return sorted(a["step"] for a in replay(run_dir) if a["alertname"] == name
                  and a["step"] is not None)


@pytest.mark.parametrize("run, alert, first, last", [
    ("nan", "LossNonFinite", 30, 30),
    ("spike-slow", "LossSpike", 210, 210),      # robust_z(loss, 200) needs 200 steps first
    pytest.param("spike-slow", "DataLoaderStarved", 50, 230, marks=pytest.mark.xfail(
        strict=True, reason="data_wait_s reads ~1 ms on MindSpore 2.9 CPU non-sink: the loader's "
                            "wait lands inside the step (see test_faults)")),
    ("periodic", "LossSpikesPeriodic", 250, 360),  # spikes detectable from step 201 on
    ("stall-leak", "UpdatesStalled", 60, 170),
    ("accum", "StepCountMismatch", 1, 48),
])
def test_the_named_rule_fires_on_the_faults_real_run(runs, run, alert, first, last):
    steps = fired(runs[run], alert)
    assert steps, f"{alert} did not fire on {run}: {replay(runs[run])}"
    assert first <= steps[0] <= last, (alert, steps)


def test_a_clean_run_fires_no_warning_or_critical_alert(runs):
    loud = [a for a in replay(runs["clean"]) if a["severity"] in ("warning", "critical")]
    assert loud == []
