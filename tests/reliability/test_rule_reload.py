"""Rule sets of a running ``msdoctor serve`` (a real process): an invalid set at start-up is
refused with every error listed; SIGHUP re-loads, keeping the last good set when the new one
is broken (and logging why, file:line:col), replacing it when it is good."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from msdoctor.wire import encode, make
from tests.reliability.helpers import ROOT, Serve, free_port, wait_for

RULE = """
      - alert: {name}
        expr: "{expr}"
        labels: {{severity: warning}}
        annotations: {{summary: "{name} at step {{{{ $step }}}}"}}
"""


def rules_file(path: Path, **rules: str) -> None:
    body = "".join(RULE.format(name=name, expr=expr) for name, expr in rules.items())
    path.write_text(f"version: 1\ngroups:\n  - name: {path.stem}\n    rules:{body}")


BROKEN = """version: 1
groups:
  - name: broken
    rules:
      - alert: Escape
        expr: "__import__('os').system('id')"
        labels: {severity: warning}
        annotations: {summary: s}
      - alert: NoSeverity
        expr: loss > 1
        annotations: {summary: s}
"""


def append(run_dir: Path, steps, loss: float) -> None:
    path = run_dir / "events" / "rank-0.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as fh:
        for n in steps:
            fh.write(encode(make("step", 0, run="r", step=n, t=time.time(), loss=loss)))


def transitions(run_dir: Path) -> list:
    path = run_dir / "alerts.jsonl"
    if not path.exists():
        return []
    return [(a["alert"], a["state"]) for a in map(json.loads, path.read_bytes().splitlines())]


@pytest.mark.slow
def test_serve_refuses_an_invalid_rule_set_at_start_up_listing_every_error(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    rules_file(rules / "good.yaml", LossHigh="loss > 5")
    (rules / "broken.yaml").write_text(BROKEN)
    (tmp_path / "run").mkdir()
    done = subprocess.run([sys.executable, "-m", "msdoctor", "serve", "--run-dir",
                           str(tmp_path / "run"), "--no-default-rules", "--rules", str(rules), "--listen",
                           f"127.0.0.1:{free_port()}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith(str(rules))]
    assert len(errors) == 2, done.stderr
    assert f"{rules / 'broken.yaml'}:6:15:" in errors[0] and "__import__" in errors[0]
    assert f"{rules / 'broken.yaml'}:9:9:" in errors[1] and "missing required key 'labels'" \
        in errors[1]
    assert "2 error(s) in the rules" in done.stderr and "not starting" in done.stderr
    assert not (tmp_path / "run" / ".msdoctor").exists()


@pytest.mark.slow
def test_sighup_keeps_the_last_good_rules_when_the_new_set_is_broken_and_swaps_a_good_one(
        tmp_path):
    rules, run_dir, log = tmp_path / "rules", tmp_path / "run", tmp_path / "serve.log"
    rules.mkdir()
    run_dir.mkdir()
    rules_file(rules / "loss.yaml", LossHigh="loss > 5")
    serve = Serve(run_dir, log, "--no-default-rules", "--rules", str(rules), "--snapshot-every", "0.2")
    try:
        assert wait_for(serve.up, 60), log.read_text()
        append(run_dir, range(1, 6), loss=10.0)
        assert wait_for(lambda: ("LossHigh", "firing") in transitions(run_dir), 30)

        (rules / "broken.yaml").write_text(BROKEN)           # a broken edit, then SIGHUP
        serve.process.send_signal(signal.SIGHUP)
        assert wait_for(lambda: "rules reload refused" in log.read_text(), 30), log.read_text()
        text = log.read_text()
        assert f"{rules / 'broken.yaml'}:6:15:" in text and f"{rules / 'broken.yaml'}:9:9:" in text
        assert "keeping the previous 1 rules" in text
        append(run_dir, range(6, 8), loss=1.0)               # the old set still evaluates
        assert wait_for(lambda: ("LossHigh", "resolved") in transitions(run_dir), 30)
        append(run_dir, range(8, 10), loss=10.0)
        assert wait_for(lambda: transitions(run_dir).count(("LossHigh", "firing")) == 2, 30)

        (rules / "broken.yaml").unlink()                     # fixed: LossHigh out, LossLow in
        rules_file(rules / "loss.yaml", LossLow="loss < 0.5")
        serve.process.send_signal(signal.SIGHUP)
        assert wait_for(lambda: "rules reloaded" in log.read_text(), 30), log.read_text()
        assert "added: LossLow; removed: LossHigh" in log.read_text()
        assert wait_for(lambda: transitions(run_dir).count(("LossHigh", "resolved")) == 2, 30)
        append(run_dir, range(10, 13), loss=0.1)
        assert wait_for(lambda: ("LossLow", "firing") in transitions(run_dir), 30)
        assert serve.process.poll() is None
    finally:
        code = serve.stop()
    assert code == 0
    assert transitions(run_dir) == [("LossHigh", "firing"), ("LossHigh", "resolved"),
                                    ("LossHigh", "firing"), ("LossHigh", "resolved"),
                                    ("LossLow", "firing")]
