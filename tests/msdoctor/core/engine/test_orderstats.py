"""Order statistics: the sort-free MAD equals the median of the sorted deviations, bit for bit."""
import numpy as np
import pytest

from msdoctor.core.engine.orderstats import row_mad, row_median, sorted_windows


def reference_mad(matrix: np.ndarray, cnt: np.ndarray, med: np.ndarray) -> np.ndarray:
    dev = np.abs(matrix - med[:, None])
    dev.sort(axis=1)
    return row_median(dev, cnt)


@pytest.mark.parametrize("seed", range(40))
def test_row_mad_is_exactly_the_median_of_the_sorted_deviations(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    kind = seed % 4
    if kind == 0:
        values = rng.normal(size=n)
    elif kind == 1:
        values = np.round(rng.normal(size=n) * 2) / 2          # many ties, MAD often 0
    elif kind == 2:
        values = rng.standard_cauchy(n) * 1e300                # huge values, overflowing sums
    else:
        values = np.full(n, 3.0)
        values[rng.random(n) < 0.2] = -1e-300
    width = int(rng.integers(1, 80))
    hi = np.sort(rng.integers(0, n + 1, size=int(rng.integers(1, 60))))
    lo = np.maximum(hi - rng.integers(0, width + 1, size=hi.shape[0]), 0)
    matrix, cnt = sorted_windows(values, lo, hi)
    with np.errstate(all="ignore"):
        med = row_median(matrix, cnt)
        got, expected = row_mad(matrix, cnt, med), reference_mad(matrix, cnt, med)
    np.testing.assert_array_equal(got, expected)
    assert np.isnan(got[cnt == 0]).all()


def test_a_constant_window_needs_no_sort_and_has_a_zero_mad():
    values = np.full(50, 8192.0)
    matrix, cnt = sorted_windows(values, np.array([0, 10]), np.array([20, 50]))
    med = row_median(matrix, cnt)
    assert med.tolist() == [8192.0, 8192.0]
    assert row_mad(matrix, cnt, med).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("seed", range(20))
def test_the_arithmetic_step_search_equals_searchsorted(seed):
    from msdoctor.core.engine.gathers import search_right

    rng = np.random.default_rng(seed)
    start, m = int(rng.integers(-5, 1000)), int(rng.integers(0, 300))
    consecutive = np.arange(start, start + m, dtype=np.int64)
    gappy = np.sort(rng.choice(np.arange(start, start + 3 * m + 1), size=m, replace=False))
    repeated = np.sort(np.concatenate((consecutive[: m // 2], consecutive[: m // 2])))
    queries = rng.integers(start - 400, start + 3 * m + 400, size=500)
    for steps in (consecutive, gappy.astype(np.int64), repeated):
        np.testing.assert_array_equal(search_right(steps, queries),
                                      np.searchsorted(steps, queries, side="right"))
