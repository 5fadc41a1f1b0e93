"""The shipped rules fire by name on each fault's real run (``msdoctor replay RUN_DIR --json``).

Separate from the spool-level tests: these need the engine, the shipped rules and the replay
command. Rules whose time scale depends on the job read what the run declares (the trainer's
tiny preset: ``run_start.config.loss_scale_window`` 50, ``run_start.expect.hang_after_s``).
JobHung is judged on the clock while the run is alive, so its run is watched by a live
``msdoctor serve`` and checked in the sidecar's ``alerts.jsonl``.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from timing_alerts import TIMING
from trainer_runs import LONG, events, journal

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


def replay(run_dir: Path) -> list:
    """Alerts of ``msdoctor replay --json``: ``alertname``, ``severity``, ``rank`` and ``step``,
    the step at which the alert started firing (after its ``for:``)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    data = json.loads(done.stdout)
    return [{"alertname": a["alert"], "severity": a["severity"], "rank": a["rank"],
             "step": a["step"], "checkpoint": a.get("checkpoint"), "fix": a.get("fix", "")}
            for a in data["alerts"]]


_replayed = {}


def alerts(runs, name: str) -> list:
    """The replayed alerts of run ``name`` (each run replayed once per session)."""
    if name not in _replayed:
        _replayed[name] = replay(runs[name])
    return _replayed[name]


def fired(runs, run: str, name: str) -> list:
    return sorted(a["step"] for a in alerts(runs, run) if a["alertname"] == name
                  and a["step"] is not None)


@pytest.mark.parametrize("run, alert, good", [
    ("nan", "LossNonFinite", 20),                    # saves every 10 steps, the NaN from 30
    ("nan", "GradNormNonFinite", 20),
    ("spike-slow", "LossSpike", 200),                # saves every 50, the spike at 210
    ("stall", "UpdatesStalled", 50),                 # the stall from 60
])
def test_the_alert_names_the_last_checkpoint_saved_before_the_fault(runs, run, alert, good):
    hits = [a for a in alerts(runs, run) if a["alertname"] == alert]
    assert hits, f"{alert} did not fire on {run}"
    path = str(runs[run] / "checkpoints" / "rank-0" / f"step-{good:08d}.ckpt")
    assert hits[0]["checkpoint"]["step"] == good and hits[0]["checkpoint"]["path"] == path
    assert f"Last good checkpoint: step {good} ({path})." in hits[0]["fix"]


@pytest.mark.parametrize("run, alert, first, last", [
    ("nan", "LossNonFinite", 30, 30),
    ("nan", "GradNormNonFinite", 30, 30),            # fp32: flagged as overflow, no scaler
    ("spike-slow", "LossSpike", 210, 210),           # robust_z(loss, 200) needs 200 steps first
    ("spike-slow", "DataLoaderStarved", 45, 230),    # 150 ms per batch from the start: median
                                                     # over 10 steps, then for: 44 steps (118 here)
    ("periodic", "LossSpikesPeriodic", 150, 260),    # spikes every 50 steps: the third one
    ("stall", "UpdatesStalled", 60, 170),
    ("accum", "StepCountMismatch", 11, 48),          # for: 10 steps
    ("scale-low", "LossScaleStuck", 151, 240),       # 3 declared windows of 50, loss flat
    ("long", "MemoryGrowth", 30, LONG),              # leak@1: growth over 30 steps, for: 20
    ("long", "GradNormSpikesRecurring", 100, LONG),  # lr-high: the 4th separate spike (193;
                                                     # a chaotic run: its spikes move when the
                                                     # cell or the batch changes)
    ("hang", "JobHung", 19, 19),                     # replay ticks through the 10 s pause too
    ("nan-fp16", "LossNonFinite", 30, 30),
    ("nan-fp16", "LossScaleCollapse", 31, 60),       # every step overflows: the scale halves
    ("stall", "ThroughputBelowBaseline", 61, 150),   # declared 100k tokens/s, has ~10k: for 60
    ("plateau", "LossPlateau", 300, 750),            # off its power law from 200: fired at 397
                                                     # (the warm-up test) and 611
])
def test_the_named_rule_fires_on_the_faults_real_run(runs, run, alert, first, last):
    steps = fired(runs, run, alert)
    assert steps, f"{alert} did not fire on {run}: {alerts(runs, run)}"
    assert first <= steps[0] <= last, (alert, steps)


