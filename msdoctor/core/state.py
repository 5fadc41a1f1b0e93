"""Per-run, per-rank state of the sidecar, updated from spool chunks.

:class:`Store` holds :class:`RunState` per run id and :class:`RankState` per
rank: the latest value of every signal, counters, status, and a bounded ring
buffer (:class:`Series`) of recent ``(step, value)`` points per signal. Step
batches are applied with numpy, not per event; memory does not grow with the
length of a run.

A step that does not exceed the last one seen (a resumed run repeating steps)
purges the buffered points with step >= it, as TensorBoard purges orphaned
data, and is counted in ``repeated_steps``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from msdoctor.core import checkpoints
from msdoctor.core.batch import StepBatch
from msdoctor.core.goodput import Goodput
from msdoctor.core.layer_rows import LayerRows
from msdoctor.core.limits import RunLimit
from msdoctor.core.liveness import STALE_MIN_S, gone_after, is_gone, median_of, stale_after
from msdoctor.core.runstart import fold_run_start
from msdoctor.core.series import DEFAULT_CAPACITY, Series, count_repeats, keep_last_writes
from msdoctor.core.spool import Chunk
from msdoctor.core.spool_typed import STEP

#: The series of each step's wall-clock time (the event's ``t``): charts on a time axis read
#: it; it is kept like a signal but has no latest value.
WALL_TIME = "t"
STATUSES = ("running", "completed", "failed", "stopped")
COUNTERS = ("steps", "overflow_steps", "nonfinite_losses", "events", "decode_errors",
            "repeated_steps", "dropped")


@dataclass
class RankState:
    """What is known about one rank of one run."""

    rank: int
    capacity: int = DEFAULT_CAPACITY
    status: str = "running"
    last_step: Optional[int] = None
    t: Optional[float] = None            # wall time of the newest event (the trainer's clock)
    step_t: Optional[float] = None       # wall time of the newest step event (the trainer's clock)
    median_step_s: Optional[float] = None   # median of the last step times (core.liveness)
    stale_limit: float = STALE_MIN_S        # seconds without a step before it is stale
    received: Optional[float] = None     # when the sidecar last read an event of this rank
    latest: Dict[str, float] = field(default_factory=dict)
    counters: Dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    run_end: Optional[Dict[str, Any]] = None
    checkpoint: Optional[Dict[str, Any]] = None
    #: every checkpoint saved, by step (the newest ``checkpoints.MAX_KEPT``)
    checkpoints: List[Dict[str, Any]] = field(default_factory=list)
    stop: Optional[Dict[str, Any]] = None
    series: Dict[str, Series] = field(default_factory=dict)
    #: the recent ``layers`` events (per-layer arrays), None until the first
    layers: Optional[LayerRows] = None

    def apply_steps(self, batch: StepBatch) -> None:
        """Fold a step batch into counters, latest values and series (vectorised)."""
        steps = batch.steps
        n = steps.shape[0]
        if n == 0:
            return
        c = self.counters
        c["steps"] += n
        last = self.last_step
        regular = (last is None or steps[0] > last) and (n == 1 or bool((steps[1:] > steps[:-1]).all()))
        keep = None
        if not regular:
            c["repeated_steps"] += count_repeats(steps, last)
            keep = keep_last_writes(steps)
            first = int(steps[keep][0])
            for series in self.series.values():
                series.drop_from(first)
        overflow = batch.series("overflow")
        if overflow is not None:
            c["overflow_steps"] += int(np.count_nonzero(overflow[1] > 0))
        loss = batch.series("loss")
        if loss is not None:
            c["nonfinite_losses"] += int(np.count_nonzero(~np.isfinite(loss[1])))
        for name, column in batch.columns.items():
            mask = batch.masks.get(name)
            if keep is not None:
                mask = keep if mask is None else (mask & keep)
            if mask is None:
                s, v = steps, column
            else:
                s, v = steps[mask], column[mask]
            if s.shape[0] == 0:
                continue
            buffer = self.series.get(name)
            if buffer is None:
                buffer = self.series[name] = Series(self.capacity)
            buffer._append(s, v)           # increasing and beyond every buffered step
        self._keep_times(batch, keep)
        self.last_step = int(steps[-1])
        step_time = self.series.get("step_time_s")
        if step_time is not None and "step_time_s" in batch.columns:
            self.note_median(median_of(step_time.values))
        names = self.series if keep is not None else batch.columns
        for name in names:
            if name == WALL_TIME:
                continue
            point = self.series[name].last() if name in self.series else None
            if point is None:
                self.latest.pop(name, None)
            else:
                self.latest[name] = point[1]

    def _keep_times(self, batch: StepBatch, keep: Optional[np.ndarray]) -> None:
        """Append the steps' wall-clock times (where recorded) to the :data:`WALL_TIME` series."""
        recorded = np.isfinite(batch.t)
        if keep is not None:
            recorded &= keep
        if not recorded.any():
            return
        buffer = self.series.get(WALL_TIME)
        if buffer is None:
            buffer = self.series[WALL_TIME] = Series(self.capacity)
        if recorded.all():
            buffer._append(batch.steps, batch.t)
        else:
            buffer._append(batch.steps[recorded], batch.t[recorded])

    def apply_event(self, event: Dict[str, Any]) -> None:
        """Fold one non-step event (run_start, run_end, checkpoint, heartbeat, stop, layers)."""
        kind = event["type"]
        if kind == "run_start":
            self.status, self.run_end, self.stop = "running", None, None
        elif kind == "run_end":
            self.status = event["status"]
            self.run_end = {k: event[k] for k in ("status", "step", "exception", "t") if k in event}
        elif kind == "heartbeat":
            if "dropped" in event:
                self.counters["dropped"] = event["dropped"]
        elif kind == "checkpoint":
            if event.get("op", "save") == "save":
                self.checkpoint = {k: event[k] for k in ("step", "path", "t") if k in event}
            checkpoints.note(self.checkpoints, event)
        elif kind == "stop":
            self.stop = {k: event[k] for k in ("reason", "step", "t") if k in event}
        elif kind == "layers":
            if self.layers is None:
                self.layers = LayerRows()
            self.layers.note(event)

    def note_median(self, median: Optional[float]) -> None:
        """Keep the median step time and the staleness limit it gives."""
        self.median_step_s, self.stale_limit = median, stale_after(median)

    def age(self, now: Optional[float] = None) -> Optional[float]:
        """Seconds since the newest step event's wall time (heartbeats do not count), or None."""
        if self.step_t is None:
            return None
        return (time.time() if now is None else now) - self.step_t

    @property
    def running(self) -> bool:
        return self.status == "running"

    def stale(self, now: float) -> bool:
        """Running, and no step for longer than :func:`msdoctor.core.liveness.stale_after`."""
        return self.status == "running" and self.step_t is not None \
            and now - self.step_t > self.stale_limit

    def gone(self, now: float, expect: Optional[Dict[str, Any]] = None) -> bool:
        """Not ended, and nothing read from it for :func:`msdoctor.core.liveness.gone_after`."""
        return is_gone(self.running, self.received, now, gone_after(expect))


