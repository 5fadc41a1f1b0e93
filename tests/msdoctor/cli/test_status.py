"""``msdoctor status`` as a user runs it: a real subprocess over a spool on disk."""
from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from msdoctor.wire import encode, make

ROOT = Path(__file__).resolve().parents[3]


def msdoctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msdoctor", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def write_spool(run_dir: Path) -> None:
    events = run_dir / "events"
    events.mkdir(parents=True)
    now = time.time()
    for rank in (0, 1):
        lines = [encode(make("run_start", rank, run="llama-test", world_size=2, t=now - 100,
                             config={"model": "llama2_7b", "precision": "bf16"}))]
        for n in range(1, 21):
            lines.append(encode(make(
                "step", rank, step=n, t=now - 20 + n, loss=2.5 if n < 20 or rank == 0 else math.nan,
                grad_norm=1.25, loss_scale=65536.0, lr=3e-4, tokens=4096, step_time_s=0.5,
                data_wait_s=0.05, mem_device_bytes=3 * 2**30, update_ratio=2e-3)))
        if rank == 0:
            lines.append(encode(make("run_end", 0, status="completed", step=20, t=now)))
            lines.append(b'{"v":1,"type":"step","rank":0,"step":"x"}\n')
        (events / f"rank-{rank}.jsonl").write_bytes(b"".join(lines))


def test_status_prints_one_row_per_rank_with_its_latest_signals(tmp_path):
    run_dir = tmp_path / "run"
    write_spool(run_dir)
    result = msdoctor("status", "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "run llama-test  world_size 2  model llama2_7b  precision bf16"
    header = lines[1].split()
    assert header == ["RANK", "STATUS", "STEP", "LOSS", "GRAD_NORM", "LOSS_SCALE", "LR", "TOK/S",
                      "STEP_TIME", "DATA_WAIT", "MEMORY", "UPD_RATIO", "AGE", "ERRORS"]
    rank0 = lines[2].split()
    assert rank0[:10] == ["0", "completed", "20", "2.5", "1.25", "65536", "3.0e-4", "8.19k",
                          "500ms", "10.0%"]
    assert rank0[10:12] == ["3G", "0.002"] and rank0[-1] == "1"
    rank1 = lines[3].split()
    assert rank1[:4] == ["1", "running", "20", "nan"] and rank1[-1] == "0"
    assert f"{run_dir}/events/rank-0.jsonl:23: field 'step': expected an integer" in result.stdout


def test_status_writes_no_state_into_the_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    write_spool(run_dir)
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    assert msdoctor("status", "--run-dir", str(run_dir)).returncode == 0
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before


def test_status_of_a_missing_run_directory_exits_2_with_one_line_naming_it(tmp_path):
    result = msdoctor("status", "--run-dir", str(tmp_path / "missing"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"msdoctor status: run directory {tmp_path / 'missing'} does not exist; expected a "
        "directory containing events/rank-<N>.jsonl written by trainer_hooks"]


def test_status_of_a_directory_without_events_exits_2(tmp_path):
    result = msdoctor("status", "--run-dir", str(tmp_path))
    assert result.returncode == 2
    assert f"{tmp_path} has no events/ directory" in result.stderr


def test_status_of_an_empty_spool_says_there_is_nothing_yet(tmp_path):
    (tmp_path / "events").mkdir()
    result = msdoctor("status", "--run-dir", str(tmp_path))
    assert result.returncode == 0 and "no events yet" in result.stdout


def test_status_takes_the_run_directory_as_its_argument_as_with_run_dir(tmp_path):
    run_dir = tmp_path / "run"
    write_spool(run_dir)
    positional = msdoctor("status", str(run_dir))
    assert positional.returncode == 0, positional.stderr
    assert positional.stdout.splitlines()[:4][2].split()[:3] == ["0", "completed", "20"]
    missing = msdoctor("status")
    assert missing.returncode == 2 and "expected a run directory" in missing.stderr


def test_status_json_is_one_document_with_each_ranks_latest_values(tmp_path):
    import json

    run_dir = tmp_path / "run"
    write_spool(run_dir)
    result = msdoctor("status", str(run_dir), "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (run,) = doc["runs"]
    assert run["run"] == "llama-test" and run["world_size"] == 2
    rank0, rank1 = run["ranks"]
    assert (rank0["rank"], rank0["status"], rank0["step"]) == (0, "completed", 20)
    assert rank0["latest"]["tokens_per_s"] == 8192.0 and rank1["latest"]["loss"] == "nan"
    assert len(doc["bad_lines"]) == 1 and doc["alerts"] == []


@pytest.mark.timeout(180)      # liveness only: a reading that never comes fails, not hangs
def test_status_watch_prints_again_as_the_spool_grows(tmp_path):
    import signal

    run_dir = tmp_path / "run"
    write_spool(run_dir)
    # Ctrl-C as at a terminal: a suite started in the background (``cmd &``) ignores SIGINT,
    # and a child inherits that unless it is reset
    proc = subprocess.Popen([sys.executable, "-m", "msdoctor", "status", str(run_dir), "--watch",
                             "-n", "0.2"], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        seen = []
        for line in proc.stdout:                    # the first reading: rank 0 at step 20
            seen.append(line)
            if line.startswith("0 ") and " 20 " in line:
                break
        with open(run_dir / "events" / "rank-0.jsonl", "ab") as fh:
            fh.write(encode(make("step", 0, step=21, t=time.time(), loss=2.25)))
        for line in proc.stdout:                    # a later reading shows step 21
            seen.append(line)
            if line.startswith("0 ") and " 21 " in line:
                break
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert sum(line.startswith("msdoctor status ") for line in seen) >= 2
    assert any(line.startswith("0 ") and " 21 " in line and "2.25" in line for line in seen)
