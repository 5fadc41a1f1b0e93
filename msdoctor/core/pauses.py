"""A rank's record with pauses inside, to the engine as the live sidecar would have seen it.

A batch read at once (a first read, a restart without a snapshot, a replay) can hold
pauses: the rank stopped stepping for a while, then went on. Live, the sidecar's clock
ticked through each pause (JobHung and the other clock-driven rules were judged then), so
the batch is cut at each pause (:func:`msdoctor.core.clock.split_at_gaps`) and the rank is
ticked through it between its parts, unless it was ticked past that time already.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from msdoctor.core.batch import StepBatch
from msdoctor.core.clock import RankTimes, latest_time, split_at_gaps

#: A part of a batch (None: the pause came before the batch) and the clock ticks after it.
Part = Tuple[Optional[StepBatch], Any]
#: One rank's item cut at its pauses: (run, rank, its other events, its parts).
Split = Tuple[str, int, List[Dict[str, Any]], List[Part]]


def parts_of(times: RankTimes, run: str, rank: int,
             batch: Optional[StepBatch]) -> Optional[List[Part]]:
    """How one rank's batch is evaluated: None for in one piece (no pause inside it), else
    its parts between pauses, each with the ticks that follow it."""
    t_max = latest_time(batch)
    before, step_before = times.before(run, rank)
    if (batch is None or not len(batch) or not math.isfinite(before) and len(batch) < 2
            or times.last_tick(run, rank) >= t_max):
        # nothing to cut: no pause inside, or the rank was ticked past all of it already
        # (live, the wall clock runs ahead of the records), so no tick falls in between
        return None
    parts = split_at_gaps(batch, before, step_before)
    if len(parts) == 1 and parts[0][0] is batch and not len(parts[0][1]):
        return None
    return parts


def _events(others: List[Dict[str, Any]], k: int, count: int) -> List[Dict[str, Any]]:
    """The events that go with part ``k`` of ``count``: a ``run_end`` with the last part (the
    rank was running during its pauses), the others with the first."""
    events = [e for e in others if e.get("type") != "run_end"] if k == 0 else []
    if k == count - 1:
        events = events + [e for e in others if e.get("type") == "run_end"]
    return events


def feed_parts(engine: Any, times: RankTimes, run: str, rank: int,
               others: List[Dict[str, Any]], parts: List[Part]) -> None:
    """One rank's parts in order, the rank ticked through the pause after each."""
    for k, (part, ticks) in enumerate(parts):
        events = _events(others, k, len(parts))
        if part is not None or events:
            engine.process(run, rank, events, part)
        for now in ticks.tolist():
            if now > times.last_tick(run, rank):
                engine.tick_rank(run, rank, now)
                times.tick(run, rank, now)


def feed_rounds(engine: Any, times: RankTimes, split: List[Split]) -> None:
    """:func:`feed_parts` for many ranks at once (the engine's ``process_many`` and
    ``tick_ranks``): the k-th parts of every rank together, then the j-th ticks of the pause
    after them of every rank together (each rank at its own time), then the (k+1)-th parts.
    Each rank sees its parts and ticks in :func:`feed_parts`'s order."""
    for k in range(max(len(parts) for *_, parts in split)):
        items = []
        for run, rank, others, parts in split:
            if k < len(parts):
                events = _events(others, k, len(parts))
                if parts[k][0] is not None or events:
                    items.append((run, rank, events, parts[k][0]))
        engine.process_many(items)
        ticks = [(run, rank, parts[k][1].tolist()) for run, rank, _, parts in split
                 if k < len(parts)]
        for j in range(max((len(t) for *_, t in ticks), default=0)):
            due: Dict[str, Tuple[List[int], List[float]]] = {}
            for run, rank, nows in ticks:
                if j < len(nows) and nows[j] > times.last_tick(run, rank):
                    ranks, at = due.setdefault(run, ([], []))
                    ranks.append(rank)
                    at.append(nows[j])
            for run, (ranks, at) in due.items():
                engine.tick_ranks(run, ranks, at)
                for rank, now in zip(ranks, at):
                    times.tick(run, rank, now)
