"""Goodput from a scripted event stream whose every phase has a known length."""
from __future__ import annotations

import math

import numpy as np
import pytest

from msdoctor.core.batch import columnize
from msdoctor.core.goodput import HANG_FACTOR, HANG_MIN_S, TYPICAL_WINDOW, Goodput, hung
from msdoctor.wire import make

COMPUTE = 0.5


def script():
    """Process 1 starts at 0, trains from 10 (compile 5 s), steps 1..40 with a 2 s data wait on
    steps 11-15, a 30 s hang on step 25, checkpoints at 20 (0.4 s) and 30, a 20 s evaluation
    after step 34 (a step 35 of 20.5 s that is no hang); it dies after step 40 and, 60 s later,
    process 2 resumes from step 30 (a rollback: steps 31-40 redone)."""
    events, t = [], 0.0
    events.append(make("run_start", 0, run="r", t=10.0, process_t=0.0))
    t = 10.0
    for step in range(1, 41):
        wait = 2.0 if 11 <= step <= 15 else 0.0
        took = COMPUTE + (5.0 if step == 1 else 0.0) + (30.0 if step == 25 else 0.0)
        save = 0.4 if step == 21 else 0.0     # the save of step 20 runs before step 21
        evaluation = 20.0 if step == 35 else 0.0
        t += wait + took + save + evaluation
        fields = {"data_wait_s": wait} if step > 1 else {}
        if evaluation:
            fields["eval_s"] = evaluation
        events.append(make("step", 0, run="r", step=step, t=t,
                           step_time_s=wait + took + save + evaluation, loss=1.0, **fields))
        if step in (20, 30):
            events.append(make("checkpoint", 0, run="r", step=step, path=f"c{step}",
                               save_s=0.4 if step == 20 else 0.0, t=t))
    down = t + 60.0
    events.append(make("run_start", 0, run="r", t=down + 8.0, process_t=down))
    t = down + 8.0
    events.append(make("checkpoint", 0, run="r", step=30, op="load", load_s=1.0, t=t))
    events.append(make("checkpoint", 0, run="r", step=30, path="c30", t=t))   # a late repeat
    t += 1.0
    for step in range(31, 61):
        took = COMPUTE + (5.0 if step == 31 else 0.0)
        t += took
        events.append(make("step", 0, run="r", step=step, t=t, step_time_s=took, loss=1.0))
    truth = {"startup": 10.0 + 5.0 + 8.0 + 5.0, "data_wait": 10.0, "checkpoint": 1.4,
             "hang": 30.0, "downtime": 60.0, "redone": 10 * COMPUTE, "evaluation": 20.0}
    return events, truth, t


def feed(goodput, events, cut):
    """Feed ``events`` in chunks of ``cut`` as the spool tailer would."""
    for a in range(0, len(events), cut):
        part = events[a:a + cut]
        steps = [e for e in part if e["type"] == "step"]
        others = [e for e in part if e["type"] != "step"]
        goodput.apply_chunk(0, part, others, columnize("r", 0, steps) if steps else None)


@pytest.mark.parametrize("cut", [1, 7, 1000])
def test_every_badput_bucket_matches_the_scripted_phases_however_the_stream_is_cut(cut):
    events, truth, end = script()
    goodput = Goodput()
    feed(goodput, events, cut)
    got = goodput.summary()
    assert got["wall_s"] == pytest.approx(end)
    for cause, seconds in truth.items():
        assert got["badput_s"][cause] == pytest.approx(seconds, abs=0.02 * end), cause
    assert got["productive_s"] == pytest.approx(60 * COMPUTE, abs=0.02 * end)
    assert got["ratio"] == pytest.approx(got["productive_s"] / end)


