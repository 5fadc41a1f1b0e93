"""Each ``--inject`` fault produces its symptom in the spool of a real run."""
import json
import math

import numpy as np
import pytest

from trainer_runs import LONG, events, steps, value

pytestmark = pytest.mark.slow


def series(run, name):
    return {e["step"]: value(e, name) for e in steps(run) if name in e}


def test_nan_makes_the_loss_non_finite_from_its_step_on(runs):
    loss = series(runs["nan"], "loss")
    assert all(math.isfinite(loss[s]) for s in range(1, 30))
    assert all(math.isnan(loss[s]) for s in range(30, 41))


def test_spike_gives_one_loss_spike_at_its_step(runs):
    loss = series(runs["spike-slow"], "loss")
    before = np.median([loss[s] for s in range(180, 210)])
    assert loss[210] > before + 2.0
    assert abs(np.median([loss[s] for s in range(211, 231)]) - before) < 0.5


def test_slow_data_makes_the_run_loader_bound(runs):
    got = steps(runs["spike-slow"])[20:]
    per_step = (got[-1]["t"] - got[0]["t"]) / (len(got) - 1)
    assert per_step > 0.15 * 0.9              # slow-data@150: one batch per 150 ms at best


def test_slow_data_makes_the_step_wait_for_the_loader(runs):
    # the loader takes >= 2x the step's measured compute, so about half of each step (or more,
    # on an idle machine where 150 ms dominates) is spent between step end and next step begin
    got = steps(runs["spike-slow"])[40:]
    waits = [value(e, "data_wait_s") for e in got]
    shares = [value(e, "data_wait_s") / value(e, "step_time_s") for e in got]
    assert np.median(waits) > 0.05 and np.median(shares) > 0.3


def test_periodic_gives_loss_spikes_at_multiples_of_k(runs):
    loss = series(runs["periodic"], "loss")
    last = max(loss)
    assert last == 260
    for step in range(50, last + 1, 50):
        neighbours = np.median([loss[s] for s in range(step - 10, step) if s % 50])
        assert loss[step] > neighbours + 2.0, step
    others = [s for s in range(30, last + 1) if s % 50
              and loss[s] > np.median(list(loss.values())) + 2]
    assert others == []


def test_stall_drives_the_update_ratio_to_zero_after_its_step(runs):
    ratio = series(runs["stall"], "update_ratio")
    assert all(ratio[s] > 1e-5 for s in ratio if s < 60)
    assert [ratio[s] for s in ratio if s > 60] and all(ratio[s] < 1e-8 for s in ratio if s > 60)


def test_leak_grows_host_memory_every_step(runs):
    rss = series(runs["long"], "mem_host_rss_bytes")
    clean = series(runs["clean-long"], "mem_host_rss_bytes")
    xs = np.array(sorted(rss))[20:]
    slope = np.polyfit(xs, [rss[s] for s in xs], 1)[0]
    clean_slope = np.polyfit(xs, [clean[s] for s in xs], 1)[0]
    assert slope > 0.9 * 2 ** 20 > 10 * clean_slope      # leak@1: ~1 MiB per step


def test_hang_stops_the_steps_while_heartbeats_go_on(runs):
    run = runs["hang"]
    evs = events(run)
    t19 = next(e["t"] for e in evs if e["type"] == "step" and e["step"] == 19)
    t20 = next(e["t"] for e in evs if e["type"] == "step" and e["step"] == 20)
    assert t20 - t19 >= 9.5                         # hang@20 with --hang-timeout 10
    beats = [e for e in evs if e["type"] == "heartbeat" and t19 < e["t"] < t20]
    assert len(beats) >= 5                          # --heartbeat-s 0.5


def test_accum_mismatch_logs_micro_batches_as_steps(runs):
    run = runs["accum"]
    config = json.loads((run / "config.json").read_text())
    got = steps(run)
    assert config["total_steps"] == 12 and config["grad_accum"] == 4
    assert got[-1]["step"] == 48                    # 12 updates logged as 48 "steps"
    assert {e["tokens"] for e in got} == {8 * 64}   # one micro-batch per logged step
    assert config["global_batch"] * config["seq_length"] == 4 * 8 * 64


def test_loss_scale_low_keeps_a_fixed_fp16_scale_so_low_that_the_loss_stays_flat(runs):
    run = runs["scale-low"]
    config = json.loads((run / "config.json").read_text())
    assert config["precision"] == "fp16" and config["loss_scaling"]["kind"] == "fixed"
    assert config["loss_scale_window"] == 50                 # the tiny preset's window
    assert set(series(run, "loss_scale").values()) == {2.0 ** -16}
    loss = series(run, "loss")
    first, last = np.mean([loss[s] for s in range(1, 21)]), np.mean([loss[s] for s in range(221, 241)])
    assert last > first - 0.1                                 # underflowed gradients: no learning


def test_lr_high_runs_30x_the_learning_rate_and_ends_above_the_clean_loss(runs):
    high, clean = series(runs["long"], "loss"), series(runs["clean-long"], "loss")
    lr_high, lr_clean = series(runs["long"], "lr"), series(runs["clean-long"], "lr")
    assert all(lr_high[s] == pytest.approx(30 * lr_clean[s], rel=1e-4) for s in lr_clean)
    assert sorted(high) == sorted(clean) == list(range(1, LONG + 1))
    tail_high = np.mean([high[s] for s in range(LONG - 150, LONG + 1)])
    tail_clean = np.mean([clean[s] for s in range(LONG - 150, LONG + 1)])
    assert tail_high > tail_clean
