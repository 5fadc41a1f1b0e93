"""A pause in the middle of a recording is replayed as the live sidecar saw it: JobHung fires
on the rank that paused, at the last step before the pause, and resolves when it steps again."""
from __future__ import annotations

import math

import numpy as np

from msdoctor.core.batch import columnize
from msdoctor.core.clock import MAX_GAP_TICKS, TICK_S, gap_ticks, split_at_gaps
from msdoctor.core.engine import default_rules_dir, load_rules
from msdoctor.replay.driver import replay_paths
from msdoctor.wire import encode, make

from spool_factory import STEP_TIME, append_steps, rank_file, write_run

T0 = 1_700_000_000.0


def hung(result, rank=None):
    return [(t.state, t.rank, t.step) for t in result["transitions"]
            if t.alert == "JobHung" and (rank is None or t.rank == rank)]


def test_a_twenty_minute_pause_mid_run_fires_job_hung_on_that_rank_only(tmp_path):
    write_run(tmp_path, ranks=(0, 1), steps=100, t0=T0, heartbeat=False)
    end = T0 + 100 * STEP_TIME
    append_steps(tmp_path, "run-a", 0, 101, 50, t=end + 1200.0)    # rank 0 pauses 20 min
    append_steps(tmp_path, "run-a", 1, 101, 50, t=end + 0.5)       # rank 1 goes on
    for rank in (0, 1):                                             # both end cleanly
        with rank_file(tmp_path, rank).open("ab") as f:
            f.write(encode(make("run_end", rank, run="run-a", t=end + 1300.0, status="completed")))
    result = replay_paths([str(tmp_path)], load_rules([default_rules_dir()]), progress=False)
    assert hung(result, 0) == [("firing", 0, 100), ("resolved", 0, 101)]
    assert hung(result, 1) == []
    fired = [a for a in result["alerts"] if a["alert"] == "JobHung"]
    assert len(fired) == 1 and "Rank 0 has logged no step for" in fired[0]["summary"]


def end_cleanly(run_dir, ranks, t):
    for rank in ranks:
        with rank_file(run_dir, rank).open("ab") as f:
            f.write(encode(make("run_end", rank, run="run-a", t=t, status="completed")))


def test_a_finished_recording_without_pauses_fires_no_job_hung(tmp_path):
    write_run(tmp_path, ranks=(0, 1), steps=300, t0=T0)
    end_cleanly(tmp_path, (0, 1), T0 + 301 * STEP_TIME)
    result = replay_paths([str(tmp_path)], load_rules([default_rules_dir()]), progress=False)
    assert hung(result) == []


def test_a_run_directory_that_never_ended_is_judged_as_of_now_like_the_live_sidecar(tmp_path):
    write_run(tmp_path, ranks=(0, 1), steps=300, t0=T0)          # its last step is years old
    result = replay_paths([str(tmp_path)], load_rules([default_rules_dir()]), progress=False)
    assert hung(result) == [("firing", 0, 300), ("firing", 1, 300)]


def test_a_batch_is_cut_before_each_record_that_follows_a_pause():
    times = [10.0, 11.0, 12.0, 13.0, 14.0, 100.0, math.nan, 101.0, 102.0, 300.0]
    events = [{"v": 1, "type": "step", "rank": 0, "run": "r", "step": n, "t": t, "loss": 1.0}
              for n, t in enumerate(times, start=1)]
    parts = split_at_gaps(columnize("r", 0, events), t_before=9.0)
    assert [p.steps.tolist() for p, _ in parts] == [[1, 2, 3, 4, 5], [6, 7, 8, 9], [10]]
    assert parts[0][1].tolist() == [44.0, 74.0, 100.0 - 1e-3]
    assert parts[1][1][0] == 132.0 and parts[1][1][-1] == 300.0 - 1e-3
    assert parts[2][1].shape[0] == 0
    before = split_at_gaps(columnize("r", 0, events[5:6]), t_before=14.0, step_before=5)
    assert before[0][0] is None and before[1][0].steps.tolist() == [6]


def test_a_pause_before_a_restart_from_an_earlier_step_is_downtime_not_a_hang():
    events = [{"v": 1, "type": "step", "rank": 0, "run": "r", "step": n, "t": t, "loss": 1.0}
              for n, t in [(1, 1.0), (2, 2.0), (3, 3.0), (2, 4000.0), (3, 4001.0)]]
    assert len(split_at_gaps(columnize("r", 0, events), t_before=0.0)) == 1
    later = split_at_gaps(columnize("r", 0, events[3:]), t_before=3.0, step_before=3)
    assert len(later) == 1


def test_a_very_long_pause_is_sampled_with_a_bounded_number_of_ticks():
    ticks = gap_ticks(0.0, 10 * 24 * 3600.0)                      # ten days
    assert ticks.shape[0] == MAX_GAP_TICKS + 1
    assert np.all(np.diff(ticks) > 0) and ticks[0] == TICK_S


def test_a_log_of_slow_steps_is_not_cut_at_every_record():
    events = [{"v": 1, "type": "step", "rank": 0, "run": "r", "step": n, "t": 60.0 * n, "loss": 1.0}
              for n in range(1, 200)]
    events[150]["t"] += 3600.0                                      # one real pause, of an hour
    for e in events[151:]:
        e["t"] += 3600.0
    parts = split_at_gaps(columnize("r", 0, events), t_before=0.0)
    assert [len(p) for p, _ in parts] == [150, 49]
