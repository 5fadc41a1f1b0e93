"""Columnar step batches: how decoded step events travel inside the sidecar.

The ingest turns each rank's newly read step events into one :class:`StepBatch`
(numpy columns), so the state and the rule engine work on arrays, not on one
Python dict per event. This is what keeps the sidecar and replay fast.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter, methodcaller
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from msdoctor.events.schema import STEP_SIGNALS

#: Series the sidecar keeps per rank: the wire signals plus derived ones.
DERIVED = ("tokens_per_s", "overflow", "data_wait_share")
SIGNALS = STEP_SIGNALS + DERIVED


@dataclass
class StepBatch:
    """Step events of one (run, rank), in arrival order.

    ``columns[name]`` is aligned with ``steps``; ``masks[name]`` is True where
    the signal was recorded (a signal absent from every event has no column;
    a column recorded on every event has no mask).
    """

    run: str
    rank: int
    steps: np.ndarray                       # int64
    t: np.ndarray                           # float64 wall-clock seconds, NaN if absent
    columns: Dict[str, np.ndarray] = field(default_factory=dict)   # float64
    masks: Dict[str, np.ndarray] = field(default_factory=dict)     # bool

    def __len__(self) -> int:
        return int(self.steps.shape[0])

    def series(self, name: str) -> Optional[tuple]:
        """``(steps, values)`` of the rows where ``name`` was recorded, or None."""
        values = self.columns.get(name)
        if values is None:
            return None
        mask = self.masks.get(name)
        if mask is None:
            return self.steps, values
        return self.steps[mask], values[mask]

    def slice(self, start: int, stop: int) -> "StepBatch":
        """Rows ``start:stop`` as a new batch (views, no copies)."""
        return StepBatch(self.run, self.rank, self.steps[start:stop], self.t[start:stop],
                         {k: v[start:stop] for k, v in self.columns.items()},
                         {k: m[start:stop] for k, m in self.masks.items()})


def columnize(run: str, rank: int, events: List[Mapping[str, Any]]) -> StepBatch:
    """Build a :class:`StepBatch` from validated step events of one rank.

    Events are grouped by their *shape* (their key tuple: a hook writes the
    same few shapes over and over), and each group's signals are pulled out
    with one ``itemgetter`` call per event into a 2-D array. Every pass runs
    in C: this function is on the hot path of ingest and replay.
    """
    n = len(events)
    steps = np.fromiter(map(_get_step, events), dtype=np.int64, count=n)
    t = np.fromiter(map(_get_t, events), dtype=np.float64, count=n)
    columns: Dict[str, np.ndarray] = {}
    masks: Dict[str, np.ndarray] = {}
    for names, index in _shape_groups(events).items():
        rows = events if index is None else [events[i] for i in index]
        table = np.array(list(map(itemgetter(*names), rows)), dtype=np.float64)
        table = table.reshape(len(rows), len(names))
        for j, name in enumerate(names):
            if index is None:
                columns[name] = np.ascontiguousarray(table[:, j])
                continue
            column = columns.get(name)
            if column is None:
                column = columns[name] = np.full(n, np.nan)
                masks[name] = np.zeros(n, dtype=bool)
            column[index] = table[:, j]
            masks[name][index] = True
    for name in [name for name, mask in masks.items() if mask.all()]:
        del masks[name]
    _derive(columns, masks)
    return StepBatch(run, rank, steps, t, columns, masks)


_get_step = itemgetter("step")
_get_t = methodcaller("get", "t", np.nan)
_SOURCES = frozenset(STEP_SIGNALS + ("overflow",))


def _shape_groups(events: List[Mapping[str, Any]]) -> Dict[tuple, Optional[List[int]]]:
    """Signal names of each event shape -> row indices (None: every row has that shape)."""
    shapes = list(map(tuple, events))
    if not shapes:
        return {}
    if shapes.count(shapes[0]) == len(shapes):
        names = tuple(k for k in shapes[0] if k in _SOURCES)
        return {names: None} if names else {}
    by_shape: Dict[tuple, List[int]] = {}
    for i, shape in enumerate(shapes):
        rows = by_shape.get(shape)
        if rows is None:
            rows = by_shape[shape] = []
        rows.append(i)
    groups: Dict[tuple, List[int]] = {}
    for shape, rows in by_shape.items():
        names = tuple(k for k in shape if k in _SOURCES)
        if names:
            groups.setdefault(names, []).extend(rows)
    return {names: sorted(rows) if len(rows) > 1 else rows for names, rows in groups.items()}


def _derive(columns: Dict[str, np.ndarray], masks: Dict[str, np.ndarray]) -> None:
    """Add ``tokens_per_s`` and ``data_wait_share`` where their inputs were recorded."""
    seconds = columns.get("step_time_s")
    if seconds is None:
        return
    positive = seconds > 0
    for name, numerator in (("tokens_per_s", "tokens"), ("data_wait_share", "data_wait_s")):
        if numerator not in columns:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(positive, columns[numerator] / seconds, np.nan)
        mask = _and(masks.get(numerator), masks.get("step_time_s"), positive)
        _store(columns, masks, name, value, mask)


def _and(*masks: Optional[np.ndarray]) -> Optional[np.ndarray]:
    result = None
    for mask in masks:
        if mask is not None:
            result = mask if result is None else (result & mask)
    return result


def _store(columns: Dict[str, np.ndarray], masks: Dict[str, np.ndarray], name: str,
           column: np.ndarray, mask: Optional[np.ndarray]) -> None:
    if mask is not None and not mask.any():
        return
    columns[name] = column
    if mask is not None and not mask.all():
        masks[name] = mask
