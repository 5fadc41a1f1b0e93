"""Replaying logs: read the inputs with their format's reader, run the rule engine, summarise.

The result has the shape of ``msdoctor replay RUN_DIR --json`` over a spool
(:func:`msdoctor.cli.replay.replay`): ``{"alerts": [...], "summary": {...}}``, plus
the input facts (``format``, ``inputs``, ``lines``, ``parse_errors``, ``notes``,
``unknown_columns``) and the run summary (``stats``).
"""
from __future__ import annotations

import gc
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch
from msdoctor.replay.formats import (FORMATS, READERS, FormatError, detect, expand, file_order,
                                     is_spool, rank_of)
from msdoctor.replay.progress import ProgressBar
from msdoctor.replay.recording import Recording
from msdoctor.core.runstats import RunStats

TABLE_FIELDS = ("alert", "severity", "run", "rank", "step", "first_step", "value", "summary",
                "cause", "fix", "runbook_url", "t", "labels", "values", "action")

#: (run, rank, non-step events, step batch or None)
Item = Tuple[str, int, List[Dict[str, Any]], Optional[StepBatch]]

#: A pause between two records of a rank longer than MIN_PAUSE_S and PAUSE_FACTOR times the
#: rank's median interval is replayed as the live sidecar would have seen it: the clock ticks
#: (every TICK_S, at most MAX_GAP_TICKS times) in between and just before the next record. (The
#: factor keeps a log of one-minute steps from being cut at every record; JobHung itself waits
#: for 30 median steps.)
MIN_PAUSE_S = 1.0
PAUSE_FACTOR = 10.0
TICK_S = 30.0
MAX_GAP_TICKS = 200


def gap_ticks(t_before: float, t_after: float) -> np.ndarray:
    """Clock times to evaluate a rank at inside a pause from ``t_before`` to ``t_after``."""
    ticks = np.arange(t_before + TICK_S, t_after, TICK_S)
    if ticks.shape[0] > MAX_GAP_TICKS:
        ticks = np.linspace(t_before + TICK_S, t_after, MAX_GAP_TICKS, endpoint=False)
    last = t_after - 1e-3                 # just before the record that ends the pause
    return np.append(ticks, last) if last > t_before else ticks


def split_at_gaps(batch: StepBatch, t_before: float, step_before: float = -math.inf
                  ) -> List[Tuple[Optional[StepBatch], np.ndarray]]:
    """``batch`` cut before each row that comes after a pause (see TICK_S), each part with the
    clock ticks of the pause that follows it (the last part: none; the first part is None when
    the pause came before the batch). A pause after which the step number goes back is the
    downtime before a restart, not a hang: no ticks there."""
    t = np.array(batch.t, dtype=np.float64)
    known = ~np.isnan(t)
    if not known.any():
        return [(batch, np.zeros(0))]
    prev = np.concatenate(([t_before], t[:-1]))
    prev_known = np.where(np.isnan(prev), -np.inf, prev)
    np.maximum.accumulate(prev_known, out=prev_known)      # the last known time before each row
    gaps = t - prev_known
    intervals = np.diff(t[known])
    typical = float(np.median(intervals)) if intervals.shape[0] else 0.0
    pause = max(MIN_PAUSE_S, PAUSE_FACTOR * typical)
    prev_step = np.concatenate(([step_before], batch.steps[:-1].astype(np.float64)))
    cuts = np.flatnonzero(known & np.isfinite(prev_known) & (gaps > pause)
                          & (batch.steps > prev_step))
    if cuts.shape[0] == 0:
        return [(batch, np.zeros(0))]
    parts, start = [], 0
    for cut in (int(c) for c in cuts):
        ticks = gap_ticks(float(prev_known[cut]), float(t[cut]))
        if cut == 0:                      # the pause came before this batch
            parts.append((None, ticks))
        else:
            parts.append((batch.slice(start, cut), ticks))
        start = cut
    parts.append((batch.slice(start, len(batch)), np.zeros(0)))
    return parts


