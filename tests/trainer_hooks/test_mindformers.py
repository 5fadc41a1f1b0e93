"""``MsDoctorMonitor`` built from a YAML-style callback list by MindFormers' own registry, on a
real MindFormers train cell (``MFTrainOneStepCell`` with a dynamic loss scale, which compiles on
a CPU only with the overflow check msdoctor puts in place) training a tiny ``LlamaForCausalLM``
in GRAPH mode on the CPU; the MindFormers log of the same run is replayed and must agree."""
from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mindformers")
pytestmark = pytest.mark.slow

STEPS = 20
SEQ, BATCH = 32, 2
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mf_run(tmp_path_factory):
    """Train 20 steps with MFLossMonitor and MsDoctorMonitor from a YAML-style config list."""
    tmp = tmp_path_factory.mktemp("mf")
    import os
    old_cwd = os.getcwd()
    os.chdir(tmp)
    try:
        import mindspore as ms
        from mindformers import build_context
        from mindformers.core.callback import build_callback
        from mindformers.models.llama import LlamaConfig, LlamaForCausalLM
        from mindformers.tools.logger import _DataFormatter, get_logger
        from mindformers.wrapper.wrapper import MFTrainOneStepCell
        from mindspore import nn
        from mindspore.dataset import GeneratorDataset

        import trainer_hooks.mindformers  # noqa: F401 - registers MsDoctorMonitor

        build_context({"context": {"mode": "GRAPH_MODE", "device_target": "CPU"}, "parallel": {}})
        ms.set_seed(0)
        config = LlamaConfig(num_layers=2, hidden_size=64, num_heads=4, intermediate_size=128,
                             vocab_size=256, seq_length=SEQ, batch_size=BATCH,
                             compute_dtype="float32", param_init_type="float32",
                             layernorm_compute_type="float32", softmax_compute_type="float32",
                             rotary_dtype="float32", use_flash_attention=False, use_past=False,
                             fused_rms_norm=False, use_rope_slice=True, pad_token_id=0)
        net = LlamaForCausalLM(config)
        rng = np.random.default_rng(0)
        data = rng.integers(2, 256, size=(STEPS * BATCH, SEQ + 1)).astype(np.int32)
        dataset = GeneratorDataset([(row,) for row in data], column_names=["input_ids"],
                                   shuffle=False).batch(BATCH)
        optimizer = nn.AdamWeightDecay(net.trainable_params(), learning_rate=1e-3)
        cell = MFTrainOneStepCell(net, optimizer, use_clip_grad=True, max_grad_norm=1.0,
                                  scale_sense=nn.DynamicLossScaleUpdateCell(2.0 ** 12, 2, 5))
        run_dir = tmp / "run"
        yaml_callbacks = [
            {"type": "MFLossMonitor", "per_print_times": 1},
            {"type": "MsDoctorMonitor", "run_dir": str(run_dir), "run": "mf-tiny",
             "seq_length": SEQ, "micro_batch_size": BATCH, "heartbeat_s": 60.0,
             "expect": {"hang_after_s": 120}, "update_every": 5, "max_errors": 50},
        ]
        callbacks = build_callback(yaml_callbacks, default_args={
            "learning_rate": 1e-3, "origin_epochs": 1, "dataset_size": STEPS, "global_batch_size": BATCH})
        log_path = tmp / "rank_0" / "info.log"
        log_path.parent.mkdir()
        handler = logging.FileHandler(log_path, encoding="utf-8")
        handler.setFormatter(_DataFormatter(
            "[%(levelname)s] %(asctime)s [%(filepath)s:%(lineno)d] %(funcName)s: %(message)s"))
        mf_logger = get_logger()        # MindFormers' logging.Logger (its own file is elsewhere)
        mf_logger.addHandler(handler)
        try:
            ms.Model(cell).train(1, dataset, callbacks=callbacks, dataset_sink_mode=False)
        finally:
            mf_logger.removeHandler(handler)
            handler.close()
        mode = ms.get_context("mode")
        return {"run_dir": run_dir, "log": log_path, "callbacks": callbacks, "mode": mode}
    finally:
        os.chdir(old_cwd)


