"""The sidecar's log of what it reads: new ranks, run start and end, progress, bad lines.

A pipeline consumer; ``msdoctor serve`` registers it. Bad lines are rate-limited per file, and
repeated or out-of-order steps (a resumed run) are warned about at most once per window.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from msdoctor.core import format as fmt
from msdoctor.core.spool import Chunk
from msdoctor.core.state import Store, count_repeats

log = logging.getLogger("msdoctor.serve")


class LogReporter:
    """A sidecar consumer that logs new ranks, run start/end, progress and bad lines.

    Bad lines are rate-limited per file: the first ``burst`` of each ``window``
    seconds are logged with file:line, the rest are counted and summarised.
    """

    name = "log"

    def __init__(self, progress_every: float = 30.0, burst: int = 5, window: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.progress_every, self.burst, self.window, self.clock = progress_every, burst, window, clock
        self._seen: Set[Tuple[str, int]] = set()
        self._last_progress = clock()
        self._reported_step: Dict[Tuple[str, int], int] = {}
        self._errors: Dict[str, List[Any]] = {}   # path -> [window start, logged, suppressed, last]
        self._last_step: Dict[str, int] = {}
        self._repeats_seen: Dict[str, int] = {}
        self._repeat_warned: Dict[str, float] = {}

    def on_chunk(self, chunk: Chunk, store: Optional[Store]) -> None:
        key = (chunk.run, chunk.rank)
        if key not in self._seen:
            self._seen.add(key)
            log.info("new rank: run %s rank %d (%s)", chunk.run, chunk.rank, chunk.path)
        for event in chunk.others:
            kind = event["type"]
            if kind == "run_start":
                config = event.get("config") or {}
                facts = " ".join(f"{k}={config[k]}" for k in
                                 ("model", "params", "seq_length", "global_batch", "precision",
                                  "parallel") if k in config)
                log.info("run_start: run %s rank %d world_size %s %s", chunk.run, chunk.rank,
                         event.get("world_size", "?"), facts)
            elif kind == "run_end":
                log.log(logging.INFO if event["status"] == "completed" else logging.WARNING,
                        "run_end: run %s rank %d %s at step %s%s", chunk.run, chunk.rank,
                        event["status"], event.get("step", "?"),
                        f": {event['exception']}" if event.get("exception") else "")
            elif kind == "stop":
                log.warning("stop acknowledged: run %s rank %d at step %s (%s)", chunk.run,
                            chunk.rank, event.get("step", "?"), event["reason"])
        for error in chunk.errors:
            self._bad_line(error)
        if chunk.steps is not None and len(chunk.steps) and store is not None:
            self._repeats(chunk, chunk.steps.steps, store)

    def _repeats(self, chunk: Chunk, steps: np.ndarray, store: Store) -> None:
        """Warn (at most once per window per file) when steps went backwards or repeated."""
        state = store.runs[chunk.run].ranks[chunk.rank]
        total = state.counters["repeated_steps"]
        before = self._last_step.get(chunk.path)
        seen = self._repeats_seen.get(chunk.path, total - count_repeats(steps, before))
        self._repeats_seen[chunk.path] = total
        self._last_step[chunk.path] = int(steps.max()) if before is None \
            else max(before, int(steps.max()))
        if total <= seen:
            return
        prev = np.maximum.accumulate(np.concatenate(
            [[np.iinfo(np.int64).min if before is None else before], steps[:-1]]))
        where = np.flatnonzero(steps <= prev)
        detail = (f" (first: step {int(steps[where[0]])} after step {int(prev[where[0]])})"
                  if where.size else "")
        now = self.clock()
        if now - self._repeat_warned.get(chunk.path, -math.inf) < self.window:
            return
        self._repeat_warned[chunk.path] = now
        log.warning("%s: %d repeated or out-of-order step(s)%s: counted in repeated_steps; the "
                    "buffered points from that step on are replaced (a run resumed from a "
                    "checkpoint?); further ones in the next %.0f s are only counted",
                    chunk.path, total - seen, detail, self.window)

    def _bad_line(self, error: Any) -> None:
        if not error.line_no:              # about the file; the tailer says it once
            log.warning("spool file: %s", error)
            return
        now = self.clock()
        entry = self._errors.setdefault(error.path, [now, 0, 0, None])
        if now - entry[0] >= self.window:
            self._flush(error.path, entry)
            entry[:] = [now, 0, 0, None]
        if entry[1] < self.burst:
            entry[1] += 1
            log.warning("bad line skipped: %s", error)
        else:
            entry[2] += 1
            entry[3] = error

    def _flush(self, path: str, entry: List[Any]) -> None:
        if entry[2]:
            log.warning("%d more bad lines in %s in the last %.0f s (latest: %s)", entry[2], path,
                        self.window, entry[3])

    def on_tick(self, now: float, store: Store) -> None:
        for path, entry in self._errors.items():
            if now - entry[0] >= self.window and entry[2]:
                self._flush(path, entry)
                entry[:] = [now, 0, 0, None]
        if now - self._last_progress < self.progress_every:
            return
        self._last_progress = now
        for run, rank, state in store.ranks():
            if state.last_step is None or self._reported_step.get((run, rank)) == state.last_step:
                continue
            self._reported_step[(run, rank)] = state.last_step
            latest = state.latest.get
            log.info("progress: run %s rank %d %s step %d loss %s grad_norm %s tokens/s %s "
                     "step_time %s errors %d", run, rank, state.status, state.last_step,
                     fmt.number(latest("loss")), fmt.number(latest("grad_norm")),
                     fmt.rate(latest("tokens_per_s")), fmt.duration(latest("step_time_s")),
                     state.counters["decode_errors"])
