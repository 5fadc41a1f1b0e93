"""Tail the event spool: ``<run_dir>/events/rank-<N>.jsonl``, one file per rank.

:class:`SpoolTailer` remembers a byte offset and a line count per file, reads
only what was appended since, and hands back one :class:`Chunk` per file with
new complete lines. A line is complete only once its ``\\n`` is written, so a
partial last line stays unread until the rest arrives. Bad lines (not JSON, not
UTF-8, not a valid event, too long) become :class:`SpoolError` entries naming
``file:line`` and are skipped; ingest goes on.

The common case, a read of valid events, is decoded in bulk (step events
validated and columnized a block at a time, see :mod:`msdoctor.core.spool_bulk`; a
replay's step lines go straight into columns, :mod:`msdoctor.core.spool_typed`);
anything else falls back to the exact line-by-line decoder, which gives the same
events, errors and positions.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Set, Tuple

from msdoctor.core.batch import StepBatch, columnize
from msdoctor.core.spool_bulk import decode_bulk, decode_line
from msdoctor.core.spool_files import Listing, Problems, non_canonical
from msdoctor.core.spool_typed import decode_typed
from msdoctor.wire.files import kind_of, open_regular
from msdoctor.wire.layout import EVENTS_DIR, RANK_FILE, events_dir
from msdoctor.wire.schema import EventError

MAX_LINE_BYTES = 1 << 20          # a longer line is skipped as an error, never buffered whole
DEFAULT_POLL_BYTES = 8 << 20      # read budget of one poll, shared by the files with new data
MIN_FILE_BYTES = 256 << 10        # each file with new data may read at least this much per poll
EXPECTED = "a regular file of JSON lines written by trainer_hooks"


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


class SpoolTailer:
    """Incrementally read every ``rank-*.jsonl`` of ``<run_dir>/events``.

    ``offsets`` (from :attr:`offsets` of an earlier tailer) resumes where that
    one stopped; ``runs`` (from :attr:`runs`) restores the run id of each file;
    ``part`` ``(i, n)`` reads only the files of the ranks ``r % n == i`` (a share
    of a parallel replay). With ``step_events`` off (a replay, the sidecar: the batches carry the
    steps) a chunk's ``events`` may hold :data:`~msdoctor.core.spool_typed.STEP` for each
    step event instead of its dict (:mod:`msdoctor.core.spool_typed`).
    """

    def __init__(self, run_dir: os.PathLike | str,
                 offsets: Optional[Mapping[str, Tuple[int, int]]] = None,
                 runs: Optional[Mapping[str, str]] = None,
                 max_line_bytes: int = MAX_LINE_BYTES,
                 part: Optional[Tuple[int, int]] = None, step_events: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.step_events = step_events
        self.events_dir = events_dir(self.run_dir)
        self.default_run = self.run_dir.resolve().name
        self.max_line_bytes = int(max_line_bytes)
        self._files: Dict[str, _File] = {}
        self._gone: Dict[str, str] = {}      # run id of each removed file, for its return
        self._listing = Listing(self.events_dir, part)
        self._problems = Problems()
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
        if match is None or non_canonical(Path(rel).name, int(match.group(1))) or offset < 0 \
                or lines < 0:
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
        return [(f"events/{e.name}", e) for _rank, e in self._listing.entries() or []
                if non_canonical(e.name, _rank) is None]

    def poll(self, max_bytes: int = DEFAULT_POLL_BYTES, per_file: Optional[int] = None
             ) -> List[Chunk]:
        """Read what was appended since the last poll; one or more Chunks per changed file.

        The files with new data share ``max_bytes``; ``per_file`` gives each of them that
        many bytes instead (whatever the others hold: a replay reads each file alike).

        A path that cannot be read as a spool file (a directory, a FIFO, a symbolic link
        loop, no descriptor left) gives one Chunk with the error, once while the problem
        lasts; the other files are read on."""
        found = self._listing.entries()
        if found is None:                  # events/ cannot be listed now: keep every position
            return []
        pending, chunks = [], []
        present = {f"events/{e.name}" for _, e in found}
        removed = self._files.keys() - present
        if removed:
            chunks.extend(self._forget(sorted(removed)))
        for rank, entry in found:
            rel = f"events/{entry.name}"
            why = non_canonical(entry.name, rank)
            if why is not None:
                chunks.extend(self._problem(entry.path, rank, "name", why))
                continue
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            except OSError as exc:
                chunks.extend(self._problem(entry.path, rank, "stat", f"cannot read: "
                                            f"{exc.strerror or exc}; expected {EXPECTED}"))
                continue
            if not stat.S_ISREG(st.st_mode):
                chunks.extend(self._problem(entry.path, rank, "stat",
                                            f"is {kind_of(st.st_mode)}; expected {EXPECTED}"))
                continue
            self._problems.clear(entry.path, "stat")
            f = self._files.get(rel)
            if f is None:
                f = self._files[rel] = self._new_file(rel, 0, 0)
                f.run = self._gone.pop(rel, None)
            if f.inode is None:
                f.inode = st.st_ino
            if st.st_size != f.offset or st.st_ino != f.inode:
                pending.append((rel, entry.path, f, st))
            else:
                f.behind = False
        if not pending:
            return chunks
        share = int(per_file) if per_file else max(int(max_bytes) // len(pending),
                                                   MIN_FILE_BYTES, 1)
        for _rel, path, f, st in pending:
            chunks.extend(self._read(path, f, st, share))
        return chunks

    def _problem(self, path: str, rank: int, stage: str, message: str) -> List[Chunk]:
        """One Chunk with a file-level error, when this problem of ``path`` is news."""
        if not self._problems.report(path, stage, message):
            return []
        f = self._files.get(os.path.join(EVENTS_DIR, os.path.basename(path)))
        run = (f.run if f is not None else None) or self.default_run
        return [Chunk(path, rank, run, errors=[SpoolError(path, 0, message)])]

    def _forget(self, removed: List[str]) -> List[Chunk]:
        """Drop the position of files that were removed (a file that comes back is new, of
        the same run until a run_start says otherwise). A file renamed inside ``events/``
        (rotated) is read to its end first."""
        chunks = []
        for rel in removed:
            f = self._files[rel]
            path = str(self.run_dir / rel)
            chunks.extend(self._finish_moved(path, f))
            del self._files[rel]
            if f.run is not None:
                self._gone[rel] = f.run
            chunks.append(self._empty(path, f, [SpoolError(
                path, 0, f"file was removed after {f.lines} lines; if it comes back it is "
                         f"read from the start")]))
        return chunks

    def _finish_moved(self, path: str, f: _File) -> List[Chunk]:
        """The lines appended to ``f`` after the last read, when it still exists under
        another name in ``events/`` (renamed by a log rotation)."""
        moved = self._listing.moved(f.inode, path)
        chunks: List[Chunk] = []
        while moved is not None:
            try:
                st = os.stat(moved)
            except OSError:
                break
            if st.st_ino != f.inode or st.st_size <= f.offset:
                break
            before = f.offset
            chunks.extend(self._read(moved, f, st, DEFAULT_POLL_BYTES))
            if f.offset == before:
                if not f.skipping:         # a last line without its newline: it is lost
                    chunks.append(self._empty(moved, f, [SpoolError(
                        moved, f.lines + 1, f"incomplete last line ({st.st_size - f.offset} "
                                            f"bytes without a newline) of a rotated file")]))
                break
        return chunks

    def _restart(self, path: str, f: _File, reason: str) -> SpoolError:
        """Read ``f`` again from its start; its run stays until a run_start says otherwise
        (a writer that recreates its file goes on with the same run)."""
        error = SpoolError(path, 0, f"{reason}; reading it again from the start")
        f.offset, f.lines, f.skipping = 0, 0, False
        return error

    def _read(self, path: str, f: _File, st: os.stat_result, budget: int) -> List[Chunk]:
        errors: List[SpoolError] = []
        chunks: List[Chunk] = []
        if st.st_ino != f.inode:
            chunks = self._finish_moved(path, f)
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
                with os.fdopen(open_regular(path), "rb") as fh:
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
                message = f"cannot read: {exc.strerror or exc}; retrying at the next poll"
                if self._problems.report(path, "read", message):
                    errors.append(SpoolError(path, 0, message))
                return chunks + ([self._empty(path, f, errors)] if errors else [])
            self._problems.clear(path, "read")
        return chunks + self._consume(path, f, data, errors)

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
        """The common case in bulk (:func:`msdoctor.core.spool_bulk.decode_bulk`; without
        ``step_events``, :func:`msdoctor.core.spool_typed.decode_typed` first); None before
        any state changes when the exact line-by-line decoder must do the work."""
        if len(lines) and max(map(len, lines)) > self.max_line_bytes:
            return None
        run = f.run or self.default_run
        found = None if self.step_events else decode_typed(lines, f.rank, run, self.default_run)
        if found is None:
            found = decode_bulk(lines, f.rank, run, self.default_run)
        if found is None:
            return None
        events, others, steps, run, started = found
        f.lines += len(lines)
        if started:
            f.run = run
        chunk = Chunk(path, f.rank, run, events=events, errors=errors, others=others)
        chunk.steps = steps
        return [chunk]


#: Reading a whole spool (replay) takes about this much of each rank file per poll (~10k
#: steps): fewer, larger batches for the engine, whose per-batch cost is per operator.
READ_BYTES_PER_FILE = 4 << 20


def drain(tailer: "SpoolTailer", empty: bool = False) -> Iterator[List[Chunk]]:
    """The chunks of every poll of ``tailer``, until the spool is drained.

    Each poll reads up to ``READ_BYTES_PER_FILE`` of every file, so how a file is cut
    into chunks does not depend on the other files (a parallel replay cuts alike). A poll
    may read and give nothing (the middle of an over-long line being skipped; yielded as
    ``[]`` when ``empty``): the spool is drained when a poll gives nothing and moves no
    file forward."""
    while True:
        before = tailer.offsets
        chunks = tailer.poll(per_file=READ_BYTES_PER_FILE)
        if chunks:
            yield chunks
        elif not tailer.behind() or tailer.offsets == before:
            return
        elif empty:
            yield chunks
