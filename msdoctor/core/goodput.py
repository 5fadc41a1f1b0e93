"""Goodput: productive training time over wall time, and the badput split by cause.

Judged per run from one rank's events (the lowest rank seen), in the trainer's clock:

- wall: from the first process start (``run_start.process_t``), else the first ``run_start``,
  else the first step's begin, to the newest event;
- ``startup``: from each process start (or ``run_start``) to its first step's begin, plus the
  first step's excess over the typical step time (graph compilation);
- ``data_wait``: the steps' ``data_wait_s``;
- ``checkpoint``: checkpoint events' ``save_s`` and ``load_s``;
- ``hang``: a step far slower than the typical one (over ``HANG_FACTOR`` times it and
  ``HANG_MIN_S`` more): its excess over it. The typical step time of a step is the median of
  the last ``TYPICAL_WINDOW`` steps before it that were neither hung nor a process's first:
  causal, so the account is the same however the stream is cut (live or replayed);
- ``downtime``: between the newest event of one process and the next ``run_start``;
- ``redone``: after a resume at step S below the furthest step reached (a rollback, a crash and
  restart), the productive time the first pass spent on steps after S;
- ``evaluation``: step events' ``eval_s`` (the hooks time evaluation passes between steps);
- ``other``: what is left (hook and framework time between steps).

``productive`` is the rest of the steps' time; ``ratio = productive / wall``. Every cause but
``other`` only grows (:attr:`Goodput.badput` holds them as counters).
"""
from __future__ import annotations

import bisect
import math
from collections import deque
from typing import Any, Deque, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch

CAUSES = ("startup", "data_wait", "checkpoint", "hang", "downtime", "redone", "evaluation", "other")
HANG_FACTOR = 10.0
HANG_MIN_S = 1.0
#: Step times the typical one is the median of.
TYPICAL_WINDOW = 64
#: A process's first step is split once this many usable step times are known.
OWED_AFTER = 4
#: Checkpoint steps whose cumulative productive time is remembered (resume targets).
MAX_MARKS = 512


def hung(history: np.ndarray, step_time: np.ndarray, busy: np.ndarray,
         opening: bool) -> Tuple[np.ndarray, np.ndarray]:
    """Each row's typical step time (NaN before any) and whether it hung (its ``busy`` time over
    ``HANG_FACTOR`` times the typical and ``HANG_MIN_S`` more); ``history``: the usable step
    times before the rows, oldest first; ``opening``: the first row is a process's first step.

    Only a row busy over ``HANG_MIN_S`` can hang, so only those are judged: all at once as if no
    row hung, exact up to the first that did; one by one from there."""
    n = len(step_time)
    typical = np.full(n, np.nan)
    hang = np.zeros(n, dtype=bool)
    rows = np.flatnonzero(busy > HANG_MIN_S)
    if not len(rows):
        return typical, hang
    values = np.concatenate([history, step_time])
    usable = np.ones(len(values), dtype=bool)
    usable[len(history)] = not opening
    at = np.flatnonzero(usable)                      # positions of the usable values
    before = np.searchsorted(at, rows + len(history))  # usable values before each judged row
    typical[rows] = _medians(values, at, before)
    hang[rows] = busy[rows] > np.maximum(HANG_FACTOR * typical[rows], typical[rows] + HANG_MIN_S)
    first = np.flatnonzero(hang[rows])
    if not len(first):
        return typical, hang
    removed: List[int] = []                          # usable positions that hung, in order
    for j in range(int(first[0]), len(rows)):
        row = int(rows[j])
        if j > first[0]:
            t = typical[row] = _median(values, _kept(at, int(before[j]), removed))
            hang[row] = bool(busy[row] > max(HANG_FACTOR * t, t + HANG_MIN_S))
        if hang[row] and usable[row + len(history)]:
            removed.append(row + len(history))
    return typical, hang


