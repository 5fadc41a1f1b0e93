"""Every window function against a naive per-row reference, over many batch cuts."""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Tuple

import numpy as np
import pytest

from msdoctor.core.engine.orderstats import stride
from msdoctor.core.engine.periods import SPIKE_Z, regular_period
from msdoctor.core.engine.sequences import ewma_points
from tests.msdoctor.core.engine.helpers import binned_reference, run_expr

SIZES = ([10_000], [1], [7], [3, 50, 1, 100], [64])


def make_series(seed: int, n: int = 400, sparse: bool = False, holes: bool = True):
    rng = np.random.default_rng(seed)
    gaps = rng.choice([1, 1, 1, 2, 5, 10], size=n) if sparse else np.ones(n, dtype=np.int64)
    steps = np.cumsum(gaps).astype(np.int64) + 100
    values: List[Optional[float]] = list(rng.normal(3.0, 1.0, size=n).round(2))
    for i in range(n):
        r = rng.random()
        if holes and r < 0.15:
            values[i] = None
        elif holes and r < 0.18:
            values[i] = math.nan
        elif holes and r < 0.19:
            values[i] = math.inf
    return steps, values


def points(steps, values, i) -> Tuple[np.ndarray, np.ndarray]:
    """Finite recorded points at rows <= i."""
    s = [steps[j] for j in range(i + 1) if values[j] is not None and math.isfinite(values[j])]
    v = [values[j] for j in range(i + 1) if values[j] is not None and math.isfinite(values[j])]
    return np.asarray(s, dtype=np.int64), np.asarray(v, dtype=np.float64)


def in_window(s, v, lo_excl, hi_incl):
    sel = (s > lo_excl) & (s <= hi_incl)
    return v[sel]


def naive(steps, values, fn: Callable[[np.ndarray, np.ndarray, int, int], float]) -> np.ndarray:
    return np.array([fn(*points(steps, values, i), int(steps[i]), i) for i in range(len(steps))])


def _last_points(s, v, lo_excl, hi_incl, m):
    """The points of (lo_excl, hi_incl], or the last m points up to hi_incl if more."""
    w = in_window(s, v, lo_excl, hi_incl)
    up_to = v[s <= hi_incl]
    return w if w.size >= m else up_to[-m:]


def _quantile(w, q):
    return float(np.quantile(w, q)) if w.size else math.nan


def _median(w):
    return float(np.median(w)) if w.size else math.nan


