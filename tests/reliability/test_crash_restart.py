"""``kill -9`` of the sidecar: every event counted once, every alert notified once,
``alerts.jsonl`` intact. With a real ``msdoctor serve`` over a real training run, and the
crash window between appending an alert and the next snapshot pinned down in-process."""
from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path

import pytest

from msdoctor.core.alerts import read_alerts
from msdoctor.core.alerts.feed import AlertFeed
from msdoctor.core.alerts.journal import AlertJournal, transition_key
from msdoctor.core.alerts.model import Alert
from msdoctor.core.engine.evaluator import Engine
from msdoctor.core.engine.loader import default_rules_dir, load_rules
from msdoctor.core.pipeline import Pipeline
from msdoctor.wire import encode, make
from tests.reliability.helpers import Serve, alert_lines, spool_lines, toy_training, wait_for

NAN_RULES = """
version: 1
groups:
  - name: loss
    rules:
      - alert: LossNonFinite
        expr: nonfinite(loss)
        labels: {severity: critical}
        annotations: {summary: "Loss is {{ $value }} at step {{ $step }}."}
"""


def write_steps(path: Path, steps, nan_at=()) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as fh:
        for n in steps:
            fh.write(encode(make("step", 0, run="r", step=n, t=float(n),
                                 loss=math.nan if n in nan_at else 1.0)))


def drain(sidecar: Pipeline) -> None:
    while sidecar.poll_once():
        pass


