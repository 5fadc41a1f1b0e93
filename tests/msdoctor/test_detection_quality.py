"""Detection quality of the shipped rules on held-out labelled synthetic runs.

The generator and scorer are ``tests/bench/synthetic.py`` and
``tests/bench/bench_detection.py`` (run the latter for the full table on both seed
sets). Here: the held-out TEST seeds, one healthy seed set (about 150k steps) and 20
anomalous runs per shipped alert, against the issue's targets.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from msdoctor.core.batch import columnize  # noqa: E402

import bench_detection as bench  # noqa: E402
from synthetic import ANOMALIES, Spec, clean_specs, events, generate  # noqa: E402


def suite_part(alert: str) -> dict:
    """One independent share of the suite: the healthy runs (``alert`` empty), or the 20
    anomalous runs of ``alert`` (each run's seed depends on its alert, not on the others)."""
    if not alert:
        return bench.run_suite({"clean": bench.TEST["clean"][:1], "anomaly": ()}, per_type=20)
    return bench.run_suite({"clean": (), "anomaly": bench.TEST["anomaly"]}, per_type=20,
                           types=(alert,))


@pytest.fixture(scope="module")
def scored():
    """The held-out suite, its shares spread over a process per core (at most two)."""
    shares = ["", *ANOMALIES]
    with multiprocessing.get_context("fork").Pool(min(2, os.cpu_count() or 1)) as pool:
        parts = pool.map(suite_part, shares, chunksize=1)
    return bench.score({"clean": [o for part in parts for o in part["clean"]],
                        "anomaly": [o for part in parts for o in part["anomaly"]],
                        "rules": parts[0]["rules"]})


def test_the_healthy_runs_cover_at_least_100k_steps(scored):
    assert scored["healthy_steps"] >= 100_000
    assert sum(s.steps for s in clean_specs(bench.TEST["clean"][0])) >= 100_000


def test_every_anomaly_is_caught_in_at_least_95_percent_of_its_runs(scored):
    low = {a: r["recall"] for a, r in scored["rows"].items() if r["recall"] < 0.95}
    assert all(r["runs"] == 20 for r in scored["rows"].values())
    assert low == {}, bench.format_table(scored, "held-out seeds")


def test_healthy_runs_raise_at_most_one_false_alert_per_10k_steps_over_all_rules(scored):
    assert scored["false_per_10k"] <= 1.0, bench.format_table(scored, "held-out seeds")


def test_a_non_finite_loss_is_alerted_on_the_step_it_is_recorded(scored):
    row = scored["rows"]["LossNonFinite"]
    assert row["recall"] == 1.0 and row["max_delay"] == 0


def test_periodic_spikes_are_reported_within_three_periods(scored):
    row = scored["rows"]["LossSpikesPeriodic"]
    assert row["within_3_periods"] >= 0.95       # a spike lost in the noise costs a period
    assert row["max_delay_periods"] <= 4.1


def test_the_scorer_meets_every_target_it_checks(scored):
    assert bench.failures(scored) == []


def test_the_bench_builds_the_same_step_batches_as_columnize():
    run = generate(Spec(seed=5, steps=400, log_every=5, precision="fp16", world_size=2,
                        grad_accum=4, device=True, anomaly="LossNonFinite", t0=200))
    for rank in run.ranks:
        steps = [e for e in events(run, rank) if e["type"] == "step"]
        want = columnize(run.run_id, rank, steps)
        got = bench.batch_of(run, rank, 0, len(run.ranks[rank]["step"]))
        assert np.array_equal(got.steps, want.steps) and np.allclose(got.t, want.t)
        assert sorted(got.columns) == sorted(want.columns)
        for name in want.columns:
            a, b = got.series(name), want.series(name)
            assert np.array_equal(a[0], b[0]), name
            assert np.allclose(a[1], b[1], equal_nan=True), name
    assert math.isnan(run.ranks[run.label.rank]["loss"][run.ranks[0]["step"] == 200][0])
