"""What "now" is for the clock-driven rules (JobHung, ...): the caller's choice of policy.

* :class:`WallClock` (``serve``, ``tui --run-dir``, ``status``, ``replay`` of a run
  directory): a spool is judged as the live sidecar judges it, as of the wall clock. A rank
  is ticked at "now" only once its backlog is read, so a late start, a restart or a long
  outage never judges a rank by the age of lines it has not read yet.
* :class:`RecordClock` (``replay``/``report`` of training logs): time is the records' own;
  the record is judged as of its last line (a log has no "run ended" marker, so judging it
  as of today would call every finished log hung).

Under both, a pause inside a rank's record (longer than ``MIN_PAUSE_S`` and ``PAUSE_FACTOR``
times the rank's typical interval) is replayed as the live sidecar would have seen it: that
rank's clock ticks through the pause (every ``TICK_S``, at most ``MAX_GAP_TICKS`` times, and
just before the record that ends it). A pause the rank was already ticked through live (the
wall clock passed it) is not ticked again, and a pause after which the step number goes back
is the downtime before a restart, not a hang.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch

MIN_PAUSE_S = 1.0
PAUSE_FACTOR = 10.0
TICK_S = 30.0
MAX_GAP_TICKS = 200


class WallClock:
    """Live time: rules are judged as of ``now()`` once a rank's backlog is read."""

    live = True

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self.now = now

    def end(self, last_record_t: float) -> float:
        """The time a finished read is judged at: now."""
        return self.now()


class RecordClock:
    """Recorded time: the record is judged as of its last line; no live ticks. ``now()`` is the
    latest record time read so far (the pipeline sets ``last_t``), the wall clock before any."""

    live = False

    def __init__(self) -> None:
        self.last_t = -math.inf

    def now(self) -> float:
        return self.last_t if math.isfinite(self.last_t) else time.time()

    def end(self, last_record_t: float) -> float:
        return last_record_t


def gap_ticks(t_before: float, t_after: float) -> np.ndarray:
    """Clock times to evaluate a rank at inside a pause from ``t_before`` to ``t_after``:
    every ``TICK_S``, or ``MAX_GAP_TICKS`` evenly spaced ones for a longer pause (decided
    before anything is allocated: a timestamp far in the future costs no more), and one just
    before ``t_after``. None (empty) for a pause whose ends or length are not finite."""
    span = t_after - t_before            # inf when the ends are beyond any clock (1e308)
    if not (math.isfinite(t_before) and math.isfinite(span)) or span <= 0:
        return np.zeros(0)
    count = math.ceil(span / TICK_S) - 1                      # multiples of TICK_S inside
    if count > MAX_GAP_TICKS:
        ticks = np.linspace(t_before + TICK_S, t_after, MAX_GAP_TICKS, endpoint=False)
    else:
        ticks = np.arange(t_before + TICK_S, t_after, TICK_S)
    last = t_after - 1e-3                 # just before the record that ends the pause
    return np.append(ticks, last) if last > t_before else ticks


def split_at_gaps(batch: StepBatch, t_before: float, step_before: float = -math.inf
                  ) -> List[Tuple[Optional[StepBatch], np.ndarray]]:
    """``batch`` cut before each row that comes after a pause, each part with the clock ticks
    of the pause that follows it (the last part: none; the first part is None when the pause
    came before the batch)."""
    t = np.array(batch.t, dtype=np.float64)
    known = np.isfinite(t)                # "inf" is no time to tick towards
    if not known.any():
        return [(batch, np.zeros(0))]
    t = np.where(known, t, np.nan)
    prev = np.concatenate(([t_before], t[:-1]))
    prev_known = np.where(np.isfinite(prev), prev, -np.inf)
    np.maximum.accumulate(prev_known, out=prev_known)      # the last known time before each row
    with np.errstate(over="ignore", invalid="ignore"):     # times near the float limits: inf gaps
        gaps = t - prev_known
        intervals = np.diff(t[known])
    typical = float(np.median(intervals)) if intervals.shape[0] else 0.0
    pause = max(MIN_PAUSE_S, PAUSE_FACTOR * typical)
    prev_step = np.concatenate(([step_before], batch.steps[:-1].astype(np.float64)))
    cuts = np.flatnonzero(known & np.isfinite(prev_known) & (gaps > pause)
                          & (batch.steps > prev_step))
    if cuts.shape[0] == 0:
        return [(batch, np.zeros(0))]
    parts: List[Tuple[Optional[StepBatch], np.ndarray]] = []
    start = 0
    for cut in (int(c) for c in cuts):
        ticks = gap_ticks(float(prev_known[cut]), float(t[cut]))
        if cut == 0:                      # the pause came before this batch
            parts.append((None, ticks))
        else:
            parts.append((batch.slice(start, cut), ticks))
        start = cut
    parts.append((batch.slice(start, len(batch)), np.zeros(0)))
    return parts


def latest_time(batch: Optional[StepBatch]) -> float:
    """The latest known step time of ``batch`` (-inf when it has none)."""
    if batch is None or not len(batch):
        return -math.inf
    t = np.asarray(batch.t, dtype=np.float64)
    latest = float(t.max())
    if latest == latest:                    # no unknown time in the batch (the usual case)
        return latest
    known = t[~np.isnan(t)]
    return float(known.max()) if known.size else -math.inf


class RankTimes:
    """Per (run, rank): the last record time and step seen, and the last time it was ticked."""

    def __init__(self) -> None:
        self.record: Dict[Tuple[str, int], Tuple[float, float]] = {}   # (last t, last step)
        self.ticked: Dict[Tuple[str, int], float] = {}

    def before(self, run: str, rank: int) -> Tuple[float, float]:
        return self.record.get((run, rank), (-math.inf, -math.inf))

    def note(self, run: str, rank: int, batch: StepBatch, t_max: Optional[float] = None) -> None:
        """``batch`` was read (``t_max``: its :func:`latest_time`, when the caller has it)."""
        before, _ = self.before(run, rank)
        t_max = latest_time(batch) if t_max is None else t_max
        self.record[(run, rank)] = (max(before, t_max), float(batch.steps[-1]))

    def last_tick(self, run: str, rank: int) -> float:
        return self.ticked.get((run, rank), -math.inf)

    def tick(self, run: str, rank: int, now: float) -> None:
        self.ticked[(run, rank)] = max(now, self.last_tick(run, rank))
