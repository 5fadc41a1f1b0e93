"""The store's series come back from a snapshot as Series.from_arrays builds them."""
from __future__ import annotations

import numpy as np
import pytest

from msdoctor.core.snapshot_store import SnapshotError, store_from_dict, store_parts
from msdoctor.core.state import RankState, RunState, Series, Store

CASES = {
    "strided": (np.arange(10, 310, 3), None),
    "one": (np.array([7]), None),
    "empty": (np.zeros(0, dtype=np.int64), None),
    "uneven": (np.array([1, 2, 4, 8, 9, 10]), None),
    "long": (np.arange(1, 200), None),                  # more than the capacity: cut
    "falls": (np.array([1, 2, 3, 2, 5]), None),         # saved out of order: purged
    "flat": (np.array([4, 4, 4]), None),
}


def saved_store() -> tuple:
    store = Store(capacity=100)
    run = store.runs["r"] = RunState("r")
    rank = run.ranks[0] = RankState(0, capacity=100)
    for name, (steps, _) in CASES.items():
        rank.series[name] = Series.from_arrays(steps, steps * 0.5, 100)
    doc, parts = store_parts(store)
    arrays = {name: member.joined() for name, member in parts.items()}   # as read back
    at = sum(len(s) for s in rank.series.values())
    for name in ("long", "falls", "flat"):                # as written, not as a store holds
        steps = CASES[name][0]
        arrays["series_steps"] = np.concatenate([arrays["series_steps"], steps])
        arrays["series_values"] = np.concatenate([arrays["series_values"], steps * 0.5])
        doc["runs"][0]["ranks"][0]["series"][name] = [at, len(steps)]
        at += len(steps)
    return doc, arrays


def test_each_series_is_what_from_arrays_makes_of_its_points_inside_and_out():
    doc, arrays = saved_store()
    back = store_from_dict(doc, arrays).runs["r"].ranks[0].series
    for name, (steps, _) in CASES.items():
        want, got = Series.from_arrays(steps, steps * 0.5, 100), back[name]
        assert got.steps.tolist() == want.steps.tolist(), name
        assert got.values.tolist() == want.values.tolist(), name
        assert (got._steps is None) == (want._steps is None), name          # strides implied
        assert got._size == want._size, name                                # the same room
        assert (got._values is None) == (want._values is None), name        # one number implied
        got.extend(np.array([1000, 1001]), np.array([1.0, 2.0]))            # and it goes on
        want.extend(np.array([1000, 1001]), np.array([1.0, 2.0]))
        assert got.steps.tolist() == want.steps.tolist(), name


@pytest.mark.parametrize("key", [[-1, 2], [0, 10 ** 6], [3, -1]])
def test_a_series_outside_the_saved_arrays_is_a_snapshot_error_naming_it(key):
    doc, arrays = saved_store()
    doc["runs"][0]["ranks"][0]["series"]["strided"] = key
    with pytest.raises(SnapshotError, match="'strided'"):
        store_from_dict(doc, arrays)
