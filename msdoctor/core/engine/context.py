"""What the engine remembers per run and per rank between batches (and in snapshots)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from msdoctor.core.engine.lifecycle import AlertState
from msdoctor.core.runstart import fold_run_start
from msdoctor.wire.numbers import from_wire, to_wire


@dataclass
class RunContext:
    run: str
    config: Dict[str, Any] = field(default_factory=dict)
    expect: Dict[str, Any] = field(default_factory=dict)
    world_size: Optional[int] = None
    ranks: Dict[int, "RankContext"] = field(default_factory=dict)
    latest: Dict[str, Dict[int, float]] = field(default_factory=dict)   # rank_median inputs
    start_rank: Optional[int] = None                                    # whose run_start wins

    def note_run_start(self, event: Dict[str, Any]) -> None:
        """Fold a run_start; :func:`fold_run_start` says which rank's wins."""
        if fold_run_start(self, event, self.start_rank):
            self.start_rank = event["rank"]


@dataclass
class RankContext:
    run: RunContext
    rank: int
    states: List[Dict[str, Any]]                      # per operator carry-over
    last: List[float]                                 # per operator value at the last row
    alerts: Dict[str, AlertState] = field(default_factory=dict)
    last_step: Optional[int] = None
    last_t: Optional[float] = None                    # t of the newest step row
    last_step_t: Optional[float] = None
    #: step rows evaluated (an upper bound of the points its window operators carry)
    rows: int = 0
    first_event_t: Optional[float] = None
    last_event_t: Optional[float] = None
    running: bool = True
    gone: bool = False                                # nothing read for core.liveness.gone_after
    heard_t: Optional[float] = None                   # the engine's clock at the last input
    last_cond: Dict[str, float] = field(default_factory=dict)
    #: Alerts firing now (as emitted) -> the root cause they are marked with, or None.
    firing: Dict[str, Optional[str]] = field(default_factory=dict)
    #: ... and the step where each of them became active.
    firing_since: Dict[str, Optional[int]] = field(default_factory=dict)
    #: Checkpoints this rank saved, by step (``msdoctor.core.checkpoints``).
    checkpoints: List[Dict[str, Any]] = field(default_factory=list)

    def note_time(self, t: Optional[float]) -> None:
        if t is None or (isinstance(t, float) and math.isnan(t)):
            return
        if self.first_event_t is None:
            self.first_event_t = t
        if self.last_event_t is None or t > self.last_event_t:
            self.last_event_t = t


def pack(value: Any) -> Any:
    """A snapshot-ready copy of an operator state: JSON values, with numeric arrays kept as
    arrays (int64/float64, not copied when they are already; the snapshot copies them into
    its own arrays at once) and non-finite floats tagged."""
    kind = type(value)
    if kind is dict:
        return {k if type(k) is str else str(k): v if type(v) in _PLAIN else pack(v)
                for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.astype(np.int64 if value.dtype.kind in "iu" else np.float64, copy=False)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": to_wire(value)}
    if isinstance(value, dict):
        return {str(k): pack(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [pack(v) for v in value]
    if isinstance(value, (np.floating,)):
        return pack(float(value))
    if isinstance(value, (np.integer,)):
        return int(value)
    return value


#: values :func:`pack` returns as they are
_PLAIN = frozenset({str, int, bool, type(None)})


def unpack(value: Any) -> Any:
    """Inverse of :func:`pack` (also reads the arrays-as-lists form of earlier snapshots)."""
    if isinstance(value, np.ndarray):
        return value.astype(np.int64 if value.dtype.kind in "iu" else np.float64)
    if isinstance(value, dict):
        if "__array__" in value:
            if value["__array__"] == "i":
                return np.asarray(value["data"], dtype=np.int64)
            return np.asarray([unpack(x) for x in value["data"]], dtype=np.float64)
        if "__float__" in value:
            return from_wire(value["__float__"])
        return {k: unpack(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unpack(v) for v in value]
    return value