def load(paths: List[str], fmt: str = "auto", rank: Optional[int] = None,
         run: Optional[str] = None, seq_length: Optional[int] = None,
         progress: Optional[bool] = None) -> Recording:
    """Read log files (not spools) into a :class:`Recording`; raises :class:`FormatError`."""
    files = expand(paths)
    if not files:
        raise FormatError(f"no log files found in {', '.join(paths)}")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FormatError(f"{missing[0]}: no such file (expected a log file, a directory of "
                          "logs, or a run directory with events/rank-N.jsonl)")
    kinds = {f: (fmt if fmt != "auto" else detect(f)) for f in files}
    found = sorted(set(kinds.values()))
    if "spool" in found:
        raise FormatError(f"{', '.join(str(f) for f, k in kinds.items() if k == 'spool')}: a spool; "
                          "replay a run directory on its own")
    if len(found) > 1:
        raise FormatError("inputs in several formats (" + ", ".join(
            f"{f}: {k}" for f, k in kinds.items()) + "); replay one format at a time or pass --format")
    name = found[0]
    if name not in READERS:
        raise FormatError(f"unknown format {name!r}; expected one of {', '.join(FORMATS)}")
    recording = Recording(name)
    run_name = run or _run_name(paths)
    bar = ProgressBar(sum(os.path.getsize(f) for f in files), progress)
    reader = READERS[name]
    for path in sorted(files, key=lambda f: (rank_of(f, rank), file_order(f))):
        reader(str(path), run_name, rank_of(path, rank), recording, bar.update, seq_length)
    bar.close()
    recording.bytes = bar.done
    return recording


def _run_name(paths: List[str]) -> str:
    first = Path(paths[0]).resolve()
    return (first.stem if first.is_file() else first.name) or "replay"


def items_of(recording: Recording) -> Iterator[Item]:
    for batch in recording.batches():
        yield batch.run, batch.rank, [], batch


def spool_items(run_dir: Path, errors: List[str]) -> Iterator[Item]:
    """A spool's chunks, read by the sidecar's own tailer (the spool path of replay)."""
    from msdoctor.core.spool import SpoolTailer, drain

    for chunks in drain(SpoolTailer(run_dir)):
        for chunk in chunks:
            errors.extend(str(e) for e in chunk.errors)
            yield chunk.run, chunk.rank, list(chunk.others), chunk.steps


def evaluate(items: Iterable[Item], rules: Any, observe: Optional[Callable[[Item], None]] = None
             ) -> Dict[str, Any]:
    """Run ``rules`` (a RuleSet) over ``items``; the replay result's alerts and engine facts."""
    from msdoctor.core.engine.evaluator import Engine

    transitions: List[Any] = []
    engine = Engine(rules, sinks=[transitions.append])
    stats = RunStats()
    started = time.perf_counter()
    events = steps = 0
    last_t = -math.inf
    rank_t: Dict[Tuple[str, int], Tuple[float, float]] = {}   # last time, last step
    collecting = gc.isenabled()
    gc.disable()      # no reference cycles here: collecting the many short-lived dicts is waste
    try:
        for item in items:
            run, rank, others, batch = item
            events += len(others)
            if batch is not None and len(batch):
                steps += len(batch)
                t_max = float(batch.t.max())
                if math.isnan(t_max):           # some steps without a time
                    t_ok = batch.t[~np.isnan(batch.t)]
                    t_max = float(t_ok.max()) if t_ok.size else -math.inf
                last_t = max(last_t, t_max)
                stats.add(batch)
            for e in others:
                t = e.get("t")
                if isinstance(t, (int, float)) and t > last_t:
                    last_t = float(t)
            _process(engine, run, rank, others, batch, rank_t)
            if observe is not None:
                observe(item)
    finally:
        if collecting:
            gc.enable()
    if math.isfinite(last_t):          # judge clock rules as of the end of the recording
        engine.on_tick(last_t)
    took = time.perf_counter() - started
    firing = [a for a in transitions if a.state == "firing"]
    by_alert: Dict[str, int] = {}
    for a in firing:
        by_alert[a.alert] = by_alert.get(a.alert, 0) + 1
    ranks = sorted({(run, r) for run, rc in engine.runs.items() for r in rc.ranks})
    return {
        "alerts": [{k: v for k, v in a.to_dict().items() if k in TABLE_FIELDS} for a in firing],
        "transitions": transitions,
        "summary": {
            "rules": len(rules), "events": events + steps, "steps": steps,
            "runs": sorted(engine.runs), "ranks": len(ranks), "firing": len(firing),
            "transitions": len(transitions), "by_alert": by_alert,
            "still_firing": [f"{a['alert']}@{a['run']}/{a['rank']}" for a in engine.firing()],
            "engine_errors": engine.errors, "seconds": round(took, 3), "stats": stats.to_dict(),
        },
    }


