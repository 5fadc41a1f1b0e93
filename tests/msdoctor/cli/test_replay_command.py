"""``msdoctor replay RUN_DIR --json`` over a small generated spool."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from msdoctor.wire import encode, make

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rules"
REPO = Path(__file__).resolve().parents[3]


def write_run(run_dir: Path) -> None:
    (run_dir / "events").mkdir(parents=True)
    for rank in (0, 1):
        with open(run_dir / "events" / f"rank-{rank}.jsonl", "wb") as fh:
            fh.write(encode(make("run_start", rank, run="demo", t=0.0, world_size=2,
                                 expect={"tokens_per_s_per_device": 1000.0})))
            for step in range(1, 401):
                loss = math.nan if (rank == 1 and step == 250) else 3.0 - step * 1e-3
                fh.write(encode(make("step", rank, run="demo", step=step, t=float(step), loss=loss,
                                     tokens=100.0, step_time_s=1.0)))
            fh.write(b'{"v":1,"type":"step","rank":' + str(rank).encode() + b',"step":"x"}\n')
            fh.write(encode(make("run_end", rank, run="demo", t=401.0, status="completed")))


RULES = """
version: 1
groups:
  - name: throughput
    rules:
      - alert: ThroughputBelowBaseline
        expr: median(tokens_per_s, 20) < 0.7 * expected(tokens_per_s_per_device)
        for: 10 steps
        labels: {severity: info}
        annotations:
          summary: "{{ $value | humanize }} tokens/s"
          cause: slow input
          fix: more workers
"""


def test_replay_json_lists_the_firing_alerts_and_writes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    (tmp_path / "rules.yaml").write_text(RULES)
    before = sorted(os.walk(run_dir))
    proc = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--no-default-rules", "--rules",
                           str(tmp_path / "rules.yaml"), "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    below = [a for a in doc["alerts"] if a["alert"] == "ThroughputBelowBaseline"]
    assert {a["rank"] for a in below} == {0, 1}
    assert all(a["value"] == 100.0 and a["severity"] == "info" and a["step"] == 11 for a in below)
    assert below[0]["summary"] == "100 tokens/s" and below[0]["fix"] == "more workers"
    for key in ("alert", "severity", "rank", "step", "value", "summary", "cause", "fix"):
        assert key in below[0]
    assert doc["summary"]["steps"] == 800 and doc["summary"]["ranks"] == 2
    assert doc["summary"]["spool_error_count"] == 2
    assert sorted(os.walk(run_dir)) == before


def test_replay_prints_a_table_with_the_fix(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    proc = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--no-default-rules", "--rules",
                           str(FIXTURES / "minimal.good.yaml")], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.split()[:4] == ["250", "1", "critical", "LossNonFinite"] for line in lines)


def test_replay_refuses_an_invalid_rule_set(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    proc = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--no-default-rules", "--rules",
                           str(FIXTURES / "values.bad.yaml")], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "invalid 'for'" in proc.stderr


def replay(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msdoctor", "replay", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120, **kw)


def test_fail_on_exits_1_when_an_alert_that_severe_or_worse_fired_and_0_otherwise(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)                                  # a NaN on rank 1: LossNonFinite, critical
    rules = ("--no-default-rules", "--rules", str(FIXTURES / "minimal.good.yaml"))
    proc = replay(str(run_dir), *rules, "--fail-on", "warning")
    assert proc.returncode == 1, proc.stderr
    assert ("--fail-on warning: 1 alert(s) of severity warning or worse fired "
            "(LossNonFinite)") in proc.stderr
    (tmp_path / "info.yaml").write_text(RULES)          # only an info alert fires here
    quiet = replay(str(run_dir), "--no-default-rules", "--rules", str(tmp_path / "info.yaml"),
                   "--fail-on", "warning")
    assert quiet.returncode == 0, quiet.stderr
    assert "ThroughputBelowBaseline" in quiet.stdout
    bad = replay(str(run_dir), "--fail-on", "fatal")
    assert bad.returncode == 2 and "invalid choice: 'fatal'" in bad.stderr


def test_a_reader_that_closes_the_pipe_ends_replay_without_a_traceback(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    read_end, write_end = os.pipe()
    os.close(read_end)                                  # as `| head` does once it has its lines
    try:
        proc = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir)],
                              cwd=REPO, stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 141


def on_a_terminal(argv, env) -> str:
    """Run ``msdoctor`` with its stdout on a pseudo-terminal; what it wrote there."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "msdoctor", *argv], cwd=REPO, stdout=follower,
                            stderr=subprocess.PIPE, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:                                 # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_alerts_are_coloured_on_a_terminal_and_not_when_piped_or_with_no_color(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    argv = ["replay", str(run_dir)]
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm-256color"
    coloured = on_a_terminal(argv, env)
    line = next(x for x in coloured.splitlines() if "LossNonFinite" in x)
    assert "\x1b[1;31mcritical" in line, repr(line)          # critical: bold red
    assert "\x1b[" not in on_a_terminal(argv, dict(env, NO_COLOR="1"))
    piped = replay(*argv[1:], env=env)
    assert piped.returncode == 0 and "LossNonFinite" in piped.stdout and "\x1b[" not in piped.stdout
