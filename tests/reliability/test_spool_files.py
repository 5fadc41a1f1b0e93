"""The spool under hostile file systems, through the real programs: rank files that are not
files (a symbolic link loop, a directory, a FIFO, /dev/zero, a second name for a rank), a
rotated spool file, a line over 8 MiB, and ``msdoctor serve`` out of file descriptors."""
from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.helpers import ROOT, Serve, wait_for, write_events

pytestmark = pytest.mark.slow


def start(run: str = "r", rank: int = 0, t: float = 1.0) -> dict:
    return {"v": 1, "type": "run_start", "rank": rank, "run": run, "t": t}


def step(n: int, rank: int = 0, run: str = "r", loss: float = 1.0) -> dict:
    return {"v": 1, "type": "step", "rank": rank, "run": run, "step": n, "t": 1.0 + n,
            "loss": loss}


def rank_view(serve: Serve, rank: int, run: str = "r") -> dict:
    try:
        return serve.get(f"/api/v1/runs/{run}/ranks/{rank}")
    except OSError:
        return {}


def spool_lines_logged(serve: Serve, path: Path) -> int:
    """How many log lines report a problem of the file ``path``."""
    return sum(1 for line in serve.text().splitlines()
               if "spool file:" in line and f"{path}:" in line)


def test_rank_files_that_are_not_files_are_reported_once_each_and_the_others_are_read(tmp_path):
    run_dir = tmp_path / "run"
    events = run_dir / "events"
    events.mkdir(parents=True)
    loop = events / "rank-0.jsonl"
    loop.symlink_to("rank-0.jsonl")                       # ELOOP on every open and stat
    (events / "rank-2.jsonl").mkdir()
    os.mkfifo(events / "rank-3.jsonl")
    (events / "rank-4.jsonl").symlink_to("/dev/zero")
    write_events(events / "rank-01.jsonl", start(rank=1), *[step(n, rank=1) for n in (1, 2)])
    good = events / "rank-1.jsonl"
    write_events(good, start(rank=1), *[step(n, rank=1) for n in (1, 2, 3)])
    bad = [loop, events / "rank-2.jsonl", events / "rank-3.jsonl", events / "rank-4.jsonl",
           events / "rank-01.jsonl"]
    for attempt in range(2):                              # and again after a restart
        serve = Serve(run_dir, tmp_path / f"serve{attempt}.log")
        try:
            read_on(serve, good, 3 + 3 * attempt)
        finally:
            if serve.process.poll() is None:
                serve.kill9()
        text = serve.text()
        assert "Traceback" not in text
        for path in bad:
            assert spool_lines_logged(serve, path) == 1, (path, text)
        assert "Too many levels of symbolic links" in text and "is a directory" in text
        assert "is a FIFO" in text and "is a character device" in text
        assert "the spool of rank 1 is named rank-1.jsonl" in text


def read_on(serve: Serve, good: Path, steps: int) -> None:
    """``serve`` reads rank 1's ``steps`` steps, then 3 more appended, and nothing else."""
    assert wait_for(lambda: rank_view(serve, 1).get("last_step") == steps, timeout=120), \
        serve.text()
    write_events(good, *[step(n, rank=1) for n in range(steps + 1, steps + 4)])
    assert wait_for(lambda: rank_view(serve, 1).get("last_step") == steps + 3, timeout=60), \
        serve.text()
    assert serve.process.poll() is None
    ranks = serve.get("/api/v1/runs/r")
    runs = [r["run"] for r in serve.get("/api/v1/runs")["runs"]]
    assert runs == ["r"] and ranks["ranks"] == 1, (runs, ranks)     # no phantom rank
    view = rank_view(serve, 1)
    assert view["counters"]["steps"] == steps + 3                  # rank-01 is not merged in
    assert view["counters"]["repeated_steps"] == 0
    assert serve.stop() == 0


