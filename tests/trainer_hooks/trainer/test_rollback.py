"""A real rollback: bad data from step 30, LossSpike's action rolls the run back to the last
good checkpoint (20) and skips the garbage; the goodput of that run, bucket by bucket."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from goodput_truth import CAUSES, badput

from trainer_hooks.trainer.schedule import lr_at

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
    saves = [e["step"] for e in events(run) if e["type"] == "checkpoint" and "save_s" in e]
    assert saves == [10, 20, 30, 30, 40, 50]           # the second pass saves 30 again
    garbage = [float(e["loss"]) for e in records[:back] if 30 <= e["step"] <= 32]
    again = [float(e["loss"]) for e in records[back:] if 30 <= e["step"] <= 32]
    assert garbage and max(again) < min(garbage)       # the garbage is not read again


def test_every_badput_bucket_is_within_two_percent_of_the_wall_time_of_the_trainers_account(runs):
    run = runs["rollback"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    (goodput,) = json.loads(done.stdout)["summary"]["goodput"].values()
    got, wall = goodput["badput_s"], goodput["wall_s"]
    truth = badput(run)                          # the trainer's own clocks, beside the run
    assert truth["hang"] >= HANG_S - 0.1 and truth["redone"] > 0
    for cause in CAUSES:
        assert abs(got[cause] - truth[cause]) <= 0.02 * wall, (cause, got[cause], truth[cause], wall)


def test_a_rollback_to_a_checkpoint_saved_before_the_lr_was_lowered_keeps_the_lower_lr(runs):
    """lr.json (factor 0.5) appears once the checkpoint of 20 is saved; the rollback goes back
    to that checkpoint, whose LR scale is 1: the factor in force stays 0.5."""
    run = runs["rollback"]
    config = json.loads((run / "config.json").read_text())
    peak, total = config["lr"], config["total_steps"]
    warmup = config["lr_schedule"]["warmup_steps"]
    records = [e for e in events(run) if e["type"] == "step"]
    back = next(i for i in range(1, len(records)) if records[i]["step"] <= records[i - 1]["step"])
    lowered = [e for e in events(run) if e["type"] == "action" and e["action"] == "lower_lr"]
    assert len(lowered) == 1 and 20 <= lowered[0]["step"] < records[back - 1]["step"]

    def factor(e):
        return float(e["lr"]) / lr_at(e["step"] - 1, peak, total, warmup)

    assert all(factor(e) == pytest.approx(1.0, rel=1e-5) for e in records[:back]
               if e["step"] <= lowered[0]["step"])
    assert all(factor(e) == pytest.approx(0.5, rel=1e-5) for e in records[back:])