REFERENCES = {
    "mean(x, 20)": lambda s, v, q, i: float(np.mean(in_window(s, v, q - 20, q))) if in_window(s, v, q - 20, q).size else math.nan,
    "sum(x, 20)": lambda s, v, q, i: float(np.sum(in_window(s, v, q - 20, q))),
    "count(x, 20)": lambda s, v, q, i: float(in_window(s, v, q - 20, q).size),
    "std(x, 20)": lambda s, v, q, i: float(np.std(in_window(s, v, q - 20, q))) if in_window(s, v, q - 20, q).size >= 2 else math.nan,
    "min(x, 20)": lambda s, v, q, i: float(np.min(in_window(s, v, q - 20, q))) if in_window(s, v, q - 20, q).size else math.nan,
    "max(x, 33)": lambda s, v, q, i: float(np.max(in_window(s, v, q - 33, q))) if in_window(s, v, q - 33, q).size else math.nan,
    "median(x, 15)": lambda s, v, q, i: _median(in_window(s, v, q - 15, q)),
    "median(x, 100)": lambda s, v, q, i: _median(in_window(s, v, (q // stride(100)) * stride(100) - 100,
                                                           (q // stride(100)) * stride(100))),
    "median(x, 15, 8)": lambda s, v, q, i: _median(_last_points(s, v, q - 15, q, 8)),
    "median(x, 100, 12)": lambda s, v, q, i: _median(_last_points(s, v, (q // stride(100)) * stride(100) - 100,
                                                                 (q // stride(100)) * stride(100), 12)),
    "quantile(x, 15, 0.9)": lambda s, v, q, i: _quantile(in_window(s, v, q - 15, q), 0.9),
    "quantile(x, 100, 0.25, 12)": lambda s, v, q, i: _quantile(_last_points(
        s, v, (q // stride(100)) * stride(100) - 100, (q // stride(100)) * stride(100), 12), 0.25),
    "delta(x, 10)": lambda s, v, q, i: (v[-1] - v[s <= q - 10][-1]) if v.size and (s <= q - 10).any() else math.nan,
    "mean(x, 20, 8)": lambda s, v, q, i: _mean(_last_points(s, v, q - 20, q, 8)),
    "sum(x, 10, 5)": lambda s, v, q, i: float(np.sum(_last_points(s, v, q - 10, q, 5))),
    "count(x, 10, 5)": lambda s, v, q, i: float(_last_points(s, v, q - 10, q, 5).size),
    "std(x, 12, 6)": lambda s, v, q, i: _std(_last_points(s, v, q - 12, q, 6)),
    "min(x, 10, 4)": lambda s, v, q, i: _extreme(_last_points(s, v, q - 10, q, 4), np.min),
    "max(x, 10, 5)": lambda s, v, q, i: _extreme(_last_points(s, v, q - 10, q, 5), np.max),
    "slope(x, 30, 10)": lambda s, v, q, i: _slope_of(*_last_steps_points(s, v, q - 30, q, 10)),
    "prev(x, 1)": lambda s, v, q, i: float(v[-2]) if v.size >= 2 else math.nan,
    "prev(x, 3)": lambda s, v, q, i: float(v[-4]) if v.size >= 4 else math.nan,
    "slope(x, 30)": lambda s, v, q, i: _slope(s, v, q, 30),
    "rel_change(x, 25)": lambda s, v, q, i: _rel(s, v, q, 25),
}


def _slope(s, v, q, n):
    sel = (s > q - n) & (s <= q)
    return _slope_of(s[sel], v[sel])


def _slope_of(s, v):
    if s.size < 2:
        return math.nan
    x, y = s.astype(float), v
    den = len(x) * (x * x).sum() - x.sum() ** 2
    return ((len(x) * (x * y).sum() - x.sum() * y.sum()) / den) if den > 0 else math.nan


def _last_steps_points(s, v, lo_excl, hi_incl, m):
    """Steps and values of (lo_excl, hi_incl], or of the last m points up to hi_incl if more."""
    sel = (s > lo_excl) & (s <= hi_incl)
    if sel.sum() >= m:
        return s[sel], v[sel]
    up_to = s <= hi_incl
    return s[up_to][-m:], v[up_to][-m:]


def _mean(w):
    return float(np.mean(w)) if w.size else math.nan


def _std(w):
    return float(np.std(w)) if w.size >= 2 else math.nan


def _extreme(w, fn):
    return float(fn(w)) if w.size else math.nan


def _rel(s, v, q, n):
    now, prev = in_window(s, v, q - n, q), in_window(s, v, q - 2 * n, q - n)
    if not now.size or not prev.size or not s.size or s[0] > q - 2 * n + 1:
        return math.nan
    return (now.mean() - prev.mean()) / abs(prev.mean())


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("expr", sorted(REFERENCES))
def test_a_window_function_matches_the_naive_reference_for_every_batch_cut(expr, sparse):
    steps, values = make_series(seed=len(expr) + sparse, sparse=sparse)
    expected = naive(steps, values, REFERENCES[expr])
    for sizes in SIZES:
        got = run_expr(expr.replace("(x,", "(loss,"), steps, {"loss": values}, sizes)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, equal_nan=True,
                                   err_msg=f"{expr} with batch sizes {sizes}")


def _locf(per_row: List[Optional[float]], initial: float) -> np.ndarray:
    out, last = [], initial
    for v in per_row:
        if v is not None:
            last = v
        out.append(last)
    return np.asarray(out, dtype=np.float64)


@pytest.mark.parametrize("n,m", [(40, 0), (40, 12), (20, 8), (100, 15)])
@pytest.mark.parametrize("sparse", [False, True])
def test_robust_z_matches_the_reference_and_is_nan_until_the_window_is_covered(sparse, n, m):
    """Without m it needs a full window of history; with m, m points of the window or of
    the last m points (whichever are more) are enough."""
    steps, values = make_series(seed=11, sparse=sparse)
    s_ = stride(n)
    per_row: List[Optional[float]] = []
    first = None
    for i, q in enumerate(steps):
        x = values[i]
        if x is None:
            per_row.append(None)
            continue
        S, V = points(steps, values, i - 1) if i else (np.zeros(0, np.int64), np.zeros(0))
        if first is None and S.size:
            first = S[0]
        a = ((q - 1) // s_) * s_
        w = _last_points(S, V, a - n, a, m)
        f = S[0] if S.size else math.inf
        covered = f <= a - n + 1 or (m > 0 and w.size >= m)
        if w.size < 3 or not covered or math.isnan(x):
            per_row.append(math.nan)
            continue
        med = np.median(w)
        mad = np.median(np.abs(w - med))
        scale = 1.4826 * mad if mad > 0 else 1.2533 * np.mean(np.abs(w - med))
        per_row.append((x - med) / scale if scale > 0 else (0.0 if x == med else math.copysign(math.inf, x - med)))
    expected = _locf(per_row, math.nan)
    for sizes in SIZES:
        expr = f"robust_z(loss, {n}, {m})" if m else f"robust_z(loss, {n})"
        got = run_expr(expr, steps, {"loss": values}, sizes)
        np.testing.assert_allclose(got, expected, rtol=1e-9, equal_nan=True, err_msg=str(sizes))


def test_robust_z_with_a_long_window_uses_anchors_that_do_not_depend_on_batching():
    steps, values = make_series(seed=5, n=900, holes=False)
    results = [run_expr("robust_z(loss, 200)", steps, {"loss": values}, sizes) for sizes in SIZES]
    for got in results[1:]:
        np.testing.assert_allclose(got, results[0], rtol=1e-12, equal_nan=True)
    assert np.isnan(results[0][:200]).all() and np.isfinite(results[0][300:]).all()


def test_ewma_matches_the_recurrence_for_several_alphas_and_cuts():
    steps, values = make_series(seed=3, n=3000)
    for alpha in (0.001, 0.05, 0.5, 0.97, 1.0):
        per_row, e = [], math.nan
        for v in values:
            if v is not None and math.isfinite(v):
                e = v if math.isnan(e) else alpha * v + (1 - alpha) * e
                per_row.append(e)
            else:
                per_row.append(None)
        expected = _locf(per_row, math.nan)
        for sizes in SIZES:
            got = run_expr(f"ewma(loss, {alpha})", steps, {"loss": values}, sizes)
            np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12, equal_nan=True,
                                       err_msg=f"alpha {alpha} sizes {sizes}")


def test_ewma_points_handles_long_runs_without_overflow():
    v = np.full(100_000, 2.0)
    assert np.allclose(ewma_points(v, 0.9, 1.0)[-5:], 2.0)


def test_steps_since_change_and_repeat_count_follow_the_recorded_values():
    steps = [1, 2, 3, 5, 8, 9, 10, 11]
    loss = [1.0, 1.0, None, 2.0, 2.0, 2.0, math.nan, math.nan]
    for sizes in SIZES:
        since = run_expr("steps_since_change(loss)", steps, {"loss": loss}, sizes)
        assert since.tolist() == [0, 1, 2, 0, 3, 4, 0, 1]
        reps = run_expr("repeat_count(loss)", steps, {"loss": loss}, sizes)
        assert reps.tolist() == [1, 2, 2, 1, 2, 3, 1, 1]


def test_nonfinite_carries_the_last_recorded_point_and_is_zero_before_any():
    steps = [1, 2, 3, 4, 5]
    loss = [None, 1.0, math.inf, None, 2.0]
    for sizes in SIZES:
        assert run_expr("nonfinite(loss)", steps, {"loss": loss}, sizes).tolist() == [0, 0, 1, 1, 0]


def test_first_max_freezes_after_n_finite_points():
    steps = list(range(1, 9))
    loss = [1.0, None, 5.0, math.nan, 2.0, 9.0, 1.0, 20.0]
    for sizes in SIZES:
        got = run_expr("first_max(loss, 3)", steps, {"loss": loss}, sizes)
        assert got.tolist() == [1, 1, 5, 5, 5, 5, 5, 5]


@pytest.mark.parametrize("sparse", [False, True])
def test_jump_is_the_loss_over_the_highest_of_the_records_before_for_every_batch_cut(sparse):
    steps, values = make_series(seed=5, sparse=sparse, holes=False)
    missing = [v if i % 7 else None for i, v in enumerate(values)]      # rows not recorded
    kept = [v for v in missing if v is not None]
    expected_points = [math.nan] + [kept[i] / max(kept[max(0, i - 5):i])
                                    for i in range(1, len(kept))]
    expected = _locf([expected_points.pop(0) if v is not None else None for v in missing],
                     math.nan)
    for sizes in SIZES:
        got = run_expr("jump(loss, 5)", steps, {"loss": missing}, sizes)
        np.testing.assert_allclose(got, expected, rtol=1e-12, equal_nan=True,
                                   err_msg=f"batch sizes {sizes}")


def test_jump_is_scale_free_and_counts_records_not_steps():
    loss = [4.0, 3.0, 2.0, 1.0, 1.0, 1.0, 3.0]
    for scale, every in ((1.0, 1), (1e-3, 10), (1e3, 100)):
        steps = [every * (i + 1) for i in range(len(loss))]
        got = run_expr("jump(loss, 3)", steps, {"loss": [scale * v for v in loss]}, [3])
        np.testing.assert_allclose(got, [math.nan, 0.75, 0.5, 0.25, 1 / 3, 0.5, 3.0])


def test_jump_of_a_recorded_nan_is_nan():
    got = run_expr("jump(loss, 2)", [1, 2, 3, 4], {"loss": [1.0, 2.0, math.nan, 4.0]}, [10])
    np.testing.assert_allclose(got, [math.nan, 2.0, math.nan, 2.0])


def test_spike_period_reports_regular_spikes_and_zero_for_irregular_ones():
    rng = np.random.default_rng(0)
    n = 3000
    steps = np.arange(1, n + 1)
    base = 3.0 + 0.01 * rng.standard_normal(n)
    regular = base.copy()
    regular[500::300] += 2.0
    irregular = base.copy()
    irregular[[500, 610, 1000, 1090, 1800]] += 2.0
    for sizes in ([10_000], [77]):
        got = run_expr("spike_period(loss, 2000)", steps, {"loss": list(regular)}, sizes)
        # spikes at steps 501, 801, 1101: the period is known from the third on
        assert got[1099] == 0.0 and got[1100] == 300.0 and got[-1] == 300.0
        assert run_expr("spike_period(loss, 2000)", steps, {"loss": list(irregular)}, sizes).max() == 0.0


def test_spike_period_with_a_minimum_of_points_finds_short_periods_from_the_first_steps():
    rng = np.random.default_rng(1)
    n = 120
    steps = np.arange(1, n + 1)
    loss = 3.0 + 0.01 * rng.standard_normal(n)
    loss[30::5] += 1.0                              # spikes at steps 31, 36, 41, ...
    for sizes in ([10_000], [1], [7]):
        without = run_expr("spike_period(loss, 2000)", steps, {"loss": list(loss)}, sizes)
        got = run_expr("spike_period(loss, 2000, 10)", steps, {"loss": list(loss)}, sizes)
        assert without.max() == 0.0                 # robust_z(x, 200) needs 200 steps
        assert got[39] == 0.0 and got[40] == 5.0, sizes


def test_spike_period_needs_a_fourth_spike_when_a_lone_one_came_in_the_stretch_before():
    rng = np.random.default_rng(2)
    n = 700
    steps = np.arange(1, n + 1)
    quiet = 3.0 + 0.01 * rng.standard_normal(n)
    quiet[[399, 459, 519, 579]] += 1.0              # spikes at 400, 460, 520, 580
    noisy = quiet.copy()
    noisy[99] += 1.0                                # and a lone one at 100: the loss spikes anyway
    for sizes in ([10_000], [1], [7]):
        got = run_expr("spike_period(loss, 200, 10)", steps, {"loss": list(quiet)}, sizes)
        assert got[518] == 0.0 and got[519] == 60.0, sizes          # the third spike
        got = run_expr("spike_period(loss, 200, 10)", steps, {"loss": list(noisy)}, sizes)
        assert got[519] == 0.0 and got[578] == 0.0 and got[579] == 60.0, sizes   # the fourth


def test_regular_period_tolerates_one_missed_spike():
    assert regular_period(np.array([100, 400, 1000, 1300])) == 300.0
    assert regular_period(np.array([100, 400, 650])) == 0.0
    assert SPIKE_Z == 6.0


def test_regular_period_finds_four_exactly_periodic_spikes_among_other_onsets():
    # periodic spikes at 3848 + 166 k, noise onsets at 4050, 4059 and 4280 between them
    assert regular_period(np.array([3848, 4014, 4050, 4059, 4180, 4280, 4346])) == 166.0
    assert regular_period(np.array([3848, 4014, 4050, 4059, 4180, 4280])) == 0.0   # three
    assert regular_period(np.array([3848, 4014, 4050, 4059, 4181, 4280, 4346])) == 166.0
    assert regular_period(np.array([3848, 4014, 4050, 4059, 4184, 4280, 4346])) == 0.0
    assert regular_period(np.array([501, 611, 1001, 1091, 1801])) == 0.0
    # onsets every ~10 steps (a loss logged with 3 digits): 50-step chains come by chance
    busy = np.array([15586, 15636, 15642, 15652, 15662, 15682, 15686, 15720, 15734])
    assert regular_period(busy) == 0.0


def test_a_chain_in_a_window_busy_with_onsets_is_no_period():
    # the same log later: a chain 16002, 16068, 16138, 16206 with only four onsets between its
    # ends, but twenty onsets in the window: a slot is filled by chance one time in four there
    busy = np.array([15720, 15784, 15788, 15792, 15822, 15836, 15840, 15864, 15888, 15952, 15960,
                     15984, 16002, 16006, 16068, 16092, 16138, 16142, 16196, 16206])
    assert regular_period(busy) == 0.0
    assert regular_period(busy[12:]) == 68.0        # the chain's span alone is sparse enough


def test_a_step_number_going_backwards_restarts_the_windows():
    steps = [1, 2, 3, 4, 2, 3]
    loss = [1.0, 2.0, 3.0, 4.0, 10.0, 20.0]
    for sizes in SIZES:
        got = run_expr("sum(loss, 100)", steps, {"loss": loss}, sizes)
        assert got.tolist()[:4] == [1, 3, 6, 10]


def _episodes_reference(steps, values, threshold: float, n: int) -> np.ndarray:
    """episodes(loss > threshold, n) row by row: true points 3+ steps after the last true one."""
    out, starts, last_true = [], [], None
    for q, x in zip(steps, values):
        if x is not None and x > threshold:            # inf > t is true, nan > t is not
            if last_true is None or q - last_true >= 3:
                starts.append(q)
            last_true = q
        out.append(float(sum(1 for s in starts if q - n < s <= q)))
    return np.asarray(out)


@pytest.mark.parametrize("sparse", [False, True])
def test_episodes_counts_separate_bursts_of_a_condition_for_every_batch_cut(sparse):
    steps, values = make_series(seed=23, sparse=sparse)
    expected = _episodes_reference(steps, values, 4.0, 30)
    assert expected.max() >= 3                          # the series really has several bursts
    for sizes in SIZES:
        got = run_expr("episodes(loss > 4, 30)", steps, {"loss": values}, sizes)
        np.testing.assert_array_equal(got, expected, err_msg=f"batch sizes {sizes}")


def test_adjacent_true_points_are_one_episode_and_old_episodes_leave_the_window():
    steps = list(range(1, 41))
    flags = [0.0] * 40
    for s in (5, 6, 7, 12, 14, 20):                     # 5-7 one burst; 12 and 14 (gap 2) one
        flags[s - 1] = 1.0
    for sizes in ([100], [1], [3, 4]):
        got = run_expr("episodes(loss, 10)", steps, {"loss": flags}, sizes)
        assert got[4:8].tolist() == [1, 1, 1, 1]        # steps 5-8: the burst counted once
        assert got[11] == 2 and got[13] == 2            # steps 12, 14: bursts from 5 and 12
        assert got[14] == 1                             # step 15: the burst at 5 has left (5, 15]
        assert got[19] == 2                             # step 20: bursts from 12 and 20
        assert got[39] == 0                             # step 40: none in (30, 40]


def _powerlaw_miss_reference(steps, values, f: float, edge: bool = False) -> np.ndarray:
    """Per row: the fit of the 24 closed log-step bins before the row's bin, with np.polyfit;
    ``edge``: the fall counted from where the recent bins begin (``powerlaw_stall``)."""
    w = math.log1p(f) / 8

    def fit(before, newest):
        hist = np.array([(u, y) for u, y, k in before if newest - 24 < k <= newest - 8])
        rec = np.array([(u, y) for u, y, k in before if k > newest - 8])
        if len(hist) < 6 or len(rec) < 3 or np.ptp(hist[:, 0]) == 0:
            return math.nan
        slope, icpt = np.polyfit(hist[:, 0], hist[:, 1], 1)
        res = hist[:, 1] - (icpt + slope * hist[:, 0])
        var = max((res ** 2).sum() / max(len(hist) - 2, 1), 1e-18)
        uh, ur = hist[:, 0].mean(), rec[:, 0].mean()
        suu = ((hist[:, 0] - uh) ** 2).sum()
        excess = rec[:, 1].mean() - (icpt + slope * ur)
        fall = -slope * (ur - ((newest - 7) * w if edge else uh))
        se = math.sqrt(var * (1 / len(rec) + 1 / len(hist) + (ur - uh) ** 2 / suu))
        ok = fall > 0 and -slope >= 4 * math.sqrt(var / suu) and excess >= 4 * se
        return excess / fall if ok else 0.0

    return binned_reference(steps, values, w, fit)


@pytest.mark.parametrize("sparse", [False, True])
def test_powerlaw_miss_matches_a_polyfit_reference_for_every_batch_cut(sparse):
    rng = np.random.default_rng(3)
    steps, _ = make_series(seed=4, n=300, sparse=sparse, holes=False)
    steps = steps - 99                                   # from step 1
    loss = 6.0 * steps.astype(float) ** -0.3 * np.exp(0.01 * rng.standard_normal(steps.shape[0]))
    stop = steps.shape[0] // 3
    loss[stop:] = loss[stop - 1]                         # stops following its curve
    values: List[Optional[float]] = list(loss)
    values[7] = None
    values[20] = math.nan
    expected = _powerlaw_miss_reference(steps, values, 1.0)
    for sizes in SIZES:
        got = run_expr("powerlaw_miss(loss, 1)", steps, {"loss": values}, sizes)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9, equal_nan=True,
                                   err_msg=str(sizes))
    assert np.nanmax(expected[stop:]) > 0.5 and np.nanmax(expected[:stop]) < 0.5


@pytest.mark.parametrize("sparse", [False, True])
def test_powerlaw_stall_matches_the_reference_counting_the_fall_from_the_recent_start(sparse):
    rng = np.random.default_rng(5)
    steps, _ = make_series(seed=6, n=300, sparse=sparse, holes=False)
    steps = steps - 99
    loss = 6.0 * steps.astype(float) ** -0.3 * np.exp(0.01 * rng.standard_normal(steps.shape[0]))
    stop = steps.shape[0] // 2
    loss[stop:] = loss[stop - 1]
    expected = _powerlaw_miss_reference(steps, list(loss), 0.2, edge=True)
    for sizes in SIZES:
        got = run_expr("powerlaw_stall(loss, 0.2)", steps, {"loss": list(loss)}, sizes)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9, equal_nan=True,
                                   err_msg=str(sizes))
    assert np.nanmax(expected[stop:]) > 1.2 and np.nanmax(expected[:stop]) < 0.5


def test_powerlaw_stall_is_near_one_on_a_loss_that_stays_where_its_history_ended():
    steps = np.arange(1, 3001)
    loss = 10.0 * steps.astype(float) ** -0.3
    loss[2000:] = loss[1999]
    got = run_expr("powerlaw_stall(loss, 0.2)", steps, {"loss": list(loss)}, [500])
    miss = run_expr("powerlaw_miss(loss, 0.2)", steps, {"loss": list(loss)}, [500])
    assert 0.8 < got[2400] < 1.2 and miss[2400] < 0.5     # the recent window: (2500, 3000]
    assert np.nanmax(got[:2000]) < 1e-6


def test_powerlaw_miss_is_zero_on_a_power_law_that_merely_slows_down():
    steps = np.arange(1, 3001)
    loss = 1.5 + 9.0 * (1 + steps / 20.0) ** -0.5      # falls ever more slowly, to a floor
    got = run_expr("powerlaw_miss(loss, 1)", steps, {"loss": list(loss)}, [500])
    assert np.nanmax(got) < 0.5
