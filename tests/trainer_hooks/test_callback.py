"""DoctorCallback on real MindSpore training (GRAPH mode, CPU): the spool it writes, and how it degrades."""
from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

import pytest

from msdoctor.wire import decode
from trainer_hooks import toy
from trainer_hooks.emitter import spool_path
from trainer_hooks.guard import HookWarning

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("in_tmp_dir")]
ms_train = pytest.importorskip("mindspore.train")


def events_of(run_dir, rank: int = 0) -> list:
    with open(spool_path(str(run_dir), rank), "rb") as handle:
        return [decode(line) for line in handle]


def steps_of(events) -> list:
    return [e for e in events if e["type"] == "step"]


class AtStep(ms_train.Callback):
    """Runs ``action(run_context)`` at the end of step ``step`` (after DoctorCallback's hook)."""

    def __init__(self, step: int, action) -> None:
        super().__init__()
        self.step, self.action = step, action

    def on_train_step_end(self, run_context):
        if run_context.original_args().cur_step_num == self.step:
            self.action(run_context)


@pytest.mark.parametrize("sink", [False, True], ids=["no-sink", "sink"])
@pytest.mark.parametrize("cell", ["plain", "loss-scale"])
def test_every_step_is_written_once_with_its_true_number_and_signals(cell, sink, tmp_path, request):
    setup = request.getfixturevalue("plain_toy" if cell == "plain" else "scaled_toy")
    run_dir = tmp_path / "run"
    # 2 epochs of 15 batches; with sink mode on CPU MindSpore falls back to non-sink but sets
    # batch_num to sink_size (5): the step numbers must still come out 1..30
    summary = toy.train(str(run_dir), 30, toy=setup, epochs=2, sink=sink,
                        sink_size=5 if sink else -1)
    events = events_of(run_dir)
    assert events[0]["type"] == "run_start" and events[-1]["type"] == "run_end"
    assert events[-1]["status"] == "completed" and events[-1]["step"] == 30
    steps = steps_of(events)
    assert [e["step"] for e in steps] == list(range(1, 31))
    for event in steps:
        assert math.isfinite(event["loss"]) and event["step_time_s"] > 0
        assert event["tokens"] == setup.config.batch * setup.config.seq
        assert event["mem_host_rss_bytes"] > 100 * 2**20
        assert event["lr"] == pytest.approx(setup.config.lr)
        assert ("data_wait_s" in event) == (event["step"] > 1)
    sampled = {e["step"]: e["update_ratio"] for e in steps if "update_ratio" in e}
    assert sorted(sampled) == [10, 20, 30] and all(0 < r < 1 for r in sampled.values())
    if cell == "loss-scale":
        assert all(e["overflow"] is False and e["loss_scale"] == 2.0 ** 16 for e in steps)
        assert all(0 < e["grad_norm"] < 100 for e in steps)
    else:
        assert not any({"overflow", "loss_scale", "grad_norm"} & set(e) for e in steps)
    config = events[0]["config"]
    assert config["params"] == sum(int(p.size) for p in setup.network.trainable_params())
    assert config["total_steps"] == 30 and config["optimizer"] == "Adam"
    assert config["sink_mode"] is False  # what really ran on CPU
    assert summary["callback"].errors == 0 and summary["callback"].emitter.dropped == 0


def test_run_start_carries_the_users_config_and_baselines(plain_toy, tmp_path):
    toy.train(str(tmp_path), 4, toy=plain_toy, hook_options={
        "config": {"model": "my-llm", "parallel": {"dp": 1}}, "precision": "fp32",
        "expect_tokens_per_s": 12000.0, "expect_step_time_s": 0.02, "run": "r-42"})
    start = events_of(tmp_path)[0]
    assert start["run"] == "r-42" and start["world_size"] == 1
    assert start["expect"] == {"tokens_per_s_per_device": 12000.0, "step_time_s": 0.02}
    config = start["config"]
    assert config["model"] == "my-llm" and config["parallel"] == {"dp": 1}
    assert config["precision"] == "fp32" and config["seq_length"] == 32 and config["micro_batch"] == 8
    assert set(config["versions"]) == {"python", "mindspore", "mindformers"}


