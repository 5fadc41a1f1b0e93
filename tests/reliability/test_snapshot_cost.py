"""A big state must not starve ingest: periodic snapshots back off in proportion to how long
the last one took, and the engine's state packs numeric arrays without a call per number."""
from __future__ import annotations

import json
import math
import time

import numpy as np

from msdoctor.core.engine.context import pack, unpack
from msdoctor.core.pipeline import SNAPSHOT_BUDGET, Pipeline
from msdoctor.wire import encode, make


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
    sidecar = Pipeline(tmp_path, consumers=[SlowState()], snapshot_interval=0.01,
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
    sidecar = Pipeline(tmp_path, snapshot_interval=5.0, clock=lambda: now[0])
    sidecar.save_snapshot()
    now[0] = 4.9
    assert not sidecar.snapshot_due()
    now[0] = 5.0
    assert sidecar.snapshot_due()


def test_packed_arrays_stay_arrays_and_round_trip_with_non_finite_values():
    finite = np.linspace(0, 1, 5)
    holey = np.array([1.0, math.nan, math.inf, -math.inf])
    ints = np.arange(4, dtype=np.int32)
    state = {"w": finite, "h": holey, "i": ints, "x": [np.float64(2.5), math.nan]}
    packed = pack(state)
    assert packed["w"] is finite          # float64 already: not copied (the snapshot copies)
    assert packed["i"].dtype == np.int64 and packed["x"][1] == {"__float__": "nan"}
    back = unpack(packed)
    np.testing.assert_array_equal(back["w"], finite)
    np.testing.assert_array_equal(back["h"], holey)
    assert back["i"].dtype == np.int64 and back["i"].tolist() == [0, 1, 2, 3]
    assert back["x"][0] == 2.5 and math.isnan(back["x"][1])


def test_an_earlier_snapshot_with_arrays_as_lists_still_unpacks():
    old = {"w": {"__array__": "f", "data": [1.0, {"__float__": "nan"}]},
           "i": {"__array__": "i", "data": [3, 4]}}
    back = unpack(old)
    assert back["i"].tolist() == [3, 4] and back["w"][0] == 1.0 and math.isnan(back["w"][1])


def test_the_snapshot_stores_consumer_arrays_natively_not_as_json(tmp_path):
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-0.jsonl").write_bytes(encode(make("step", 0, step=1, t=1.0)))
    window = np.arange(200_000, dtype=np.float64) / 7
    state = {"engine": {"windows": [window], "nested": {"steps": np.arange(3)}, "n": 1}}
    sidecar = Pipeline(tmp_path, consumers=[ArrayState(state)])
    sidecar.poll_once()
    path = sidecar.save_snapshot()
    assert path.stat().st_size < window.nbytes * 1.2          # JSON text would be ~2.5x
    with np.load(path, allow_pickle=False) as archive:
        meta = archive["meta"].tobytes().decode()
    assert len(meta) < 10_000
    restored = ArrayState({})
    Pipeline(tmp_path, consumers=[restored])
    np.testing.assert_array_equal(restored.loaded["engine"]["windows"][0], window)
    assert restored.loaded["engine"]["nested"]["steps"].tolist() == [0, 1, 2]


class ArrayState:
    """A consumer whose state holds numpy arrays (like the rule engine's windows)."""

    name = "arrays"

    def __init__(self, state):
        self.state, self.loaded = state, None

    def state_dict(self):
        return self.state

    def load_state_dict(self, state):
        self.loaded = state


def test_thousands_of_small_arrays_become_two_flat_members_and_a_table_and_come_back_exactly():
    from msdoctor.core.snapshot import TABLE, join_arrays, split_arrays

    state = {"ranks": [{"w": np.arange(r, r + 5, dtype=np.float64), "i": np.arange(r),
                        "b": np.array([r % 2 == 0, True]), "m": np.ones((2, 3)) * r,
                        "e": np.zeros((0, 4), dtype=np.int32), "c": np.array(r, dtype=np.float32),
                        "z": np.float64(r)} for r in range(2000)]}
    doc, arrays = split_arrays(state)
    assert sorted(arrays) == sorted(["consumer_float", "consumer_int", TABLE])
    assert doc["ranks"][7]["m"] == {"__ndarray__": 7 * 6 + 3}      # a row of the table
    back = join_arrays(json.loads(json.dumps(doc)), arrays)
    for r, got in enumerate(back["ranks"]):
        want = state["ranks"][r]
        for key in ("w", "i", "b", "m", "e", "c"):
            assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape
            assert np.array_equal(got[key], want[key])


def test_an_array_of_more_dimensions_or_another_dtype_is_described_in_the_document():
    from msdoctor.core.snapshot import join_arrays, split_arrays

    state = {"deep": np.arange(32.0).reshape(2, 2, 2, 2, 2), "big": np.arange(3, dtype=">i8"),
             "flat": np.arange(3.0)}
    doc, arrays = split_arrays(state)
    assert doc["deep"]["shape"] == [2] * 5 and doc["big"]["dtype"] == ">i8"
    assert doc["flat"] == {"__ndarray__": 0}
    back = join_arrays(doc, arrays)
    for key, want in state.items():
        assert back[key].dtype == want.dtype and np.array_equal(back[key], want)


def test_a_tampered_array_reference_is_a_snapshot_error_not_a_crash():
    import pytest

    from msdoctor.core.snapshot import SnapshotError, join_arrays, split_arrays

    doc, arrays = split_arrays({"w": np.arange(4.0).reshape(1, 1, 1, 1, 4)})
    described = doc["w"]                        # more than 4 dimensions: described in full
    for bad in ({"at": 3}, {"at": -1}, {"shape": [9]}, {"dtype": "O"}, {"__ndarray__": "meta"},
                {"shape": "x"}):
        broken = {"w": dict(described, **bad)}
        with pytest.raises(SnapshotError, match="does not fit the saved arrays"):
            join_arrays(broken, arrays)


def test_a_tampered_array_table_is_a_snapshot_error_naming_the_row():
    import pytest

    from msdoctor.core.snapshot import TABLE, SnapshotError, join_arrays, split_arrays

    doc, arrays = split_arrays({"w": np.arange(4.0), "i": np.arange(6).reshape(2, 3)})
    for ref in ({"__ndarray__": 2}, {"__ndarray__": -1}, {"__ndarray__": 0, "at": 1}):
        with pytest.raises(SnapshotError, match="does not fit the saved arrays"):
            join_arrays({"w": ref}, arrays)
    for column, value in ((0, 2), (1, 1), (1, -1), (2, 99), (3, 5), (4, 7), (6, 1)):
        table = arrays[TABLE].copy()
        table[1, column] = value
        with pytest.raises(SnapshotError, match=f"{TABLE} row 1 .* does not fit"):
            join_arrays(doc, dict(arrays, **{TABLE: table}))
    with pytest.raises(SnapshotError, match="expected int rows of 8"):
        join_arrays(doc, dict(arrays, **{TABLE: arrays[TABLE][:, :5]}))
    without = {k: v for k, v in arrays.items() if k != "consumer_int"}
    with pytest.raises(SnapshotError, match="row 1"):
        join_arrays(doc, without)


def test_a_snapshot_of_the_previous_version_still_loads_and_a_newer_one_is_refused(
        tmp_path, monkeypatch, caplog):
    from msdoctor.core import snapshot

    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "rank-0.jsonl").write_bytes(encode(make("step", 0, step=1, t=1.0)))
    state = {"engine": {"windows": [np.arange(5.0)], "steps": np.arange(3)}}
    with monkeypatch.context() as patched:        # version 1: every array described in full
        patched.setattr(snapshot, "VERSION", 1)
        patched.setattr(snapshot, "_CODES", {})
        sidecar = Pipeline(tmp_path, consumers=[ArrayState(state)])
        sidecar.poll_once()
        path = sidecar.save_snapshot()
    with np.load(path, allow_pickle=False) as archive:
        assert snapshot.TABLE not in archive.files
    restored = ArrayState({})
    Pipeline(tmp_path, consumers=[restored])
    assert restored.loaded["engine"]["windows"][0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert restored.loaded["engine"]["steps"].dtype == np.int64

    with monkeypatch.context() as patched:
        patched.setattr(snapshot, "VERSION", 3)
        Pipeline(tmp_path, consumers=[ArrayState(state)]).save_snapshot()
    with caplog.at_level("WARNING"):
        fresh = ArrayState({})
        Pipeline(tmp_path, consumers=[fresh])
    assert fresh.loaded is None
    assert "snapshot version 3, this msdoctor reads 1 and 2" in caplog.text
