"""One pipeline, one verdict: ``replay``, the embedded TUI and a live ``msdoctor serve`` give the
same alerts on the same run directory, the clock-driven JobHung included."""
from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from msdoctor.core.engine import default_rules_dir, load_rules
from msdoctor.core.pipeline import Pipeline
from msdoctor.replay.driver import replay_paths
from msdoctor.tui.source import EmbeddedSource
from msdoctor.wire import encode, make

from spool_factory import STEP_TIME, append_steps, rank_file, step, write_run

ROOT = Path(__file__).resolve().parents[3]
KEY = ("alert", "rank", "state", "step", "first_step")


def troubled_run(run_dir: Path, steps: int = 100) -> None:
    """Two ranks, two hours ago: rank 0's loss goes NaN at step 40, it pauses 20 minutes after
    step ``steps`` and ends cleanly; rank 1 stops after step ``steps + 50`` and never ends (a
    crash)."""
    t0 = time.time() - 7200.0
    write_run(run_dir, ranks=(0,), steps=steps, t0=t0, nan_at=40, heartbeat=False)
    write_run(run_dir, ranks=(1,), steps=steps + 50, t0=t0, heartbeat=False)
    end = t0 + steps * STEP_TIME
    append_steps(run_dir, "run-a", 0, steps + 1, 50, t=end + 1200.0)
    with rank_file(run_dir, 0).open("ab") as f:
        f.write(encode(make("run_end", 0, run="run-a", t=end + 1300.0, status="completed")))


def keys(transitions) -> list:
    out = []
    for t in transitions:
        d = t.to_dict() if hasattr(t, "to_dict") else t
        out.append(tuple(d.get(k) for k in KEY))
    return sorted(out, key=repr)


@pytest.fixture(scope="module")
def rules():
    return load_rules([default_rules_dir()])


@pytest.fixture
def run_dir(tmp_path) -> Path:
    troubled_run(tmp_path / "run")
    return tmp_path / "run"


def test_the_troubled_run_has_the_alerts_it_was_made_to_have(run_dir, rules):
    found = keys(replay_paths([str(run_dir)], rules, progress=False)["transitions"])
    assert ("LossNonFinite", 0, "firing", 40, 40) in found
    assert ("JobHung", 0, "firing", 100, 100) in found and ("JobHung", 0, "resolved", 101, 100) in found
    assert ("JobHung", 1, "firing", 150, 150) in found                  # never ended
    assert not any(k[0] == "JobHung" and k[1] == 0 and k[3] > 101 for k in found)   # ended


def test_replay_and_the_embedded_tui_agree_on_every_transition(run_dir, rules):
    replayed = keys(replay_paths([str(run_dir)], rules, progress=False)["transitions"])
    source = EmbeddedSource(run_dir)
    source.fetch()
    source.fetch()
    assert keys(source.feed.history(10**6)) == replayed


def test_a_backlog_read_in_many_polls_gives_the_same_transitions_and_no_early_job_hung(
        tmp_path, rules):
    run_dir = tmp_path / "big"
    troubled_run(run_dir, steps=4000)
    whole = Pipeline(run_dir, rules=rules, persist=False, keep_transitions=True)
    whole.drain()
    whole.finish()
    small = Pipeline(run_dir, rules=rules, persist=False, keep_transitions=True, poll_bytes=1)
    polls = 0
    while small.poll_once():          # the wall clock ticks after every poll of the backlog
        polls += 1
    small.poll_once()
    assert polls >= 4
    found = keys(small.transitions)
    assert found == keys(whole.transitions)
    assert [k for k in found if k[0] == "JobHung" and k[2] == "firing"] == [
        ("JobHung", 0, "firing", 4000, 4000), ("JobHung", 1, "firing", 4050, 4050)]


@pytest.mark.slow
def test_a_live_serve_started_after_the_fact_journals_the_same_transitions(run_dir, rules, tmp_path):
    replayed = keys(replay_paths([str(run_dir)], rules, progress=False)["transitions"])
    from tests.servers import free_port

    serve = subprocess.Popen(
        [sys.executable, "-m", "msdoctor", "serve", "--run-dir", str(run_dir), "--listen",
         f"127.0.0.1:{free_port()}", "--poll", "0.05", "--state-dir", str(tmp_path / "state")],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    journal = run_dir / "alerts.jsonl"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lines = journal.read_text().splitlines() if journal.exists() else []
            if len(lines) >= len(replayed):
                break
            time.sleep(0.1)
        time.sleep(1.0)               # a few more polls: nothing else may arrive
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=30)
    assert serve.returncode == 0, err
    journalled = [json.loads(line) for line in journal.read_text().splitlines()]
    assert keys(journalled) == replayed


