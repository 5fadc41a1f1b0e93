"""Columnar step batches: how decoded step events travel inside the sidecar.

The ingest turns each rank's newly read step events into one :class:`StepBatch`
(numpy columns), so the state and the rule engine work on arrays, not on one
Python dict per event. This is what keeps the sidecar and replay fast.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional

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
    """Build a :class:`StepBatch` from validated step events of one rank."""
    n = len(events)
    steps = np.fromiter((e["step"] for e in events), dtype=np.int64, count=n)
    t = np.fromiter((e.get("t", np.nan) for e in events), dtype=np.float64, count=n)
    columns: Dict[str, np.ndarray] = {}
    masks: Dict[str, np.ndarray] = {}
    present = set()
    for event in events:
        present.update(event.keys())
    for name in STEP_SIGNALS:
        if name in present:
            _add_column(columns, masks, name, (e.get(name) for e in events), n)
    if "overflow" in present:
        _add_column(columns, masks, "overflow",
                    (None if e.get("overflow") is None else float(e["overflow"]) for e in events), n)
    if "tokens" in columns and "step_time_s" in columns:
        seconds = columns["step_time_s"]
        with np.errstate(divide="ignore", invalid="ignore"):
            tps = np.where(seconds > 0, columns["tokens"] / seconds, np.nan)
        mask = _and(masks.get("tokens"), masks.get("step_time_s"), seconds > 0)
        _store(columns, masks, "tokens_per_s", tps, mask)
    if "data_wait_s" in columns and "step_time_s" in columns:
        seconds = columns["step_time_s"]
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(seconds > 0, columns["data_wait_s"] / seconds, np.nan)
        mask = _and(masks.get("data_wait_s"), masks.get("step_time_s"), seconds > 0)
        _store(columns, masks, "data_wait_share", share, mask)
    return StepBatch(run, rank, steps, t, columns, masks)


def _add_column(columns: Dict[str, np.ndarray], masks: Dict[str, np.ndarray], name: str,
                values: Iterable[Any], n: int) -> None:
    raw = [v for v in values]
    mask = np.fromiter((v is not None for v in raw), dtype=bool, count=n)
    column = np.fromiter((np.nan if v is None else v for v in raw), dtype=np.float64, count=n)
    _store(columns, masks, name, column, mask)


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
