"""The second labelled-run generator (tests/bench/generator2.py, faults2.py) labels what it
injects: a faulty run equals its healthy twin up to the onset and differs at the onset, the
labels carry the issue's targets, and the healthy runs stay within what a healthy run does."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import faults2  # noqa: E402
from generator2 import LOGGINGS, Run, Shape, Table, generate  # noqa: E402

pytestmark = pytest.mark.slow
SEED = 5
PER_KIND = 6          # every logging of a fault, early and late


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b, equal_nan=True))


@pytest.fixture(scope="module")
def pairs():
    """(faulty run, its healthy twin) for PER_KIND runs of every fault."""
    out = []
    for name in faults2.KINDS:
        for i in range(PER_KIND):
            shape, _ = faults2.plan(faults2.KINDS[name], SEED, i)
            run = faults2.faulty(name, SEED, i)
            out.append((run, generate(shape, run.run_id)))
    return out


@pytest.fixture(scope="module")
def healthy():
    return faults2.healthy_suite(SEED, scale=0.3)


def test_a_faulty_run_equals_its_healthy_twin_before_the_onset(pairs):
    for run, twin in pairs:
        o = run.label.onset_record
        for rank, table in run.ranks.items():
            other = twin.ranks[rank]
            assert _same(table.step[:o], other.step[:o]), run.run_id
            assert _same(table.t[:o], other.t[:o]), run.run_id
            for name, column in table.cols.items():
                assert _same(column[:o], other.cols[name][:o]), (run.run_id, name)


def test_the_injected_signal_changes_at_the_onset_record(pairs):
    for run, twin in pairs:
        label, kind = run.label, faults2.KINDS[run.label.kind]
        o = label.onset_record
        table, other = run.ranks[label.rank or 0], twin.ranks[label.rank or 0]
        assert int(table.step[o]) == label.onset_step
        if kind.name == "job_hung":           # the steps stop after the onset
            assert len(table) == o + 1 < len(other)
            assert label.hang_t == pytest.approx(float(table.t[-1]), abs=0.01)
            continue
        assert not _same(table.cols[kind.signal][o:o + 1], other.cols[kind.signal][o:o + 1]), \
            (run.run_id, kind.signal)


def test_only_the_labelled_rank_is_changed_by_a_one_rank_fault(pairs):
    for run, twin in pairs:
        if run.label.rank is None:
            continue
        for rank, table in run.ranks.items():
            if rank != run.label.rank:
                for name, column in table.cols.items():
                    assert _same(column, twin.ranks[rank].cols[name]), (run.run_id, rank, name)


def test_onsets_are_early_or_late_as_labelled(pairs):
    for run, _ in pairs:
        label, every = run.label, run.shape.every
        if run.shape.logging == "dense" and label.timing == "early":
            assert 20 <= label.onset_step <= 110, run.run_id
        elif run.shape.logging == "dense":
            assert label.onset_step >= 1000, run.run_id
        elif label.timing == "early":
            assert 6 <= label.onset_record <= 20, run.run_id
        else:
            assert label.onset_record >= 9 and label.onset_step >= 9 * every, run.run_id
        if label.kind != "job_hung":            # a hung job logs nothing after its onset
            assert len(run.ranks[label.rank or 0]) > label.onset_record + 3, run.run_id


def test_every_fault_is_injected_early_and_late_in_dense_and_sparse_logs(pairs):
    seen = {(run.label.kind, run.label.timing, run.shape.logging == "dense") for run, _ in pairs}
    for name in faults2.KINDS:
        wanted = {("early", True), ("late", True)}
        if name != "job_hung":
            wanted |= {("early", False), ("late", False)}
        assert {(t, d) for k, t, d in seen if k == name} >= wanted, name


def test_labels_carry_the_issue_s_delay_targets(pairs):
    for run, _ in pairs:
        label = run.label
        expected = {"loss_nonfinite": 0, "grad_nonfinite": 0, "loss_spike": 0,
                    "updates_stalled": 20, "lr_zero": 20, "loss_scale_collapse": 20,
                    "data_starvation": 50, "throughput_drop": 100}
        if label.kind in expected:
            assert label.target == expected[label.kind]
        elif label.kind == "plateau":
            assert label.target == max(300, 0.1 * label.onset_step)
        elif label.kind == "periodic_spikes":
            assert label.target == 3 * label.period / run.shape.every
        assert label.unit == ("seconds" if label.kind == "job_hung" else
                              "steps" if run.shape.logging == "dense" else "records")


def test_periodic_spikes_recur_at_their_labelled_period(pairs):
    for run, twin in pairs:
        if run.label.kind != "periodic_spikes":
            continue
        loss, base = run.ranks[0].cols["loss"], twin.ranks[0].cols["loss"]
        changed = run.ranks[0].step[np.flatnonzero(loss != base)]
        assert changed[0] == run.label.onset_step
        assert set(np.diff(changed)) == {run.label.period}, run.run_id
        assert 5 <= run.label.period <= 200 or run.shape.logging != "dense"


def test_memory_grows_ten_percent_in_the_labelled_number_of_steps(pairs):
    for run, twin in pairs:
        if run.label.kind != "memory_growth":
            continue
        table, other = run.ranks[run.label.rank], twin.ranks[run.label.rank]
        grown = table.cols["mem_host_rss_bytes"] - other.cols["mem_host_rss_bytes"]
        end = np.searchsorted(table.step, run.label.onset_step + run.label.grow_steps - 1)
        level = np.median(other.cols["mem_host_rss_bytes"][max(0, end - 20):end + 1])
        assert grown[end] == pytest.approx(0.1 * level, rel=0.05), run.run_id


def _healthy_checks(run: Run) -> None:
    shape, facts = run.shape, run.facts
    lengths = {len(t) for t in run.ranks.values()}
    assert len(lengths) == 1
    for table in run.ranks.values():
        c, step = table.cols, table.step
        back = np.flatnonzero(np.diff(step) <= 0) + 1
        assert [int(r) for r in back] == [row for row, _ in run.restarts]
        assert (np.diff(table.t) > 0).all()
        assert np.isfinite(c["loss"]).all() and (c["loss"] > 0).all()
        assert np.isfinite(c["grad_norm"]).all() and (c["grad_norm"] > 0).all()
        # the loss stays near its trend (the noise model of the family)
        if shape.family == "nearzero":
            above = np.abs(table.trend - facts["level"])
            assert (c["loss"] <= table.trend + 7 * facts["sigma"] * above
                    + 20 * facts["level"]).all()
        elif shape.family == "noisy":
            ratio = np.log(c["loss"] / table.trend)
            assert (np.abs(ratio) <= 7 * facts["sigma"]).all()
        else:
            assert (np.abs(c["loss"] - table.trend) <= 7 * table.sd).all()
        # the learning rate is positive and at most its peak (a cosine to zero may end at 0)
        lr = c["lr"]
        assert (lr <= facts["lr_max"] * (1 + 1e-9)).all()
        assert (lr[:-1] > 0).all() and lr[-1] >= 0
        if "update_ratio" in c:
            seen = c["update_ratio"][table.recorded("update_ratio")]
            assert (seen[:-1] > 0).all()
        # the input pipeline waits more than 20 % only at start-up or in short slow shards
        share = c["data_wait_s"] / c["step_time_s"]
        busy = np.flatnonzero(share[1:] > 0.2) + 1
        if shape.logging == "dense":
            runs = np.split(busy, np.flatnonzero(np.diff(busy) > 1) + 1) if busy.size else []
            assert all(len(r) <= 10 for r in runs)
        # memory is flat 50 steps after each (re)start (within 1 %), device memory after step 1
        edges = [0, *back, len(table)]
        for lo, hi in zip(edges[:-1], edges[1:]):
            host = c["mem_host_rss_bytes"][lo:hi][step[lo:hi] > step[lo] + 50]
            if host.size:
                level = np.median(host)
                assert host.max() <= 1.01 * level and host.min() >= 0.99 * level
        assert np.ptp(c["mem_device_bytes"][1:]) <= 0.01 * facts["device"]
        if shape.precision == "fp16":
            overflow = c["overflow"]
            early = facts["early_overflows"]
            if shape.logging == "dense":
                assert overflow[:early].all() and overflow[early:].mean() < 0.02
            scale = c["loss_scale"] / facts["scale_unit"]
            assert scale.min() >= 2.0 ** 16 / 2 ** (early + 8)
        else:
            assert "overflow" not in c and "loss_scale" not in c
    clocks = np.stack([t.t for t in run.ranks.values()])
    assert np.ptp(clocks, axis=0).max() < 0.05          # synchronous ranks


def test_healthy_runs_are_healthy_by_construction(healthy):
    for run in healthy:
        _healthy_checks(run)


def test_healthy_runs_cover_every_family_logging_and_rank_layout(healthy):
    shapes = {(r.shape.family, r.shape.logging) for r in healthy}
    assert {f for f, _ in shapes} == {"llm", "exp", "noisy", "nearzero"}
    assert {g for _, g in shapes} == set(LOGGINGS)
    assert any(r.shape.world_size > 1 for r in healthy)
    assert any(r.restarts for r in healthy)
    levels = [float(np.median(t.cols["loss"][-50:])) for r in healthy for t in r.ranks.values()]
    assert min(levels) < 0.05 and max(t.cols["loss"][0] for r in healthy
                                      for t in r.ranks.values()) > 10


def test_the_near_zero_family_has_a_loss_of_two_hundredths_give_or_take_as_much():
    run = generate(Shape(seed=3, family="nearzero", steps=6000))
    tail = run.ranks[0].cols["loss"][-2000:]
    assert 0.005 <= float(np.mean(tail)) <= 0.06
    assert float(np.std(tail)) >= 0.5 * float(np.mean(tail))


def test_a_resumed_run_repeats_the_steps_after_its_checkpoint():
    run = generate(Shape(seed=9, family="llm", steps=4000, resumed=True))
    (row, t), = run.restarts
    steps = run.ranks[0].step
    assert steps[row] <= steps[row - 1] and steps[-1] == 4000
    assert run.ranks[0].t[row - 1] < t < run.ranks[0].t[row]
    assert not math.isnan(run.end_t)


def test_the_bench_replays_labelled_runs_through_the_engine_and_writes_its_figures(tmp_path):
    import bench_detection2

    out = tmp_path / "figures.json"
    code = bench_detection2.main(["--per-kind", "2", "--kinds", "loss_nonfinite", "job_hung",
                                  "--healthy-seeds", "3", "--scale", "0.1", "--json", str(out)])
    figures = json.loads(out.read_text())
    assert code == 0
    assert set(figures["rows"]) == {"loss_nonfinite", "job_hung"}
    assert [r["runs"] for r in figures["rows"].values()] == [2, 2]
    assert {r["kind"] for r in figures["runs"]} == {"loss_nonfinite", "job_hung"}
    assert figures["healthy_records"] == sum(
        r.records for r in faults2.healthy_suite(3, scale=0.1))
    assert {"false_per_10k", "false_by_alert", "false_by_group"} <= set(figures)


def _table(trend: np.ndarray, sd: np.ndarray) -> Table:
    steps = np.arange(1, trend.shape[0] + 1)
    return Table(steps, steps * 1.0, {"loss": trend.copy()}, trend=trend, sd=sd)


def test_the_oracle_separation_sums_the_plateau_s_gap_in_noise_sds_over_the_target():
    # a straight fall of 0.01 a step with noise 0.1: row o + k is 0.01 (k + 1) below the
    # level the plateau keeps (row o - 1), so z = 0.1 sqrt(sum_{k=1..rows+1} k^2)
    trend = 10.0 - 0.01 * np.arange(1000)
    table = _table(trend, np.full(1000, 0.1))
    k = np.arange(1, 302)
    assert faults2.oracle_z(table, 100, 300) == pytest.approx(0.1 * math.sqrt(np.sum(k ** 2)))
    # twice the noise halves it; the window is clipped at the end of the table
    noisy = _table(trend, np.full(1000, 0.2))
    assert faults2.oracle_z(noisy, 100, 300) == pytest.approx(
        faults2.oracle_z(table, 100, 300) / 2)
    assert faults2.oracle_z(table, 900, 300) == pytest.approx(
        0.1 * math.sqrt(np.sum(np.arange(1, 101) ** 2)))


def test_a_plateau_early_in_a_steep_curve_is_detectable_and_one_on_a_flat_tail_is_not():
    import bench_detection2

    steps = np.arange(1, 20001, dtype=float)
    trend = 2.0 + 8.0 * (1.0 + steps / 20.0) ** -0.5         # steep early, nearly flat late
    table = _table(trend, 0.01 * trend)
    early = faults2.oracle_z(table, 50, 300)
    late = faults2.oracle_z(table, 15000, 300)
    assert early > 100 and late < bench_detection2.ORACLE_Z < early
    assert faults2.oracle_z(table, 15000, 1500) > 10            # a longer target: separable
    assert faults2.oracle_z(_table(trend, 0.1 * trend), 50, 300) == pytest.approx(early / 10)


def test_plateau_labels_carry_the_oracle_separation_of_their_target_window(pairs):
    import bench_detection2

    seen = set()
    for run, twin in pairs:
        label = run.label
        if label.kind != "plateau":
            assert math.isnan(label.oracle_z), run.run_id
            continue
        # from the healthy twin's noise-free curve and noise, over the target in rows
        expected = faults2.oracle_z(twin.ranks[0], label.onset_record, int(label.target))
        assert label.oracle_z == pytest.approx(expected), run.run_id
        assert label.oracle_z > 0
        if label.timing == "early" and run.shape.logging == "dense":
            assert label.oracle_z >= bench_detection2.ORACLE_Z, run.run_id
        seen.add((label.timing, run.shape.logging == "dense"))
    assert ("early", True) in seen and ("late", True) in seen


def test_the_bench_judges_on_time_over_the_runs_an_oracle_can_separate():
    import bench_detection2

    runs = [{"run": f"r{i}", "oracle_z": z} for i, z in enumerate([50.0, 9.0, 4.0, 3.9, 1.0])]
    in_time = {id(runs[0]), id(runs[1]), id(runs[4])}      # r2 (z = 4) late, r3 late
    got = bench_detection2._oracle(runs, in_time)
    assert (got["detectable"], got["on_time_detectable_n"]) == (3, 2)
    assert got["on_time_detectable"] == pytest.approx(2 / 3)
    assert (got["beyond_oracle"], got["beyond_caught_on_time"]) == (1, 1)
    assert got["undetectable"] == ["r3", "r4"]
    assert not bench_detection2._oracle([{"run": "x", "oracle_z": None}], set())["oracle"]