def _kept(at: np.ndarray, k: int, removed: List[int]) -> np.ndarray:
    """The positions of the last TYPICAL_WINDOW of the first ``k`` usable values that did
    not hang (``removed``: those that did, all before the k-th, ascending)."""
    lo = max(0, k - TYPICAL_WINDOW)
    while True:                                      # widen the window past the hung ones
        inside = len(removed) - bisect.bisect_left(removed, int(at[lo])) if lo < k else 0
        wider = max(0, k - TYPICAL_WINDOW - inside)
        if wider == lo:
            break
        lo = wider
    window = at[lo:k]
    return window[~np.isin(window, removed[len(removed) - inside:])] if inside else window


def _median(values: np.ndarray, positions: np.ndarray) -> float:
    return float(np.median(values[positions])) if len(positions) else math.nan


def _medians(values: np.ndarray, at: np.ndarray, before: np.ndarray) -> np.ndarray:
    """The median of the last TYPICAL_WINDOW usable values before each count in ``before``."""
    out = np.full(len(before), np.nan)
    full = before >= TYPICAL_WINDOW
    if full.any():
        windows = at[before[full, None] - TYPICAL_WINDOW + np.arange(TYPICAL_WINDOW)]
        out[full] = np.median(values[windows], axis=1)
    for i in np.flatnonzero(~full):
        out[i] = _median(values, at[:before[i]])
    return out