@dataclass
class RunState:
    """One training run: its run_start per rank and its ranks."""

    run: str
    run_start: Dict[int, Dict[str, Any]] = field(default_factory=dict)
    world_size: Optional[int] = None
    config: Dict[str, Any] = field(default_factory=dict)
    expect: Dict[str, Any] = field(default_factory=dict)
    ranks: Dict[int, RankState] = field(default_factory=dict)
    goodput: Goodput = field(default_factory=Goodput)

    def note_run_start(self, event: Dict[str, Any]) -> None:
        """Keep ``event`` as its rank's run_start; :func:`fold_run_start` says which wins."""
        lowest = min(self.run_start) if self.run_start else None
        self.run_start[event["rank"]] = event
        fold_run_start(self, event, lowest)


class Store:
    """All runs seen in one spool, updated by :meth:`apply` (one call per Chunk)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY,
                 clock: Callable[[], float] = time.time) -> None:
        self.capacity = int(capacity)
        self.clock = clock
        self.runs: Dict[str, RunState] = {}
        #: the bound on run ids and what it refused (the pipeline checks it)
        self.run_limit = RunLimit()

    def rank(self, run: str, rank: int) -> RankState:
        """The state of (run, rank), created on first use."""
        state = self.runs.get(run)
        if state is None:
            state = self.runs[run] = RunState(run)
        rank_state = state.ranks.get(rank)
        if rank_state is None:
            rank_state = state.ranks[rank] = RankState(rank, capacity=self.capacity)
        return rank_state

    def apply(self, chunk: Chunk) -> RankState:
        """Update the state from one spool Chunk; return the rank's state."""
        state = self.rank(chunk.run, chunk.rank)
        c = state.counters
        c["events"] += len(chunk.events)
        c["decode_errors"] += sum(1 for e in chunk.errors if e.line_no)
        if chunk.events:
            state.received = self.clock()
        for event in chunk.others:
            if event["type"] == "run_start":
                self.runs[chunk.run].note_run_start(event)
            state.apply_event(event)
        if chunk.steps is not None:
            state.apply_steps(chunk.steps)
        self.runs[chunk.run].goodput.apply_chunk(chunk.rank, chunk.events, chunk.others,
                                                 chunk.steps)
        times = chunk.steps.t if chunk.steps is not None else np.zeros(0)
        row = times.shape[0]
        for event in reversed(chunk.events):
            if event is STEP:          # a step read into columns only: its t is in them
                row -= 1
                t = float(times[row]) if row >= 0 and not math.isnan(times[row]) else None
            else:
                t = event.get("t")
            if t is not None:
                state.t = t
                break
        if chunk.steps is not None and len(chunk.steps):
            t_steps = chunk.steps.t[~np.isnan(chunk.steps.t)]
            state.step_t = float(t_steps.max()) if t_steps.shape[0] else state.received
        return state

    def ranks(self) -> List[Tuple[str, int, RankState]]:
        """Every ``(run, rank, state)``, runs in first-seen order, ranks ascending."""
        return [(run.run, r, run.ranks[r]) for run in self.runs.values() for r in sorted(run.ranks)]
