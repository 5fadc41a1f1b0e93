"""Step logs of each MindFormers release (0.6, 1.0, 1.3, 1.5, 1.7, the PyNative trainers) are read."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import releases as R

from msdoctor.replay.driver import load
from msdoctor.replay.recording import FormatError

IDS = [r.name for r in R.RELEASES]
REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("release", R.RELEASES, ids=IDS)
def test_each_fixture_was_made_with_the_release_s_real_format_string(release):
    fixture = R.HERE / f"{release.name}.log"
    assert fixture.read_text(encoding="utf-8") == R.text_of(release)


def test_the_format_strings_render_as_python_renders_them():
    assert R.literal(R.V06_FILE) == "[%(levelname)s] %(asctime)s [%(pathname)s:%(lineno)d] %(funcName)s: %(message)s"
    assert R.fstring(R.P19_PARTS[1], {"log_info.get('loss')": 5.5}) == f"loss: {5.5:10.6f}"
    assert R.fstring(R.P19_LINE, {"', '.join(log_parts)": "a, b"}) == "{ a, b }"


def test_the_installed_pynative_trainer_still_holds_the_copied_format_strings():
    spec = importlib.util.find_spec("mindformers")
    if spec is None or spec.origin is None:
        pytest.skip("mindformers is not installed (the train extra)")
    source = (Path(spec.origin).parent / "pynative" / "callback" / "loss_callback.py").read_text()
    for text in [*R.P19_PARTS, R.P19_LINE]:
        assert text in source


@pytest.mark.parametrize("release", R.RELEASES, ids=IDS)
def test_each_release_s_log_replays_its_steps_loss_lr_scale_overflow_and_norm(release):
    rec = load([str(R.HERE / f"{release.name}.log")])
    assert rec.format == "mindformers" and rec.problems.count == 0, rec.problems.examples
    ((_, log),) = rec.ranks.items()
    (block,) = log.blocks
    assert block.steps.tolist() == R.STEPS                   # epoch 2 continues the count
    loss, mask = block.columns["loss"]
    assert mask is None and loss.tolist() == pytest.approx(R.LOSSES)
    assert block.columns["step_time_s"][0] == pytest.approx(
        [0.250125 if release.name.endswith("0.6") else 0.25] * 12)
    if release.has_lr:
        lr, lr_mask = block.columns["lr"]
        recorded = R.STEPS if lr_mask is None else [s for s, m in zip(R.STEPS, lr_mask) if m]
        assert recorded == list(release.has_lr)
        assert lr[lr_mask if lr_mask is not None else slice(None)] == pytest.approx(R.LR)
    else:
        assert "lr" not in block.columns
    if release.scale:
        assert block.columns["loss_scale"][0].tolist() == R.SCALES
        assert np.flatnonzero(block.columns["overflow"][0]).tolist() == [R.OVERFLOW - 1]
    else:
        assert "loss_scale" not in block.columns and "overflow" not in block.columns
    if release.norm:
        norm, norm_mask = block.columns["grad_norm"]
        recorded = R.STEPS if norm_mask is None else [s for s, m in zip(R.STEPS, norm_mask) if m]
        assert recorded == list(release.norm)
        assert norm[: len(release.norm)] == pytest.approx(R.NORMS[: len(release.norm)], rel=1e-6)
    else:
        assert "grad_norm" not in block.columns
    assert np.all(np.diff(block.t) > 0)


def test_a_0_x_line_cut_short_is_reported_with_its_line_and_the_others_read(tmp_path):
    lines = R.v06()
    lines[3] = lines[3][: lines[3].index("overflow")]
    path = tmp_path / "info.log"
    path.write_text("\n".join(lines) + "\n")
    rec = load([str(path)])
    ((_, log),) = rec.ranks.items()
    assert log.blocks[0].steps.tolist() == [s for s in R.STEPS if s != 4]
    assert rec.problems.count == 1
    assert rec.problems.examples[0].startswith(f"{path}:4: not a complete MindFormers 0.x")


def test_an_unknown_layout_is_refused_naming_the_file_and_every_known_layout(tmp_path):
    path = tmp_path / "info.log"
    path.write_text("[INFO] 2025-06-15 15:06:40,250 [x.py:1] f: Epoch 1 step 3 loss=5.1 took 12ms\n")
    with pytest.raises(FormatError) as caught:
        load([str(path)])
    message = str(caught.value)
    assert message.startswith(f"{path}:1: a training step line in a layout")
    assert "\n" not in message
    for shape in ("per_step_time: Nms", "time:N ms, lr:x", "{ step:[s/S], loss: x"):
        assert shape in message


@pytest.mark.parametrize("release", R.RELEASES, ids=IDS)
def test_msdoctor_replay_reads_each_release_s_log_from_the_command_line(release):
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay",
                           str(R.HERE / f"{release.name}.log"), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["steps"] == len(R.STEPS)
