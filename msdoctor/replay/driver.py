"""Replaying logs and spools: read the inputs (a log with its format's reader, a spool with the
sidecar's tailer), run them through the pipeline, summarise.

The result has the shape of ``msdoctor replay RUN_DIR --json`` over a spool
(:func:`msdoctor.cli.replay.replay`): ``{"alerts": [...], "summary": {...}}``, plus
the input facts (``format``, ``inputs``, ``lines``, ``parse_errors``, ``notes``,
``unknown_columns``) and the run summary (``stats``).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from msdoctor.core.clock import RecordClock
from msdoctor.core.heap import collector_paused
from msdoctor.core.pipeline import Item, Pipeline
from msdoctor.core.recovery import Ledger
from msdoctor.core.runstats import RunStats
from msdoctor.replay.crashes import ErrorScan
from msdoctor.replay.diagnosis import SpoolErrors, diagnose
from msdoctor.replay.formats import (
    FORMATS,
    READERS,
    FormatError,
    detect,
    file_order,
    is_spool,
    rank_of,
    reader,
)
from msdoctor.replay.progress import ProgressBar
from msdoctor.replay.recording import Recording
from msdoctor.replay.textfile import blocks
from msdoctor.replay.tree import select

TABLE_FIELDS = ("alert", "severity", "run", "rank", "step", "first_step", "value", "summary",
                "cause", "fix", "runbook_url", "t", "labels", "values", "action", "caused_by",
                "checkpoint")


def load(paths: List[str], fmt: str = "auto", rank: Optional[int] = None,
         run: Optional[str] = None, seq_length: Optional[int] = None,
         progress: Optional[bool] = None) -> Recording:
    """Read log files (not spools) into a :class:`Recording`; raises :class:`FormatError`."""
    chosen = select(paths)
    empty = [s for s in chosen.sources if s.role == "steps" and s.fmt is None and _empty(s.path)]
    for source in empty:
        chosen.skip(source.path, "empty file")
    sources = [s for s in chosen.sources if s not in empty]
    if not sources:
        why = f"; skipped {chosen.skipped[0][0]}: {chosen.skipped[0][1]}" if chosen.skipped else ""
        raise FormatError(f"{', '.join(paths)}: no logs found (expected MindFormers' "
                          "output/log/rank_N/info.log or output/msrun_log/worker_N.log, log files, "
                          f"or a run directory with events/rank-N.jsonl){why}")
    missing = [str(s.path) for s in sources if not s.path.is_file()]
    if missing:
        raise FormatError(f"{missing[0]}: no such file (expected a log file, a directory of "
                          "logs, or a run directory with events/rank-N.jsonl)")
    logs = [s for s in sources if s.role == "steps"]
    kinds = {s.path: (fmt if fmt != "auto" else s.fmt or _detect(s.path)) for s in logs}
    found = sorted(set(kinds.values()))
    if "spool" in found:
        raise FormatError(f"{', '.join(str(f) for f, k in kinds.items() if k == 'spool')}: a spool; "
                          "replay a run directory on its own")
    if len(found) > 1:
        raise FormatError("inputs in several formats (" + ", ".join(
            f"{f}: {k}" for f, k in kinds.items()) + "); replay one format at a time or pass --format")
    name = found[0] if found else "mindformers"
    if name not in READERS:
        raise FormatError(f"unknown format {name!r}; expected one of {', '.join(FORMATS)}")
    recording = Recording(name)
    recording.skipped = list(chosen.skipped)
    run_name = run or _run_name(paths)
    bar = ProgressBar(sum(os.path.getsize(s.path) for s in sources), progress)
    read = reader(name)
    # per rank, step logs first: an error they share with error.log is shown where it has context
    for source in sorted(sources, key=lambda s: (rank_of(s.path, rank), s.role == "errors",
                                                 file_order(s.path))):
        path, at = str(source.path), rank_of(source.path, rank)
        try:
            if source.role == "errors":
                read_errors(path, run_name, at, recording, bar.update)
            else:
                read(path, run_name, at, recording, bar.update, seq_length)
        except OSError as exc:
            raise FormatError(f"{path}: cannot read it ({exc.strerror or exc}); expected a "
                              "readable log file") from None
    bar.close()
    recording.bytes = bar.done
    return recording


def _empty(path: Path) -> bool:
    """True for a file with nothing in it (read, not stat: /proc files say size 0)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(1) == b""
    except OSError:
        return False                # unreadable: said when it is read


def _detect(path: Path) -> str:
    try:
        return detect(path)
    except OSError as exc:
        raise FormatError(f"{path}: cannot read it ({exc.strerror or exc}); expected a readable "
                          "log file") from None


def read_errors(path: str, run: str, rank: int, out: Recording, progress: Any = None) -> None:
    """An errors-only log (``error.log``): its ERROR lines and tracebacks, no steps."""
    scan = ErrorScan(path)
    for first_line, text, is_last in blocks(path, progress):
        out.lines += text.count("\n") + (1 if is_last else 0)
        scan.feed(text, first_line)
    out.add_errors(run, rank, scan, errors_only=True)


def _run_name(paths: List[str]) -> str:
    first = Path(paths[0]).resolve()
    return (first.stem if first.is_file() else first.name) or "replay"


def items_of(recording: Recording) -> Iterator[Item]:
    for batch in recording.batches():
        yield batch.run, batch.rank, [], batch