@pytest.mark.xfail(strict=True, reason="a too-high LR does not make the 1M-parameter Llama's loss "
                   "oscillate by 10 % of its level (LossOscillating's threshold): AdamW with "
                   "clipping absorbs it (detrended spread 2-3 %, below the clean run's 4-5 %); "
                   "measured at 3x-300x the LR, batch 1-32, with/without warm-up and clipping, "
                   "beta2 0.95/0.999, fp16; lr-high shows as GradNormSpikesRecurring instead")
def test_lr_high_makes_the_loss_oscillate(runs):
    assert fired(runs, "long", "LossOscillating")


def test_a_hang_fires_job_hung_on_the_live_sidecar_at_the_last_step_before_it(runs):
    run = runs["hang"]
    hung = [a for a in journal(run) if a["alert"] == "JobHung"]
    firing = [a for a in hung if a["state"] == "firing"]
    assert firing, f"JobHung did not fire: {journal(run)}"
    assert firing[0]["step"] == 19 and firing[0]["severity"] == "critical"
    t = {e["step"]: e["t"] for e in events(run) if e["type"] == "step"}
    assert t[19] + 3 < firing[0]["t"] < t[20]        # --hang-after-s 3, hang@20 for 10 s
    assert [a["state"] for a in hung][-1] == "resolved"   # steps resumed, then the run ended


def loud(found: list) -> list:
    """Warning/critical alerts that do not depend on the machine's load."""
    return [a for a in found if a["severity"] in ("warning", "critical")
            and a["alertname"] not in TIMING]


def test_a_clean_run_fires_no_warning_or_critical_alert(runs):
    assert loud(alerts(runs, "clean")) == []


def test_the_long_clean_run_fires_no_warning_or_critical_alert(runs):
    assert loud(alerts(runs, "clean-long")) == []


def test_the_slow_rank_of_a_two_rank_launch_fires_straggler_rank_on_that_rank_only(runs):
    found = alerts(runs, "two-ranks")
    straggler = [a for a in found if a["alertname"] == "StragglerRank"]
    assert straggler, found
    assert {a["rank"] for a in straggler} == {1} and 201 <= straggler[0]["step"] <= 280
    assert {a["rank"] for a in found if a["alertname"] == "DataLoaderStarved"} == {1}


def test_a_job_leaking_toward_its_container_limit_is_warned_before_the_oom_killer_ends_it(runs):
    run = runs["oom"]
    start = events(run)[0]
    assert start["config"]["mem_host_total_bytes"] == 1536 << 20      # the cgroup's, not the RAM
    near = fired(runs, "oom", "MemoryNearCapacity")
    last = max(e["step"] for e in events(run) if e["type"] == "step")
    assert near and near[0] < last, (near, last)
    ended = [e for e in events(run) if e["type"] == "run_end"]
    assert ended == [] or last == 400              # killed (no run_end), or it got through


def replayed_transitions(run_dir: Path) -> list:
    """``msdoctor replay --json``'s firing transitions: (alert, rank, step, caused_by)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return [(a["alert"], a["rank"], a["step"], a.get("caused_by"))
            for a in json.loads(done.stdout)["alerts"]]


@pytest.mark.parametrize("run, consequence", [
    ("nan", "GradNormNonFinite"),          # the NaN loss's backward pass
    ("nan-fp16", "LossScaleCollapse"),     # every step overflows after the NaN
])
def test_a_real_nan_loss_is_the_one_cause_and_the_rest_its_consequences(runs, run, consequence,
                                                                        tmp_path):
    got = replayed_transitions(runs[run])
    # the process's host memory is the machine's allocator's, not the fault's: a real run's
    # RSS may grow for a few steps anywhere (MemoryGrowth once at step 31 on a CI machine);
    # and its step times are the machine's load's (StepTimeErratic at step 10 while other
    # jobs shared the 2 cores): both are left out, as in the clean-run tests
    causes = [a for a in got if a[3] is None and not a[0].startswith("Memory")
              and a[0] not in TIMING]
    assert causes == [("LossNonFinite", 0, 30, None)], got
    assert consequence in {a[0] for a in got if a[3] == "LossNonFinite"}, got
    # a live sidecar started on the run gives the same transitions
    from tests.servers import sidecar, wait_until

    run_dir = tmp_path / run
    shutil.copytree(runs[run], run_dir)
    with sidecar(run_dir, tmp_path):
        wait_until(lambda: len([a for a in journal(run_dir) if a["state"] == "firing"])
                   >= len(got), 60, what="the sidecar's alerts.jsonl")
    served = [(a["alert"], a["rank"], a["step"], a.get("caused_by")) for a in journal(run_dir)
              if a["state"] == "firing"]
    assert sorted(served) == sorted(got)
