"""The emitter appends complete event lines, never blocks or raises, and counts what it loses."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from msdoctor.wire import decode
from trainer_hooks.emitter import Emitter, spool_path
from trainer_hooks.guard import HookWarning
from trainer_hooks.wire import make

REPO = Path(__file__).resolve().parents[2]


def step_event(step: int, **fields) -> dict:
    return make("step", 0, step=step, t=time.time(), loss=1.0 / step, **fields)


def read_events(path) -> list:
    with open(path, "rb") as handle:
        return [decode(line) for line in handle]


def hook_warnings(records) -> list:
    return [r for r in records if issubclass(r.category, HookWarning)]


def test_events_are_appended_as_complete_decodable_lines_in_emit_order(tmp_path):
    emitter = Emitter(tmp_path, rank=3, flush_s=0.01)
    for step in range(1, 501):
        assert emitter.emit(step_event(step, overflow=step % 7 == 0, grad_norm=float("nan")))
    emitter.close()
    events = read_events(spool_path(tmp_path, 3))
    assert [e["step"] for e in events] == list(range(1, 501))
    assert events[6]["overflow"] is True and events[0]["grad_norm"] != events[0]["grad_norm"]
    assert (emitter.emitted, emitter.written, emitter.dropped, emitter.io_errors) == (500, 500, 0, 0)


def test_a_full_queue_drops_and_counts_instead_of_blocking(tmp_path):
    # the writer sleeps for an hour between drains: it is stalled for the whole test
    emitter = Emitter(tmp_path, rank=0, queue_size=10, flush_s=3600)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        accepted = [emitter.emit(step_event(step)) for step in range(1, 101)]
    elapsed = time.perf_counter() - start
    assert accepted == [True] * 10 + [False] * 90
    assert elapsed < 0.5, f"100 emits took {elapsed:.3f} s: emit blocked"
    assert len(hook_warnings(records)) == 1 and "queue full" in str(records[0].message)
    emitter.close()
    assert (emitter.emitted, emitter.written, emitter.dropped) == (100, 10, 90)
    assert [e["step"] for e in read_events(emitter.path)] == list(range(1, 11))


def test_an_unwritable_run_dir_warns_once_drops_everything_and_never_raises(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file where the run directory should be\n")
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        emitter = Emitter(blocker / "run", rank=0, flush_s=0.01, retry_s=0.02)
        for step in range(1, 51):
            emitter.emit(step_event(step))
            time.sleep(0.002)
        emitter.close()
    assert emitter.io_errors >= 2, "the writer should have retried opening"
    assert (emitter.emitted, emitter.written, emitter.dropped) == (50, 0, 50)
    found = hook_warnings(records)
    assert len(found) == 1 and "not-a-dir" in str(found[0].message)


def test_a_deleted_events_directory_is_recreated_and_later_events_land_in_it(tmp_path):
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        emitter = Emitter(tmp_path, rank=1, flush_s=0.01)
        for step in range(1, 11):
            emitter.emit(step_event(step))
        assert emitter.flush(5)
        shutil.rmtree(tmp_path / "events")
        for step in range(11, 21):
            emitter.emit(step_event(step))
        emitter.close()
    assert [e["step"] for e in read_events(emitter.path)] == list(range(11, 21))
    assert (emitter.written, emitter.dropped) == (20, 0)
    assert len(hook_warnings(records)) == 1 and "removed" in str(records[0].message)


def test_a_file_size_limit_keeps_only_complete_lines_and_counts_the_rest(tmp_path):
    """Disk full, simulated honestly with RLIMIT_FSIZE in a child process (root ignores chmod)."""
    code = textwrap.dedent(f"""
        import json, resource, time, warnings
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        from trainer_hooks.emitter import Emitter
        from trainer_hooks.wire import make
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            emitter = Emitter({str(tmp_path)!r}, rank=0, flush_s=0.005, retry_s=0.01)
            for step in range(1, 301):
                emitter.emit(make("step", 0, step=step, t=time.time(), loss=0.5, tokens=4096))
                if step % 20 == 0:
                    time.sleep(0.02)
            emitter.close()
        print(json.dumps({{"emitted": emitter.emitted, "written": emitter.written,
                           "dropped": emitter.dropped, "io_errors": emitter.io_errors,
                           "warnings": len(records)}}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    counters = json.loads(done.stdout.strip().splitlines()[-1])
    path = spool_path(tmp_path, 0)
    assert os.path.getsize(path) <= 4096
    events = read_events(path)  # every line decodes: no torn line was left behind
    assert counters["written"] == len(events) > 0
    assert counters["dropped"] == counters["emitted"] - counters["written"] > 0
    assert counters["io_errors"] >= 1 and counters["warnings"] == 1
    assert [e["step"] for e in events] == sorted(e["step"] for e in events)


@pytest.mark.filterwarnings("ignore::trainer_hooks.guard.HookWarning")
def test_heartbeats_carry_the_last_step_and_the_dropped_count(tmp_path):
    emitter = Emitter(tmp_path, rank=0, queue_size=2, flush_s=0.01, heartbeat_s=0.05)
    for step in (1, 2, 3):  # the third is dropped: the queue holds two until the writer wakes
        emitter.emit(step_event(step))
    time.sleep(0.4)
    emitter.close()
    beats = [e for e in read_events(emitter.path) if e["type"] == "heartbeat"]
    assert len(beats) >= 2 and emitter.heartbeats == len(beats)
    assert beats[-1]["step"] == 3 and beats[-1]["dropped"] == emitter.dropped


def test_close_is_idempotent_bounded_and_later_emits_are_counted_as_dropped(tmp_path):
    emitter = Emitter(tmp_path, rank=0)
    emitter.emit(step_event(1))
    start = time.perf_counter()
    emitter.close(timeout=1.0)
    emitter.close(timeout=1.0)
    assert time.perf_counter() - start < 1.0
    assert emitter.emit(step_event(2)) is False
    assert (emitter.emitted, emitter.written, emitter.dropped) == (2, 1, 1)


def test_an_emitter_never_closed_still_writes_its_events_at_interpreter_exit(tmp_path):
    code = ("from trainer_hooks.emitter import Emitter\nfrom trainer_hooks.wire import make\n"
            f"e = Emitter({str(tmp_path)!r}, rank=0, flush_s=60)\n"
            "for s in range(1, 6): e.emit(make('step', 0, step=s, loss=1.0))\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=60)
    assert [e["step"] for e in read_events(spool_path(tmp_path, 0))] == [1, 2, 3, 4, 5]


def test_a_torn_line_left_by_a_crashed_writer_is_terminated_before_new_lines(tmp_path):
    path = Path(spool_path(tmp_path, 0))
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"v":1,"type":"step","rank":0,"step":1}\n{"v":1,"type":"st')
    emitter = Emitter(tmp_path, rank=0)
    emitter.emit(step_event(2))
    emitter.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[1] == b'{"v":1,"type":"st' and lines[-1] == b""
    assert decode(lines[2])["step"] == 2


def test_a_fifo_at_the_spool_path_fails_fast_instead_of_hanging(tmp_path):
    path = Path(spool_path(tmp_path, 0))
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    with pytest.warns(HookWarning, match="cannot open"):
        emitter = Emitter(tmp_path, rank=0, retry_s=60)
    emitter.emit(step_event(1))
    emitter.close(timeout=1.0)  # close makes one last attempt to open
    assert (emitter.written, emitter.dropped) == (0, 1) and emitter.io_errors >= 1


def test_a_malformed_event_is_dropped_and_counted_not_raised(tmp_path):
    emitter = Emitter(tmp_path, rank=0)
    assert emitter.emit(["not", "a", "dict"]) is False  # type: ignore[arg-type]
    assert emitter.emit({"v": 1, "type": "step", "rank": 0, "step": 1, "loss": object()})
    emitter.close()
    (line,) = Path(emitter.path).read_bytes().splitlines()  # the emitter does not validate:
    assert b'"step":1' in line and b'"loss":"<object' in line  # unknown objects go as str()
    assert (emitter.emitted, emitter.written, emitter.dropped) == (2, 1, 1)
