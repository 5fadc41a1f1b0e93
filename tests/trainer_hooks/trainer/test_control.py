"""The bundled trainer's reading of the control files: applied once, bad ones reported once and
ignored, other runs' ignored (no MindSpore needed)."""
from __future__ import annotations

import json
import os
import warnings

from trainer_hooks.guard import HookWarning
from trainer_hooks.trainer.control import Control, DataMap
from trainer_hooks.wire import LR_FILE, PROTECT_FILE, ROLLBACK_DONE_FILE, ROLLBACK_FILE, SKIP_FILE


def control(tmp_path):
    (tmp_path / "control").mkdir(exist_ok=True)
    done = []
    ctl = Control(str(tmp_path), "r", DataMap(), lambda *a: done.append(a))
    return ctl, done


STAMP = [0]


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    STAMP[0] += 1                      # a new mtime each write, however fast the test runs
    os.utime(path, ns=(STAMP[0] * 10**9, STAMP[0] * 10**9))
    os.utime(path.parent, ns=(STAMP[0] * 10**9, STAMP[0] * 10**9))


def test_skipped_steps_map_to_later_batches_and_merge():
    data = DataMap()
    data.skip(5, 9)
    assert [data.batch(s) for s in range(1, 8)] == [1, 2, 3, 4, 10, 11, 12]
    data.skip(10, 10)
    assert data.skipped == [(5, 10)] and data.batch(5) == 11


def test_lr_factor_skip_and_protect_are_applied_once_and_recorded(tmp_path):
    ctl, done = control(tmp_path)
    write(tmp_path, LR_FILE, {"v": 1, "run": "r", "factor": 0.5, "alert": "LossSpike"})
    write(tmp_path, SKIP_FILE, {"v": 1, "run": "r", "ranges": [{"from_step": 3, "to_step": 4}]})
    write(tmp_path, PROTECT_FILE, {"v": 1, "run": "r", "paths": [str(tmp_path / "a.ckpt")]})
    ctl.poll(10)
    ctl.poll(11)
    assert ctl.lr_factor == 0.5 and ctl.data.skipped == [(3, 4)]
    assert ctl.protected == {os.path.realpath(tmp_path / "a.ckpt")}
    assert sorted(a[0] for a in done) == ["lower_lr", "protect_checkpoint", "skip_batches"]
    (tmp_path / LR_FILE).unlink()
    os.utime(tmp_path / "control", ns=(10**12, 10**12))
    ctl.poll(12)
    assert ctl.lr_factor == 1.0 and done[-1][0] == "lower_lr"


def test_a_file_that_cannot_be_parsed_is_reported_once_and_ignored(tmp_path):
    ctl, done = control(tmp_path)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        write(tmp_path, LR_FILE, "{not json")
        ctl.poll(1)
        write(tmp_path, LR_FILE, "[1, 2]")
        ctl.poll(2)
        write(tmp_path, ROLLBACK_FILE, {"v": 1, "run": "r", "to_step": 3, "checkpoint": "/nope"})
        ctl.poll(3)
        os.mkfifo(tmp_path / SKIP_FILE)
        os.utime(tmp_path / "control", ns=(10**12, 10**12))
        ctl.poll(4)
    messages = [str(w.message) for w in seen if issubclass(w.category, HookWarning)]
    assert len([m for m in messages if "lr.json" in m]) == 1 and "expected a JSON object" in messages[0]
    assert any("rollback.json" in m and "an existing file" in m for m in messages)
    assert any("skip.json" in m and "not a regular file" in m for m in messages)
    assert ctl.lr_factor == 1.0 and ctl.rollback is None and not done


def test_another_runs_files_are_ignored(tmp_path):
    ctl, done = control(tmp_path)
    write(tmp_path, LR_FILE, {"v": 1, "run": "other", "factor": 0.5})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctl.poll(1)
    assert ctl.lr_factor == 1.0 and not done


def test_a_rollback_skips_from_the_checkpoint_to_the_last_batch_read_plus_the_margin(tmp_path):
    ctl, done = control(tmp_path)
    ckpt = tmp_path / "step-20.ckpt"
    ckpt.write_bytes(b"x")
    write(tmp_path, ROLLBACK_FILE, {"v": 1, "run": "r", "to_step": 20, "checkpoint": str(ckpt),
                                    "skip_from": 21, "margin": 5, "alert": "LossSpike"})
    ctl.poll(33)
    assert ctl.rollback is not None and ctl.rollback.to_step == 20
    assert ctl.done_rollback(stopped_at=33) == (21, 38)
    assert ctl.data.batch(21) == 39 and (tmp_path / ROLLBACK_DONE_FILE).exists()
    assert not (tmp_path / ROLLBACK_FILE).exists() and done[-1][0] == "rollback"
