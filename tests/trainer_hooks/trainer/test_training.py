"""A clean run of the tiny preset, resume, and a two-rank launch: real MindFormers Llama
training on the CPU."""
import json
import os
import subprocess

import pytest

from trainer_hooks.trainer.schedule import lr_at

from trainer_runs import ROOT, command, events, steps, train, value

pytestmark = pytest.mark.slow

CONFIG_KEYS = ("model", "params", "seq_length", "micro_batch", "global_batch", "grad_accum",
               "precision", "optimizer", "lr", "total_steps", "parallel", "versions")


def test_a_clean_run_writes_the_spool_the_config_and_step_numbered_checkpoints(runs):
    run = runs["clean"]
    config = json.loads((run / "config.json").read_text())
    start = events(run)[0]
    assert start["type"] == "run_start"
    for key in CONFIG_KEYS:
        assert key in config and start["config"][key] == config[key], key
    assert config["model"] == "LlamaForCausalLM" and config["params"] == 950_912
    assert (config["total_steps"], config["precision"], config["grad_accum"]) == (200, "fp32", 1)
    assert config["betas"] == [0.9, 0.95] and config["weight_decay"] == 0.1
    assert config["clip_norm"] == 1.0 and config["seed"] == 42
    assert {"mindspore", "mindformers", "python"} <= set(config["versions"])
    got = steps(run)
    assert [e["step"] for e in got] == list(range(1, 201))
    assert events(run)[-1]["type"] == "run_end" and events(run)[-1]["status"] == "completed"
    ckpts = sorted(p.name for p in (run / "checkpoints" / "rank-0").iterdir())
    assert ckpts == ["step-00000100.ckpt", "step-00000150.ckpt", "step-00000200.ckpt"]
    saves = [e for e in events(run) if e["type"] == "checkpoint"]
    assert [e["step"] for e in saves] == [50, 100, 150, 200]
    for e in saves[-3:]:                       # size and save time of each file still there
        path = run / "checkpoints" / "rank-0" / f"step-{e['step']:08d}.ckpt"
        assert e["path"] == str(path) and e["size_bytes"] == path.stat().st_size
        assert 0 < e["save_s"] < 60
    assert isinstance(events(run)[0]["process_t"], float) and \
        events(run)[0]["process_t"] <= events(run)[0]["t"]


def test_the_clean_run_learns_with_warmup_then_cosine_and_clipping(runs):
    got = steps(runs["clean"])
    first = sum(value(e, "loss") for e in got[:10]) / 10
    last = sum(value(e, "loss") for e in got[-10:]) / 10
    assert first > 7.0 and last < first - 0.8
    for e in got:
        assert value(e, "lr") == pytest.approx(lr_at(e["step"] - 1, 1e-3, 200, 4), rel=1e-4)
        assert e["tokens"] == 8 * 64 and e["overflow"] is False and value(e, "grad_norm") > 0
    ratios = [value(e, "update_ratio") for e in got if "update_ratio" in e]
    assert len(ratios) >= 18 and min(ratios) > 1e-5


def test_resume_continues_the_same_loss_curve_step_by_step(runs, token_cache):
    """200 steps straight vs 100 then --resume for 100: fp32 on CPU, tolerance 1e-5 relative."""
    straight, half = runs["clean"], runs["half"]
    train(half, token_cache, "--steps", "200", "--save-every", "50", "--resume")
    a = {e["step"]: value(e, "loss") for e in steps(straight)}
    b = {e["step"]: value(e, "loss") for e in steps(half)}
    assert sorted(b) == list(range(1, 201))
    for step in range(1, 201):
        assert b[step] == pytest.approx(a[step], rel=1e-5), step
    starts = [e for e in events(half) if e["type"] == "run_start"]
    assert len(starts) == 2 and starts[0]["run"] == starts[1]["run"]


def test_the_ranks_of_one_launch_share_a_run_id_and_each_keeps_its_own_spool_and_shard(runs):
    run = runs["two-ranks"]
    config = json.loads((run / "config.json").read_text())       # written by rank 0 alone
    assert config["parallel"] == {"mode": "independent_replicas", "device_num": 2}
    assert config["run"] == run.name and config["global_batch"] == 16
    starts = [events(run, rank)[0] for rank in (0, 1)]
    assert [s["run"] for s in starts] == [run.name, run.name]
    assert [s["rank"] for s in starts] == [0, 1] and all(s["world_size"] == 2 for s in starts)
    first, last = steps_of(run, 0), steps_of(run, 1)
    assert [e["step"] for e in last] == list(range(1, 281))
    assert [e["step"] for e in first] == list(range(1, len(first) + 1))
    stops = [e for e in events(run, 0) if e["type"] == "stop"]     # rank 0: until rank 1 ended
    assert [e["step"] for e in stops] == [first[-1]["step"]] and stops[0]["t"] > last[-1]["t"]
    loss0 = [value(e, "loss") for e in steps_of(run, 0)[:20]]
    loss1 = [value(e, "loss") for e in steps_of(run, 1)[:20]]
    assert loss0 != loss1                                         # different shards and seeds


def test_a_second_launch_into_the_same_directory_is_refused_by_every_rank(runs, token_cache):
    run = runs["two-ranks"]
    for rank in (0, 1):
        env = dict(os.environ, PYTHONPATH=str(ROOT), RANK_ID=str(rank), RANK_SIZE="2")
        done = subprocess.run(command(run, token_cache, "--steps", "5"), cwd=str(run.parent),
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "already holds" in done.stderr, (rank, done.stderr)


def steps_of(run, rank):
    return [e for e in events(run, rank) if e["type"] == "step"]


def test_the_console_shows_a_real_rate_on_its_first_progress_line_and_a_closing_summary(runs):
    import re

    from trainer_runs import console

    out = console(runs["nan"]).read_text()           # --log-every 1000: one line, at step 40
    progress = [line for line in out.splitlines() if line.startswith("step ")]
    assert len(progress) == 1 and progress[0].startswith("step     40/40")
    rate = float(re.search(r"([\d.]+|nan) steps/s", progress[0]).group(1))
    assert rate > 0, progress[0]
    summary = out.splitlines()[-1]
    assert summary.startswith("done: steps 1..40 in "), out[-500:]
    assert "11 non-finite loss step(s), the first at step 30" in summary
    assert f"events in {runs['nan']}/events" in summary
