"""A snapshot written by a forked child: the state at the fork, while the sidecar reads on."""
from __future__ import annotations

import json
import logging
import os
import threading
import time
import zipfile

import numpy as np
import pytest
from test_pipeline import drain, write_run

from msdoctor.core import forked, snapshot
from msdoctor.core.engine.loader import default_rules_dir, load_rules
from msdoctor.core.pipeline import Pipeline

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")


def contents(path):
    """The snapshot's arrays and its metadata, without the time it was written."""
    with zipfile.ZipFile(path) as z:
        arrays = {n: np.load(z.open(n), allow_pickle=False) for n in z.namelist()}
    meta = json.loads(arrays.pop("meta.npy").tobytes())
    meta.pop("written")
    return meta, arrays


def sidecar(run_dir, state_dir, **kwargs):
    return Pipeline(run_dir, rules=load_rules([default_rules_dir()]), journal=True,
                    state_dir=state_dir, capacity=256, **kwargs)


def test_the_child_writes_what_an_in_line_save_writes_at_that_moment_while_the_parent_reads_on(
        tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 301), start=True)
    live = sidecar(run_dir, tmp_path / "state")
    drain(live)
    live.state_dir = tmp_path / "inline"             # the reference, at the same moment
    assert live.save_snapshot() is not None
    live.state_dir = tmp_path / "state"
    assert live.save_snapshot_forked()
    assert not live.save_snapshot_forked()           # one child at a time
    write_run(run_dir, range(301, 601), end=True)    # the parent reads on while the child writes
    drain(live)
    assert live.store.runs["resume-test"].ranks[0].last_step == 600
    live.collect_snapshot(wait=True)
    assert live.snapshot_failures == 0 and live.snapshot_seconds > 0 and not live.forked.running

    child_meta, child_arrays = contents(tmp_path / "state" / snapshot.FILENAME)
    line_meta, line_arrays = contents(tmp_path / "inline" / snapshot.FILENAME)
    assert child_meta == line_meta
    assert child_arrays.keys() == line_arrays.keys()
    assert child_arrays["consumer_arrays.npy"].size > 1000       # the engine's windows
    for name, values in child_arrays.items():
        np.testing.assert_array_equal(values, line_arrays[name], err_msg=name)
    restored = sidecar(run_dir, tmp_path / "state")  # resumes where the fork was
    assert restored.store.runs["resume-test"].ranks[0].last_step == 300


def test_the_snapshot_keeps_the_journal_offset_of_the_fork_not_of_later_appends(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 101), start=True)
    live = sidecar(run_dir, tmp_path / "state")
    drain(live)
    at_fork = live.engine.journal.size()
    with live.engine.journal_held():
        with open(live.engine.journal.path, "ab") as fh:   # an alert appended after the fork
            fh.write(b'{"late": true}\n')
        assert live.engine.state_dict()["journal"]["offset"] == at_fork
    assert live.engine.state_dict()["journal"]["offset"] == at_fork + 15


class Failing:
    name = "failing"

    def state_dict(self):
        raise RuntimeError("no state today")


def test_a_child_that_cannot_save_is_counted_and_logged_and_the_old_snapshot_stays(
        tmp_path, caplog):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 51), start=True)
    state_dir = tmp_path / "state"
    good = Pipeline(run_dir, state_dir=state_dir, capacity=256)
    drain(good)
    assert good.save_snapshot() is not None
    before = (state_dir / snapshot.FILENAME).read_bytes()
    bad = Pipeline(run_dir, state_dir=state_dir, capacity=256, consumers=[Failing()])
    assert bad.save_snapshot_forked()
    with caplog.at_level(logging.ERROR, logger="msdoctor.sidecar"):
        bad.collect_snapshot(wait=True)
    assert bad.snapshot_failures == 1
    assert bad.snapshot_error == "failing.state_dict raised RuntimeError: no state today"
    assert "could NOT be saved" in caplog.text
    assert (state_dir / snapshot.FILENAME).read_bytes() == before


def test_a_child_over_its_time_limit_is_killed_and_its_file_removed(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    now = [0.0]
    write = forked.ForkedWrite(clock=lambda: now[0])

    def stuck():
        snapshot.temporary_path(state_dir, os.getpid()).write_bytes(b"half")
        time.sleep(60)

    write.start(stuck, str, limit_s=0)
    half = snapshot.temporary_path(state_dir, write.pid)
    deadline = time.monotonic() + 60
    while not half.exists() and time.monotonic() < deadline:    # the child is writing
        time.sleep(0.01)
    assert write.outcome() is None                   # within its limit (120 s at least)
    now[0] = forked.MIN_LIMIT_S + 1
    done = write.outcome()
    assert done is not None and done.killed and "killed" in (done.error or "")
    assert not write.running
    assert snapshot.temporary_path(state_dir, done.pid).exists()   # the pipeline removes it


def test_the_pipeline_removes_a_killed_childs_temporary_file(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    leftover = snapshot.temporary_path(state_dir, 4242)
    leftover.write_bytes(b"half")
    sidecar_ = Pipeline(tmp_path, state_dir=state_dir)
    sidecar_.forked.outcome = lambda wait=False: forked.Outcome("killed", 120.0, 4242, True)
    sidecar_.collect_snapshot()
    assert not leftover.exists() and sidecar_.snapshot_failures == 1


def test_forking_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(forked.ENV, "0")
    assert not forked.available()
    monkeypatch.setenv(forked.ENV, "1")
    assert forked.available()


def test_the_running_sidecar_takes_its_periodic_snapshots_in_a_forked_child(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 301), start=True)
    live = Pipeline(run_dir, state_dir=tmp_path / "state", capacity=256,
                    snapshot_interval=0.05, poll_interval=0.05)
    children = []
    start = live.forked.start
    live.forked.start = lambda *args: (start(*args), children.append(live.forked.pid))[0]
    stop = threading.Event()
    loop = threading.Thread(target=live.run_forever, args=(stop,))
    loop.start()
    deadline = time.monotonic() + 60
    while len(children) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    loop.join(30)
    assert len(children) >= 2 and not loop.is_alive()
    assert live.snapshot_failures == 0 and not live.forked.running     # every child collected
    assert snapshot.load(tmp_path / "state", run_dir, 256) is not None


def test_a_fork_that_fails_falls_back_to_an_in_line_save_and_is_logged_once(
        tmp_path, monkeypatch, caplog):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 51), start=True)
    live = Pipeline(run_dir, state_dir=tmp_path / "state", capacity=256, snapshot_interval=0.0)
    drain(live)
    opened = len(os.listdir("/proc/self/fd"))

    def no_fork():
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(os, "fork", no_fork)
    with caplog.at_level(logging.WARNING, logger="msdoctor.sidecar"):
        assert not live.save_snapshot_forked()
        for _ in range(2):
            live.last_snapshot = -1e9                # due
            live.snapshot_if_due()                   # what run_forever does: in line instead
    assert live.forked.refused == 3 and not live.forked.running
    assert caplog.text.count("cannot fork to write the snapshot") == 1
    assert live.snapshot_failures == 0 and (tmp_path / "state" / snapshot.FILENAME).exists()
    assert len(os.listdir("/proc/self/fd")) == opened          # the pipe was closed