def test_tokens_count_micro_batches_when_the_user_says_inputs_are_micro_batches(plain_toy, tmp_path):
    toy.train(str(tmp_path), 3, toy=plain_toy,
              hook_options={"grad_accum": 4, "micro_batch_inputs": True})
    events = events_of(tmp_path)
    assert all(e["tokens"] == 4 * 256 and e["micro_steps"] == 4 for e in steps_of(events))
    assert events[0]["config"]["global_batch"] == 32 and events[0]["config"]["micro_batch"] == 8


def test_rank_and_world_size_come_from_the_launchers_environment(plain_toy, tmp_path, monkeypatch):
    monkeypatch.setenv("RANK_ID", "3")
    monkeypatch.setenv("RANK_SIZE", "4")
    toy.train(str(tmp_path), 2, toy=plain_toy)
    events = events_of(tmp_path, rank=3)
    assert {e["rank"] for e in events} == {3} and events[0]["world_size"] == 4


def write_stop(run_dir: Path, reason: str) -> None:
    """What the sidecar does: temp file + rename."""
    control = run_dir / "control"
    control.mkdir(parents=True, exist_ok=True)
    request = {"v": 1, "reason": reason, "alert": "loss_nan", "rank": 0, "step": 5, "t": 1.0}
    (control / "stop.tmp").write_text(json.dumps(request))
    os.replace(control / "stop.tmp", control / "stop.json")


def test_a_stop_request_stops_training_within_one_step_and_is_recorded(plain_toy, tmp_path):
    stopper = AtStep(5, lambda rc: write_stop(tmp_path, "loss is NaN: stop and roll back"))
    with pytest.warns(HookWarning, match="stopping training at step 6"):
        toy.train(str(tmp_path), 30, toy=plain_toy, callbacks=[stopper])
    events = events_of(tmp_path)
    assert [e["step"] for e in steps_of(events)] == [1, 2, 3, 4, 5, 6]
    stop = [e for e in events if e["type"] == "stop"]
    assert len(stop) == 1 and stop[0]["step"] == 6 and stop[0]["alert"] == "loss_nan"
    assert stop[0]["reason"] == "loss is NaN: stop and roll back"
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "stopped"


def test_a_stop_file_older_than_the_run_is_ignored(plain_toy, tmp_path):
    write_stop(tmp_path, "from an earlier run")
    with pytest.warns(HookWarning, match="ignoring"):
        toy.train(str(tmp_path), 8, toy=plain_toy)
    events = events_of(tmp_path)
    assert len(steps_of(events)) == 8 and events[-1]["status"] == "completed"
    assert not [e for e in events if e["type"] == "stop"]


def test_an_exception_in_training_is_recorded_as_a_failed_run_end(plain_toy, tmp_path):
    def boom(run_context):
        raise RuntimeError("device lost at step 7")

    with pytest.raises(RuntimeError, match="device lost"):
        toy.train(str(tmp_path), 20, toy=plain_toy, callbacks=[AtStep(7, boom)])
    events = events_of(tmp_path)
    end = events[-1]
    assert end["type"] == "run_end" and end["status"] == "failed" and end["step"] == 7
    assert "RuntimeError: device lost at step 7" in end["exception"]
    assert len(steps_of(events)) == 7


