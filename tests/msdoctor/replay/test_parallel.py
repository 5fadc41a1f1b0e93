"""``replay --jobs N``: the rank files read by N processes give what one process gives; and
reading the step lines as structs (no dict per step) gives what reading them as dicts gives."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from msdoctor.core import spool
from msdoctor.core.engine.loader import default_rules_dir, load_rules
from msdoctor.replay.driver import replay_paths
from msdoctor.wire import encode, make

from spool_factory import STEP_TIME, append_steps, rank_file, run_start, step, write_run

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """5 ranks, rank 3 a straggler, NaN losses from step 500; rank 1 with a bad line, rank 2
    ending in a partial line, rank 4 starting a second run mid-file."""
    run_dir = tmp_path_factory.mktemp("parallel") / "run"
    t0 = time.time() - 400      # recent: no rule judged on the wall clock (JobHung) fires
    write_run(run_dir, run="big", ranks=range(5), steps=600, slow_rank=3, nan_at=500, t0=t0)
    with rank_file(run_dir, 1).open("ab") as fh:
        fh.write(b'{"v":1,"type":"step","rank":1,"step":"x"}\nnot json\n')
    append_steps(run_dir, "big", 1, 601, 20, t=t0 + 301)
    with rank_file(run_dir, 2).open("ab") as fh:
        fh.write(b'{"v":1,"type":"step","rank":2,"st')
    write_run(run_dir, run="second", ranks=[4], steps=50, world_size=5, t0=t0 + 320)
    return run_dir


def comparable(result: dict) -> dict:
    summary = {k: v for k, v in result["summary"].items() if k != "seconds"}
    return {"alerts": result["alerts"], "summary": summary, "ranks": result["ranks"],
            "transitions": [a.to_dict() for a in result["transitions"]]}


def test_three_jobs_give_the_alerts_errors_and_summary_of_one(tree, monkeypatch):
    monkeypatch.setattr(spool, "READ_BYTES_PER_FILE", 16 << 10)   # many polls per file
    rules = load_rules([str(default_rules_dir())])
    one = replay_paths([str(tree)], rules, jobs=1)
    three = replay_paths([str(tree)], rules, jobs=3)
    assert comparable(three) == comparable(one)
    fired = {a["alert"] for a in one["alerts"]}
    assert {"LossNonFinite", "StragglerRank"} <= fired            # a cross-rank rule too
    assert one["summary"]["spool_error_count"] == 2
    assert any("rank-1.jsonl:" in e for e in one["summary"]["spool_errors"])


def test_replay_jobs_on_the_command_line_prints_what_one_job_prints(tree):
    def run(*extra: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(tree), "--json",
                              *extra], capture_output=True, text=True, timeout=300, cwd=ROOT,
                             check=True).stdout
        return json.loads(out)
    one, four = run(), run("--jobs", "4")
    for doc in (one, four):
        doc["summary"].pop("seconds")
    assert four == one and one["alerts"]


def test_a_replay_reading_steps_as_structs_gives_what_reading_them_as_dicts_gives(
        tree, monkeypatch):
    monkeypatch.setattr(spool, "READ_BYTES_PER_FILE", 16 << 10)
    rules = load_rules([str(default_rules_dir())])
    taken = []
    real = spool.decode_typed
    monkeypatch.setattr(spool, "decode_typed", lambda *args: taken.append(real(*args)) or taken[-1])
    typed = replay_paths([str(tree)], rules)
    assert sum(found is not None for found in taken) > 10      # most reads took the typed path
    monkeypatch.setattr(spool, "decode_typed", lambda *args: None)    # bulk or exact path only
    dicts = replay_paths([str(tree)], rules)
    assert comparable(typed) == comparable(dicts) and typed["alerts"]


def test_jobs_keep_the_order_of_steps_and_other_events_for_the_goodput(tmp_path):
    """Heartbeats between steps cut the steps where they fall (the typical step time, hence
    the start-up and hang time, is judged segment by segment) with N jobs as with one."""
    run_dir = tmp_path / "run"
    t0 = time.time() - 400
    for rank in range(2):
        lines = [encode(run_start("up", rank, 2, t0))]
        t = t0 + 60
        for n in range(1, 300):
            slow = 1.0 + (n % 7) / 3 + (8.0 if n % 97 == 0 else 0.0)
            t += STEP_TIME * slow
            lines.append(encode(step("up", rank, n, t, slow)))
            if n % 5 == 0:
                lines.append(encode(make("heartbeat", rank, run="up", t=t, step=n)))
        rank_file(run_dir, rank).parent.mkdir(parents=True, exist_ok=True)
        rank_file(run_dir, rank).write_bytes(b"".join(lines))
    rules = load_rules([str(default_rules_dir())])
    one = replay_paths([str(run_dir)], rules, jobs=1)
    two = replay_paths([str(run_dir)], rules, jobs=2)
    assert comparable(two) == comparable(one)
    assert one["summary"]["goodput"]["up"]["badput_s"]["startup"] > 50