def _events(run_dir: Path):
    lines = (run_dir / "events" / "rank-0.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_the_yaml_entry_builds_our_callback_through_the_mindformers_registry(mf_run):
    from trainer_hooks.mindformers import MsDoctorMonitor

    kinds = [type(c).__name__ for c in mf_run["callbacks"]]
    assert kinds == ["MFLossMonitor", "MsDoctorMonitor"]
    assert isinstance(mf_run["callbacks"][1], MsDoctorMonitor)
    assert mf_run["mode"] == 0, "training must have stayed in GRAPH mode"


def test_every_step_records_loss_overflow_loss_scale_and_global_norm(mf_run):
    events = _events(mf_run["run_dir"])
    steps = [e for e in events if e["type"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, STEPS + 1))
    for e in steps:
        assert math.isfinite(e["loss"]) and 4.0 < e["loss"] < 7.0     # ~ln(256) = 5.5 at the start
        assert e["overflow"] is False
        assert e["loss_scale"] in (2.0 ** 12, 2.0 ** 13, 2.0 ** 14, 2.0 ** 15, 2.0 ** 16)
        assert e["grad_norm"] > 0 and math.isfinite(e["grad_norm"])
        assert e["tokens"] == SEQ * BATCH and e["step_time_s"] > 0
    assert steps[-1]["loss_scale"] > steps[0]["loss_scale"], "the dynamic scale grew every 5 clean steps"
    start = next(e for e in events if e["type"] == "run_start")
    assert start["config"]["seq_length"] == SEQ
    assert start["expect"] == {"hang_after_s": 120}                  # the YAML's expect: mapping
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "completed"


def test_replaying_the_mindformers_log_of_the_same_run_gives_the_same_series(mf_run):
    from msdoctor.core.engine.loader import default_rules_dir, load_rules
    from msdoctor.replay.driver import load

    recording = load([str(mf_run["log"])])
    assert recording.format == "mindformers" and recording.problems.count == 0
    (log,) = recording.ranks.values()
    block = log.blocks[0]
    spool = [e for e in _events(mf_run["run_dir"]) if e["type"] == "step"]
    assert block.steps.tolist() == [e["step"] for e in spool]
    loss, _ = block.columns["loss"]
    np.testing.assert_allclose(loss, [e["loss"] for e in spool], rtol=0, atol=1e-6)  # %5.6f
    scale, _ = block.columns["loss_scale"]
    assert scale.tolist() == [e["loss_scale"] for e in spool]
    norm, _ = block.columns["grad_norm"]
    np.testing.assert_allclose(norm, [e["grad_norm"] for e in spool], rtol=1e-6)
    assert load_rules([str(default_rules_dir())])     # the shipped rules load for the replay below
    done = subprocess.run([sys.executable, "-m", "msdoctor", "replay", str(mf_run["log"]), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["summary"]["format"] == "mindformers" and doc["summary"]["steps"] == STEPS
    assert not [a for a in doc["alerts"] if a["severity"] == "critical"]


def test_a_yaml_entry_with_auto_register_loads_it_without_an_import_in_the_launch_script(tmp_path):
    """MindFormers' own ``auto_register`` + ``REGISTER_PATH`` (what ``run_mindformer.py
    --register_path`` sets), in a fresh interpreter that never imports trainer_hooks itself."""
    import os

    code = ("from mindformers.core.callback import build_callback\n"
            "cbs = build_callback([{'type': 'MsDoctorMonitor', 'run_dir': 'run', "
            "'auto_register': 'msdoctor_mindformers.MsDoctorMonitor'}])\n"
            "c = cbs[0]; print('BUILT', type(c).__module__, type(c).__name__, c.run_dir)\n")
    env = dict(os.environ, REGISTER_PATH=str(REPO / "trainer_hooks" / "mindformers_plugin"),
               PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "BUILT trainer_hooks.mindformers MsDoctorMonitor run" in done.stdout


def test_what_the_job_says_goes_into_run_start_config(mf_run):
    """Read from the train cell, the model's config and the parallel context, not from the YAML."""
    start = next(e for e in _events(mf_run["run_dir"]) if e["type"] == "run_start")
    config = start["config"]
    assert config["loss_scale_window"] == 5                        # DynamicLossScaleUpdateCell(.., 5)
    assert config["loss_scaling"] == {"kind": "dynamic", "window": 5, "factor": 2.0, "init": 4096.0}
    assert config["use_clip_grad"] is True and config["clip_norm"] == 1.0
    assert config["vocab_size"] == 256 and config["micro_batch"] == BATCH
    assert config["parallel"]["mode"] == "stand_alone" and config["parallel"]["data_parallel"] == 1
    monitor = mf_run["callbacks"][1]
    assert monitor.update_every == 5 and monitor.max_errors == 50 and monitor.errors == 0


def test_the_cpu_overflow_check_is_msdoctors_own_and_only_on_cpu(mf_run):
    import mindspore as ms
    from mindformers.wrapper.wrapper import MFTrainOneStepCell

    from trainer_hooks.mindformers_job import patch_overflow_check_on_cpu

    assert ms.get_context("device_target") == "CPU"
    assert getattr(MFTrainOneStepCell.get_overflow_status, "msdoctor_cpu", False)
    assert patch_overflow_check_on_cpu() is True                   # idempotent
