"""A series whose values are all one number does not store them, and reads back exactly what
the stored path gives: the same steps, values (bit for bit), last point and snapshot arrays."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import msdoctor.core.series as series_module
from msdoctor.core.batch import StepBatch
from msdoctor.core.series import Series
from msdoctor.core.state import RankState

#: NaN with another payload than numpy's, and both zeros: equal as floats, not as bits
ODD_NAN = np.array([0x7FF8000000000123], dtype=np.uint64).view(np.float64)[0]
VALUES = [0.0, -0.0, 1.0, 65536.0, float("nan"), ODD_NAN, float("inf"), 0.1]


def bits(a: np.ndarray) -> list:
    return np.asarray(a, dtype=np.float64).view(np.uint64).tolist()


@contextmanager
def values_implied(implied: bool) -> Iterator[None]:
    """Within it, a series of one number implies its values (the fast path) or, when
    ``implied`` is False, stores them like any other (the exact path)."""
    original = series_module.same_bits
    if not implied:
        series_module.same_bits = lambda values, value: False
    try:
        yield
    finally:
        series_module.same_bits = original


def seen(s: Series) -> tuple:
    """Everything a reader gets from ``s``: its points, last point, a read since its middle
    step and its snapshot arrays (values as bits)."""
    last = s.last()
    mid = int(s.steps[len(s) // 2]) if len(s) else 0
    since, arrays = s.since(mid), s.arrays()
    return (len(s), s.steps.tolist(), bits(s.values),
            None if last is None else (last[0], bits(np.array([last[1]]))),
            since[0].tolist(), bits(since[1]), arrays[0].tolist(), bits(arrays[1]))


def same(fast: Series, exact: Series) -> None:
    assert seen(fast) == seen(exact)


ops = st.lists(st.tuples(
    st.sampled_from(["extend", "extend", "extend", "drop", "restore"]),
    st.integers(1, 70),                          # points
    st.integers(-30, 5),                         # where the steps start, from the last one
    st.lists(st.sampled_from(VALUES), min_size=1, max_size=3),   # the values drawn from
    st.integers(0, 2**32 - 1)), max_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, capacity=st.sampled_from([1, 5, 50, 64, 100]))
def test_values_of_one_number_read_back_as_the_stored_path_gives(ops, capacity):
    runs = {}
    for implied in (True, False):
        with values_implied(implied):
            s, last, observed = Series(capacity), 0, []
            for kind, n, back, pool, seed in ops:
                rng = np.random.default_rng(seed)
                if kind == "drop":
                    s.drop_from(last + back)
                elif kind == "restore":
                    steps, values = s.arrays()
                    s = Series.restored(steps, values, 0, 0, capacity)
                else:
                    steps = max(last + back, 0) + np.cumsum(rng.integers(1, 3, n))
                    values = np.array(pool, dtype=np.float64)[rng.integers(0, len(pool), n)]
                    s.extend(steps, values)
                    last = int(steps[-1])
                observed.append(seen(s))
            runs[implied] = observed
    assert runs[True] == runs[False]


@pytest.mark.parametrize("value", [0.0, -0.0, 65536.0, float("nan"), ODD_NAN])
def test_a_series_of_one_number_stores_no_values_until_another_comes(value):
    s = Series(capacity=100)
    for k in range(30):
        s.extend(np.arange(1 + 10 * k, 11 + 10 * k), np.full(10, value))
    assert s._values is None and s._steps is None and len(s) == 100
    assert bits(s.values) == bits(np.full(100, value))
    other = 0.0 if bits(np.array([value])) != bits(np.array([0.0])) else -0.0
    s.extend(np.array([301]), np.array([other]))
    assert s._values is not None
    assert bits(s.values) == bits(np.full(99, value)) + bits(np.array([other]))


def test_a_rank_fed_batches_keeps_the_same_series_with_values_implied_or_stored():
    rng = np.random.default_rng(3)
    states = {}
    for implied in (True, False):
        with values_implied(implied):
            rank, step = RankState(0, capacity=256), 0
            for _ in range(120):
                n = int(rng.integers(1, 40))
                steps = step + np.arange(1, n + 1, dtype=np.int64)
                step = int(steps[-1]) if rng.random() > 0.05 else max(step - 50, 0)
                columns = {"loss": rng.random(n), "loss_scale": np.full(n, 65536.0),
                           "overflow": np.zeros(n), "tokens": np.full(n, 4096.0)}
                if rng.random() < 0.1:
                    columns["loss_scale"][-1] = 32768.0
                rank.apply_steps(StepBatch("run", 0, steps, steps * 0.1, columns, {}))
            states[implied] = rank
        if implied:
            rng = np.random.default_rng(3)
    fast, exact = states[True], states[False]
    assert fast.latest == exact.latest and fast.counters == exact.counters
    assert fast.median_step_s == exact.median_step_s
    assert set(fast.series) == set(exact.series)
    for name in exact.series:
        same(fast.series[name], exact.series[name])
    assert fast.series["tokens"]._values is None and fast.series["overflow"]._values is None
