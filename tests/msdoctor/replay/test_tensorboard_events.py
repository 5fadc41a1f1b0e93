"""TensorBoard event files as MindFormers writes them (tensorboardX's SummaryWriter, the tags of
MFLossMonitor) are read with TensorBoard's own loader and replayed."""
from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msdoctor.replay.driver import load
from msdoctor.replay.recording import FormatError

SummaryWriter = pytest.importorskip("tensorboardX").SummaryWriter
pytest.importorskip("tensorboard")

REPO = Path(__file__).resolve().parents[3]
STEPS = 30
GBS = 8


def mindformers_events(log_dir: Path, nan_at: int = 0, scale_drop_at: int = 0) -> Path:
    """The scalars MFLossMonitor adds (mindformers/core/callback/callback.py, 1.9.0) for STEPS steps."""
    writer = SummaryWriter(log_dir=str(log_dir), max_queue=10)
    for step in range(1, STEPS + 1):
        loss = math.nan if step == nan_at else 7.0 - 0.05 * step
        scale = 32768.0 if scale_drop_at and step >= scale_drop_at else 65536.0
        for tag, value in (("learning-rate", 1e-4), ("loss", loss), ("lm-loss", loss - 0.25),
                           ("loss-scale", scale), ("grad-norm", 1.0 + 0.01 * step),
                           ("iteration-time", 250), ("throughput", 16.0)):
            writer.add_scalar(tag, value, global_step=step)
            writer.add_scalar(f"{tag} vs samples", value, global_step=step * GBS)
    writer.close()
    (path,) = log_dir.glob("events.out.tfevents.*")
    return path


def test_an_event_file_replays_every_mindformers_scalar_by_step(tmp_path):
    path = mindformers_events(tmp_path / "tensorboard" / "rank_2", scale_drop_at=12)
    recording = load([str(path)])
    assert recording.format == "tfevents" and recording.problems.count == 0
    (batch,) = list(recording.batches())
    assert batch.rank == 2 and batch.steps.tolist() == list(range(1, STEPS + 1))
    columns = batch.columns
    assert columns["loss"][:3].tolist() == pytest.approx([6.95, 6.9, 6.85], rel=1e-6)
    assert columns["lm_loss"][0] == pytest.approx(6.7, rel=1e-6)      # kept, not the loss
    assert columns["lr"][0] == pytest.approx(1e-4)
    assert np.flatnonzero(np.diff(columns["loss_scale"])).tolist() == [10]   # 11 -> 12
    assert columns["grad_norm"][-1] == pytest.approx(1.3, rel=1e-6)
    assert np.all(columns["step_time_s"] == 0.25)                     # ms -> s
    assert sorted(recording.unknown_columns) == ["lm_loss", "throughput"]
    assert any("plotted against samples skipped" in note for note in recording.problems.notes)


def test_a_nan_loss_in_an_event_file_fires_on_its_rank_and_step(tmp_path):
    mindformers_events(tmp_path / "tb" / "rank_0")
    mindformers_events(tmp_path / "tb" / "rank_1", nan_at=17)
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(tmp_path / "tb"), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    fired = {(a["alert"], a["rank"], a["step"]) for a in doc["alerts"]}
    assert ("LossNonFinite", 1, 17) in fired and not [f for f in fired if f[1] == 0]
    assert doc["summary"]["steps"] == 2 * STEPS


def test_a_corrupt_record_is_a_problem_naming_its_byte_and_the_steps_before_it_are_read(tmp_path):
    path = mindformers_events(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF                                         # one byte: a bad CRC
    path.write_bytes(bytes(data))
    recording = load([str(path)])
    (batch,) = list(recording.batches())
    assert 0 < len(batch.steps) < STEPS and batch.steps[0] == 1
    assert recording.problems.count == 1
    assert recording.problems.examples[0].startswith(f"{path}:0: corrupt record at byte ")


def test_a_record_cut_by_a_writer_at_work_is_a_note(tmp_path):
    path = mindformers_events(tmp_path)
    path.write_bytes(path.read_bytes()[:-10])
    recording = load([str(path)])
    assert recording.problems.count == 0
    assert any("cut short" in note for note in recording.problems.notes)
    assert len(next(iter(recording.batches())).steps) == STEPS           # the cut one is a vs-samples tag


def test_a_file_named_like_events_but_holding_none_is_one_line_naming_it(tmp_path):
    path = tmp_path / "events.out.tfevents.1750000000.host"
    path.write_bytes(b"this is not a TFRecord file at all, just text\n" * 3)
    with pytest.raises(FormatError, match=r"tfevents.*not a readable TensorBoard event file"):
        load([str(path)])
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert str(path) in done.stderr


@pytest.mark.slow
def test_a_mindspore_summary_record_file_is_refused_in_one_line_saying_why(tmp_path):
    script = (
        "import sys, mindspore as ms\n"
        "from mindspore.train.summary import SummaryRecord\n"
        "ms.set_device('CPU')\n"
        "with SummaryRecord(sys.argv[1], network=None) as rec:\n"
        "    for s in range(1, 4):\n"
        "        rec.add_value('scalar', 'loss', ms.Tensor(5.0 - s * 0.1, ms.float32))\n"
        "        rec.record(s)\n")
    if importlib.util.find_spec("mindspore") is None:   # not imported here: its protos clash
        pytest.skip("mindspore is not installed (the train extra)")
    made = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    (path,) = tmp_path.glob("events.out.events.summary.*")
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert str(path) in done.stderr and "MindSpore SummaryRecord file" in done.stderr


def test_an_output_tree_s_tensorboard_dir_is_skipped_with_the_command_to_replay_it(tmp_path):
    rank = tmp_path / "output" / "log" / "rank_0"
    rank.mkdir(parents=True)
    (rank / "info.log").write_text("[INFO] 2025-06-15 15:06:40,250 [x.py:1] f: Load dataset\n")
    board = tmp_path / "output" / "tensorboard"
    mindformers_events(board)
    recording = load([str(tmp_path / "output")])
    assert recording.format == "mindformers"
    (why,) = [w for p, w in recording.skipped if p == str(board)]
    assert why.endswith(f"msdoctor replay {board})")
    assert len(list(load([str(board)]).batches())[0].steps) == STEPS
