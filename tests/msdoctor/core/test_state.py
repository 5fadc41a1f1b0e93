"""Store / RunState / RankState / Series: per-rank state folded from spool chunks."""
from __future__ import annotations

import gc
import math
import tracemalloc

import numpy as np
import pytest

from msdoctor.core.batch import columnize
from msdoctor.core.spool import Chunk, SpoolError
from msdoctor.core.state import Series, Store, count_repeats, keep_last_writes
from msdoctor.wire import make


def step(rank: int, n: int, **fields):
    fields.setdefault("loss", 3.0 - n * 1e-3)
    fields.setdefault("t", 100.0 + n)
    return make("step", rank, step=n, **fields)


def chunk(events, run="run", rank=0, errors=()):
    steps = [e for e in events if e["type"] == "step"]
    return Chunk(f"events/rank-{rank}.jsonl", rank, run, list(events),
                 columnize(run, rank, steps) if steps else None, list(errors),
                 [e for e in events if e["type"] != "step"])


# -- Series ----------------------------------------------------------------------
def test_a_series_keeps_only_its_capacity_of_newest_points():
    series = Series(capacity=8)
    for start in range(0, 100, 3):
        series.extend(np.arange(start, start + 3), np.arange(start, start + 3) * 0.5)
    assert len(series) == 8
    assert series.steps.tolist() == list(range(94, 102))
    assert series.last() == (101, 50.5)
    series.extend(np.arange(200, 300), np.zeros(100))          # one batch over capacity
    assert series.steps.tolist() == list(range(292, 300))


def test_since_returns_copies_of_the_points_from_a_step_on():
    series = Series(capacity=16)
    series.extend(np.array([1, 3, 5, 7]), np.array([1.0, 3.0, 5.0, 7.0]))
    steps, values = series.since(4)
    assert steps.tolist() == [5, 7] and values.tolist() == [5.0, 7.0]
    steps[0] = -1
    assert series.steps.tolist() == [1, 3, 5, 7]
    assert series.since(100)[0].size == 0 and Series(4).last() is None


def test_a_repeated_step_purges_the_buffered_points_from_that_step_on():
    series = Series(capacity=64)
    series.extend(np.arange(1, 11), np.ones(10))
    repeated = series.extend(np.array([6, 7, 8]), np.full(3, 2.0))
    assert repeated == 3
    assert series.steps.tolist() == list(range(1, 9))
    assert series.values.tolist() == [1.0] * 5 + [2.0] * 3


def test_a_regression_inside_one_batch_keeps_the_last_write_of_each_step():
    steps = np.array([1, 2, 3, 4, 2, 3, 3, 5])
    assert keep_last_writes(steps).tolist() == [True, False, False, False, True, False, True, True]
    assert count_repeats(steps, None) == 3
    assert count_repeats(np.array([5, 6]), 5) == 1


def test_a_series_rejects_a_capacity_below_one():
    with pytest.raises(ValueError, match="capacity must be >= 1, got 0"):
        Series(0)


# -- Store.apply ---------------------------------------------------------------------
def test_apply_updates_latest_values_counters_and_series_of_the_rank():
    store = Store(capacity=128)
    store.apply(chunk([make("run_start", 0, run="run", world_size=2, t=1.0,
                            config={"model": "llama"}, expect={"step_time_s": 0.5}),
                       step(0, 1, overflow=False, grad_norm=1.0, tokens=4096, step_time_s=0.5),
                       step(0, 2, overflow=True, grad_norm=math.inf, loss=math.nan),
                       make("heartbeat", 0, t=103.0, step=2, dropped=7)],
                      errors=[SpoolError("events/rank-0.jsonl", 9, "not valid JSON")]))
    run = store.runs["run"]
    assert run.world_size == 2 and run.config == {"model": "llama"}
    assert run.expect == {"step_time_s": 0.5}
    state = run.ranks[0]
    assert state.status == "running" and state.last_step == 2 and state.t == 103.0
    assert state.counters == {"steps": 2, "overflow_steps": 1, "nonfinite_losses": 1,
                              "events": 4, "decode_errors": 1, "repeated_steps": 0, "dropped": 7}
    assert math.isnan(state.latest["loss"]) and state.latest["grad_norm"] == math.inf
    assert state.latest["tokens_per_s"] == 8192.0           # from step 1, the last recorded
    assert state.series["tokens_per_s"].steps.tolist() == [1]
    assert state.received is not None


def test_run_end_sets_the_status_and_a_new_run_start_resets_it():
    store = Store()
    store.apply(chunk([step(0, 1), make("run_end", 0, status="failed", step=1,
                                          exception="RuntimeError: boom", t=5.0)]))
    state = store.runs["run"].ranks[0]
    assert state.status == "failed"
    assert state.run_end == {"status": "failed", "step": 1, "exception": "RuntimeError: boom",
                             "t": 5.0}
    store.apply(chunk([make("run_start", 0, run="run", t=6.0), step(0, 2)]))
    assert state.status == "running" and state.run_end is None