def test_an_unwritable_run_dir_warns_once_and_training_completes(plain_toy, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        summary = toy.train(str(blocker / "run"), 12, toy=plain_toy)
    emitter = summary["callback"].emitter
    # 12 steps, run_start and run_end at least (a sampled ``layers`` event may come too): all dropped
    assert emitter.written == 0 and emitter.dropped == emitter.emitted >= 14
    found = [r for r in records if issubclass(r.category, HookWarning)]
    assert len(found) == 1 and "cannot open" in str(found[0].message)


def test_internal_errors_are_counted_warned_once_and_disable_the_callback(tmp_path):
    from mindspore.train.callback import RunContext, _InternalCallbackParam

    from trainer_hooks.callback import DoctorCallback

    callback = DoctorCallback(str(tmp_path), max_errors=5)
    context = RunContext(_InternalCallbackParam())  # real, but lacks cur_step_num etc.
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        callback.on_train_begin(context)
        for _ in range(20):
            callback.on_train_step_begin(context)
            callback.on_train_step_end(context)
        callback.on_train_end(context)
    assert callback.disabled and callback.errors >= 5
    messages = [str(r.message) for r in records if issubclass(r.category, HookWarning)]
    assert len([m for m in messages if "step_end failed" in m]) == 1
    assert any("stops here" in m for m in messages)


def test_checkpoints_saved_by_model_checkpoint_are_reported_with_their_step(plain_toy, tmp_path):
    from mindspore.train import CheckpointConfig, ModelCheckpoint

    saver = ModelCheckpoint(prefix="toy", directory=str(tmp_path / "ckpt"),
                            config=CheckpointConfig(save_checkpoint_steps=5, keep_checkpoint_max=5))
    toy.train(str(tmp_path), 15, toy=plain_toy, callbacks=[saver])
    saved = [e for e in events_of(tmp_path) if e["type"] == "checkpoint"]
    assert [e["step"] for e in saved] == [5, 10, 15]
    assert all(Path(e["path"]).is_file() for e in saved)
    assert all(e["size_bytes"] == Path(e["path"]).stat().st_size for e in saved)
    assert all(0 <= e.get("save_s", 0) < 60 for e in saved)


def test_save_seconds_come_from_the_saver_mindformers_start_times_or_the_file_mtime(tmp_path):
    import os
    import time

    from trainer_hooks.callback import checkpoint_facts

    path = tmp_path / "a.ckpt"
    path.write_bytes(b"x" * 10)
    os.utime(path, (1000.0, 1000.0))

    class Bundled:
        latest_ckpt_save_s = 0.25

    class MindFormers:            # CheckpointMonitor.save_info_list[step]["ckpt"]["save_start_time"]
        save_info_list = {5: {"ckpt": {"save_start_time": 997.0, "ckpt_file_path": None}}}

    class Plain:
        pass

    assert checkpoint_facts(Bundled(), str(path), 0.0) == (10, 0.25)
    assert checkpoint_facts(MindFormers(), str(path), 0.0) == (10, 3.0)
    assert checkpoint_facts(Plain(), str(path), 999.5) == (10, 0.5)
    assert checkpoint_facts(Plain(), str(path), time.time()) == (10, None)   # saved before it
    assert checkpoint_facts(Plain(), str(tmp_path / "gone.ckpt"), 0.0) == (None, None)


def test_a_missing_run_dir_is_refused_at_construction_with_the_expected_form():
    from trainer_hooks.callback import DoctorCallback

    with pytest.raises(TypeError, match=r"run_dir must be a directory path \(str or os.PathLike\), got None"):
        DoctorCallback(None)


def test_an_evaluation_between_steps_is_the_next_steps_eval_s_not_its_data_wait(plain_toy, tmp_path):
    import time

    from trainer_hooks.callback import DoctorCallback

    def evaluate(run_context):         # what Model.eval / Model.fit call around a pass
        (doctor,) = [c for c in run_context.original_args().list_callback
                     if isinstance(c, DoctorCallback)]
        doctor.on_eval_begin(run_context)
        time.sleep(0.3)
        doctor.on_eval_end(run_context)

    toy.train(str(tmp_path), 10, toy=plain_toy, callbacks=[AtStep(5, evaluate)])
    steps = steps_of(events_of(tmp_path))
    assert [e["step"] for e in steps if "eval_s" in e] == [6]
    six = steps[5]
    assert six["eval_s"] >= 0.3 and six["data_wait_s"] < 0.3 <= six["step_time_s"]
