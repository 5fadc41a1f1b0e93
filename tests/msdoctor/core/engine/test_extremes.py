"""Window minima and maxima: the sparse table and the one-pass path give the exact values."""
import numpy as np
import pytest

from msdoctor.core.engine.windows import range_extreme


@pytest.mark.parametrize("rows", [3, 400])
def test_window_extremes_of_few_or_many_rows_equal_the_brute_force_reduction(rows):
    """Few rows take one reduceat pass, many the sparse table; both exact."""
    rng = np.random.default_rng(rows)
    for _ in range(200):
        n = int(rng.integers(1, 80))
        V = rng.normal(size=n)
        lo = rng.integers(0, n + 1, rows)
        hi = np.minimum(lo + rng.integers(0, n + 1, rows), n)
        for fn in (np.maximum, np.minimum):
            want = [fn.reduce(V[a:b]) if b > a else np.nan for a, b in zip(lo, hi)]
            np.testing.assert_array_equal(range_extreme(V, lo, hi, fn), want)
