"""``msdoctor serve`` as a real process: tails a spool another process appends to,
logs what it sees, saves its state on SIGTERM and resumes from it."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from msdoctor.core import snapshot
from msdoctor.wire import encode, make

ROOT = Path(__file__).resolve().parents[3]

from tests.servers import free_port  # noqa: E402


def start_serve(run_dir: Path, *extra: str) -> subprocess.Popen:
    listen = f"127.0.0.1:{free_port()}"   # never the default 9089, which a user's sidecar may hold
    return subprocess.Popen(
        [sys.executable, "-m", "msdoctor", "serve", "--run-dir", str(run_dir), "--listen", listen,
         "--poll", "0.05",
         "--progress-every", "0.2", "--snapshot-every", "0.5", *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def append_steps(run_dir: Path, rank: int, steps: range, start: bool = False) -> None:
    path = run_dir / "events" / f"rank-{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [encode(make("run_start", rank, run="served", world_size=2, t=time.time(),
                         config={"model": "toy"}))] if start else []
    lines += [encode(make("step", rank, step=n, t=time.time(), loss=1.0 / n, tokens=64,
                          step_time_s=0.01)) for n in steps]
    with open(path, "ab") as fh:
        fh.write(b"".join(lines))


def wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def stop(process: subprocess.Popen) -> tuple:
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    return process.returncode, err


def last_steps(run_dir: Path) -> dict:
    snap = snapshot.load(run_dir / ".msdoctor", run_dir)
    if snap is None or "served" not in snap.store.runs:
        return {}
    return {r: (s.last_step, s.counters["steps"])
            for r, s in snap.store.runs["served"].ranks.items()}


@pytest.mark.slow
def test_serve_tails_a_growing_spool_and_saves_its_state_on_sigterm(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    process = start_serve(run_dir)                      # events/ does not exist yet: it waits
    try:   # its first snapshot is written after it said it waits (however loaded the machine)
        assert wait_for(lambda: (run_dir / ".msdoctor" / "snapshot.npz").exists())
        append_steps(run_dir, 0, range(1, 51), start=True)
        assert wait_for(lambda: last_steps(run_dir).get(0) == (50, 50))
        append_steps(run_dir, 1, range(1, 31), start=True)   # a rank that appears late
        append_steps(run_dir, 0, range(51, 101))
        with open(run_dir / "events" / "rank-1.jsonl", "ab") as fh:
            fh.write(b"not json at all\n")
        assert wait_for(lambda: last_steps(run_dir) == {0: (100, 100), 1: (30, 30)})
        append_steps(run_dir, 1, range(31, 41))
        time.sleep(0.3)
    finally:
        code, err = stop(process)
    assert code == 0, err
    assert "waiting for" in err and "new rank: run served rank 1" in err
    assert "run_start: run served rank 0 world_size 2 model=toy" in err
    assert f"bad line skipped: {run_dir}/events/rank-1.jsonl:32: not valid JSON" in err
    assert "received SIGTERM, stopping" in err and "state saved" in err
    assert last_steps(run_dir) == {0: (100, 100), 1: (40, 40)}   # the final snapshot

    # A restarted sidecar resumes: steps written while it was down are counted once.
    append_steps(run_dir, 0, range(101, 121))
    process = start_serve(run_dir)
    try:
        assert wait_for(lambda: last_steps(run_dir).get(0) == (120, 120))
    finally:
        code, err = stop(process)
    assert code == 0, err
    assert "resumed from" in err
    assert last_steps(run_dir) == {0: (120, 120), 1: (40, 40)}


@pytest.mark.timeout(240)      # liveness only
def test_serve_waits_for_a_run_directory_that_does_not_exist_yet_then_tails_it(tmp_path):
    run_dir = tmp_path / "later"
    listen = f"127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [sys.executable, "-m", "msdoctor", "serve", str(run_dir), "--listen", listen, "--poll",
         "0.05", "--snapshot-every", "0.2"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stderr:
            if "waiting for the run directory" in line:
                break
        assert process.poll() is None and not run_dir.exists()
        append_steps(run_dir, 0, range(1, 11), start=True)          # the trainer starts
        assert wait_for(lambda: last_steps(run_dir).get(0) == (10, 10), timeout=120)
    finally:
        code, err = stop(process)
    assert code == 0, err
    assert str(run_dir) in line and "state saved" in err


def test_serve_on_a_run_directory_that_is_a_file_exits_2_with_one_line_naming_it(tmp_path):
    (tmp_path / "file").write_text("")
    result = subprocess.run([sys.executable, "-m", "msdoctor", "serve", str(tmp_path / "file")],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"msdoctor serve: run directory {tmp_path / 'file'} is not a directory; expected a "
        "directory containing events/rank-<N>.jsonl written by trainer_hooks"]


def test_serve_rejects_a_listen_address_that_is_not_host_port(tmp_path):
    result = subprocess.run([sys.executable, "-m", "msdoctor", "serve", "--run-dir", str(tmp_path),
                             "--listen", "9089"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert "--listen '9089': expected HOST:PORT, e.g. 127.0.0.1:9089" in result.stderr


def test_serve_on_port_0_listens_on_a_free_port_and_logs_it(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "msdoctor", "serve", "--run-dir", str(tmp_path), "--listen",
         "127.0.0.1:0", "--poll", "0.05"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in process.stderr:
            lines.append(line)
            if "serving /metrics" in line:
                break
        url = lines[-1].rsplit(" on ", 1)[-1].strip()
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0"), lines
        with urllib.request.urlopen(url + "/metrics", timeout=60) as response:
            assert response.status == 200
    finally:
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=120)
    assert process.returncode == 0, "".join(lines) + rest


@pytest.mark.slow
def test_serve_follows_a_real_mindspore_training_run_with_an_injected_overflow(tmp_path):
    """trainer_hooks.toy trains a real network (GRAPH mode, CPU, dynamic loss scale) and
    feeds an inf input at step 20; the sidecar sees every step, the overflow, the NaN
    loss, the halved loss scale and the run's end."""
    pytest.importorskip("mindspore")
    run_dir, cwd = tmp_path / "run", tmp_path / "cwd"
    run_dir.mkdir()
    cwd.mkdir()                                     # MindSpore writes kernel_meta/ etc. here
    process = start_serve(run_dir)
    try:
        train = subprocess.run(
            [sys.executable, "-m", "trainer_hooks.toy", "--run-dir", str(run_dir), "--steps", "40",
             "--loss-scale", "--inject-nan-at", "20"],
            cwd=cwd, capture_output=True, text=True, timeout=300,
            env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
        assert train.returncode == 0, train.stderr[-2000:]

        def finished() -> bool:
            snap = snapshot.load(run_dir / ".msdoctor", run_dir)
            return snap is not None and any(
                s.status == "completed" for _, _, s in snap.store.ranks())
        assert wait_for(finished, timeout=60)
    finally:
        code, err = stop(process)
    assert code == 0, err
    snap = snapshot.load(run_dir / ".msdoctor", run_dir)
    [(run, rank, state)] = snap.store.ranks()
    assert run.startswith("toy-") and rank == 0
    assert f"run_end: run {run} rank 0 completed at step 40" in err
    assert state.last_step == 40 and state.counters["steps"] == 40
    assert state.counters["overflow_steps"] == 1 and state.counters["nonfinite_losses"] == 1
    assert state.counters["decode_errors"] == 0 and state.counters["repeated_steps"] == 0
    scale = state.series["loss_scale"]
    assert scale.since(1)[1][0] == 65536.0 and state.latest["loss_scale"] == 32768.0
    assert len(state.series["loss"]) == 40
    assert snap.store.runs[run].config["model"] == "toy-lm"
