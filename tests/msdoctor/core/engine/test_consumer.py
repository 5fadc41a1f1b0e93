"""The engine as a sidecar consumer over a real spool (Sidecar + SpoolTailer + Store)."""
from __future__ import annotations

import json
import math
from pathlib import Path

from msdoctor.core.alerts import read_alerts
from msdoctor.core.engine.loader import load_rules
from msdoctor.core.pipeline import Pipeline
from msdoctor.wire import encode, make

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "rules"
RULES = """
version: 1
groups:
  - name: loss
    rules:
      - alert: LossNonFinite
        expr: nonfinite(loss)
        labels: {severity: critical}
        annotations:
          summary: "Loss is {{ $value }} at step {{ $step }} on rank {{ $labels.rank }}."
          fix: Switch to bf16.
        action: stop_training
"""


def append(path: Path, events) -> None:
    with open(path, "ab") as fh:
        for e in events:
            fh.write(encode(e))


def test_the_sidecar_journals_each_transition_once_and_requests_a_stop_across_restarts(tmp_path):
    (tmp_path / "rules.yaml").write_text(RULES)
    rules = load_rules([tmp_path / "rules.yaml"])
    run_dir = tmp_path / "run"
    (run_dir / "events").mkdir(parents=True)
    spool = run_dir / "events" / "rank-0.jsonl"
    append(spool, [make("run_start", 0, run="demo", t=0.0)] +
           [make("step", 0, run="demo", step=i, t=float(i), loss=1.0) for i in range(1, 50)] +
           [make("step", 0, run="demo", step=50, t=50.0, loss=math.nan)])
    sidecar = Pipeline(run_dir, rules=rules, journal=True, clock=lambda: 60.0)
    sidecar.poll_once()
    sidecar.save_snapshot()
    assert [(a["alert"], a["state"], a["step"]) for a in read_alerts(run_dir)] == [
        ("LossNonFinite", "firing", 50)]
    stop = json.loads((run_dir / "control" / "stop.json").read_text())
    assert stop["alert"] == "LossNonFinite" and stop["step"] == 50 and stop["rank"] == 0
    # a restarted sidecar resumes: no second "firing", the resolution comes once
    append(spool, [make("step", 0, run="demo", step=51, t=51.0, loss=1.0)])
    again = Pipeline(run_dir, rules=rules, journal=True, clock=lambda: 61.0)
    again.poll_once()
    again.poll_once()
    assert [(a["alert"], a["state"], a["step"]) for a in read_alerts(run_dir)] == [
        ("LossNonFinite", "firing", 50), ("LossNonFinite", "resolved", 51)]
