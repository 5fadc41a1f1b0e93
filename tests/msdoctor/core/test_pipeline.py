"""Sidecar: tail -> store -> consumers, snapshots, and resuming without loss or double counting."""
from __future__ import annotations

import logging
import math
import threading
from pathlib import Path

import numpy as np

from msdoctor.core import snapshot
from msdoctor.core.pipeline import Pipeline
from msdoctor.core.spool_typed import STEP
from msdoctor.wire import encode, make

N_RANKS, N_STEPS = 3, 600


def write_run(run_dir: Path, steps: range, ranks=range(N_RANKS), start=False, end=False,
              run: str = "resume-test") -> None:
    events = run_dir / "events"
    events.mkdir(parents=True, exist_ok=True)
    for rank in ranks:
        lines = []
        if start:
            lines.append(encode(make("run_start", rank, run=run, world_size=N_RANKS,
                                     t=0.0, config={"model": "toy"})))
        for n in steps:
            lines.append(encode(make(
                "step", rank, step=n, t=float(n), loss=(math.nan if n % 97 == 0 else 5.0 / n),
                overflow=(n % 50 == 0), grad_norm=1.0 + rank, tokens=512, step_time_s=0.1,
                update_ratio=(1e-3 if n % 10 == 0 else None))))
            if n % 25 == 0:
                lines.append(encode(make("heartbeat", rank, t=float(n), step=n, dropped=n // 100)))
        if end:
            lines.append(encode(make("run_end", rank, status="completed", step=steps[-1], t=1e4)))
        with open(events / f"rank-{rank}.jsonl", "ab") as fh:
            fh.write(b"".join(lines))


def drain(sidecar: Pipeline) -> None:
    while sidecar.poll_once():
        pass


class Recorder:
    """A consumer counting what it saw, with resumable state."""

    name = "recorder"

    def __init__(self):
        self.steps = 0
        self.ticks = 0

    def on_chunk(self, chunk, store):
        self.steps += 0 if chunk.steps is None else len(chunk.steps)

    def on_tick(self, now, store):
        self.ticks += 1

    def state_dict(self):
        return {"steps": self.steps}

    def load_state_dict(self, state):
        self.steps = state["steps"]


def fingerprint(sidecar: Pipeline) -> dict:
    """Everything the store knows, comparable across runs."""
    out = {}
    for run, rank, state in sidecar.store.ranks():
        out[(run, rank)] = (state.status, state.last_step, state.t, dict(state.counters),
                            {k: (round(v, 12) if math.isfinite(v) else str(v))
                             for k, v in state.latest.items()},
                            {k: (s.steps.tolist(), np.nan_to_num(s.values, nan=-1.0).tolist())
                             for k, s in state.series.items()})
    return out


def reference(tmp_path: Path) -> dict:
    run_dir = tmp_path / "reference"
    write_run(run_dir, range(1, N_STEPS + 1), start=True, end=True)
    sidecar = Pipeline(run_dir, persist=False, capacity=256)
    drain(sidecar)
    return fingerprint(sidecar)


def test_a_restarted_sidecar_resumes_from_its_snapshot_with_every_step_exactly_once(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 301), start=True)
    first = Pipeline(run_dir, capacity=256, consumers=[Recorder()])
    drain(first)
    first.save_snapshot()
    write_run(run_dir, range(301, N_STEPS + 1), end=True)
    recorder = Recorder()
    second = Pipeline(run_dir, capacity=256, consumers=[recorder])
    assert second.restored is not None and recorder.steps == 300 * N_RANKS
    drain(second)
    assert fingerprint(second) == reference(tmp_path)
    assert recorder.steps == N_STEPS * N_RANKS
    counters = second.store.runs["resume-test"].ranks[1].counters
    assert counters["steps"] == N_STEPS and counters["repeated_steps"] == 0


def test_events_read_after_the_last_snapshot_are_read_again_exactly_once_after_a_crash(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 201), start=True)
    crashed = Pipeline(run_dir, capacity=256)
    drain(crashed)
    crashed.save_snapshot()
    write_run(run_dir, range(201, 451))
    drain(crashed)                                  # read, but never snapshotted: then "crash"
    assert crashed.store.runs["resume-test"].ranks[0].last_step == 450
    write_run(run_dir, range(451, N_STEPS + 1), end=True)
    resumed = Pipeline(run_dir, capacity=256)
    assert resumed.store.runs["resume-test"].ranks[0].last_step == 200
    drain(resumed)
    assert fingerprint(resumed) == reference(tmp_path)


def test_a_corrupt_snapshot_is_reported_and_the_spool_is_read_from_the_start(tmp_path, caplog):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, N_STEPS + 1), start=True, end=True)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / snapshot.FILENAME).write_bytes(b"PK\x03\x04 not really a zip")
    with caplog.at_level(logging.WARNING, logger="msdoctor.sidecar"):
        sidecar = Pipeline(run_dir, state_dir=state_dir, capacity=256)
    assert sidecar.restored is None
    assert "ignoring the saved state" in caplog.text and "unreadable" in caplog.text
    assert "rebuilding from the start of the spool" in caplog.text
    drain(sidecar)
    assert fingerprint(sidecar) == reference(tmp_path)