def nan_run(tmp_path: Path):
    """The NaN rule loaded from a file, a run directory and its rank-0 spool path."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(NAN_RULES)
    run_dir = tmp_path / "run"
    return load_rules([rules]), run_dir, run_dir / "events" / "rank-0.jsonl"


def key_counts(run_dir: Path) -> Counter:
    return Counter(transition_key(a) for a in read_alerts(run_dir))


def test_a_crash_between_an_alert_append_and_the_next_snapshot_does_not_notify_it_twice(tmp_path):
    ruleset, run_dir, spool = nan_run(tmp_path)
    write_steps(spool, range(1, 11))
    first = Pipeline(run_dir, rules=ruleset, journal=True)
    drain(first)
    first.save_snapshot()                                  # the snapshot: steps 1-10, no alert
    write_steps(spool, range(11, 31), nan_at={15, 25})
    drain(first)                                           # 4 transitions appended ...
    assert len(read_alerts(run_dir)) == 4                  # ... then kill -9: no snapshot
    second = Pipeline(run_dir, rules=ruleset, journal=True, keep_transitions=True)
    delivered = second.transitions                         # what reaches the sinks
    drain(second)                                          # re-evaluates steps 11-30
    assert delivered == [] and second.engine.replayed.suppressed == 4
    write_steps(spool, range(31, 36), nan_at={33})
    drain(second)
    assert [(a.state, a.step) for a in delivered] == [("firing", 33), ("resolved", 34)]
    assert all(n == 1 for n in key_counts(run_dir).values()) and len(read_alerts(run_dir)) == 6


def test_transitions_not_yet_found_again_survive_a_second_crash(tmp_path):
    """Killed again while catching up: the not-yet-re-found transitions are in the snapshot."""
    ruleset, run_dir, spool = nan_run(tmp_path)
    write_steps(spool, range(1, 8001), nan_at={5, 7990})   # > 256 KiB: several polls
    first = Pipeline(run_dir, rules=ruleset, journal=True)
    drain(first)                                           # 4 transitions, never snapshotted
    second = Pipeline(run_dir, rules=ruleset, journal=True, poll_bytes=1)   # smallest reads
    second.poll_once()
    assert second.engine.replayed.suppressed == 2    # step 5 re-found, 7990 not yet
    second.save_snapshot()                                 # mid catch-up, then kill -9
    third = Pipeline(run_dir, rules=ruleset, journal=True)
    drain(third)
    assert sorted(key_counts(run_dir).values()) == [1, 1, 1, 1]


def test_a_torn_last_alert_line_is_cut_off_before_the_next_append_and_the_feed_skips_it(tmp_path):
    journal = AlertJournal(tmp_path)
    alert = Alert("LossNonFinite", "firing", "critical", "r", 0, 5, 5, math.nan, 5.0)
    journal(alert)
    with open(tmp_path / "alerts.jsonl", "ab") as fh:
        fh.write(b'{"alert": "LossNonFinite", "state": "resol')      # killed mid-append
    feed = AlertFeed(tmp_path / "alerts.jsonl")
    assert [a["state"] for a in feed.history()] == ["firing"] and feed.errors == 0
    reopened = AlertJournal(tmp_path)                       # the restarted sidecar
    reopened(Alert("LossNonFinite", "resolved", "critical", "r", 0, 6, 5, 1.0, 6.0))
    lines = (tmp_path / "alerts.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 2 and all(line.endswith(b"\n") and json.loads(line) for line in lines)
    feed.poll()
    assert [a["state"] for a in feed.history()] == ["firing", "resolved"] and feed.errors == 0


def expected_transitions(run_dir: Path, rules) -> Counter:
    """What one uninterrupted pass of the engine over the finished spool notifies."""
    found = []
    sidecar = Pipeline(run_dir, persist=False, consumers=[Engine(rules, sinks=[found.append])])
    drain(sidecar)
    return Counter(transition_key(a.to_dict()) for a in found)


@pytest.mark.slow
def test_a_sidecar_killed_twice_during_a_real_training_run_counts_every_event_once(tmp_path):
    """Real MindSpore training (3000 steps, a NaN loss at steps 300, 1300, 2300) while
    ``msdoctor serve`` is kill -9'd twice: once before it ever snapshotted (every alert it
    appended is in the re-read window), once mid-run with a recent snapshot."""
    pytest.importorskip("mindspore")
    run_dir, log = tmp_path / "run", tmp_path / "serve.log"
    run_dir.mkdir()
    train = toy_training(run_dir, tmp_path / "cwd", "--steps", "3000", "--epochs", "3",
                         "--loss-scale", "--inject-nan-at", "300")
    servers = []

    def firing() -> int:
        lines = alert_lines(run_dir) or []
        return sum(b'"LossNonFinite", "state": "firing"' in line for line in lines)

    try:
        servers.append(Serve(run_dir, log, "--snapshot-every", "3600"))
        assert wait_for(lambda: firing() >= 1, timeout=240), log.read_text()[-3000:]
        assert train.poll() is None, "the training ended before the first kill"
        servers[-1].kill9()
        assert not (run_dir / ".msdoctor" / "snapshot.npz").exists()
        servers.append(Serve(run_dir, log, "--snapshot-every", "0.2"))
        assert wait_for(lambda: firing() >= 2, timeout=240), log.read_text()[-3000:]
        assert train.poll() is None, "the training ended before the second kill"
        servers[-1].kill9()
        servers.append(Serve(run_dir, log, "--snapshot-every", "0.2"))
        out, err = train.communicate(timeout=600)
        assert train.returncode == 0, err[-3000:]
        spool = spool_lines(run_dir)
        run = spool[0]["run"]
        last = servers[-1]

        def caught_up() -> bool:
            try:
                rank = last.get(f"/api/v1/runs/{run}/ranks/0")
            except OSError:
                return False
            return rank["status"] == "completed" and rank["counters"]["events"] == len(spool)
        assert wait_for(caught_up, timeout=120), log.read_text()[-3000:]
        rank = last.get(f"/api/v1/runs/{run}/ranks/0")
    finally:
        if train.poll() is None:
            train.kill()
        codes = [s.stop() for s in servers if s.process.poll() is None]
    assert codes == [0]
    steps = [e for e in spool if e["type"] == "step"]
    assert len(steps) == 3000 and rank["last_step"] == 3000
    counters = rank["counters"]
    assert counters["steps"] == 3000 and counters["events"] == len(spool)
    assert counters["decode_errors"] == 0 and counters["repeated_steps"] == 0
    assert counters["nonfinite_losses"] == sum(
        1 for e in steps if isinstance(e.get("loss"), str) or not math.isfinite(e.get("loss", 0)))
    # alerts.jsonl: every line complete JSON, each transition once, the same as one clean pass
    lines = alert_lines(run_dir)
    assert lines and all(line.endswith(b"\n") and isinstance(json.loads(line), dict)
                         for line in lines)
    recorded = key_counts(run_dir)
    assert max(recorded.values()) == 1, [k for k, n in recorded.items() if n > 1]
    rules = load_rules([default_rules_dir()])
    step_driven = {r.alert for r in rules if not r.time_based}
    expected = expected_transitions(run_dir, rules)
    assert {k for k in recorded if k[0] in step_driven} == \
        {k for k in expected if k[0] in step_driven}
    assert sum(k[0] == "LossNonFinite" and k[3] == "firing" for k in recorded) == 3
    text = log.read_text()
    assert "will not be notified twice" in text and text.count("resumed from") >= 1
    assert os.path.exists(run_dir / ".msdoctor" / "snapshot.npz")