def test_steps_that_follow_a_pause_on_every_rank_are_judged_together_with_the_verdict_of_one_by_one(
        tmp_path, rules):
    """A sidecar slower than the steps: each rank's new step comes after a pause. The pause is
    ticked rank by rank, then all ranks' steps go to the engine in one pass, and the verdict is
    that of feeding every chunk alone (JobHung during the pause, the NaN after it)."""
    run_dir, ranks, steps = tmp_path / "many", range(6), 60
    t0 = time.time() - 7200.0
    write_run(run_dir, ranks=ranks, steps=steps, t0=t0, heartbeat=False)
    end = t0 + steps * STEP_TIME
    now = [end + 1.0]
    together = Pipeline(run_dir, rules=rules, persist=False, keep_transitions=True,
                        clock=lambda: now[0])
    alone = Pipeline(run_dir, rules=rules, persist=False, keep_transitions=True,
                     clock=lambda: now[0])

    def poll_one_by_one() -> None:
        for chunk in alone.tailer.poll(alone.poll_bytes):
            alone.apply(chunk)
        alone.tick()

    together.poll_once()
    poll_one_by_one()
    later = end + 1200.0                                 # 20 minutes without a step
    for rank in ranks:
        with rank_file(run_dir, rank).open("ab") as f:
            f.write(encode(step("run-a", rank, steps + 1, later,
                                loss=math.nan if rank == 2 else None)))
    now[0] = later + 1.0
    calls = []
    process = together.engine.process
    together.engine.process = lambda *args: calls.append(args[1]) or process(*args)
    together.poll_once()
    poll_one_by_one()
    assert calls == []                                    # no rank was evaluated on its own
    found = keys(together.transitions)
    assert found == keys(alone.transitions)
    assert ("LossNonFinite", 2, "firing", steps + 1, steps + 1) in found
    assert {k[1] for k in found if k[0] == "JobHung" and k[2] == "firing"} == set(ranks)


def test_a_backlog_with_pauses_inside_every_rank_is_judged_round_by_round_as_one_by_one(
        tmp_path, rules):
    """A first read of ranks whose records hold pauses of their own lengths (a restart without
    a snapshot): every rank's k-th part goes to the engine with the others', each rank ticked
    through its own pause at its own times; the verdict is that of feeding rank after rank."""
    run_dir, ranks, steps = tmp_path / "paused", range(6), 60
    t0 = time.time() - 7200.0
    write_run(run_dir, ranks=ranks, steps=steps, t0=t0, heartbeat=False)
    for rank in ranks:
        t = t0 + steps * STEP_TIME + 1000.0 + 100.0 * rank       # a hang of its own length
        append_steps(run_dir, "run-a", rank, steps + 1, 20, t=t)
        t += 20 * 0.01 + (1000.0 if rank % 2 == 0 else 5.0)      # the even ranks hang again
        with rank_file(run_dir, rank).open("ab") as f:
            for n in range(steps + 21, steps + 41):
                f.write(encode(step("run-a", rank, n, t + 0.01 * (n - steps - 21),
                                    loss=math.nan if rank == 4 and n > steps + 30 else None)))
            if rank == 3:
                f.write(encode(make("run_end", 3, run="run-a", t=t + 1.0, status="completed")))
    now = time.time()
    together = Pipeline(run_dir, rules=rules, persist=False, keep_transitions=True,
                        clock=lambda: now)
    alone = Pipeline(run_dir, rules=rules, persist=False, keep_transitions=True,
                     clock=lambda: now)
    singles = []
    tick_rank = together.engine.tick_rank
    together.engine.tick_rank = lambda *args: singles.append(args[1]) or tick_rank(*args)
    together.poll_once()
    for chunk in alone.tailer.poll(alone.poll_bytes):
        alone.apply(chunk)
    alone.tick()
    assert singles == []                                  # no rank was ticked on its own
    found = keys(together.transitions)
    assert found == keys(alone.transitions)
    hung = {(k[1], k[3]) for k in found if k[0] == "JobHung" and k[2] == "firing"}
    assert {(r, steps) for r in ranks} <= hung                      # the first pauses
    assert {(r, steps + 20) for r in (0, 2, 4)} <= hung             # the even ranks' second
    assert not {(r, steps + 20) for r in (1, 3, 5)} & hung
    assert (3, steps + 40) not in hung                              # rank 3 ended
    assert ("LossNonFinite", 4, "firing", steps + 31, steps + 31) in found
