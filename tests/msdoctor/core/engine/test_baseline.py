"""``baseline(x, warmup, n[, m])``: a frozen median of the first steps, over many batch cuts."""
from __future__ import annotations

import math
from typing import List

import numpy as np
import pytest

from tests.msdoctor.core.engine.helpers import run_expr
from tests.msdoctor.core.engine.test_windows import SIZES, make_series, points


def test_baseline_is_nan_until_its_window_passed_then_frozen():
    steps = list(range(10, 30))
    tps = [float(i) for i in range(20)]
    for sizes in SIZES:
        got = run_expr("baseline(tokens_per_s, 5, 4)", steps, {"tokens_per_s": tps}, sizes)
        # first step 10: window [15, 19), values 5..8 -> median 6.5 from step 18 on
        assert np.isnan(got[:8]).all()
        assert got[8:].tolist() == [6.5] * 12


def baseline_reference(steps, values, warmup: int, n: int, m: int) -> List[float]:
    """``baseline(x, warmup, n, m)`` row by row: the median of the finite points from the
    first step + warmup on, through the window's end and on until there are m of them,
    from the step where that window closed."""
    start = steps[0] + warmup
    end = start + n - 1
    s, v = points(steps, values, len(steps) - 1)
    pick = (s >= start) & (s <= end)
    beyond = np.flatnonzero((s > end))
    need = m - int(pick.sum())
    closed = end
    if need > 0:
        if beyond.shape[0] < need:
            return [math.nan] * len(steps)
        pick[beyond[:need]] = True
        closed = int(s[beyond[need - 1]])
    value = float(np.median(v[pick]))
    return [value if q >= closed and steps[-1] >= end else math.nan for q in steps]


@pytest.mark.parametrize("seed", range(6))
def test_baseline_with_fewest_points_reaches_past_its_window_in_a_sparse_log(seed):
    steps, values = make_series(seed, n=120, sparse=True)
    for warmup, n, m in ((3, 15, 6), (0, 40, 3), (10, 5, 12)):
        want = baseline_reference(steps, values, warmup, n, m)
        for sizes in SIZES:
            got = run_expr(f"baseline(loss, {warmup}, {n}, {m})", steps, {"loss": values}, sizes)
            np.testing.assert_array_equal(got, want)


def test_baseline_with_fewest_points_closes_at_its_window_in_a_dense_log():
    steps = list(range(10, 60))
    tps = [float(i) for i in range(50)]
    for sizes in SIZES:
        with_m = run_expr("baseline(tokens_per_s, 5, 4, 3)", steps, {"tokens_per_s": tps}, sizes)
        without = run_expr("baseline(tokens_per_s, 5, 4)", steps, {"tokens_per_s": tps}, sizes)
        np.testing.assert_array_equal(with_m, without)


def test_baseline_of_every_tenth_step_waits_for_its_fewest_points():
    steps = [10 * (i + 1) for i in range(12)]
    tps = [0.47, 0.54, 0.53, 0.55, 0.54, 0.52, 0.56, 0.53, 0.54, 0.55, 0.54, 0.53]
    for sizes in SIZES:
        one = run_expr("baseline(step_time_s, 3, 15)", steps, {"step_time_s": tps}, sizes)
        five = run_expr("baseline(step_time_s, 3, 15, 5)", steps, {"step_time_s": tps}, sizes)
        # steps 13..27 hold one record (step 20); with 5 points the window runs to step 60
        assert np.isnan(one[:2]).all() and one[2:].tolist() == [0.54] * 10
        assert np.isnan(five[:5]).all() and five[5:].tolist() == [0.54] * 7
