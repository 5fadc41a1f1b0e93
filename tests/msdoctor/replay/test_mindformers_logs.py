"""Reading MindFormers 1.x training logs (MFLossMonitor lines) and replaying the rules over them."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msdoctor.replay.driver import evaluate, items_of, load

import logformats as L

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
REPO = Path(__file__).resolve().parents[3]


def columns(recording, rank=0):
    log = next(v for k, v in recording.ranks.items() if k[1] == rank)
    assert len(log.blocks) == 1
    return log.blocks[0]


def test_a_real_cpu_log_of_mindformers_1_9_reads_every_field():
    rec = load([str(FIXTURES / "mindformers_real_cpu_info.log")], seq_length=32)
    block = columns(rec)
    assert rec.format == "mindformers" and rec.problems.count == 0
    assert block.steps.tolist() == list(range(1, 21))
    loss, mask = block.columns["loss"]
    assert mask is None and loss[0] == pytest.approx(5.540463)
    assert block.columns["lr"][0][0] == pytest.approx(0.001)
    assert block.columns["loss_scale"][0][0] == 4096.0
    assert block.columns["grad_norm"][0][0] == pytest.approx(1.4142627)
    assert block.columns["step_time_s"][0][0] == pytest.approx(2.794)
    assert block.columns["overflow"][0].sum() == 0
    # tokens = samples/s/p x seq_length x step seconds: 0.71562 x 32 x 2.794
    assert block.columns["tokens"][0][0] == pytest.approx(0.71562 * 32 * 2.794, rel=1e-6)
    assert np.all(np.diff(block.t) >= 0) and not np.isnan(block.t).any()


def test_file_and_stdout_prefixes_sink_mode_and_absent_fields_are_read():
    rec = load([str(FIXTURES / "mindformers_worker_1.log")])
    block = columns(rec, rank=1)                         # rank from worker_1.log
    assert len(block.steps) == 60 and "lr" not in block.columns
    assert "loss_scale" not in block.columns and "grad_norm" not in block.columns  # unavailable, None
    assert block.columns["loss"][0][1] == pytest.approx(9.823663)


def test_overflow_flags_are_read_from_numpy_bools(tmp_path):
    rec = load([str(FIXTURES / "mindformers_info.log")])
    overflow = columns(rec).columns["overflow"][0]
    assert np.flatnonzero(overflow).tolist() == [16]     # step 17


def test_noise_windows_line_ends_and_a_truncated_last_line_are_tolerated(tmp_path):
    path = tmp_path / "info.log"
    lines = list(L.mf_lines(L.loss_curve(30), grad_norms=[1.0] * 30, steps_per_epoch=30))
    lines.insert(3, "Traceback (most recent call last): { not json")
    lines.insert(8, "\x00\x01 binary junk \xff")
    lines.append(lines[-2][:120])                        # a step line cut mid-write
    L.write(path, lines, newline="\r\n", truncate_last=2)
    rec = load([str(path)])
    block = columns(rec)
    assert block.steps.tolist() == list(range(1, 31))
    assert rec.problems.count == 0
    assert any("unterminated last line" in note for note in rec.problems.notes)


@pytest.mark.parametrize("spelling,expected", [("nan", math.nan), ("NaN", math.nan),
                                               ("inf", math.inf), ("-inf", -math.inf),
                                               ("[nan]", math.nan), ("[inf]", math.inf)])
def test_non_finite_spellings_are_recorded_as_non_finite_values(tmp_path, spelling, expected):
    lines = list(L.mf_lines([5.0, 4.9, 4.8], grad_norms=[1.0] * 3, noise_every=0))
    lines[2] = lines[2].replace("global_norm: [1.]", f"global_norm: {spelling}")
    lines[2] = lines[2].replace("loss:[4.900000/", f"loss:[{spelling.strip('[]')}/")
    path = tmp_path / "info.log"
    L.write(path, lines)
    block = columns(load([str(path)]))
    for name in ("loss", "grad_norm"):
        value = block.columns[name][0][1]
        assert (math.isnan(value) and math.isnan(expected)) or value == expected, name


def test_a_malformed_number_is_counted_and_reported_with_file_and_line_not_fatal(tmp_path):
    lines = list(L.mf_lines([5.0, 4.9, 4.8, 4.7], grad_norms=[1.0] * 4, noise_every=0))
    lines[4] = lines[4].replace("loss:[4.800000/", "loss:[4.8x0000/")
    lines[6] = lines[6].replace("global_norm: [1.]", "global_norm: [1.0.1]")
    path = tmp_path / "info.log"
    L.write(path, lines)
    rec = load([str(path)])
    block = columns(rec)
    assert block.steps.tolist() == [1, 2, 3, 4]
    loss, mask = block.columns["loss"]
    assert mask.tolist() == [True, True, False, True]   # that value is "not recorded"
    assert rec.problems.count == 2
    assert rec.problems.examples[0].startswith(f"{path}:5: MindFormers step line, loss:")
    assert "'4.8x0000'" in rec.problems.examples[0]
    assert rec.problems.examples[1].startswith(f"{path}:7: MindFormers step line, global_norm:")


def test_a_line_with_the_mark_but_not_the_layout_is_reported_with_its_line(tmp_path):
    lines = list(L.mf_lines([5.0, 4.9], noise_every=0))
    lines.insert(1, "[INFO] 2025-06-15 15:06:40,250 [x.py:1] f: { Epoch:[  1/  1], step:[ oops")
    path = tmp_path / "info.log"
    L.write(path, lines)
    rec = load([str(path)])
    assert columns(rec).steps.tolist() == [1, 2]
    assert rec.problems.count == 1 and rec.problems.examples[0].startswith(f"{path}:2: not a complete")


def test_ranks_come_from_rank_directories_and_each_rank_is_evaluated(tmp_path):
    for rank in (0, 1, 3):
        d = tmp_path / "output" / "log" / f"rank_{rank}"
        d.mkdir(parents=True)
        L.write(d / "info.log", L.mf_lines(L.loss_curve(50, seed=rank), grad_norms=[1.0] * 50))
    rec = load([str(tmp_path / "output")])
    assert sorted(k[1] for k in rec.ranks) == [0, 1, 3]


def test_a_rank_hint_overrides_the_path(tmp_path):
    path = tmp_path / "rank_5" / "info.log"
    path.parent.mkdir()
    L.write(path, L.mf_lines([5.0, 4.0]))
    assert [k[1] for k in load([str(path)], rank=2).ranks] == [2]


def test_rotated_files_are_read_oldest_first(tmp_path):
    d = tmp_path / "rank_0"
    d.mkdir()
    losses = L.loss_curve(30)
    L.write(d / "info.log.1", L.mf_lines(losses[:15], steps_per_epoch=30))
    L.write(d / "info.log", L.mf_lines(losses[15:], start_step=16, steps_per_epoch=30))
    rec = load([str(d)])
    steps = np.concatenate([b.steps for b in rec.ranks[next(iter(rec.ranks))].blocks])
    assert steps.tolist() == list(range(1, 31))


def test_a_restart_that_repeats_steps_is_replayed_without_false_alarms(tmp_path):
    from msdoctor.core.engine.loader import default_rules_dir, load_rules

    losses = L.loss_curve(300, seed=4)
    lines = list(L.mf_lines(losses[:200], grad_norms=[1.0] * 200, steps_per_epoch=300))
    lines += ["[INFO] 2025-06-15 16:00:00,000 [x.py:1] f: ......resume from checkpoint step 150......"]
    lines += list(L.mf_lines(losses[150:], start_step=151, grad_norms=[1.0] * 150,
                             steps_per_epoch=300, t0=1_750_003_600.0))
    path = tmp_path / "info.log"
    L.write(path, lines)
    result = evaluate(items_of(load([str(path)])), load_rules([str(default_rules_dir())]))
    stats = result["summary"]["stats"]
    assert stats["steps"] == 350 and stats["restarts"] == 1
    assert not [a for a in result["alerts"] if a["severity"] == "critical"]


def test_replay_json_raises_loss_non_finite_at_the_step_of_an_injected_nan(tmp_path):
    losses = L.loss_curve(400, seed=7)
    losses[233] = float("nan")                          # step 234
    for rank in (0, 1):
        d = tmp_path / "log" / f"rank_{rank}"
        d.mkdir(parents=True)
        L.write(d / "info.log", L.mf_lines(losses if rank == 1 else L.loss_curve(400, seed=8),
                                           grad_norms=[1.0] * 400, steps_per_epoch=400))
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(tmp_path / "log"), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    hits = [a for a in doc["alerts"] if a["alert"] == "LossNonFinite"]
    assert [(a["rank"], a["step"]) for a in hits] == [(1, 234)]
    assert hits[0]["value"] == "nan" and hits[0]["fix"]
    summary = doc["summary"]
    assert summary["format"] == "mindformers" and summary["ranks"] == 2 and summary["steps"] == 800
    assert summary["stats"]["loss_first"] == pytest.approx(L.loss_curve(400, seed=8)[0], abs=1e-6)
    assert set(hits[0]) >= {"alert", "severity", "run", "rank", "step", "value", "summary", "fix"}
