"""Bounds on what a spool can make the real programs do: nesting depth, the number of run ids,
timestamps and step numbers at the limits, snapshots that cannot be written, and text that
would drive a terminal. Each case runs the real ``msdoctor serve``, ``status``, ``replay`` or
``report`` in its own process."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

import pytest

from msdoctor.core.pipeline import Pipeline
from msdoctor.core.snapshot import FILENAME
from msdoctor.wire import encode, make
from msdoctor.wire.schema import MAX_DEPTH
from tests.reliability.helpers import ROOT, Serve, wait_for

pytestmark = pytest.mark.slow
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def nested(depth: int) -> Dict[str, Any]:
    """An object nesting ``depth`` levels (``{"a": {"a": ... {}}}``)."""
    value: Dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def line(event: Dict[str, Any]) -> bytes:
    """One wire line; the standard library's encoder for nesting beyond orjson's 254 levels."""
    deep = any(isinstance(v, dict) and v for v in event.values())
    return (json.dumps(event).encode() + b"\n") if deep else encode(event)


def write(run_dir: Path, events: List[Dict[str, Any]], rank: int = 0) -> Path:
    path = run_dir / "events" / f"rank-{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as fh:
        fh.write(b"".join(line(e) for e in events))
    return path


def steps(first: int, last: int, t0: float, nan_at: int = 0, **extra: Any) -> List[Dict]:
    return [make("step", 0, step=n, t=t0 + n, loss=float("nan") if n == nan_at else 2.0 - n / 100,
                 **extra) for n in range(first, last + 1)]


def firing(serve: Serve, name: str) -> List[Dict[str, Any]]:
    return [a for a in serve.get("/api/v1/alerts?state=firing")["alerts"] if a["alert"] == name]


def msdoctor(*args: str, limit_bytes: int = 0, timeout: float = 300) -> subprocess.CompletedProcess:
    def limit() -> None:
        if limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return subprocess.run([sys.executable, "-m", "msdoctor", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=limit)


def rank0(serve: Serve, run: str) -> Dict[str, Any]:
    return serve.get(f"/api/v1/runs/{run}/ranks/0")


def test_a_config_nested_500_levels_is_a_located_error_and_the_api_and_the_state_stay_whole(
        tmp_path):
    run_dir, t0 = tmp_path / "run", time.time() - 100
    write(run_dir, [make("run_start", 0, t=t0, run="run", config=nested(500)),
                    make("run_start", 0, t=t0, run="run", config=nested(MAX_DEPTH - 1),
                         world_size=1)] + steps(1, 20, t0, nan_at=5))
    serve = Serve(run_dir, tmp_path / "serve.log")
    try:
        assert wait_for(lambda: serve.up() and rank0(serve, "run")["last_step"] == 20, 60)
        runs = serve.get("/api/v1/runs")                # a 500 (TypeError) before the bound
        assert runs["runs"][0]["config"] == nested(MAX_DEPTH - 1)
        assert rank0(serve, "run")["counters"]["decode_errors"] == 1
        assert wait_for(lambda: not firing(serve, "LossNonFinite"), 30)
        assert serve.stop() == 0
        text = serve.text()
        assert (f"rank-0.jsonl:1: field 'config': nested deeper than {MAX_DEPTH} levels"
                in text)
        assert "state saved in" in text and "could NOT" not in text
        restarted = Serve(run_dir, tmp_path / "serve2.log")
        try:
            assert wait_for(restarted.up, 60)
            assert "resumed from" in restarted.text()
            # the NaN at step 5 resolved at step 6: still resolved after the restart
            assert not firing(restarted, "LossNonFinite")
            assert rank0(restarted, "run")["counters"]["steps"] == 20
        finally:
            assert restarted.stop() == 0
    finally:
        serve.stop()


def test_a_state_that_cannot_be_saved_is_reported_and_serve_exits_1_not_state_saved(tmp_path):
    run_dir = tmp_path / "run"
    write(run_dir, [make("run_start", 0, t=time.time(), run="run")] + steps(1, 5, time.time()))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    serve = Serve(run_dir, tmp_path / "serve.log", "--state-dir", str(blocker / "state"),
                  "--snapshot-every", "0.2")
    assert wait_for(lambda: serve.up() and rank0(serve, "run")["last_step"] == 5, 60)
    assert wait_for(lambda: "could NOT be saved" in serve.text(), 30)
    assert serve.stop() == 1
    text = serve.text()
    assert "state saved in" not in text
    assert "stopped; the state could NOT be saved" in text


class Unsaveable:
    """A consumer whose state cannot be taken (as deep nesting once made the engine's)."""

    name = "unsaveable"
    broken = True

    def state_dict(self) -> Dict[str, Any]:
        if self.broken:
            raise RecursionError("maximum recursion depth exceeded")
        return {"ok": 1}


def test_a_consumer_state_that_cannot_be_taken_leaves_the_previous_snapshot_in_place(tmp_path):
    write(tmp_path, [make("run_start", 0, t=1.0)] + steps(1, 3, 1.0))
    pipeline = Pipeline(tmp_path)
    pipeline.poll_once()
    assert pipeline.save_snapshot() is not None              # a good snapshot first
    before = (tmp_path / ".msdoctor" / FILENAME).read_bytes()
    consumer = Unsaveable()
    pipeline.add_consumer(consumer)
    write(tmp_path, steps(4, 6, 1.0))
    pipeline.poll_once()
    assert pipeline.save_snapshot() is None
    assert pipeline.snapshot_failures == 1 and "RecursionError" in pipeline.snapshot_error
    assert (tmp_path / ".msdoctor" / FILENAME).read_bytes() == before   # offsets not advanced
    consumer.broken = False
    assert pipeline.save_snapshot() is not None and pipeline.snapshot_error is None


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def metric(serve: Serve, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{serve.port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_five_thousand_run_ids_in_one_rank_file_keep_64_runs_and_count_the_rest(tmp_path):
    run_dir, t0, n = tmp_path / "run", time.time() - 10_000, 5000
    events: List[Dict[str, Any]] = []
    for i in range(n):
        events += [make("run_start", 0, t=t0 + i, run=f"run-{i:05d}"),
                   make("step", 0, step=i + 1, t=t0 + i, loss=1.0)]
    write(run_dir, events)
    serve = Serve(run_dir, tmp_path / "serve.log")
    try:
        def read() -> bool:
            try:
                return serve.get("/api/v1/status")["ingest"]["refused_run_starts"] == n - 64
            except OSError:
                return False
        assert wait_for(read, 300, every=0.5), serve.text()[-3000:]
        status = serve.get("/api/v1/status")
        assert status["runs"] == 64
        assert status["ingest"] == {"max_runs": 64, "runs": 64, "refused_events": 2 * (n - 64),
                                    "refused_run_starts": n - 64}
        assert metric(serve, "msdoctor_ingest_refused_events_total") == 2 * (n - 64)
        assert len(serve.get("/api/v1/runs")["runs"]) == 64
        rss = rss_mib(serve.process.pid)
        print(f"RSS with {n} run ids in the spool: {rss:.0f} MiB")
        assert rss < 600                                 # 1.19 GB before the bound
        assert serve.stop() == 0
        size = (run_dir / ".msdoctor" / FILENAME).stat().st_size
        print(f"snapshot: {size / 2**20:.1f} MiB")
        assert size < 50 * 2**20                         # 150 MB before the bound
        assert "refused: 64 runs are kept already" in serve.text()
    finally:
        serve.stop()


def test_far_future_and_millisecond_timestamps_are_replayed_in_bounded_memory(tmp_path):
    run_dir, now = tmp_path / "run", time.time()
    write(run_dir, [make("run_start", 0, t=1.0, run="run")]
          + [make("step", 0, step=n, t=float(n), loss=2.0) for n in range(1, 6)]   # 1970
          + [make("step", 0, step=n, t=now + n, loss=2.0) for n in range(6, 11)]
          + [make("step", 0, step=11, t=now * 1000.0, loss=2.0),                  # milliseconds
             make("step", 0, step=12, t=253402300799.0, loss=2.0),                # 9999-12-31
             make("step", 0, step=13, t="inf", loss=2.0)])
    for args in (["replay", str(run_dir)], ["report", str(run_dir), "-o",
                                            str(tmp_path / "report.html")]):
        done = msdoctor(*args, limit_bytes=4 << 30)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr


MF_LINE = ("{date} 10:00:{s:02d},123 - mindformers[mindformers/core/callback/callback.py:323] - "
           "INFO - {{ Epoch:[  1/  1], step:[{step}/   40], loss:[2.5/2.5], per_step_time: "
           "1000ms, lr: 1e-4, overflow cond: False, loss_scale: 1.0, global_norm: [1.0]")


def test_a_mindformers_step_number_beyond_64_bits_is_a_located_error_in_replay_and_report(
        tmp_path):
    lines = [MF_LINE.format(date="2024-05-01", s=i, step=f"{i:5d}") for i in range(1, 21)]
    lines.append(MF_LINE.format(date="2024-05-01", s=21, step="9" * 23))
    lines.append(MF_LINE.format(date="9999-12-31", s=22, step="   22"))
    log = tmp_path / "info.log"
    log.write_text("\n".join(lines) + "\n")
    for args in (["replay", str(log)], ["report", str(log), "-o", str(tmp_path / "r.html")],
                 ["replay", "--json", str(log)]):
        done = msdoctor(*args, limit_bytes=4 << 30)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Traceback" not in done.stderr
    text = msdoctor("replay", str(log)).stdout
    assert f"{log}:21: MindFormers step line, step:" in text and "does not fit in 64 bits" in text
    assert "21 steps" in text


@pytest.mark.parametrize("name, text, where", [
    ("loss.log", "epoch: 1 step: 1, loss is 2.5\nepoch: 1 step: 2, loss is 2.4\n"
                 "epoch: 99999999999999999999 step: 2, loss is 2.4\nepoch: 1 step: 3, loss is 2.3\n",
     ":3: LossMonitor line, step:"),
    ("steps.csv", "step,loss\n1,2.0\n1e30,2.0\n3,2.0\n", ":3: column 'step': '1e30' does not fit"),
    ("ranks.csv", "step,loss,rank\n1,2.0,0\n2,2.0,1e30\n3,2.0,0\n", ":3: column 'rank': expected"),
])
def test_step_and_rank_numbers_beyond_their_range_in_other_logs_are_located_errors(
        tmp_path, name, text, where):
    log = tmp_path / name
    log.write_text(text)
    done = msdoctor("replay", str(log))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"{log}{where}" in done.stdout
    assert "from 1 rank(s)" in done.stdout


def test_tables_with_a_key_or_a_run_per_row_are_replayed_in_bounded_memory(tmp_path):
    keys = tmp_path / "keys.jsonl"        # 50 000 distinct keys: a cell per key and row before
    keys.write_text("".join(json.dumps({"step": i, "loss": 1.0, f"k{i}": 1}) + "\n"
                            for i in range(1, 50_001)))
    done = msdoctor("replay", str(keys), limit_bytes=3 << 30)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "50002 distinct keys; the first 64 are read as columns" in done.stdout
    runs = tmp_path / "runs.csv"          # 20 000 runs: grouped in one pass, 64 kept
    runs.write_text("step,loss,run\n" + "".join(f"{i},1.0,run-{i}\n" for i in range(1, 20_001)))
    done = msdoctor("replay", str(runs), limit_bytes=3 << 30)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "19936 event(s) of runs beyond the first 64 refused" in done.stdout


EVIL = "evil\x1b[2J\x1b]0;owned\x07\nINFO msdoctor.serve: forged line\r\u202e"


def test_a_run_name_with_terminal_escapes_and_newlines_is_escaped_in_the_log_and_in_status(
        tmp_path):
    run_dir, t0 = tmp_path / "run", time.time() - 100
    write(run_dir, [make("run_start", 0, t=t0, run=EVIL, config={"model": EVIL})]
          + steps(1, 5, t0)
          + [make("stop", 0, t=t0 + 6, step=5, reason=EVIL),
             make("run_end", 0, t=t0 + 7, status="failed", step=5, exception=EVIL)])
    serve = Serve(run_dir, tmp_path / "serve.log")
    try:
        assert wait_for(lambda: serve.up() and serve.get("/api/v1/status")["ranks"] == 1, 60)
        assert wait_for(lambda: "run_end" in serve.text(), 30)
    finally:
        serve.stop()
    raw = serve.log.read_bytes()
    for bad in (b"\x1b", b"\x07", b"\r", "\u202e".encode(), b"\nINFO msdoctor.serve: forged"):
        assert bad not in raw, bad
    assert "evil\\x1b[2J\\x1b]0;owned\\x07\\nINFO msdoctor.serve: forged line\\r\\u202e" \
        in serve.text()
    status = msdoctor("status", "--run-dir", str(run_dir))
    assert status.returncode == 0, status.stderr
    for bad in ("\x1b", "\x07", "\r", "\u202e", "\nINFO msdoctor.serve: forged"):
        assert bad not in status.stdout, bad
    assert "run evil\\x1b[2J" in status.stdout
    (run_dir / "data.csv").write_text(f"step,loss,{EVIL.replace(',', ';')}\n1,2.0,3\n")
    for target in (run_dir, run_dir / "data.csv"):
        replay = msdoctor("replay", str(target))
        assert replay.returncode == 0, replay.stderr
        for bad in ("\x1b", "\x07", "\r", "\u202e"):
            assert bad not in replay.stdout, (target, bad)
