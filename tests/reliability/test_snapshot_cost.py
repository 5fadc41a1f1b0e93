"""A big state must not starve ingest: periodic snapshots back off in proportion to how long
the last one took, and the engine's state packs numeric arrays without a call per number."""
from __future__ import annotations

import math
import time

import numpy as np

from msdoctor.daemon import SNAPSHOT_BUDGET, Sidecar
from msdoctor.engine.context import pack, unpack
from msdoctor.events import encode, make


class SlowState:
    """A consumer whose state takes 50 ms to produce, like 1024 ranks of rule windows."""

    name = "slow"

    def state_dict(self):
        time.sleep(0.05)
        return {"ok": True}


def test_a_slow_snapshot_is_not_repeated_back_to_back(tmp_path):
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-0.jsonl").write_bytes(encode(make("step", 0, step=1, t=1.0)))
    now = [100.0]
    sidecar = Sidecar(tmp_path, consumers=[SlowState()], snapshot_interval=0.01,
                      clock=lambda: now[0])
    sidecar.poll_once()
    assert sidecar.save_snapshot() is not None
    took = sidecar.snapshot_seconds
    assert took >= 0.05
    now[0] += 0.5 * SNAPSHOT_BUDGET * took          # the interval has passed, the budget not
    assert not sidecar.snapshot_due()
    now[0] += 0.6 * SNAPSHOT_BUDGET * took
    assert sidecar.snapshot_due()


def test_a_fast_snapshot_keeps_the_configured_interval(tmp_path):
    now = [0.0]
    sidecar = Sidecar(tmp_path, snapshot_interval=5.0, clock=lambda: now[0])
    sidecar.save_snapshot()
    now[0] = 4.9
    assert not sidecar.snapshot_due()
    now[0] = 5.0
    assert sidecar.snapshot_due()


def test_packed_arrays_round_trip_with_non_finite_values_and_stay_plain_lists():
    finite = np.linspace(0, 1, 5)
    holey = np.array([1.0, math.nan, math.inf, -math.inf])
    ints = np.arange(4, dtype=np.int32)
    state = {"w": finite, "h": holey, "i": ints, "x": [np.float64(2.5), math.nan]}
    packed = pack(state)
    assert packed["w"] == {"__array__": "f", "data": finite.tolist()}
    assert packed["i"] == {"__array__": "i", "data": [0, 1, 2, 3]}
    back = unpack(packed)
    np.testing.assert_array_equal(back["w"], finite)
    np.testing.assert_array_equal(back["h"], holey)
    assert back["i"].dtype == np.int64 and back["i"].tolist() == [0, 1, 2, 3]
    assert back["x"][0] == 2.5 and math.isnan(back["x"][1])