class Goodput:
    """The goodput account of one run (see the module docstring)."""

    def __init__(self) -> None:
        self.rank: Optional[int] = None
        self.badput: Dict[str, float] = dict.fromkeys(CAUSES, 0.0)
        self.productive = 0.0
        self.first_t: Optional[float] = None
        self.last_t: Optional[float] = None
        self.max_step: Optional[int] = None
        self.last_step: Optional[int] = None
        self._start_t: Optional[float] = None      # a run_start whose first step is not seen yet
        self._marks: Dict[int, float] = {}         # step -> productive time up to its end
        self._wanted: set = set()                  # checkpoint steps not yet reached
        self._typical: Deque[float] = deque(maxlen=TYPICAL_WINDOW)
        self._loaded = 0.0           # checkpoint loads since the last run_start
        self._owed = 0.0             # a first step counted as startup, its typical part owed back

    # -- input ------------------------------------------------------------------------------
    def accepts(self, rank: int) -> bool:
        """Only the lowest rank counts; a lower one than seen so far starts the account over."""
        if self.rank is None or rank < self.rank:
            self.__init__()       # type: ignore[misc]
            self.rank = rank
        return rank == self.rank

    def apply(self, rank: int, events: Iterable[Mapping[str, Any]],
              steps: Optional[StepBatch]) -> None:
        """Fold one chunk of ``rank``: its non-step events, then its step batch."""
        if not self.accepts(rank):
            return
        for event in events:
            self._event(event)
        if steps is not None and len(steps):
            self._steps(steps)

    def apply_chunk(self, rank: int, events: list, others: list,
                    steps: Optional[StepBatch]) -> None:
        """Fold a spool chunk keeping its order (``events``: every event, steps included): a
        resume's ``run_start`` falls between the two processes' steps."""
        if steps is None or not others or len(events) != len(others) + len(steps):
            self.apply(rank, others, steps)
            return
        if not self.accepts(rank):
            return
        rest, row = steps, 0
        for event in events:
            if event.get("type") == "step":
                row += 1
                continue
            if row:
                self._steps(rest.slice(0, row))
                rest, row = rest.slice(row, len(rest)), 0
            self._event(event)
        if len(rest):
            self._steps(rest)

    def _see(self, t: Any) -> None:
        if isinstance(t, (int, float)) and math.isfinite(t):
            if self.first_t is None or t < self.first_t:
                self.first_t = float(t)
            if self.last_t is None or t > self.last_t:
                self.last_t = float(t)

    def _event(self, event: Mapping[str, Any]) -> None:
        kind, t = event.get("type"), event.get("t")
        if kind == "run_start" and isinstance(t, (int, float)):
            began = event.get("process_t")     # the process start: imports, model build
            if not (isinstance(began, (int, float)) and math.isfinite(began) and began <= t
                    and (self.last_t is None or began >= self.last_t)):
                began = t
            if self.last_t is not None and began > self.last_t:
                self.badput["downtime"] += began - self.last_t
            self.badput["startup"] += t - began
            self._see(began)
            self._start_t = float(t)
        elif kind == "checkpoint":
            for key in ("save_s", "load_s"):
                seconds = event.get(key)
                if isinstance(seconds, (int, float)) and 0 < seconds < math.inf:
                    self.badput["checkpoint"] += seconds
                    if key == "save_s":
                        self.productive -= seconds      # the save ran inside a step's time
                    else:
                        self._loaded += seconds         # ... the load before the first step
            step = event.get("step")
            if event.get("op", "save") == "save" and isinstance(step, int):
                if self.last_step is not None and step <= self.last_step:
                    if step == self.last_step or step not in self._marks:   # not a late repeat
                        self._mark(step, self.productive)
                else:
                    self._wanted.add(step)
        self._see(t)

    def _mark(self, step: int, value: float) -> None:
        self._marks[step] = value
        if len(self._marks) > MAX_MARKS:
            del self._marks[min(self._marks)]

    def _steps(self, batch: StepBatch) -> None:
        steps = batch.steps
        cuts = [0] + [int(c) for c in np.flatnonzero(steps[1:] <= steps[:-1]) + 1] + [len(steps)]
        for a, b in zip(cuts[:-1], cuts[1:]):
            if a < b:
                self._segment(batch.slice(a, b) if (a, b) != (0, len(steps)) else batch)

    def _column(self, batch: StepBatch, name: str) -> np.ndarray:
        values = batch.columns.get(name)
        if values is None:
            return np.zeros(len(batch))
        out = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
        mask = batch.masks.get(name)
        return out if mask is None else np.where(mask, out, 0.0)

    def _segment(self, batch: StepBatch) -> None:
        steps, t = batch.steps, batch.t
        first = int(steps[0])
        if self.last_step is not None and first <= self.last_step:
            self._resumed(first)
        step_time = self._column(batch, "step_time_s")
        wait = np.minimum(self._column(batch, "data_wait_s"), step_time)
        evaluation = self._column(batch, "eval_s")
        opening = self._start_t is not None      # its first row is the first step of a process
        compute = step_time - wait - evaluation
        busy = step_time - evaluation            # an evaluation pass is not a hang
        history = np.fromiter(self._typical, dtype=np.float64)
        typical, hang = hung(history, step_time, busy, opening)
        excess = np.where(hang, busy - typical, 0.0)
        productive = np.where(hang, np.minimum(busy, typical), compute)
        if self._start_t is not None:            # the first step after a run_start
            begin = float(t[0]) - float(step_time[0]) if math.isfinite(t[0]) else self._start_t
            self.badput["startup"] += max(0.0, begin - self._start_t - self._loaded)
            self._owed = float(step_time[0])     # compilation + a typical step: split once
                                                 # the typical step time is known
            productive[0] = wait[0] = excess[0] = 0.0
            self._start_t, self._loaded = None, 0.0
        elif self.first_t is None and len(t) and math.isfinite(t[0]):
            self._see(float(t[0]) - float(step_time[0]))
        self.badput["data_wait"] += float(np.sum(np.where(hang, 0.0, wait)))
        self.badput["hang"] += float(np.sum(excess))
        self.badput["evaluation"] += float(np.sum(evaluation))
        usable = ~hang
        usable[0] &= not opening
        if self._owed:
            self._repay(history, step_time, usable, productive)
        self._typical.extend(step_time[usable][-TYPICAL_WINDOW:].tolist())
        cumulative = self.productive + np.cumsum(productive)
        self.productive = float(cumulative[-1])
        for step in [s for s in self._wanted if first <= s <= int(steps[-1])]:
            row = int(np.searchsorted(steps, step, side="right")) - 1
            self._mark(step, float(cumulative[row]))
            self._wanted.discard(step)
        self.last_step = int(steps[-1])
        self.max_step = max(self.last_step, self.max_step or self.last_step)
        finite = t[np.isfinite(t)]
        if finite.shape[0]:
            self._see(float(finite.max()))

    def _repay(self, history: np.ndarray, step_time: np.ndarray, usable: np.ndarray,
               productive: np.ndarray) -> None:
        """Split a process's first step into startup and a typical step, at the row where
        ``OWED_AFTER`` usable step times are known (the typical step: their median)."""
        short = OWED_AFTER - len(history)
        rows = np.flatnonzero(usable)
        if short > len(rows):
            return
        row = 0 if short <= 0 else int(rows[short - 1])
        sample = history if short <= 0 else np.concatenate([history, step_time[rows[:short]]])
        back = min(self._owed, float(np.median(sample[-TYPICAL_WINDOW:])))
        self.badput["startup"] += self._owed - back
        productive[row] += back
        self._owed = 0.0

    def _resumed(self, first: int) -> None:
        """A run resumed at ``first``: the steps after it done before are redone."""
        below = [s for s in self._marks if s < first]
        at = self._marks[max(below)] if below else 0.0
        redone = max(0.0, self.productive - at)
        self.badput["redone"] += redone
        self.productive -= redone
        for s in [s for s in self._marks if s >= first]:
            del self._marks[s]
        self._wanted = {s for s in self._wanted if s < first}

    # -- output -----------------------------------------------------------------------------
    @property
    def wall(self) -> float:
        if self.first_t is None or self.last_t is None:
            return 0.0
        return max(0.0, self.last_t - self.first_t)

    def summary(self) -> Dict[str, Any]:
        """``{wall_s, productive_s, ratio, badput_s: {cause: seconds}}`` (ratio None before
        any time has passed)."""
        wall = self.wall
        productive = max(0.0, self.productive)
        badput = {k: max(0.0, v) for k, v in self.badput.items() if k != "other"}
        badput["startup"] += self._owed           # a first step not split yet
        badput["other"] = max(0.0, wall - productive - sum(badput.values()))
        return {"wall_s": wall, "productive_s": productive,
                "ratio": (min(1.0, productive / wall) if wall > 0 else None),
                "badput_s": badput}

    def state_dict(self) -> Dict[str, Any]:
        return {"rank": self.rank, "badput": dict(self.badput), "productive": self.productive,
                "first_t": self.first_t, "last_t": self.last_t, "max_step": self.max_step,
                "last_step": self.last_step, "start_t": self._start_t,
                "marks": [[s, v] for s, v in self._marks.items()], "wanted": sorted(self._wanted),
                "typical": list(self._typical), "loaded": self._loaded, "owed": self._owed}

    @classmethod
    def from_state(cls, d: Mapping[str, Any]) -> "Goodput":
        g = cls()
        g.rank = d.get("rank")
        g.badput.update({k: float(v) for k, v in (d.get("badput") or {}).items() if k in CAUSES})
        g.productive = float(d.get("productive") or 0.0)
        g.first_t, g.last_t = d.get("first_t"), d.get("last_t")
        g.max_step, g.last_step, g._start_t = d.get("max_step"), d.get("last_step"), d.get("start_t")
        g._marks = {int(s): float(v) for s, v in d.get("marks") or []}
        g._wanted = {int(s) for s in d.get("wanted") or []}
        g._typical.extend(float(x) for x in d.get("typical") or [])
        g._loaded, g._owed = float(d.get("loaded") or 0.0), float(d.get("owed") or 0.0)
        return g
