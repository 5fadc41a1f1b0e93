"""The one-value median of a live poll equals the array version, ties and NaN included."""
import math

import numpy as np

from msdoctor.core.engine.rankmedian import _median_of_one, _median_with


def test_the_median_of_one_new_value_equals_the_array_version_with_ties_and_nan():
    rng = np.random.default_rng(1)
    for _ in range(5000):
        fin = sorted(rng.integers(0, 4, int(rng.integers(0, 7))).astype(float).tolist())
        x = float(rng.integers(0, 4)) if rng.random() < 0.8 else math.nan
        got = _median_of_one(fin, x)
        want = _median_with(np.array(fin, dtype=np.float64), np.array([x]))[0]
        assert got == want or (math.isnan(got) and math.isnan(want)), (fin, x, got, want)


def test_the_median_of_nothing_is_nan_and_of_one_value_that_value():
    assert math.isnan(_median_of_one([], math.nan))
    assert _median_of_one([], 2.5) == 2.5
    assert _median_of_one([1.0, 3.0], math.nan) == 2.0
