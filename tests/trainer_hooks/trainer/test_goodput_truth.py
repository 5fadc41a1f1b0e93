"""msdoctor's goodput of a real run against the trainer's own account of its time (``--truth``,
beside the run, never read from the spool): a slow-data window, evaluations, checkpoint saves,
a 4 s hang, a crash at step 34 and a restart 2 s later resuming from the checkpoint of 30."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from goodput_truth import CAUSES, badput

from trainer_runs import events

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


def replayed_goodput(run: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (goodput,) = json.loads(done.stdout)["summary"]["goodput"].values()
    return goodput


def test_the_run_went_through_every_phase_by_the_trainers_own_account(runs):
    truth = badput(runs["goodput"])
    assert truth["data_wait"] >= 1.0            # 5 steps of 0.4 s data, read-ahead or not
    assert truth["hang"] >= 3.5 and truth["downtime"] >= 2.0
    assert truth["evaluation"] > 0 and truth["checkpoint"] > 0 and truth["redone"] > 0
    steps = [e["step"] for e in events(runs["goodput"]) if e["type"] == "step"]
    assert steps[:33] == list(range(1, 34)) and steps[33:] == list(range(31, 41))
    assert [e.get("eval_s", 0) > 0 for e in events(runs["goodput"]) if e["type"] == "step"
            ].count(True) == 2                   # after the evaluations of steps 15 and 30


def test_every_badput_bucket_is_within_two_percent_of_the_wall_time_of_the_trainers_account(runs):
    run = runs["goodput"]
    got = replayed_goodput(run)
    truth, wall = badput(run), got["wall_s"]
    for cause in CAUSES:
        assert abs(got["badput_s"][cause] - truth[cause]) <= 0.02 * wall, \
            (cause, got["badput_s"][cause], truth[cause], wall)
