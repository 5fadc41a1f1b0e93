"""Columnar step batches keep every recorded value, tell "absent" from NaN, and derive throughput."""
import math
import random

import numpy as np
from hypothesis import given, settings, strategies as st

from msdoctor.core.batch import columnize
from msdoctor.wire.schema import STEP_SIGNALS

SOURCES = STEP_SIGNALS + ("overflow",)
value = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6))


@st.composite
def step_events(draw):
    events = []
    for step in range(1, draw(st.integers(1, 25)) + 1):
        names = draw(st.lists(st.sampled_from(SOURCES), unique=True))
        random.Random(step).shuffle(names)  # the key order of an event must not matter
        event = {"step": step}
        for name in names:
            event[name] = draw(st.booleans()) if name == "overflow" else draw(value)
        events.append(event)
    return events


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@settings(max_examples=200, deadline=None)
@given(step_events())
def test_each_series_holds_exactly_the_values_that_were_recorded(events):
    batch = columnize("run", 0, events)
    for name in SOURCES:
        expected = [(e["step"], float(e[name])) for e in events if name in e]
        got = batch.series(name)
        if not expected:
            assert got is None
            continue
        steps, values = got
        assert list(steps) == [s for s, _ in expected]
        assert all(_same(v, w) for (_, v), w in zip(expected, values))


def test_a_nan_loss_is_a_recorded_value_and_an_absent_loss_is_not():
    batch = columnize("run", 0, [{"step": 1, "loss": float("nan")}, {"step": 2, "lr": 1e-4}])
    steps, values = batch.series("loss")
    assert list(steps) == [1] and math.isnan(values[0])


def test_throughput_and_data_wait_share_are_derived_where_their_inputs_were_recorded():
    batch = columnize("run", 3, [
        {"step": 1, "tokens": 4096, "step_time_s": 0.5, "data_wait_s": 0.1},
        {"step": 2, "tokens": 4096},
        {"step": 3, "tokens": 4096, "step_time_s": 0.25, "data_wait_s": 0.2},
    ])
    steps, tps = batch.series("tokens_per_s")
    assert list(steps) == [1, 3] and list(tps) == [8192.0, 16384.0]
    steps, share = batch.series("data_wait_share")
    assert list(steps) == [1, 3] and np.allclose(share, [0.2, 0.8])


def test_an_empty_list_of_events_gives_an_empty_batch():
    batch = columnize("run", 0, [])
    assert len(batch) == 0 and batch.columns == {}
