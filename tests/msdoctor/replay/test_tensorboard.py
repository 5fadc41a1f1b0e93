"""TensorBoard scalar exports (``Wall time,Step,Value``, one file per tag, named
``run-<run>-tag-<tag>.csv``): merged by step per rank and replayed; what is missing is named."""
from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msdoctor.replay.driver import load
from msdoctor.replay.recording import FormatError

REPO = Path(__file__).resolve().parents[3]
T0 = 1_750_000_000.0


def export(path: Path, values, start: int = 1) -> Path:
    """A TensorBoard UI "Download CSV" file of ``values`` at steps start, start+1, ..."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["Wall time", "Step", "Value"])
        for i, v in enumerate(values):
            out.writerow([T0 + 0.5 * i, start + i, repr(float(v))])
    return path


def losses(n: int = 40, nan_at: int = 0):
    v = list(np.linspace(7.0, 5.0, n))
    if nan_at:
        v[nan_at - 1] = math.nan
    return v


def test_the_scalars_of_a_rank_are_merged_by_step_and_a_nan_loss_fires(tmp_path):
    for rank, nan_at in ((0, 0), (1, 30)):
        export(tmp_path / f"run-rank_{rank}-tag-loss.csv", losses(nan_at=nan_at))
        export(tmp_path / f"run-rank_{rank}-tag-grad-norm.csv", [1.0] * 40)
        export(tmp_path / f"run-rank_{rank}-tag-iteration-time.csv", [250] * 40)   # ms
    recording = load([str(tmp_path)])
    assert recording.format == "tensorboard" and recording.problems.count == 0
    log = recording.ranks[(tmp_path.name, 1)]
    (batch,) = [b for b in recording.batches() if b.rank == 1]
    assert batch.steps.tolist() == list(range(1, 41))
    assert batch.columns["step_time_s"][0] == 0.25 and batch.t[0] == T0
    assert len(log.sources) == 3
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(tmp_path), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    fired = {(a["alert"], a["rank"], a["step"]) for a in doc["alerts"]}
    assert ("LossNonFinite", 1, 30) in fired and not [f for f in fired if f[1] == 0]
    assert doc["summary"]["steps"] == 80


def test_an_export_without_the_tag_in_its_name_says_what_is_missing(tmp_path):
    path = export(tmp_path / "loss.csv", losses())
    with pytest.raises(FormatError, match=r"does not say which scalar.*run-<run>-tag-<tag>\.csv"):
        load([str(path)])
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_a_tag_plotted_against_samples_is_refused(tmp_path):
    path = export(tmp_path / "run-.-tag-loss vs samples.csv", losses())
    with pytest.raises(FormatError, match="against samples, not steps"):
        load([str(path)])


def test_an_unknown_tag_is_kept_as_a_named_column(tmp_path):
    export(tmp_path / "run-.-tag-loss.csv", losses())
    export(tmp_path / "run-.-tag-throughput.csv", [100.0] * 40)
    recording = load([str(tmp_path)])
    assert recording.unknown_columns == ["throughput"]


def test_a_csv_header_without_step_says_so(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("Step,Value\n1,5.0\n")
    with pytest.raises(FormatError, match="needs a 'step' column.*Wall time,Step,Value"):
        load([str(path)])
