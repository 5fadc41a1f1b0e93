"""What the log readers produce: per-rank step columns, parse problems, then step batches.

A reader appends parsed blocks (step numbers, times, named float columns with a
"recorded" mask) to a :class:`Recording`; :meth:`Recording.batches` turns each
(run, rank)'s blocks into :class:`~msdoctor.core.batch.StepBatch` es of bounded size, the
same objects the spool ingest makes, so the rule engine cannot tell a log from a spool.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch, assemble
from msdoctor.replay.crashes import ErrorLine, ErrorScan, merge
from msdoctor.wire.errors import MsdoctorError

#: Rows per batch handed to the engine (its cost is per operator and batch, not per row).
BATCH_ROWS = 32768

#: ``name -> (values float64, recorded bool or None for all)``
Columns = Dict[str, Tuple[np.ndarray, Optional[np.ndarray]]]


class FormatError(MsdoctorError, ValueError):
    """An input no reader can read: names the path, what was expected and, where it helps, the
    first unreadable line."""


class Problems:
    """Lines that matched a format but could not be read: counted, a few kept as file:line text."""

    def __init__(self, keep: int = 50) -> None:
        self.keep = keep
        self.count = 0
        self.examples: List[str] = []
        self.notes: List[str] = []

    @property
    def full(self) -> bool:
        """True once no more examples are kept (callers may skip computing line numbers)."""
        return len(self.examples) >= self.keep

    def add(self, path: str, line: int, message: str) -> None:
        self.count += 1
        if len(self.examples) < self.keep:
            self.examples.append(f"{path}:{line}: {message}")

    def note(self, text: str) -> None:
        """Something tolerated (a truncated last line, a synthesised clock) worth telling."""
        if text not in self.notes and len(self.notes) < self.keep:
            self.notes.append(text)


@dataclass
class Block:
    steps: np.ndarray                 # int64
    t: np.ndarray                     # float64, NaN where unknown
    columns: Columns


@dataclass
class RankLog:
    """Everything read for one (run, rank), in file order."""

    run: str
    rank: int
    blocks: List[Block] = field(default_factory=list)
    sources: List[str] = field(default_factory=list)
    errors: List[ErrorLine] = field(default_factory=list)     # the first ones, in time order
    counts: Dict[bool, int] = field(default_factory=dict)     # errors-only file? -> errors

    @property
    def error_count(self) -> int:
        """Errors of this rank: info.log holds error.log's lines too, so the larger count."""
        return max(self.counts.values(), default=0)


class Recording:
    """Parsed step data of several ranks, plus the problems met while reading."""

    def __init__(self, fmt: str) -> None:
        self.format = fmt
        self.ranks: Dict[Tuple[str, int], RankLog] = {}
        self.problems = Problems()
        self.lines = 0                 # input lines read (for the throughput figure)
        self.bytes = 0
        self.unknown_columns: List[str] = []
        self.others: Dict[Tuple[str, int], List[dict]] = {}   # run_start etc. (tables: none)
        self.skipped: List[Tuple[str, str]] = []       # (path, why) of inputs not read
        self.merge_by_step = False     # blocks of a rank are columns of the same steps (TensorBoard)

    def rank_log(self, run: str, rank: int, source: str) -> RankLog:
        log = self.ranks.get((run, rank))
        if log is None:
            log = self.ranks[(run, rank)] = RankLog(run, rank)
        if source not in log.sources:
            log.sources.append(source)
        return log

    def add(self, run: str, rank: int, source: str, block: Block) -> None:
        if len(block.steps):
            self.rank_log(run, rank, source).blocks.append(block)

    def add_errors(self, run: str, rank: int, scan: ErrorScan, errors_only: bool = False) -> None:
        """The errors one file of this rank holds (the rank is known even without steps)."""
        log = self.rank_log(run, rank, scan.path)
        log.errors = merge(log.errors, scan.found)
        log.counts[errors_only] = log.counts.get(errors_only, 0) + scan.count

    def batches(self, rows: int = BATCH_ROWS) -> Iterator[StepBatch]:
        """Step batches of every rank, interleaved in time order of their first rows."""
        pending: List[Tuple[float, int, StepBatch]] = []
        for order, log in enumerate(self.ranks.values()):
            steps, t, columns = (_merge if self.merge_by_step else _concat)(log.blocks)
            if not len(steps):
                continue
            if np.isnan(t).all():
                t = _synthetic_clock(columns, len(steps))
                self.problems.note(f"rank {log.rank}: the log has no timestamps; times are the "
                                   "running sum of the step times (1 s per step where unknown)")
            for start in range(0, len(steps), rows):
                stop = min(start + rows, len(steps))
                batch = _batch(log.run, log.rank, steps[start:stop], t[start:stop],
                               {k: (v[start:stop], None if m is None else m[start:stop])
                                for k, (v, m) in columns.items()})
                first = float(t[start]) if not np.isnan(t[start]) else float("inf")
                pending.append((first, order, batch))
        pending.sort(key=lambda p: (p[0], p[1]))
        for _, _, batch in pending:
            yield batch