def test_a_snapshot_of_a_replaced_spool_does_not_match_and_is_not_used(tmp_path, caplog):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 101), start=True)
    sidecar = Pipeline(run_dir, capacity=256)
    drain(sidecar)
    sidecar.save_snapshot()
    for path in (run_dir / "events").iterdir():
        path.unlink()
    write_run(run_dir, range(1, N_STEPS + 1), start=True, end=True, run="resume-tesT")
    with caplog.at_level(logging.WARNING, logger="msdoctor.sidecar"):
        again = Pipeline(run_dir, capacity=256)
    assert again.restored is None and "does not hold the bytes read before" in caplog.text
    drain(again)
    assert [run for run, _, _ in again.store.ranks()] == ["resume-tesT"] * N_RANKS
    assert again.store.runs["resume-tesT"].ranks[0].counters["steps"] == N_STEPS


def test_the_snapshot_file_holds_no_pickled_objects(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 51), start=True)
    sidecar = Pipeline(run_dir)
    drain(sidecar)
    path = sidecar.save_snapshot()
    with np.load(path, allow_pickle=False) as archive:
        assert all(archive[name].dtype != object for name in archive.files)


class Exploding:
    def on_chunk(self, chunk, store):
        raise RuntimeError("rule engine bug")

    def on_tick(self, now, store):
        raise KeyError("tick bug")


def test_a_consumer_that_raises_is_logged_once_per_kind_and_never_stops_the_sidecar(tmp_path,
                                                                                   caplog):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 11), start=True)
    recorder = Recorder()
    sidecar = Pipeline(run_dir, persist=False, consumers=[Exploding(), recorder])
    with caplog.at_level(logging.ERROR, logger="msdoctor.sidecar"):
        drain(sidecar)
        write_run(run_dir, range(11, 21))
        drain(sidecar)
    assert recorder.steps == 20 * N_RANKS
    assert sidecar.consumer_errors >= 2 * N_RANKS
    assert caplog.text.count("Exploding.on_chunk raised RuntimeError: rule engine bug") == 1
    assert caplog.text.count("Exploding.on_tick raised KeyError") == 1


def test_run_forever_stops_on_its_event_and_writes_a_final_snapshot(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 101), start=True)
    recorder = Recorder()
    sidecar = Pipeline(run_dir, poll_interval=0.01, consumers=[recorder])
    stop = threading.Event()
    thread = threading.Thread(target=sidecar.run_forever, args=(stop,))
    thread.start()
    try:
        for _ in range(500):
            if recorder.steps == 100 * N_RANKS and recorder.ticks > 3:
                break
            stop.wait(0.01)
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive() and recorder.steps == 100 * N_RANKS
    snap = snapshot.load(sidecar.state_dir, run_dir)
    assert snap.consumers == {"recorder": {"steps": 100 * N_RANKS}}
    assert snap.store.runs["resume-test"].ranks[2].last_step == 100


def test_the_sidecar_gives_the_heap_back_once_when_a_drain_ends_and_not_on_later_idle_polls(
        tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, range(1, 301), start=True)
    sidecar = Pipeline(run_dir, persist=False, capacity=256)
    drain(sidecar)                                   # its last poll read nothing: idle
    assert sidecar.idle_release.count == 1
    sidecar.idle_release.last -= 60                  # long after
    sidecar.poll_once()
    assert sidecar.idle_release.count == 1           # nothing was read since


def test_the_live_sidecar_keeps_no_dict_per_step_and_still_knows_each_rank_s_last_time(tmp_path):
    events = tmp_path / "run" / "events"
    events.mkdir(parents=True)
    (events / "rank-0.jsonl").write_bytes(b"".join(
        [encode(make("run_start", 0, run="r", world_size=2, t=0.0))]
        + [encode(make("step", 0, step=n, t=float(n), loss=5.0 / n)) for n in range(1, 101)]))
    (events / "rank-1.jsonl").write_bytes(b"".join(                  # ends on a heartbeat
        [encode(make("run_start", 1, run="r", world_size=2, t=0.0)),
         encode(make("step", 1, step=1, t=7.5, loss=2.0)),
         encode(make("heartbeat", 1, t=9.0, step=1))]))
    sidecar = Pipeline(tmp_path / "run", persist=False, capacity=256)
    chunks = sidecar.poll_once()
    steps = [e for c in chunks for e in c.events if e.get("type") == "step"]
    assert len(steps) == 101 and all(e is STEP for e in steps)     # the values are in columns
    ranks = sidecar.store.runs["r"].ranks
    assert ranks[0].t == 100.0 and ranks[0].last_step == 100
    assert ranks[1].t == 9.0
