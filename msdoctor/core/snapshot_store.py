"""The store's part of a snapshot: a JSON document plus the ring buffers as two flat arrays.

Every series is a ``[at, length]`` slice of ``series_steps`` and ``series_values``. Loading
checks the slices of all series at once (in bounds, steps strictly increasing, a constant
stride) and builds each :class:`~msdoctor.core.state.Series` as :meth:`Series.from_arrays`
would, without its per-series checks; a series whose steps do not increase goes through
:meth:`Series.from_arrays` (it purges as a live store does).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from msdoctor.core.goodput import Goodput
from msdoctor.core.npzparts import Parts
from msdoctor.core.state import COUNTERS, DEFAULT_CAPACITY, RankState, RunState, Series, Store
from msdoctor.wire.errors import MsdoctorError


class SnapshotError(MsdoctorError):
    """A snapshot that cannot be used: says which file and why."""


def store_parts(store: Store) -> Tuple[Dict[str, Any], Dict[str, Parts]]:
    """The store as a JSON-able document plus the ring buffers as two flat arrays, each given
    as its parts (written without being joined)."""
    steps = Parts(np.dtype(np.int64))
    values = Parts(np.dtype(np.float64))
    at = 0
    runs = []
    for run in store.runs.values():
        ranks = []
        for rank in run.ranks.values():
            series = {}
            for name, buffer in rank.series.items():
                steps.parts.append(buffer.steps)
                values.parts.append(buffer.values)
                series[name] = [at, len(buffer)]      # where in the two flat arrays
                at += len(buffer)
            ranks.append({"rank": rank.rank, "status": rank.status, "last_step": rank.last_step,
                          "t": rank.t, "received": rank.received, "step_t": rank.step_t,
                          "median_step_s": rank.median_step_s, "latest": rank.latest,
                          "counters": rank.counters, "run_end": rank.run_end,
                          "checkpoint": rank.checkpoint, "checkpoints": rank.checkpoints,
                          "stop": rank.stop, "series": series})
        runs.append({"run": run.run, "world_size": run.world_size, "config": run.config,
                     "expect": run.expect, "goodput": run.goodput.state_dict(),
                     "run_start": [[r, e] for r, e in run.run_start.items()], "ranks": ranks})
    return {"capacity": store.capacity, "runs": runs, "run_limit": store.run_limit.to_json()}, \
        {"series_steps": steps, "series_values": values}


def store_from_dict(doc: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                    capacity: Optional[int] = None) -> Store:
    """Rebuild a :class:`Store` from :func:`store_parts` output (its parts joined, as read back)."""
    store = Store(capacity or int(doc.get("capacity", DEFAULT_CAPACITY)))
    store.run_limit.load(doc.get("run_limit") or {})
    wanted: List[Tuple[RankState, str, Any]] = []      # (rank, series name, where it is saved)
    for entry in doc["runs"]:
        run = store.runs[entry["run"]] = RunState(entry["run"])
        run.world_size = entry.get("world_size")
        run.config = dict(entry.get("config") or {})
        run.expect = dict(entry.get("expect") or {})
        run.run_start = {int(r): e for r, e in entry.get("run_start", [])}
        if isinstance(entry.get("goodput"), dict):
            run.goodput = Goodput.from_state(entry["goodput"])
        for item in entry["ranks"]:
            rank = RankState(int(item["rank"]), capacity=store.capacity)
            rank.status = str(item["status"])
            rank.last_step = item.get("last_step")
            rank.t, rank.received = item.get("t"), item.get("received")
            rank.step_t = item.get("step_t", rank.t)         # older snapshots: the newest event
            rank.note_median(item.get("median_step_s"))
            rank.latest = {str(k): float(v) for k, v in item.get("latest", {}).items()}
            rank.counters.update({k: int(v) for k, v in item.get("counters", {}).items()
                                  if k in COUNTERS})
            rank.run_end, rank.checkpoint = item.get("run_end"), item.get("checkpoint")
            rank.stop = item.get("stop")
            saved = item.get("checkpoints")
            rank.checkpoints = [dict(c) for c in saved if isinstance(c, dict) and "step" in c] \
                if isinstance(saved, list) else []
            wanted.extend((rank, name, key) for name, key in item.get("series", {}).items())
            run.ranks[rank.rank] = rank
    for (rank, name, _), series in zip(wanted, _series(arrays, wanted, store.capacity)):
        rank.series[name] = series
    return store


def _series(arrays: Mapping[str, np.ndarray], wanted: List[Tuple[RankState, str, Any]],
            capacity: int) -> List[Series]:
    """The saved series ``wanted`` (``[at, length]`` in the flat arrays, checked at once)."""
    steps, values = arrays.get("series_steps"), arrays.get("series_values")
    keys = [key for _, _, key in wanted]
    if not (steps is not None and values is not None and steps.dtype.kind == "i"
            and values.dtype.kind == "f" and steps.ndim == values.ndim == 1
            and all(type(k) is list and len(k) == 2 and type(k[0]) is int and type(k[1]) is int
                    for k in keys)):
        return [_one_series(arrays, name, key, capacity) for _, name, key in wanted]
    at, n = np.array(keys, dtype=np.int64).reshape(-1, 2).T
    if at.shape[0] and (int(at.min()) < 0 or int(n.min()) < 0
                        or int((at + n).max()) > min(steps.shape[0], values.shape[0])):
        bad = int(np.flatnonzero((at < 0) | (n < 0) | (at + n > min(steps.shape[0],
                                                                    values.shape[0])))[0])
        raise SnapshotError(f"series {wanted[bad][1]!r}: {keys[bad]!r} does not fit the saved "
                            f"arrays")
    gaps = np.diff(steps)                       # gaps[j] = steps[j + 1] - steps[j]
    down = np.flatnonzero(gaps <= 0)            # a series over one of these does not increase
    turns = np.flatnonzero(gaps[1:] != gaps[:-1]) + 1    # where the stride changes
    last = at + np.maximum(n - 1, 0)            # a series' gaps are gaps[at:last]
    rising = np.searchsorted(down, last) == np.searchsorted(down, at)
    even = np.searchsorted(turns, last) == np.searchsorted(turns, at + 1)
    out = []
    for a, k, up, flat in zip(at.tolist(), n.tolist(), rising.tolist(), even.tolist()):
        if not up or k > capacity:              # purged or cut as a live store does it
            out.append(Series.from_arrays(steps[a:a + k], values[a:a + k], capacity))
        elif flat or k < 2:
            stride = int(gaps[a]) if k > 1 else 0
            out.append(Series.restored(None, values[a:a + k], int(steps[a]) if k else 0, stride,
                                       capacity))
        else:
            out.append(Series.restored(steps[a:a + k], values[a:a + k], 0, 0, capacity))
    return out


def _one_series(arrays: Mapping[str, np.ndarray], name: str, key: Any, capacity: int) -> Series:
    steps, values = _series_arrays(arrays, name, key)
    if steps.dtype.kind != "i" or values.dtype.kind != "f" or steps.shape != values.shape:
        raise SnapshotError(f"series {name!r}: expected int steps and float values of "
                            f"equal length, got {steps.dtype}{steps.shape} and "
                            f"{values.dtype}{values.shape}")
    return Series.from_arrays(steps, values, capacity)


def _series_arrays(arrays: Mapping[str, np.ndarray], name: str, key: Any
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """A series' saved points: ``[at, length]`` in the flat arrays (or, in earlier
    snapshots, the name of its own pair of arrays)."""
    if isinstance(key, str):
        return arrays[f"{key}_steps"], arrays[f"{key}_values"]
    steps, values = arrays.get("series_steps"), arrays.get("series_values")
    if (not isinstance(key, list) or len(key) != 2 or not all(isinstance(k, int) and k >= 0
                                                               for k in key)
            or steps is None or values is None or key[0] + key[1] > steps.shape[0]
            or key[0] + key[1] > values.shape[0]):
        raise SnapshotError(f"series {name!r}: {key!r} does not fit the saved arrays")
    return steps[key[0]:key[0] + key[1]], values[key[0]:key[0] + key[1]]