def _concat(blocks: List[Block]) -> Tuple[np.ndarray, np.ndarray, Columns]:
    if not blocks:
        return np.zeros(0, np.int64), np.zeros(0), {}
    if len(blocks) == 1:
        return blocks[0].steps, blocks[0].t, dict(blocks[0].columns)
    steps = np.concatenate([b.steps for b in blocks])
    t = np.concatenate([b.t for b in blocks])
    names = list(dict.fromkeys(k for b in blocks for k in b.columns))
    columns: Columns = {}
    for name in names:
        values, masks = [], []
        for b in blocks:
            n = len(b.steps)
            v, m = b.columns.get(name, (None, None))
            if v is None:
                values.append(np.full(n, np.nan))
                masks.append(np.zeros(n, bool))
            else:
                values.append(v)
                masks.append(np.ones(n, bool) if m is None else m)
        mask = np.concatenate(masks)
        columns[name] = (np.concatenate(values), None if mask.all() else mask)
    return steps, t, columns


def _merge(blocks: List[Block]) -> Tuple[np.ndarray, np.ndarray, Columns]:
    """Blocks holding different columns of the same steps, as one block on the union of steps."""
    if not blocks:
        return np.zeros(0, np.int64), np.zeros(0), {}
    steps = np.unique(np.concatenate([b.steps for b in blocks]))
    n = len(steps)
    t = np.full(n, np.nan)
    merged: Dict[str, Tuple[np.ndarray, np.ndarray]] = {}
    for b in blocks:
        at = np.searchsorted(steps, b.steps)
        unset = np.isnan(t[at])
        t[at[unset]] = b.t[unset]
        for name, (v, m) in b.columns.items():
            values, have = merged.setdefault(name, (np.full(n, np.nan), np.zeros(n, bool)))
            rec = np.ones(len(at), bool) if m is None else m
            values[at[rec]] = v[rec]
            have[at[rec]] = True
    return steps, t, {k: (v, None if h.all() else h) for k, (v, h) in merged.items()}


def _synthetic_clock(columns: Columns, n: int) -> np.ndarray:
    seconds = np.ones(n)
    if "step_time_s" in columns:
        v, m = columns["step_time_s"]
        ok = np.isfinite(v) & (v > 0) if m is None else (m & np.isfinite(v) & (v > 0))
        seconds[ok] = v[ok]
    return np.cumsum(seconds)


def _batch(run: str, rank: int, steps: np.ndarray, t: np.ndarray, columns: Columns) -> StepBatch:
    tables = []
    for name, (values, mask) in columns.items():
        if mask is None:
            tables.append((None, (name,), values.reshape(-1, 1)))
        elif mask.any():
            index = np.flatnonzero(mask)
            tables.append((index, (name,), values[index].reshape(-1, 1)))
    return assemble(run, rank, np.ascontiguousarray(steps, dtype=np.int64),
                    np.ascontiguousarray(t, dtype=np.float64), tables)