def test_a_lower_rank_replaces_the_account_and_a_higher_one_is_ignored():
    goodput = Goodput()
    goodput.apply(3, [make("run_start", 3, t=0.0)], None)
    goodput.apply(0, [make("run_start", 0, t=5.0)], None)
    goodput.apply(1, [make("run_start", 1, t=1.0)], None)
    assert goodput.rank == 0 and goodput.first_t == 5.0


def test_the_account_survives_a_snapshot():
    events, _, _ = script()
    whole, half = Goodput(), Goodput()
    feed(whole, events, 5)
    feed(half, events[:40], 5)
    again = Goodput.from_state(half.state_dict())
    feed(again, events[40:], 5)
    got, want = again.summary(), whole.summary()
    assert got["badput_s"] == pytest.approx(want["badput_s"])
    assert (got["wall_s"], got["productive_s"]) == pytest.approx((want["wall_s"], want["productive_s"]))


def reference_hung(history, step_time, busy, opening):
    """``hung`` one row at a time: the plain reading of its definition."""
    usable = list(history)
    typical, hang = [], []
    for i, (took, spent) in enumerate(zip(step_time, busy)):
        recent = usable[-TYPICAL_WINDOW:]
        t = float(np.median(recent)) if recent else math.nan
        hung_now = bool(spent > max(HANG_FACTOR * t, t + HANG_MIN_S))
        typical.append(t)
        hang.append(hung_now)
        if not hung_now and not (opening and i == 0):
            usable.append(float(took))
    return np.array(typical), np.array(hang)


@pytest.mark.parametrize("seed", range(12))
def test_hung_steps_are_those_of_the_one_row_at_a_time_definition(seed):
    """Slow and fast runs, a drifting step time, rare and frequent hangs, a short history."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    base = rng.choice([0.05, 0.3, 2.0])
    step_time = base * np.exp(np.cumsum(rng.normal(0, 0.05, n))) * rng.lognormal(0, 0.2, n)
    hangs = rng.random(n) < rng.choice([0.0, 0.01, 0.3])
    step_time[hangs] += rng.uniform(0.5, 60, hangs.sum())
    busy = step_time - np.where(rng.random(n) < 0.05, rng.uniform(0, 1, n) * step_time, 0.0)
    history = base * rng.lognormal(0, 0.2, int(rng.choice([0, 3, 64])))
    opening = bool(rng.random() < 0.5)
    typical, hang = hung(history, step_time, busy, opening)
    want_typical, want_hang = reference_hung(history, step_time, busy, opening)
    assert hang.tolist() == want_hang.tolist()
    np.testing.assert_allclose(typical[hang], want_typical[hang], rtol=1e-12)


def drifting_run(seed):
    """One process whose step time drifts (a loaded machine) and some steps of which are slow
    enough to be hangs by one typical time but not by a later one."""
    rng = np.random.default_rng(seed)
    events, t = [make("run_start", 0, run="r", t=5.0, process_t=0.0)], 5.0
    for step in range(1, 301):
        took = 0.08 * (1 + 3 * (step > 150)) * rng.lognormal(0, 0.3) + (4.0 if step == 1 else 0.0)
        if step % 37 == 0:
            took += rng.uniform(0.8, 3.0)
        t += took
        events.append(make("step", 0, run="r", step=step, t=t, step_time_s=took, loss=1.0))
        if step % 50 == 0:
            events.append(make("checkpoint", 0, run="r", step=step, path=f"c{step}", t=t))
    return events


@pytest.mark.parametrize("cut", [1, 3, 50, 10_000])
def test_the_account_is_the_same_however_the_stream_is_cut_live_or_replayed(cut):
    events = drifting_run(0)
    whole, cut_up = Goodput(), Goodput()
    feed(whole, events, 10_000)
    feed(cut_up, events, cut)
    got, want = cut_up.summary(), whole.summary()
    assert got["badput_s"]["hang"] > 0
    assert got["badput_s"] == pytest.approx(want["badput_s"], abs=1e-9)
    assert got["productive_s"] == pytest.approx(want["productive_s"], abs=1e-9)
