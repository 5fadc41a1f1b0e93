"""The sort-free order statistics give the values of a sort of each window, bit for bit."""
import numpy as np
import pytest

from msdoctor.core.engine import orderstats, selection
from msdoctor.core.engine.orderstats import row_mad, row_median, row_quantile, sorted_windows
from msdoctor.core.engine.selection import Selection, Sliding, pays, rank_filter, sorted_rows
from tests.msdoctor.core.engine.helpers import run_expr
from tests.msdoctor.core.engine.test_windows import REFERENCES, make_series


def random_values(rng: np.random.Generator, n: int, kind: int) -> np.ndarray:
    if kind == 0:
        return rng.normal(size=n)
    if kind == 1:
        return np.round(rng.normal(size=n) * 2) / 2                 # many ties
    if kind == 2:
        return rng.standard_cauchy(n) * 1e300                       # huge values
    if kind == 3:
        values = np.full(n, 3.0)
        values[rng.random(n) < 0.2] = -1e-300
        return values
    return rng.choice([0.0, 1.0, -2.5, 1e-308, -1e308], size=n)   # a few values, subnormal


def random_windows(rng: np.random.Generator, n: int, width: int):
    hi = np.sort(rng.integers(0, n + 1, size=int(rng.integers(1, 300))))
    lo = np.maximum(hi - rng.integers(0, width + 1, size=hi.shape[0]), 0)
    return lo, hi


def reference_sorted(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    width = int((hi - lo).max()) if lo.shape[0] else 0
    matrix = np.full((lo.shape[0], width), np.inf)
    for row, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        matrix[row, :b - a] = np.sort(values[a:b], kind="stable")   # equal values keep their order
    return matrix


@pytest.mark.parametrize("seed", range(25))
def test_the_kth_smallest_of_every_window_is_the_sorted_windows_kth_value(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    values = random_values(rng, n, seed % 5)
    lo, hi = random_windows(rng, n, int(rng.integers(1, 600)))
    expected = reference_sorted(values, lo, hi)
    selection = Selection(values)
    cnt = hi - lo
    rows = np.flatnonzero(cnt > 0)
    k = (rng.random(rows.shape[0]) * cnt[rows]).astype(np.int64)
    np.testing.assert_array_equal(selection.kth(lo[rows], hi[rows], k), expected[rows, k])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(selection.median(lo, hi), row_median(expected, cnt))
        for q in (0.0, 0.01, 0.25, 0.9, 1.0):
            np.testing.assert_array_equal(selection.quantile(lo, hi, q),
                                          row_quantile(expected, cnt, q))


@pytest.mark.parametrize("seed", range(15))
def test_windows_sorted_by_rank_are_the_windows_sorted_by_value(seed, monkeypatch):
    monkeypatch.setattr(selection, "ranks_pay", lambda *a: True)
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 4000))
    values = random_values(rng, n, seed % 5)
    lo, hi = random_windows(rng, n, int(rng.integers(selection.RANK_WIDTH, 700)))
    matrix, cnt = sorted_windows(values, lo, hi)
    np.testing.assert_array_equal(matrix, reference_sorted(values, lo, hi))
    np.testing.assert_array_equal(cnt, hi - lo)


def test_a_batch_too_large_for_16_bit_ranks_is_sorted_as_32_bit_ranks(monkeypatch):
    monkeypatch.setattr(selection, "ranks_pay", lambda *a: True)
    rng = np.random.default_rng(7)
    values = np.round(rng.normal(size=40_000), 1)
    values[::7] *= -0.0                         # equal values of other bits, in their order
    lo = np.arange(0, 40_000 - 100, 97)
    rows, _ = sorted_rows(values, lo, lo + 100)
    assert rows.index.dtype == np.int32
    np.testing.assert_array_equal(rows.dense(), reference_sorted(values, lo, lo + 100))
    np.testing.assert_array_equal(np.signbit(rows.dense()),
                                  np.signbit(reference_sorted(values, lo, lo + 100)))


def test_ranking_pays_for_many_windows_over_their_points_only():
    assert selection.ranks_pay(10_000, 10_000 * 50, 50)   # a replay batch, a window every step
    assert selection.ranks_pay(10_000, 1_500 * 200, 200)  # anchors every 7 steps
    assert not selection.ranks_pay(10_000, 30 * 200, 200)  # the odd windows of other widths
    assert not selection.ranks_pay(300_000, 1_024 * 50, 50)  # a live poll over long carries


