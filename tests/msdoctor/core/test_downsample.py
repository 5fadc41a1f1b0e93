"""Min/max downsampling keeps spikes and NaNs, and never returns more than asked."""
import numpy as np
import pytest

from msdoctor.core.downsample import minmax


def series(n):
    steps = np.arange(1, n + 1, dtype=np.int64)
    return steps, np.linspace(5.0, 1.0, n)


def test_a_short_series_comes_back_unchanged():
    steps, values = series(10)
    s, v = minmax(steps, values, 10)
    assert s is steps and v is values


@pytest.mark.parametrize("n, k", [(1000, 100), (1001, 7), (5000, 2), (97, 50), (10_000, 1)])
def test_at_most_max_points_come_back_in_step_order(n, k):
    s, v = minmax(*series(n), k)
    assert 1 <= len(s) <= k and np.all(np.diff(s) > 0)


def test_a_single_spike_and_a_single_nan_survive_heavy_downsampling():
    steps, values = series(10_000)
    values[4321] = 99.0
    values[7777] = np.nan
    s, v = minmax(steps, values, 20)
    assert 99.0 in v and 4322 in s
    assert np.isnan(v).sum() == 1 and 7778 in s
    assert v[0] == 5.0 and v[-1] == pytest.approx(1.0, abs=0.01)


def test_infinities_are_kept_and_all_nan_buckets_are_represented():
    steps = np.arange(100)
    values = np.full(100, np.nan)
    values[:50] = 1.0
    values[10] = np.inf
    s, v = minmax(steps, values, 10)
    assert np.isinf(v).any() and np.isnan(v).any()


def test_max_points_below_one_is_refused():
    with pytest.raises(ValueError, match="max_points must be >= 1, got 0"):
        minmax(*series(5), 0)