def evaluate(items: Iterable[Item], rules: Any, observe: Optional[Callable[[Item], None]] = None,
             clock: Any = None) -> Dict[str, Any]:
    """Run ``rules`` (a RuleSet) over the items of a recording through the pipeline (record
    clock by default); the replay result's alerts and engine facts."""
    pipeline = Pipeline(rules=rules, clock=clock or RecordClock(), store=False,
                        keep_transitions=True, persist=False)
    stats = RunStats()
    ledger = Ledger()
    started = time.perf_counter()
    events = steps = 0
    with collector_paused():   # no cycles are made: collecting short-lived dicts is waste
        for item in items:
            run, rank, others, batch = item
            events += len(others)
            if batch is not None and len(batch):
                steps += len(batch)
                stats.add(batch)
            ledger.add(run, rank, others, batch)
            pipeline.ingest(run, rank, others, batch)
            if observe is not None:
                observe(item)
        pipeline.finish()
    return result_of(pipeline, rules, events, steps, stats, time.perf_counter() - started, ledger)


def evaluate_spool(run_dir: Path, rules: Any, observe: Optional[Callable[[Item], None]] = None,
                   jobs: int = 1) -> Tuple[Dict[str, Any], List[str]]:
    """Run ``rules`` over a run directory's spool as the live sidecar would judge it now
    (wall clock); the result (with the per-rank diagnoses) and the spool's bad lines.
    ``jobs`` > 1 reads and decodes the rank files in that many processes
    (:mod:`msdoctor.replay.parallel`), with the same result."""
    pipeline = Pipeline(run_dir, rules=rules, store=False, keep_transitions=True, persist=False)
    pipeline.tailer.step_events = False    # no store: the step batches are all it needs
    stats = RunStats()
    ledger = Ledger()
    errors: List[str] = []
    failures = SpoolErrors()
    seen_ranks: set = set()
    counts = [0, 0]
    started = time.perf_counter()

    def seen(chunk: Any) -> None:
        errors.extend(str(e) for e in chunk.errors)
        counts[0] += len(chunk.others)
        failures.observe(chunk.run, chunk.rank, chunk.others)
        seen_ranks.add((chunk.run, chunk.rank))
        ledger.add(chunk.run, chunk.rank, chunk.others, chunk.steps, chunk.events)
        if chunk.steps is not None and len(chunk.steps):
            counts[1] += len(chunk.steps)
            stats.add(chunk.steps)
        if observe is not None:
            observe((chunk.run, chunk.rank, list(chunk.others), chunk.steps))

    with collector_paused():   # no cycles are made: collecting short-lived dicts is waste
        if jobs > 1:
            from msdoctor.replay.parallel import parallel_chunks

            for chunks in parallel_chunks(run_dir, jobs):
                for chunk in chunks:
                    pipeline.apply(chunk)
                    seen(chunk)
        else:
            pipeline.drain(seen)
        pipeline.finish()
    result = result_of(pipeline, rules, counts[0], counts[1], stats, time.perf_counter() - started,
                       ledger)
    result["ranks"] = diagnose(result, {k: (v, len(v)) for k, v in failures.found.items()},
                               seen_ranks)
    return result, errors



def result_of(pipeline: Pipeline, rules: Any, events: int, steps: int, stats: RunStats,
              took: float, ledger: Optional[Ledger] = None) -> Dict[str, Any]:
    """The replay result: the firing transitions and the summary."""
    transitions = pipeline.transitions or []
    engine = pipeline.engine
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
            "consequences": sum(1 for a in firing if a.caused_by),
            "transitions": len(transitions), "by_alert": by_alert,
            "still_firing": [f"{a['alert']}@{a['run']}/{a['rank']}"
                             for a in pipeline.alerts.firing()],
            "engine_errors": engine.errors, "seconds": round(took, 3), "stats": stats.to_dict(),
            "ingest": pipeline.run_limit.to_json(),
            **(ledger.summary(transitions) if ledger is not None else {}),
        },
    }


def replay_paths(paths: List[str], rules: Any, fmt: str = "auto", rank: Optional[int] = None,
                 run: Optional[str] = None, seq_length: Optional[int] = None,
                 progress: Optional[bool] = None,
                 observe: Optional[Callable[[Item], None]] = None, jobs: int = 1
                 ) -> Dict[str, Any]:
    """Replay log files or one run directory; the full result (see the module docstring).
    ``jobs`` > 1 reads a run directory's rank files in that many processes."""
    started = time.perf_counter()
    spool_errors: List[str] = []
    if len(paths) == 1 and fmt in ("auto", "spool") and is_spool(Path(paths[0])):
        result, spool_errors = evaluate_spool(Path(paths[0]), rules, observe, jobs)
        facts: Dict[str, Any] = {"format": "spool", "inputs": [paths[0]]}
    else:
        if fmt == "spool":
            raise FormatError(f"{paths[0]}: not a run directory (expected "
                              f"{Path(paths[0]) / 'events'}/rank-N.jsonl)")
        recording = load(paths, fmt, rank, run, seq_length, progress)
        result = evaluate(items_of(recording), rules, observe)
        result["ranks"] = diagnose(result, {k: (log.errors, log.error_count)
                                            for k, log in recording.ranks.items() if log.errors},
                                   recording.ranks)
        facts = {"format": recording.format, "skipped": recording.skipped,
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
