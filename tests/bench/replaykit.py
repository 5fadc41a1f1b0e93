"""What the detection benches share: the import path, the rules directory, and feeding a
labelled run to the engine as the sidecar would.

A run is fed as a ``run_start`` per rank (again at each restart), its rows in slabs (ranks
interleaved ``SLAB`` step numbers at a time, ``SOLO_SLAB`` for one rank, divided by the log
interval) with a clock tick after each slab, heartbeats once the steps stop, and ``run_end``.
The engine's clock is the run's: a slab is read at the time of its last row (on the wall clock,
a run whose records are stamped ahead of it would look silent for good at every tick).
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for _path in (HERE, ROOT):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from msdoctor.core.engine import Engine  # noqa: E402

RULES_DIR = os.path.join(ROOT, "rules")
TICK_S = 30.0
SLAB = 256              # step numbers per engine call and rank when ranks interleave
SOLO_SLAB = 8192        # a single-rank run has no cross-rank functions to interleave for


def firings(engine: Engine, record: Callable[[Any], Any], out: List[Any]
            ) -> Callable[[Any], None]:
    """Attach a sink to ``engine`` appending ``record(alert)`` of each firing transition to
    ``out``; returns the sink (remove it from ``engine.sinks`` when done)."""
    def sink(alert: Any) -> None:
        if alert.state == "firing":
            out.append(record(alert))
    engine.sinks.append(sink)
    return sink


def feed(engine: Engine, run_id: str, ranks: Sequence[int], rows: int, every: int,
         restarts: Dict[int, float], start: Callable[[int, Optional[float]], Dict],
         batch: Callable[[int, int, int], Any], last_t: Callable[[int], float],
         heartbeats: Iterable[float], end_t: Optional[float]) -> None:
    """Feed one run to ``engine``.

    ``start(rank, t)``: the run_start event (``t`` None at the beginning, the restart time at
    a restart); ``batch(rank, lo, hi)``: rows lo:hi of a rank; ``last_t(hi)``: the clock after
    rows :hi; ``restarts``: first row of each restart -> its time.
    """
    clock = [float(start(ranks[0], None)["t"])]
    engine.clock = lambda: clock[0]      # the sidecar reads each slab when it was written
    for rank in ranks:
        engine.process(run_id, rank, [start(rank, None)])
    slab = max(1, (SLAB if len(ranks) > 1 else SOLO_SLAB) // every)
    edges = sorted({*range(0, rows, slab), *restarts, rows})
    for lo, hi in zip(edges[:-1], edges[1:]):
        clock[0] = last_t(hi)
        for rank in ranks:
            if lo in restarts:                           # the process was restarted
                engine.process(run_id, rank, [start(rank, restarts[lo])])
            engine.process(run_id, rank, (), batch(rank, lo, hi))
        engine.on_tick(clock[0])
    for now in heartbeats:                               # alive, no more steps
        clock[0] = float(now)
        engine.on_tick(float(now))
    if end_t is not None:
        clock[0] = end_t
        for rank in ranks:
            engine.process(run_id, rank, [{"v": 1, "type": "run_end", "rank": rank,
                                           "run": run_id, "t": end_t, "status": "completed"}])
        clock[0] = end_t + TICK_S
        engine.on_tick(end_t + TICK_S)
