"""Replaying a MindFormers ``output/`` tree: which files are read as what, per-rank diagnoses,
crashes before the first step, and one-line errors for bad input (the lines are written with
MindFormers' own logger format strings, see tests/fixtures/logs/logformats.py)."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from msdoctor.replay.crashes import known_cause
from msdoctor.replay.driver import load
from msdoctor.replay.recording import FormatError

import logformats as L

REPO = Path(__file__).resolve().parents[3]
T0 = 1_750_000_000.0
#: MindFormers 1.9.0 mindformers/dataset/dataloader/training_dataloader.py, when dataset_dir is missing
MISSING = "FileNotFoundError: No such file or directory: /data/wiki/train.mindrecord"


def replay(*args: str, cwd: Path = REPO, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msdoctor", "replay", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, **kw)


def warnings(t: float):
    yield L.mf_line("Import PyNativeQwen3ForCausalLM failed: No module named 'hyper_parallel'.", t,
                    logging.WARNING, filepath="mindformers/models/qwen3/modeling_qwen3.py",
                    lineno=35, func="<module>")


def crashed_rank(rank_dir: Path, t: float) -> None:
    """A rank that died building its dataset: warnings, an ERROR in info.log and error.log."""
    rank_dir.mkdir(parents=True)
    error = L.mf_line("Build dataset failed: No such file or directory: /data/wiki/train.mindrecord",
                      t + 2, logging.ERROR, filepath="mindformers/dataset/causal_language_model_dataset.py",
                      func="__new__")
    L.write(rank_dir / "info.log", [*warnings(t), L.mf_line("Load dataset ...", t + 1), error])
    L.write(rank_dir / "error.log", [error])


def trained_rank(rank_dir: Path, steps: int = 40, nan_at: int = 0, rotate_at: int = 0) -> None:
    rank_dir.mkdir(parents=True)
    losses = L.loss_curve(steps)
    if nan_at:
        losses[nan_at - 1] = float("nan")
    lines = [*warnings(T0), *L.mf_lines(losses, grad_norms=[1.0] * steps, steps_per_epoch=steps,
                                         t0=T0)]
    if rotate_at:                                  # RotatingFileHandler: the older part is .1
        cut = lines.index(next(ln for ln in lines if f"step:[{rotate_at:5d}/" in ln))
        L.write(rank_dir / "info.log.1", lines[:cut])
        lines = lines[cut:]
    L.write(rank_dir / "info.log", lines)
    L.write(rank_dir / "error.log", [])


@pytest.fixture
def output(tmp_path) -> Path:
    """output/log/rank_0 trained 40 steps with a NaN at 30; rank_1 crashed before step 1;
    output/msrun_log holds the workers' consoles (rank 1's with the traceback) and the scheduler's."""
    out = tmp_path / "output"
    trained_rank(out / "log" / "rank_0", nan_at=30)
    crashed_rank(out / "log" / "rank_1", T0)
    msrun = out / "msrun_log"
    msrun.mkdir()
    L.write(msrun / "worker_0.log", L.mf_lines(L.loss_curve(40), grad_norms=[1.0] * 40,
                                               steps_per_epoch=40, t0=T0, stdout=True))
    L.write(msrun / "worker_1.log", [
        *(line for line in [L.mf_line("Load dataset ...", T0 + 1, stdout=True)]),
        "Traceback (most recent call last):",
        '  File "run_mindformer.py", line 60, in main',
        "    trainer.train()",
        MISSING])
    L.write(msrun / "scheduler.log", ["[WARNING] DISTRIBUTED(1,7f,python):2025-06-15-12:00:00.000.000 "
                                      "[cluster_context.cc:319] BuildCluster] Cluster is successfully "
                                      "initialized."])
    (out / "checkpoint").mkdir()
    return out


