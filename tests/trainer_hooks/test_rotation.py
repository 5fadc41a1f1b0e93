"""protect.json against the savers' own rotation: MindSpore's ``ModelCheckpoint`` (the
``CheckpointManager`` MindFormers' ``CheckpointMonitor`` uses too) on a real toy training run, and
MindFormers' new-format directory rotation (its own ``check_checkpoints_dir_max_num``)."""
from __future__ import annotations

import json
import os

import pytest

from trainer_hooks import toy
from trainer_hooks.guard import Guard
from trainer_hooks.rotation import Protected, ProtectedList

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("in_tmp_dir")]


def protect(run_dir, *paths) -> None:
    control = run_dir / "control"
    control.mkdir(parents=True, exist_ok=True)
    (control / "protect.json").write_text(json.dumps({"paths": [str(p) for p in paths]}))


def test_a_checkpoint_protect_json_names_outlives_model_checkpoints_rotation(plain_toy, tmp_path):
    from mindspore.train import CheckpointConfig, ModelCheckpoint

    ckpt = tmp_path / "ckpt"
    protect(tmp_path, ckpt / "toy-1_5.ckpt")
    saver = ModelCheckpoint(prefix="toy", directory=str(ckpt),
                            config=CheckpointConfig(save_checkpoint_steps=5, keep_checkpoint_max=2))
    toy.train(str(tmp_path), 25, toy=plain_toy, callbacks=[saver])
    kept = sorted(p.name for p in ckpt.glob("*.ckpt"))
    # step 5 protected (and not counted), the two newest kept, 10 and 15 rotated away
    assert kept == ["toy-1_20.ckpt", "toy-1_25.ckpt", "toy-1_5.ckpt"]


def test_without_protect_json_the_rotation_is_untouched(plain_toy, tmp_path):
    from mindspore.train import CheckpointConfig, ModelCheckpoint

    ckpt = tmp_path / "ckpt"
    saver = ModelCheckpoint(prefix="toy", directory=str(ckpt),
                            config=CheckpointConfig(save_checkpoint_steps=5, keep_checkpoint_max=2))
    toy.train(str(tmp_path), 15, toy=plain_toy, callbacks=[saver])
    assert sorted(p.name for p in ckpt.glob("*.ckpt")) == ["toy-1_10.ckpt", "toy-1_15.ckpt"]


def test_mindformers_new_format_rotation_never_removes_a_protected_iteration_directory(tmp_path):
    utils = pytest.importorskip("mindformers.checkpoint.utils")
    dirs = []
    for step in (2, 4, 6, 8):
        d = tmp_path / "checkpoint" / f"iteration_{step:08d}"
        d.mkdir(parents=True)
        (d / "model.safetensors").write_bytes(b"x")
        dirs.append(str(d))
    protect(tmp_path, os.path.join(dirs[0], "model.safetensors"))
    kept = ProtectedList([], Protected(str(tmp_path), Guard("test")))
    for d in dirs:                     # what save_checkpoint does after each save
        kept.append(d)
        utils.check_checkpoints_dir_max_num(2, kept)
    assert [os.path.isdir(d) for d in dirs] == [True, False, True, True]


def test_a_protect_file_that_is_not_json_protects_nothing_and_warns_once(tmp_path):
    (tmp_path / "control").mkdir()
    (tmp_path / "control" / "protect.json").write_text("{not json")
    guard = Guard("test")
    protected = Protected(str(tmp_path), guard)
    with pytest.warns(Warning, match="protect.json"):
        assert not protected(str(tmp_path / "a.ckpt"))
    assert not protected(str(tmp_path / "a.ckpt")) and guard.counts == {"protect:bad": 1}
