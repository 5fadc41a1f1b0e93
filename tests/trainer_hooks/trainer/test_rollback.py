"""A real rollback: bad data from step 30, LossSpike's action rolls the run back to the last
good checkpoint (20) and skips the garbage; the goodput of that run, bucket by bucket."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer_runs import events, journal

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
HANG_S = 4.0


def test_one_rollback_to_the_last_good_checkpoint_recorded_in_the_journal_and_the_spool(runs):
    run = runs["rollback"]
    taken = [a for a in journal(run) if a.get("action_taken")]
    assert [(a["alert"], a["action_taken"]["action"], a["action_taken"]["to_step"])
            for a in taken] == [("LossSpike", "rollback", 20)]
    acted = [e for e in events(run) if e["type"] == "action"]
    assert [e["action"] for e in acted if e["action"] == "rollback"] == ["rollback"]
    assert "rolled back" in acted[-1]["reason"] and acted[-1]["alert"] == "LossSpike"
    assert (run / "control" / "rollback.done.json").exists()
    records = [e for e in events(run) if e["type"] == "step"]
    steps = [e["step"] for e in records]
    back = next(i for i in range(1, len(steps)) if steps[i] <= steps[i - 1])
    assert steps[back] == 21 and steps[-1] == 50       # resumed after the checkpoint of 20
    loads = [e for e in events(run) if e["type"] == "checkpoint" and e.get("op") == "load"]
    assert [e["step"] for e in loads] == [20] and loads[0]["load_s"] > 0
    garbage = [float(e["loss"]) for e in records[:back] if 30 <= e["step"] <= 32]
    again = [float(e["loss"]) for e in records[back:] if 30 <= e["step"] <= 32]
    assert garbage and max(again) < min(garbage)       # the garbage is not read again


def test_every_badput_bucket_is_within_two_percent_of_the_wall_time_of_its_truth(runs):
    run = runs["rollback"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    (goodput,) = json.loads(done.stdout)["summary"]["goodput"].values()
    got, wall = goodput["badput_s"], goodput["wall_s"]
    evs = events(run)
    start = evs[0]
    steps = [e for e in evs if e["type"] == "step"]
    back = next(i for i in range(1, len(steps)) if steps[i]["step"] <= steps[i - 1]["step"])
    first, second = steps[:back], steps[back:]
    median = sorted(e["step_time_s"] for e in steps)[len(steps) // 2]
    redone = sum(e["step_time_s"] - e.get("data_wait_s", 0.0) for e in first if e["step"] > 20)
    saves = sum(e.get("save_s", 0.0) + e.get("load_s", 0.0) for e in evs if e["type"] == "checkpoint")
    starts = [e for e in evs if e["type"] == "run_start"]
    truth = {
        "hang": HANG_S,                                  # the injected hang's length
        "redone": redone,                                # the first pass after the checkpoint
        "checkpoint": saves,
        "startup": (first[0]["t"] - first[0]["step_time_s"] - start["process_t"])
        + (first[0]["step_time_s"] - median)
        + (second[0]["t"] - second[0]["step_time_s"] - starts[1]["t"])
        + max(0.0, second[0]["step_time_s"] - median),
        "downtime": starts[1]["t"] - max(e["t"] for e in evs[:evs.index(starts[1])]),
    }
    assert wall == pytest.approx(evs[-1]["t"] - start["process_t"], rel=1e-6)
    for cause, seconds in truth.items():
        assert abs(got[cause] - seconds) <= 0.02 * wall, (cause, got[cause], seconds, wall)
