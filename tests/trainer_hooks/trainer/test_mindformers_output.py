"""The MindFormers ``output/`` tree of real two-rank runs (the bundled trainer logs with
MindFormers' own ``MFLossMonitor`` and logger): ``msdoctor replay`` of ``output/log`` and of msrun's
``msrun_log`` gives each rank the diagnosis the spool of the same run gives."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from timing_alerts import TIMING
from trainer_runs import ROOT, msrun_log

pytestmark = pytest.mark.slow


def replay(path) -> dict:
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(path), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


#: Alerts on inputs only the spool carries (MindFormers' log prints no update ratio and no
#: vocabulary): the log cannot give them, every other alert it must give alike, but those on
#: wall-clock timings (the log times a step otherwise than the hooks, and a loaded machine
#: makes either erratic).
SPOOL_ONLY = {"UpdatesStalled", "LearningRateHuge"}


def diagnoses(doc: dict) -> dict:
    """Per rank: steps, last step, the alerts with their first step (but those on inputs only
    the spool carries and those on timings), the verdict."""
    return {r["rank"]: (r["steps"], r["last_step"],
                        sorted((a["alert"], a["step"]) for a in r["alerts"]
                               if a["alert"] not in SPOOL_ONLY and a["alert"] not in TIMING),
                        r["verdict"])
            for r in doc["ranks"]}


def test_the_output_log_tree_gives_each_rank_the_diagnosis_of_the_spool(runs):
    run = runs["mf-two-ranks"]
    spool = diagnoses(replay(run))
    assert spool[0][:2] == (40, 40) and spool[0][2] == []
    assert ("LossNonFinite", 30) in spool[1][2]
    tree = replay(run / "work" / "output" / "log")
    assert diagnoses(tree) == spool
    assert tree["summary"]["format"] == "mindformers" and tree["summary"]["parse_error_count"] == 0
    names = sorted(p.rsplit("/", 2)[-2] + "/" + p.rsplit("/", 1)[-1] for p in tree["summary"]["inputs"])
    assert names == ["rank_0/error.log", "rank_0/info.log", "rank_1/error.log", "rank_1/info.log"]
    assert diagnoses(replay(run / "work" / "output")) == spool


def test_msrun_worker_logs_give_each_rank_the_diagnosis_of_the_spool(runs):
    run = runs["mf-msrun"]
    spool = diagnoses(replay(run))
    assert set(spool) == {0, 1} and ("LossNonFinite", 30) in spool[1][2] and spool[0][2] == []
    workers = replay(msrun_log(run))
    assert diagnoses(workers) == spool
    assert [p.rsplit("/", 1)[-1] for p, _ in workers["summary"]["skipped"]] == ["scheduler.log"]
    assert diagnoses(replay(run / "work" / "output" / "log")) == spool


def test_no_file_of_the_output_tree_is_an_unknown_log_format(runs):
    run = runs["mf-msrun"]
    files = sorted(p for base in (run / "work" / "output", msrun_log(run)) for p in base.rglob("*")
                   if p.is_file())
    assert any(p.name == "info.log" for p in files) and any(p.name == "worker_1.log" for p in files)
    for path in files:
        done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(path)], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert "unknown log format" not in done.stderr, done.stderr
        assert done.returncode == 0 or (done.returncode == 2 and "empty file" in done.stderr), \
            (path, done.stderr)