def _process(engine: Any, run: str, rank: int, others: List[Dict[str, Any]],
             batch: Optional[StepBatch], rank_t: Dict[Tuple[str, int], Tuple[float, float]]
             ) -> None:
    """Feed one item; a pause inside the rank's record ticks that rank's clock in between.

    A ``run_end`` among ``others`` is folded with the last part (the rank was running during
    its pauses); the other events with the first.
    """
    before, step_before = rank_t.get((run, rank), (-math.inf, -math.inf))
    if batch is None or not len(batch) or not math.isfinite(before) and len(batch) < 2:
        engine.process(run, rank, others, batch)
    else:
        parts = split_at_gaps(batch, before, step_before)
        ends = [e for e in others if e.get("type") == "run_end"]
        first = [e for e in others if e.get("type") != "run_end"]
        for k, (part, ticks) in enumerate(parts):
            events = first if k == 0 else []
            if k == len(parts) - 1:
                events = events + ends
            if part is not None or events:
                engine.process(run, rank, events, part)
            for now in ticks:
                engine.tick_rank(run, rank, float(now))
    if batch is not None and len(batch):
        t_ok = batch.t[~np.isnan(batch.t)]
        rank_t[(run, rank)] = (max(before, float(t_ok.max())) if t_ok.size else before,
                               float(batch.steps[-1]))


def replay_paths(paths: List[str], rules: Any, fmt: str = "auto", rank: Optional[int] = None,
                 run: Optional[str] = None, seq_length: Optional[int] = None,
                 progress: Optional[bool] = None,
                 observe: Optional[Callable[[Item], None]] = None) -> Dict[str, Any]:
    """Replay log files or one run directory; the full result (see the module docstring)."""
    started = time.perf_counter()
    spool_errors: List[str] = []
    if len(paths) == 1 and fmt in ("auto", "spool") and is_spool(Path(paths[0])):
        result = evaluate(spool_items(Path(paths[0]), spool_errors), rules, observe)
        facts: Dict[str, Any] = {"format": "spool", "inputs": [paths[0]]}
    else:
        if fmt == "spool":
            raise FormatError(f"{paths[0]}: not a run directory (expected "
                              f"{Path(paths[0]) / 'events'}/rank-N.jsonl)")
        recording = load(paths, fmt, rank, run, seq_length, progress)
        result = evaluate(items_of(recording), rules, observe)
        facts = {"format": recording.format,
                 "inputs": sorted({s for log in recording.ranks.values() for s in log.sources}),
                 "lines": recording.lines, "bytes": recording.bytes,
                 "parse_errors": recording.problems.examples,
                 "parse_error_count": recording.problems.count,
                 "notes": recording.problems.notes,
                 "unknown_columns": recording.unknown_columns}
    summary = result["summary"]
    summary.update(facts)
    summary["run_dir"] = ", ".join(paths)
    summary["spool_errors"] = spool_errors[:50]
    summary["spool_error_count"] = len(spool_errors)
    summary["seconds"] = round(time.perf_counter() - started, 3)
    return result
