"""MindSpore LossMonitor/TimeMonitor output, CSV and JSON-lines step tables, format detection."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msdoctor.replay.driver import evaluate, items_of, load, replay_paths
from msdoctor.replay.formats import FormatError
from msdoctor.wire import encode, make

import logformats as L

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
REPO = Path(__file__).resolve().parents[3]


def only_block(recording):
    (log,) = recording.ranks.values()
    (block,) = log.blocks
    return block


def test_loss_monitor_lines_give_global_steps_and_time_monitor_gives_step_times():
    rec = load([str(FIXTURES / "mindspore_stdout.log")])
    block = only_block(rec)
    assert rec.format == "mindspore"
    assert block.steps.tolist() == list(range(1, 41))   # 4 epochs of 10
    assert block.columns["step_time_s"][0][0] == pytest.approx(0.150)
    assert block.columns["data_wait_s"][0][-1] == pytest.approx(0.0025)
    batch = next(rec.batches())                         # no timestamps: a clock from step times
    assert batch.t[:3].tolist() == pytest.approx([0.15, 0.30, 0.45])
    assert any("no timestamps" in n for n in rec.problems.notes)


def test_loss_monitor_raising_on_nan_becomes_a_nan_loss_step_that_fires(tmp_path):
    from msdoctor.core.engine.loader import default_rules_dir, load_rules

    losses = L.loss_curve(25)
    losses[22] = float("nan")
    path = tmp_path / "train.log"
    L.write(path, L.ms_lines(losses, steps_per_epoch=10), newline="\r\n")
    rec = load([str(path)])
    block = only_block(rec)
    assert block.steps[-1] == 23 and math.isnan(block.columns["loss"][0][-1])
    result = evaluate(items_of(rec), load_rules([str(default_rules_dir())]))
    assert [(a["alert"], a["step"]) for a in result["alerts"] if a["severity"] == "critical"] == \
        [("LossNonFinite", 23)]


def test_a_malformed_loss_monitor_number_is_reported_with_its_line(tmp_path):
    path = tmp_path / "train.log"
    L.write(path, ["epoch: 1 step: 1, loss is 2.5", "epoch: 1 step: 2, loss is 2.4.1",
                   "epoch: 1 step: 3, loss is -inf"])
    rec = load([str(path)])
    loss, mask = only_block(rec).columns["loss"]
    assert mask.tolist() == [True, False, True] and loss[2] == -math.inf
    assert rec.problems.examples == [f"{path}:2: LossMonitor line, loss: expected a number "
                                     "(or nan, inf, -inf, None), got '2.4.1'"]


def test_a_csv_table_with_empty_cells_and_an_unknown_column():
    rec = load([str(FIXTURES / "steps.csv")])
    block = only_block(rec)
    assert rec.format == "csv" and rec.unknown_columns == ["my_metric"]
    gn, mask = block.columns["grad_norm"]
    assert np.flatnonzero(mask).tolist() == [4, 9, 14, 19, 24, 29]     # empty = not recorded
    batch = next(rec.batches())
    steps, tps = batch.series("tokens_per_s")
    assert tps[0] == pytest.approx(2048 / 0.5)          # derived like the live sidecar does


def test_a_jsonl_table_with_booleans_nulls_and_nan_strings(tmp_path):
    rec = load([str(FIXTURES / "steps.jsonl")])
    block = only_block(rec)
    assert rec.format == "jsonl" and "lr" not in block.columns
    assert np.flatnonzero(block.columns["overflow"][0]).tolist() == [8]
    path = tmp_path / "t.jsonl"
    path.write_text('{"step": 1, "loss": "NaN", "rank": 2}\n{"step": 2, "loss": "inf", "rank": 2}\n'
                    '{"step": 3, "loss": "much"}\n')
    rec = load([str(path)])
    assert sorted(k[1] for k in rec.ranks) == [0, 2]
    assert rec.problems.examples[0].startswith(f"{path}:3: column 'loss':")


def test_a_csv_row_with_the_wrong_cell_count_is_reported(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("step,loss\r\n1,2.0\r\n2,1.9,extra\r\n3,nan\r\n")
    rec = load([str(path)])
    assert only_block(rec).steps.tolist() == [1, 3]
    assert rec.problems.examples == [f"{path}:3: expected 2 cells (step, loss), got 3"]


def test_an_unknown_format_names_the_formats_tried_and_the_first_line(tmp_path):
    path = tmp_path / "what.log"
    path.write_text("\n  hello world\nsomething else\n")
    with pytest.raises(FormatError) as err:
        load([str(path)])
    text = str(err.value)
    assert "tried spool, mindformers, mindspore, tensorboard, csv, jsonl" in text
    assert f"{path}:2: '  hello world'" in text


def test_the_command_exits_2_with_the_format_error(tmp_path):
    path = tmp_path / "what.log"
    path.write_text("hello\n")
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unknown log format" in done.stderr


def test_a_forced_format_reads_a_file_autodetection_would_also_pick(tmp_path):
    result = replay_paths([str(FIXTURES / "steps.csv")], _rules(), fmt="csv")
    assert result["summary"]["format"] == "csv" and result["summary"]["steps"] == 30


def test_a_run_directory_goes_through_the_spool_path_and_gets_the_run_summary(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "events").mkdir(parents=True)
    with open(run_dir / "events" / "rank-0.jsonl", "wb") as fh:
        for step in range(1, 51):
            fh.write(encode(make("step", 0, step=step, t=float(step), loss=3.0 - step / 100,
                                 tokens=1000.0, step_time_s=0.5, mem_host_rss_bytes=2.0 ** 30)))
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(run_dir), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)["summary"]["stats"]
    assert stats["steps"] == 50 and stats["loss_first"] == 2.99 and stats["loss_min"] == 2.5
    assert stats["tokens_per_s_per_device_median"] == 2000.0
    assert stats["mem_host_rss_max_bytes"] == 2.0 ** 30


def test_the_text_output_has_the_table_the_problems_and_the_summary(tmp_path):
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay",
                           str(FIXTURES / "mindformers_info.log"), "--seq-length", "128"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "format: mindformers" in done.stdout and "summary: 60 step records" in done.stdout
    assert "tokens/s/device" in done.stdout


def _rules():
    from msdoctor.core.engine.loader import default_rules_dir, load_rules

    return load_rules([str(default_rules_dir())])