def test_a_rotated_spool_file_is_read_to_its_end_and_the_new_file_keeps_the_run(tmp_path):
    run_dir = tmp_path / "run-dir-name"
    spool = run_dir / "events" / "rank-0.jsonl"
    write_events(spool, start(), *[step(n) for n in range(1, 6)])
    serve = Serve(run_dir, tmp_path / "serve.log")
    try:
        assert wait_for(lambda: rank_view(serve, 0).get("last_step") == 5, timeout=120)
        serve.process.send_signal(signal.SIGSTOP)          # no read between the next moves
        try:
            write_events(spool, *[step(n) for n in range(6, 9)])   # after the last read
            os.rename(spool, spool.with_name("rank-0.jsonl.1"))   # logrotate's rename + create
            write_events(spool, *[step(n) for n in range(9, 13)])
        finally:
            serve.process.send_signal(signal.SIGCONT)
        assert wait_for(lambda: rank_view(serve, 0).get("last_step") == 12, timeout=60), \
            serve.text()
        runs = [r["run"] for r in serve.get("/api/v1/runs")["runs"]]
        assert runs == ["r"]                                 # no run named "run-dir-name"
        counters = rank_view(serve, 0)["counters"]
        assert counters["steps"] == 12 and counters["repeated_steps"] == 0, counters
        # removed, noticed, then recreated by the hook (no run_start in the new file)
        spool.unlink()
        assert wait_for(lambda: "file was removed after 4 lines" in serve.text(), timeout=60)
        write_events(spool, *[step(n) for n in range(13, 15)])
        assert wait_for(lambda: rank_view(serve, 0).get("last_step") == 14, timeout=60)
        assert [r["run"] for r in serve.get("/api/v1/runs")["runs"]] == ["r"]
        assert rank_view(serve, 0)["counters"]["steps"] == 14
    finally:
        serve.stop()


def replay_json(run_dir: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_replay_and_status_read_on_past_a_12_mb_line_and_count_it_with_its_position(tmp_path):
    run_dir = tmp_path / "run"
    spool = run_dir / "events" / "rank-0.jsonl"
    write_events(spool, start(), *[step(n) for n in range(1, 21)])
    with open(spool, "ab") as fh:
        fh.write(b"x" * (12 << 20) + b"\n")                 # line 22
    write_events(spool, *[step(n, loss=float("nan") if n == 25 else 1.0) for n in range(21, 31)])
    doc = replay_json(run_dir)
    summary = doc["summary"]
    assert summary["spool_error_count"] == 1, summary
    assert f"{spool}:22: line longer than" in summary["spool_errors"][0]
    assert [a["step"] for a in doc["alerts"] if a["alert"] == "LossNonFinite"] == [25]
    assert summary["steps"] == 30, summary
    status = subprocess.run([sys.executable, "-m", "msdoctor", "status", "--run-dir",
                             str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert status.returncode == 0 and "1 bad line(s) skipped" in status.stdout, status.stdout
    assert f"{spool}:22: line longer than" in status.stdout


def limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def test_serve_with_64_descriptors_and_60_idle_connections_keeps_ingesting(tmp_path):
    run_dir = tmp_path / "run"
    write_events(run_dir / "events" / "rank-0.jsonl", start(), step(1))
    serve = Serve(run_dir, tmp_path / "serve.log", preexec=limit_descriptors)
    idle = []
    try:
        assert wait_for(lambda: rank_view(serve, 0).get("last_step") == 1, timeout=120)
        for _ in range(60):
            idle.append(socket.create_connection(("127.0.0.1", serve.port), timeout=10))
        busy = idle[-1].recv(200)                          # beyond the cap: 503 and closed
        assert busy.startswith(b"HTTP/1.1 503"), busy
        for rank in range(1, 9):                           # new files need descriptors
            write_events(run_dir / "events" / f"rank-{rank}.jsonl", start(rank=rank),
                         step(1, rank=rank), step(2, rank=rank))
        assert wait_for(lambda: serve.text().count("run_start: run r rank") >= 9, timeout=60), \
            serve.text()
        assert serve.process.poll() is None
    finally:
        for sock in idle:
            sock.close()
    try:
        assert wait_for(lambda: rank_view(serve, 8).get("last_step") == 2, timeout=60)
        assert serve.get("/api/v1/status")["ranks"] == 9
        text = serve.text()
        assert "Too many open files" not in text and "Traceback" not in text
        assert "further ones get 503" in text
    finally:
        assert serve.stop() == 0