def test_an_output_tree_gives_each_rank_its_steps_alerts_and_first_error(output):
    done = replay(str(output), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    ranks = {r["rank"]: r for r in doc["ranks"]}
    assert ranks[0]["steps"] == 40 and ranks[0]["errors"] == []
    assert {a["alert"] for a in ranks[0]["alerts"]} >= {"LossNonFinite"}
    crashed = ranks[1]
    assert crashed["steps"] == 0 and crashed["cause"] == "dataset-missing"
    assert crashed["diagnosis"].startswith("crashed before its first step: Build dataset failed")
    assert crashed["error_count"] == 1                 # info.log and error.log hold the same line
    assert crashed["first_error"]["where"].endswith("log/rank_1/info.log:3")
    assert crashed["first_error"]["t"] == pytest.approx(T0 + 2, abs=0.002)
    assert "dataset_dir" in crashed["hint"]
    skipped = dict(map(tuple, doc["summary"]["skipped"]))
    assert "read from" in skipped[str(output / "msrun_log")]
    assert "not a log directory" in skipped[str(output / "checkpoint")]
    assert doc["summary"]["parse_error_count"] == 0


def test_the_text_report_names_the_crash_its_time_and_the_hint(output):
    done = replay(str(output / "log"))
    assert done.returncode == 0, done.stderr
    assert "rank 1: crashed before its first step: Build dataset failed" in done.stdout
    assert "first error at " in done.stdout and "hint: a dataset file is missing" in done.stdout
    assert "unknown log format" not in done.stdout + done.stderr


def test_msrun_worker_logs_give_the_traceback_of_a_crash_and_skip_the_scheduler(output):
    done = replay(str(output / "msrun_log"), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    ranks = {r["rank"]: r for r in doc["ranks"]}
    assert ranks[0]["steps"] == 40
    first = ranks[1]["first_error"]
    assert first["text"] == MISSING and first["where"].endswith("worker_1.log:2")
    assert first["t"] == pytest.approx(T0 + 1, abs=0.002)   # the last time logged before it
    assert ranks[1]["cause"] == "dataset-missing"
    assert [p for p, _ in doc["summary"]["skipped"]] == [str(output / "msrun_log" / "scheduler.log")]


def test_a_single_rank_folder_and_rotated_info_logs_are_read_in_time_order(tmp_path):
    trained_rank(tmp_path / "rank_3", steps=60, rotate_at=25)
    recording = load([str(tmp_path / "rank_3")])
    (log,) = recording.ranks.values()
    assert log.rank == 3
    assert [s for b in log.blocks for s in b.steps.tolist()] == list(range(1, 61))
    assert [Path(s).name for s in log.sources] == ["info.log.1", "info.log", "error.log"]


def test_an_error_log_given_alone_is_read_as_errors_not_as_a_step_log(tmp_path):
    crashed_rank(tmp_path / "rank_0", T0)
    done = replay(str(tmp_path / "rank_0" / "error.log"), "--json")
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    assert rank["diagnosis"].startswith("crashed before its first step")


def test_an_info_log_without_step_lines_is_a_mindformers_log_not_an_unknown_format(tmp_path):
    path = tmp_path / "info.log"
    L.write(path, [*warnings(T0), L.mf_line("Load dataset ...", T0 + 1)])
    recording = load([str(path)])
    assert recording.format == "mindformers"
    (log,) = recording.ranks.values()
    assert log.blocks == [] and log.errors == []


def test_step_lines_of_an_unknown_release_are_refused_in_one_line_naming_the_file(tmp_path):
    path = tmp_path / "rank_0" / "info.log"
    path.parent.mkdir()
    L.write(path, [*warnings(T0), L.mf_line("Epoch 1/1 Step 5/20 | loss 5.54 | 12ms", T0 + 1,
                                             filepath="mindformers/core/callback/callback.py",
                                             func="print_output_info")])
    with pytest.raises(FormatError, match=r"info\.log:2: a training step line in a layout"):
        load([str(path)])
    done = replay(str(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and str(path) in done.stderr


def test_a_tree_with_no_logs_is_one_line_exit_2(tmp_path):
    (tmp_path / "output" / "log" / "rank_0").mkdir(parents=True)
    (tmp_path / "output" / "log" / "rank_0" / "mindspore.pid").write_text("1\n")
    done = replay(str(tmp_path / "output"))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "no logs found" in line and "output/log/rank_N/info.log" in line


def test_an_unreadable_log_is_one_line_naming_it_exit_2(tmp_path):
    if os.geteuid() == 0:        # root reads any file: /proc/self/mem is a file that fails to read
        path = Path("/proc/self/mem")
    else:
        path = tmp_path / "info.log"
        L.write(path, [*warnings(T0)])
        os.chmod(path, 0)
    done = replay(str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert str(path) in line and "cannot read it" in line and "expected a readable" in line


@pytest.mark.parametrize("text,cause", [
    (MISSING, "dataset-missing"),
    ("ValueError: No dataset file in /data/wiki", "dataset-missing"),
    ("RuntimeError: Out of Memory!!! Request memory size: 2147483648B", "out-of-memory"),
    ("Device(id:0) memory isn't enough and alloc failed, kernel name: MatMul", "out-of-memory"),
    ("RuntimeError: [EI0002] The wait execution of the Notify register times out. HCCL timeout",
     "collective-timeout"),
    ("RuntimeError: The total number of timed out node is 1. worker 1 is the first one timed out",
     "collective-timeout"),
    ("RuntimeError: Compile graph kernel_graph_0 failed.", "compile-failure"),
    ("RuntimeError: Unsupported op [NPUGetFloatStatusV2] on CPU", "cpu-overflow-check"),
    ("ValueError: something else entirely", None),
])
def test_known_causes_are_named(text, cause):
    assert known_cause(text)[0] == cause


def test_an_output_tree_with_only_error_logs_reads_them(tmp_path):
    rank_dir = tmp_path / "output" / "log" / "rank_0"
    rank_dir.mkdir(parents=True)
    L.write(rank_dir / "error.log", [L.mf_line("RuntimeError: Out of Memory!!! Request memory size: "
                                               "2147483648B", T0, logging.ERROR)])
    done = replay(str(tmp_path / "output"), "--json")
    assert done.returncode == 0, done.stderr
    (rank,) = json.loads(done.stdout)["ranks"]
    assert rank["verdict"] == "crash-before-first-step" and rank["cause"] == "out-of-memory"