def test_few_windows_over_many_points_are_sorted_by_value():
    rng = np.random.default_rng(8)
    values = rng.normal(size=300_000)
    lo, hi = np.array([0, 299_900]), np.array([100, 300_000])
    rows, _ = sorted_rows(values, lo, hi)
    assert rows.table is None                   # no ranking of 300k points for 200 cells
    np.testing.assert_array_equal(rows.dense(), reference_sorted(values, lo, hi))


@pytest.mark.parametrize("width", [8, 16, 50, 256, 257, 600])
def test_rank_rows_of_every_sort_kind_give_the_values_of_the_windows_sorted(width, monkeypatch):
    monkeypatch.setattr(selection, "ranks_pay", lambda *a: True)
    rng = np.random.default_rng(width)
    values = np.round(rng.normal(size=3000), 1) * np.where(rng.random(3000) < 0.5, 1.0, -1.0)
    lo = np.arange(0, 3000 - width, 3)
    rows, cnt = sorted_rows(values, lo, lo + width)
    expected = reference_sorted(values, lo, lo + width)
    np.testing.assert_array_equal(rows.dense(), expected)
    np.testing.assert_array_equal(np.signbit(rows.dense()), np.signbit(expected))
    with np.errstate(all="ignore"):
        med = row_median(expected, cnt)
        np.testing.assert_array_equal(row_median(rows, cnt), med)
        np.testing.assert_array_equal(row_mad(rows, cnt, med), row_mad(expected, cnt, med))
        np.testing.assert_array_equal(row_quantile(rows, cnt, 0.9), row_quantile(expected, cnt, 0.9))


def test_selection_pays_for_long_windows_of_a_long_batch_only():
    assert pays(10_000, 10_000, 50)             # a replay batch, a window at every step
    assert pays(10_000, 1_500, 200)             # anchors every 7 steps
    assert not pays(300_000, 1_024, 50)         # a live poll: one row per rank, long carries
    assert not pays(10_000, 10_000, 5)


@pytest.mark.skipif(rank_filter() is None, reason="SciPy is not installed")
@pytest.mark.parametrize("seed", range(15))
def test_a_sliding_rank_filter_gives_the_sorted_full_windows_values(seed):
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(2, 3000))
    values = random_values(rng, n, seed % 5)
    width = int(rng.integers(1, min(n, 600) + 1))
    lo = np.unique(rng.integers(0, n - width + 1, size=int(rng.integers(1, 300))))
    hi = lo + width
    expected = reference_sorted(values, lo, hi)
    sliding = Sliding(values, width)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(sliding.median(lo, hi), row_median(expected, hi - lo))
        for q in (0.0, 0.01, 0.25, 0.9, 1.0):
            np.testing.assert_array_equal(sliding.quantile(lo, hi, q),
                                          row_quantile(expected, hi - lo, q))


PATHS = {"selection": (lambda: None, lambda *a: False), "sliding": (rank_filter, lambda *a: True)}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("expr", sorted(e for e in REFERENCES if e.startswith(("median", "quantile"))))
@pytest.mark.parametrize("sparse", [False, True])
def test_median_and_quantile_without_sorting_equal_the_sorting_path_bit_for_bit(expr, sparse, path,
                                                                              monkeypatch):
    """The sorting path is held to the naive reference by test_windows.py."""
    if path == "sliding" and rank_filter() is None:
        pytest.skip("SciPy is not installed")
    steps, values = make_series(seed=len(expr) + sparse, sparse=sparse)
    text = expr.replace("(x,", "(loss,")
    for sizes in ([10_000], [7], [3, 50, 1, 100]):
        monkeypatch.setattr(orderstats, "pays", lambda *a, **k: False)
        monkeypatch.setattr(orderstats, "sliding_pays", lambda *a, **k: False)
        monkeypatch.setattr(selection, "RANK_WIDTH", 10**9)
        sorting = run_expr(text, steps, {"loss": values}, sizes)
        monkeypatch.setattr(orderstats, "pays", lambda *a, **k: True)
        monkeypatch.setattr(orderstats, "rank_filter", PATHS[path][0])
        monkeypatch.setattr(orderstats, "sliding_pays", PATHS[path][1])
        got = run_expr(text, steps, {"loss": values}, sizes)
        np.testing.assert_array_equal(got, sorting, err_msg=f"{expr} with batch sizes {sizes}")