def test_a_resumed_run_repeating_steps_purges_orphaned_points_and_counts_them():
    store = Store(capacity=256)
    store.apply(chunk([step(0, n) for n in range(1, 101)]))
    sampled = [step(0, n, update_ratio=1e-3) for n in (40, 80)]
    store.apply(chunk(sampled))                                 # repeats 40 and 80
    state = store.runs["run"].ranks[0]
    assert state.counters["repeated_steps"] == 2
    assert state.series["loss"].steps.tolist() == list(range(1, 40)) + [40, 80]
    # resume from a checkpoint at step 50: steps 51.. again, with new values
    store.apply(chunk([step(0, n, loss=9.0, update_ratio=2e-3) for n in range(51, 61)]))
    assert state.counters["repeated_steps"] == 2 + 10           # none of 51..60 exceeds 80
    loss = state.series["loss"]
    assert loss.steps.tolist() == list(range(1, 40)) + [40] + list(range(51, 61))
    assert state.series["update_ratio"].steps.tolist() == [40] + list(range(51, 61))
    assert state.last_step == 60 and state.latest["loss"] == 9.0


def test_latest_values_follow_a_purge_that_empties_a_series():
    store = Store()
    store.apply(chunk([step(0, 1), step(0, 5, update_ratio=0.1)]))
    store.apply(chunk([step(0, 3)]))                            # purges step 5 and its ratio
    state = store.runs["run"].ranks[0]
    assert "update_ratio" not in state.latest and len(state.series["update_ratio"]) == 0
    assert state.series["loss"].steps.tolist() == [1, 3]


def test_each_step_s_wall_time_is_kept_as_a_series_without_a_latest_value():
    store = Store()
    store.apply(chunk([step(0, 1, t=100.0), step(0, 2, t=101.5), step(0, 3, t=160.0)]))
    store.apply(chunk([step(0, 2, t=200.0)]))                   # resumed: step 3 is purged
    state = store.runs["run"].ranks[0]
    assert state.series["t"].steps.tolist() == [1, 2]
    assert state.series["t"].values.tolist() == [100.0, 200.0]
    assert "t" not in state.latest


def test_memory_does_not_grow_with_the_length_of_the_run():
    store = Store(capacity=512)
    batch = [step(0, n, grad_norm=1.0, lr=1e-4, tokens=4096, step_time_s=0.4, data_wait_s=0.01)
             for n in range(1, 1001)]

    def feed(first: int, count: int) -> None:
        for k in range(count):
            base = first + k * 1000
            events = [dict(e, step=e["step"] + base) for e in batch]
            store.apply(chunk(events))

    feed(0, 5)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    feed(5000, 50)
    gc.collect()                    # garbage the collector has not reached yet is not kept
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    # only what the store's own code holds: other threads of a long test session (servers,
    # pipelines of earlier tests) allocate too, and are not this test's business
    mine = [tracemalloc.Filter(True, "*/msdoctor/core/*")]
    growth = sum(d.size_diff for d in after.filter_traces(mine).compare_to(
        before.filter_traces(mine), "filename"))
    state = store.runs["run"].ranks[0]
    assert state.last_step == 55_000 and state.counters["steps"] == 55_000
    assert all(len(s) == 512 for s in state.series.values())
    assert growth < 64 * 1024, growth


def test_a_series_grows_with_what_it_keeps_and_holds_the_newest_points_like_a_list():
    rng = np.random.default_rng(5)
    series, kept, step = Series(capacity=300), [], 0
    assert series._size <= 64                               # a short run, a short array
    for _ in range(400):
        n = int(rng.choice([1, 2, 7, 64, 299, 300, 301]))
        steps = np.arange(step + 1, step + n + 1)
        step += n
        series.extend(steps, steps * 0.5)
        kept = (kept + steps.tolist())[-300:]
        assert series.steps.tolist() == kept and series.values.tolist() == [s * 0.5 for s in kept]
        assert series._size <= 300 + 75


@pytest.mark.parametrize("seed", range(6))
def test_steps_of_one_stride_are_implied_and_any_steps_read_back_as_a_list_keeps_them(seed):
    rng = np.random.default_rng(seed)
    series, kept, step = Series(capacity=50), [], 0
    stride = int(rng.choice([1, 10]))
    for _ in range(300):
        n = int(rng.choice([1, 1, 2, 7, 49, 50, 51]))
        r = rng.random()
        if r < 0.03:                                  # a resume from an earlier step
            step = max(step - int(rng.integers(1, 80)), 0)
        elif r < 0.06:                                # the log changes its stride
            stride = int(rng.choice([1, 3, 10]))
        gaps = np.full(n, stride)
        if rng.random() < 0.03:                       # one irregular gap
            gaps[int(rng.integers(0, n))] += 1
        steps = step + np.cumsum(gaps)
        step = int(steps[-1])
        series.extend(steps, steps * 0.5)
        kept = [s for s in kept if s < steps[0]]
        kept = (kept + steps.tolist())[-50:]
        assert series.steps.tolist() == kept and series.values.tolist() == [s * 0.5 for s in kept]
        assert series.last() == (kept[-1], kept[-1] * 0.5)
        assert series.since(kept[len(kept) // 2])[0].tolist() == kept[len(kept) // 2:]


def test_a_dense_series_and_one_of_every_tenth_step_store_no_steps():
    for stride in (1, 10):
        series, last = Series(capacity=100), 0
        for _ in range(700):
            steps = last + stride * np.arange(1, 8)
            series.extend(steps, np.ones(7))
            last = int(steps[-1])
        assert series._steps is None
        assert series.steps.tolist() == list(range(last - 99 * stride, last + 1, stride))
    series.extend(np.array([last + 3]), np.ones(1))             # off the stride: stored
    assert series._steps is not None
    assert series.steps.tolist() == list(range(last - 98 * stride, last + 1, stride)) + [last + 3]
