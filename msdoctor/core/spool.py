"""Tail the event spool: ``<run_dir>/events/rank-<N>.jsonl``, one file per rank.

:class:`SpoolTailer` remembers a byte offset and a line count per file, reads
only what was appended since, and hands back one :class:`Chunk` per file with
new complete lines. A line is complete only once its ``\\n`` is written, so a
partial last line stays unread until the rest arrives. Bad lines (not JSON, not
UTF-8, not a valid event, too long) become :class:`SpoolError` entries naming
``file:line`` and are skipped; ingest goes on.

The common case, a read of valid events, is decoded in bulk (step events
validated and columnized a block at a time, see :meth:`SpoolTailer._decode_bulk`);
anything else falls back to the exact line-by-line decoder, which gives the same
events, errors and positions.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Set, Tuple

import numpy as np

from msdoctor.core.batch import StepBatch, assemble, columnize, step_block, wire_steps
from msdoctor.wire.codec import loads
from msdoctor.wire.layout import RANK_FILE, events_dir
from msdoctor.wire.schema import FIELDS, INT64_MAX, INT64_MIN, EventError, validate

try:  # the bulk path parses with orjson directly (errors are left to the exact path)
    from orjson import loads as _raw_loads
except ImportError:  # pragma: no cover - exercised only without orjson
    _raw_loads = None  # type: ignore[assignment]

MAX_LINE_BYTES = 1 << 20          # a longer line is skipped as an error, never buffered whole
DEFAULT_POLL_BYTES = 8 << 20      # read budget of one poll, shared by the files with new data
MIN_FILE_BYTES = 256 << 10        # each file with new data may read at least this much per poll
MAX_BULK_SHAPES = 64              # more distinct key tuples in one read: decode line by line
BULK_LINES = 2048                 # lines parsed and checked together by the bulk decoder


@dataclass(frozen=True)
class SpoolError:
    """One bad line (or a file-level problem, ``line_no`` 0) of a spool file."""

    path: str
    line_no: int
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line_no}" if self.line_no else self.path
        return f"{where}: {self.message}"


@dataclass
class Chunk:
    """The new complete lines of one rank file (of one run) read by one poll."""

    path: str
    rank: int
    run: str
    events: List[Dict[str, Any]] = field(default_factory=list)   # every decoded event, file order
    steps: Optional[StepBatch] = None                            # its step events, columnar
    errors: List[SpoolError] = field(default_factory=list)
    others: List[Dict[str, Any]] = field(default_factory=list)   # its non-step events, in order


@dataclass
class _File:
    rank: int
    offset: int = 0
    lines: int = 0
    run: Optional[str] = None       # run id from the latest run_start seen in this file
    skipping: bool = False          # inside an over-long line: discard up to the next newline
    inode: Optional[int] = None
    behind: bool = False            # the last read stopped at its budget: more lines wait


def _fast_decode_table() -> Dict[str, Tuple[Dict[str, tuple], frozenset]]:
    """Per event type: field -> exact types that validate() accepts unchanged; required fields."""
    accept = {"int": (int,), "number": (float, int), "bool": (bool,), "string": (str,),
              "object": (dict,)}
    table = {}
    for kind, spec in FIELDS.items():
        types = {name: accept[fkind] for name, (fkind, _) in spec.items()}
        required = frozenset(name for name, (_, req) in spec.items() if req)
        table[kind] = (types, required)
    return table


_FAST = _fast_decode_table()


_ACCEPTED: Dict[tuple, bool] = {}   # (type, keys, value types) -> passes the fast check
_ACCEPTED_MAX = 1024


def _fast_ok(kind: str, event: Dict[str, Any]) -> bool:
    entry = _FAST.get(kind)
    if entry is None:
        return False
    types, required = entry
    for name, value in event.items():
        allowed = types.get(name)
        if allowed is not None and type(value) not in allowed:
            return False
    return required.issubset(event.keys())


def decode_line(line: bytes) -> Dict[str, Any]:
    """Same result as :func:`msdoctor.wire.decode`, faster for the common case.

    An event whose known fields already have their exact wire types needs no
    normalising: such shapes (type, field names, value types) are checked once
    and remembered. Anything else (non-finite strings, integral floats, errors)
    goes through :func:`msdoctor.wire.schema.validate`, so normalising and
    error messages stay the schema's own.
    """
    return check_event(loads(line))


def check_event(event: Any) -> Dict[str, Any]:
    """:func:`decode_line` after the JSON parse: validate (and normalise) a parsed event."""
    if type(event) is dict and event.get("v") == 1:
        kind = event.get("type")
        if type(kind) is str:
            shape = (kind, tuple(event), tuple(map(type, event.values())))
            ok = _ACCEPTED.get(shape)
            if ok is None:
                if len(_ACCEPTED) >= _ACCEPTED_MAX:
                    _ACCEPTED.clear()
                ok = _ACCEPTED[shape] = _fast_ok(kind, event)
            # ints must fit in 64 bits (numpy columns): the one check a shape cannot carry
            if ok and kind == "step" and INT64_MIN <= event["step"] <= INT64_MAX \
                    and INT64_MIN <= event["rank"] <= INT64_MAX:
                return event
    return validate(event)


def _groups(events: List[Dict[str, Any]], by_keys: bool = False) -> Optional[List[Any]]:
    """Row indices of events with the same number of keys (or the same key tuple);
    ``[None]`` when that is every row; None when there are too many kinds."""
    n = len(events)
    shapes: List[Any] = list(map(tuple, events)) if by_keys else list(map(len, events))
    if shapes.count(shapes[0]) == n:
        return [None]
    unique = list(dict.fromkeys(shapes))
    if len(unique) > MAX_BULK_SHAPES:
        return None
    code = {shape: i for i, shape in enumerate(unique)}
    codes = np.fromiter(map(code.__getitem__, shapes), dtype=np.intp, count=n)
    return [np.flatnonzero(codes == i) for i in range(len(unique))]


class SpoolTailer:
    """Incrementally read every ``rank-*.jsonl`` of ``<run_dir>/events``.

    ``offsets`` (from :attr:`offsets` of an earlier tailer) resumes where that
    one stopped; ``runs`` (from :attr:`runs`) restores the run id of each file.
    """

    def __init__(self, run_dir: os.PathLike | str,
                 offsets: Optional[Mapping[str, Tuple[int, int]]] = None,
                 runs: Optional[Mapping[str, str]] = None,
                 max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.run_dir = Path(run_dir)
        self.events_dir = events_dir(self.run_dir)
        self.default_run = self.run_dir.resolve().name
        self.max_line_bytes = int(max_line_bytes)
        self._files: Dict[str, _File] = {}
        for rel, pos in (offsets or {}).items():
            self._files[rel] = self._new_file(rel, int(pos[0]), int(pos[1]))
        for rel, run in (runs or {}).items():
            if rel in self._files:
                self._files[rel].run = run

    # -- persisted position ------------------------------------------------
    @property
    def offsets(self) -> Dict[str, Tuple[int, int]]:
        """``{relative path: (byte offset, line count)}`` of every file seen."""
        return {rel: (f.offset, f.lines) for rel, f in self._files.items()}

    @property
    def runs(self) -> Dict[str, str]:
        """``{relative path: run id}`` of the files whose run_start was read."""
        return {rel: f.run for rel, f in self._files.items() if f.run is not None}

    def state_dict(self) -> Dict[str, Any]:
        """Everything needed to resume exactly here (JSON-able)."""
        return {"files": {rel: {"offset": f.offset, "lines": f.lines, "run": f.run,
                                "skipping": f.skipping}
                          for rel, f in self._files.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        files = state.get("files")
        if not isinstance(files, dict):
            raise ValueError(f"spool state: 'files' must be an object, got {type(files).__name__}")
        self._files = {}
        for rel, entry in files.items():
            f = self._new_file(rel, int(entry["offset"]), int(entry["lines"]))
            run = entry.get("run")
            f.run = run if isinstance(run, str) else None
            f.skipping = bool(entry.get("skipping", False))
            self._files[rel] = f

    def _new_file(self, rel: str, offset: int, lines: int) -> _File:
        match = RANK_FILE.search(rel)
        if match is None or offset < 0 or lines < 0:
            raise ValueError(f"bad spool offset entry {rel!r}: ({offset}, {lines}); expected "
                             f"'events/rank-<N>.jsonl' with a non-negative offset and line count")
        return _File(rank=int(match.group(1)), offset=offset, lines=lines)

    def behind(self) -> Set[Tuple[str, int]]:
        """``(run, rank)`` of the files whose last read stopped at its byte budget: their
        backlog is not read yet (a trailing partial line does not count)."""
        return {(f.run or self.default_run, f.rank) for f in self._files.values() if f.behind}

    # -- reading -------------------------------------------------------------
    def scan(self) -> List[Tuple[str, os.DirEntry]]:
        """The rank files present now, as ``(relative path, entry)`` sorted by rank."""
        try:
            entries = [e for e in os.scandir(self.events_dir) if RANK_FILE.match(e.name)]
        except (FileNotFoundError, NotADirectoryError):
            return []
        entries.sort(key=lambda e: int(RANK_FILE.match(e.name).group(1)))  # type: ignore[union-attr]
        return [(f"events/{e.name}", e) for e in entries]

    def poll(self, max_bytes: int = DEFAULT_POLL_BYTES) -> List[Chunk]:
        """Read what was appended since the last poll; one or more Chunks per changed file."""
        pending, found = [], self.scan()
        chunks: List[Chunk] = []
        removed = self._files.keys() - {rel for rel, _ in found}
        if removed:
            chunks.extend(self._forget(sorted(removed)))
        for rel, entry in found:
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            f = self._files.get(rel)
            if f is None:
                f = self._files[rel] = self._new_file(rel, 0, 0)
            if f.inode is None:
                f.inode = st.st_ino
            if st.st_size != f.offset or st.st_ino != f.inode:
                pending.append((rel, entry.path, f, st))
            else:
                f.behind = False
        if not pending:
            return chunks
        share = max(int(max_bytes) // len(pending), MIN_FILE_BYTES, 1)
        for _rel, path, f, st in pending:
            chunks.extend(self._read(path, f, st, share))
        return chunks

    def _forget(self, removed: List[str]) -> List[Chunk]:
        """Drop the position of files that were removed (a file that comes back is new)."""
        chunks = []
        for rel in removed:
            f = self._files.pop(rel)
            path = str(self.run_dir / rel)
            chunks.append(self._empty(path, f, [SpoolError(
                path, 0, f"file was removed after {f.lines} lines; if it comes back it is "
                         f"read from the start")]))
        return chunks

    def _restart(self, path: str, f: _File, reason: str) -> SpoolError:
        error = SpoolError(path, 0, f"{reason}; reading it again from the start")
        f.offset, f.lines, f.run, f.skipping = 0, 0, None, False
        return error

    def _read(self, path: str, f: _File, st: os.stat_result, budget: int) -> List[Chunk]:
        errors: List[SpoolError] = []
        if st.st_ino != f.inode:
            errors.append(self._restart(path, f, "file was replaced (new inode)"))
            f.inode = st.st_ino
        elif st.st_size < f.offset:
            errors.append(self._restart(
                path, f, f"file shrank from {f.offset} to {st.st_size} bytes (truncated or rotated)"))
        available = st.st_size - f.offset
        limit = self.max_line_bytes
        data = b""
        if available > 0:
            try:
                with open(path, "rb") as fh:
                    fh.seek(f.offset)
                    data = fh.read(min(available, budget))
                    f.behind = len(data) < available
                    end = data.rfind(b"\n")
                    # No complete line in the budget: read on, up to one line's bound.
                    while end < 0 and len(data) <= limit and len(data) < available:
                        more = fh.read(min(available - len(data), limit + 1 - len(data)))
                        if not more:
                            break
                        data += more
                        end = data.rfind(b"\n")
                    f.behind = len(data) < available
            except OSError as exc:
                errors.append(SpoolError(path, 0, f"cannot read: {exc.strerror or exc}"))
                return [Chunk(path, f.rank, f.run or self.default_run, errors=errors)]
        return self._consume(path, f, data, errors)

    def _consume(self, path: str, f: _File, data: bytes, errors: List[SpoolError]) -> List[Chunk]:
        start = 0
        if f.skipping:                     # finish discarding an over-long line
            nl = data.find(b"\n")
            if nl < 0:
                f.offset += len(data)
                return [self._empty(path, f, errors)] if errors else []
            f.lines += 1
            f.skipping = False
            errors.append(SpoolError(path, f.lines, self._too_long()))
            start = nl + 1
        end = data.rfind(b"\n")
        chunks: List[Chunk] = []
        if end >= start:                   # complete lines in data[start:end + 1]
            chunks = self._decode(path, f, data[start:end], errors)
            start = end + 1
        f.offset += start
        if len(data) - start > self.max_line_bytes:   # partial line already over the bound
            f.offset += len(data) - start
            f.skipping = True
        if not chunks and errors:
            chunks = [self._empty(path, f, errors)]
        return chunks

    def _empty(self, path: str, f: _File, errors: List[SpoolError]) -> Chunk:
        return Chunk(path, f.rank, f.run or self.default_run, errors=errors)

    def _too_long(self) -> str:
        return (f"line longer than {self.max_line_bytes} bytes, skipped; "
                f"expected one JSON event per line")

    def _decode(self, path: str, f: _File, body: bytes, errors: List[SpoolError]) -> List[Chunk]:
        """Decode complete lines (``body`` without its final newline); count them."""
        lines = body.split(b"\n")
        bulk = self._decode_bulk(path, f, lines, errors)
        if bulk is not None:
            return bulk
        rank, limit, line_no = f.rank, self.max_line_bytes, f.lines
        chunks: List[Chunk] = []
        chunk = self._empty(path, f, errors)
        events, steps, others = chunk.events, [], chunk.others
        for line in lines:
            line_no += 1
            if len(line) > limit:
                chunk.errors.append(SpoolError(path, line_no, self._too_long()))
                continue
            try:
                event = decode_line(line)
            except EventError as exc:
                if line.strip():           # a blank line is harmless, not an event
                    chunk.errors.append(SpoolError(path, line_no, str(exc)))
                continue
            if event["rank"] != rank:
                chunk.errors.append(SpoolError(
                    path, line_no, f"field 'rank': {event['rank']} in the file of rank {rank}; "
                                   f"expected {rank}"))
                continue
            if event["type"] == "step":
                steps.append(event)
            else:
                if event["type"] == "run_start":
                    run = event.get("run") or self.default_run
                    if run != chunk.run and events:     # a new run starts mid-read: split
                        self._finish(chunk, steps)
                        chunks.append(chunk)
                        chunk = Chunk(path, rank, run)
                        events, steps, others = chunk.events, [], chunk.others
                    chunk.run = f.run = run
                others.append(event)
            events.append(event)
        f.lines = line_no
        self._finish(chunk, steps)
        if chunk.events or chunk.errors:
            chunks.append(chunk)
        return chunks

    @staticmethod
    def _finish(chunk: Chunk, steps: List[Dict[str, Any]]) -> None:
        if steps:
            chunk.steps = columnize(chunk.run, chunk.rank, steps)

    def _decode_bulk(self, path: str, f: _File, lines: List[bytes],
                     errors: List[SpoolError]) -> Optional[List[Chunk]]:
        """The common case in bulk: every line a valid event of this file's rank.

        Lines are parsed in cache-sized blocks, grouped by key count (then key
        tuple), and each group of step events is validated and columnized as a
        block (:func:`wire_steps`); other events, and the step events holding
        something to normalise ("nan") or to reject, are checked one by one.
        Anything unusual (a bad line, a wrong rank, a new run starting mid-read)
        returns None *before* any state changes, and the exact line-by-line
        decoder does the work, with its own errors.
        """
        n = len(lines)
        if _raw_loads is None or not n or max(map(len, lines)) > self.max_line_bytes:
            return None
        events: List[Dict[str, Any]] = []
        is_step = np.zeros(n, dtype=bool)
        blocks: List[Any] = []               # (line rows or None, steps, t, tables)
        single: List[int] = []               # lines checked one by one
        for start in range(0, n, BULK_LINES):   # blocks small enough to stay in the CPU cache
            part = self._bulk_part(lines[start:start + BULK_LINES], f.rank, start, n,
                                   is_step, blocks, single)
            if part is None:
                return None
            events.extend(part)
        run, started = f.run or self.default_run, False
        if single:
            single.sort()
            loose = []
            for i in single:
                try:
                    event = check_event(events[i])
                except EventError:
                    return None
                if event["rank"] != f.rank:
                    return None
                if event["type"] == "step":
                    is_step[i] = True
                    loose.append(i)
                elif event["type"] == "run_start":
                    new_run = event.get("run") or self.default_run
                    if new_run != run and i > 0:     # a new run mid-read: split, line by line
                        return None
                    run, started = new_run, True
            if loose:
                blocks.append((np.asarray(loose, dtype=np.intp),
                               *step_block([events[i] for i in loose])))
        f.lines += n
        if started:
            f.run = run
        chunk = Chunk(path, f.rank, run, events=events, errors=errors)
        chunk.others = [events[i] for i in np.flatnonzero(~is_step).tolist()]
        if blocks:
            chunk.steps = self._batch(run, f.rank, is_step, blocks)
        return [chunk]

    @staticmethod
    def _bulk_part(lines: List[bytes], rank: int, start: int, total: int, is_step: np.ndarray,
                   blocks: list, single: List[int]) -> Optional[List[Dict[str, Any]]]:
        """Parse lines ``start:start + len(lines)`` of a read; add their step blocks."""
        try:
            events = list(map(_raw_loads, lines))
        except ValueError:
            return None
        if set(map(type, events)) != {dict}:
            return None
        groups = _groups(events)
        if groups is None:
            return None
        n = len(events)
        for index in groups:
            rows = events if index is None else [events[i] for i in index.tolist()]
            try:
                block = wire_steps(rows, tuple(rows[0]), rank)
            except KeyError:                 # same length, other keys: split by key tuple
                more = _groups(rows, by_keys=True)
                if more is None or more == [None]:
                    return None
                groups.extend(sub if index is None else index[sub] for sub in more)
                continue
            lines_at = (None if n == total else np.arange(start, start + n)) if index is None \
                else index + start
            if block is None:
                single.extend(range(start, start + n) if lines_at is None else lines_at.tolist())
                continue
            *columns, good = block
            if good is not None:             # rows with "nan" & co: those one by one
                at = np.arange(start, start + n) if lines_at is None else lines_at
                odd = np.ones(len(rows), dtype=bool)
                odd[good] = False
                single.extend(at[odd].tolist())
                lines_at = at[good]
            blocks.append((lines_at, *columns))
            is_step[slice(start, start + n) if lines_at is None else lines_at] = True
        return events

    @staticmethod
    def _batch(run: str, rank: int, is_step: np.ndarray, blocks: list) -> StepBatch:
        """One StepBatch from blocks of step lines (rows given as line numbers in the read)."""
        if len(blocks) == 1 and blocks[0][0] is None:
            _, steps, t, tables = blocks[0]
            return assemble(run, rank, steps, t, tables)
        where = np.cumsum(is_step) - 1           # line -> row among the step lines
        total = int(where[-1]) + 1
        steps = np.empty(total, dtype=np.int64)
        t = np.empty(total)
        tables = []
        for lines, b_steps, b_t, b_tables in blocks:
            rows = where[lines]
            steps[rows], t[rows] = b_steps, b_t
            for sub, names, table in b_tables:
                tables.append((rows if sub is None else rows[sub], names, table))
        return assemble(run, rank, steps, t, tables)


#: Reading a whole spool (replay) takes about this much of each rank file per poll (~10k
#: steps): fewer, larger batches for the engine, whose per-batch cost is per operator.
READ_BYTES_PER_FILE = 4 << 20


def drain(tailer: "SpoolTailer") -> Iterator[List[Chunk]]:
    """The chunks of every poll of ``tailer``, until the spool is drained."""
    while True:
        chunks = tailer.poll(READ_BYTES_PER_FILE * max(1, len(tailer.scan())))
        if not chunks:
            return
        yield chunks
