"""The one pipeline: ingest -> store -> rule engine -> alert journal -> the active-alert set.

``serve``, ``status``, ``tui --run-dir``, ``replay`` and ``report`` all assemble this class;
they differ only in what they switch on and in the clock policy (:mod:`msdoctor.core.clock`):

=================  ==========  =====  =======  =========  ==================
caller             clock       store  journal  snapshot   input
=================  ==========  =====  =======  =========  ==================
serve              WallClock   yes    yes      yes        the spool, live
tui --run-dir      WallClock   yes    no       no         the spool, live
status             WallClock   yes    no rules no         the spool, once
replay RUN_DIR     WallClock   no     no       no         the spool, once
replay/report LOG  RecordClock no     no       no         a recording
=================  ==========  =====  =======  =========  ==================

So the same run directory gets the same alerts whichever way it is read. Other consumers
(the progress log, the rule reloader, a journal feed; :mod:`msdoctor.core.consumers`) see
every chunk and tick and may keep state in the snapshot. A consumer that raises is logged
(once per consumer, method and exception type) and never stops the pipeline.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from msdoctor.core import forked, heap, pauses, snapshot
from msdoctor.core.alerts.active import ActiveAlerts, AlertListener
from msdoctor.core.alerts.feed import JournalReader
from msdoctor.core.batch import StepBatch
from msdoctor.core.clock import RankTimes, RecordClock, WallClock, latest_time
from msdoctor.core.consumers import Consumer, consumer_name
from msdoctor.core.engine.relabel import relabel
from msdoctor.core.limits import MAX_RUNS, RunLimit
from msdoctor.core.spool import DEFAULT_POLL_BYTES, Chunk, SpoolTailer, drain
from msdoctor.core.state import DEFAULT_CAPACITY, Store
from msdoctor.wire.errors import MsdoctorError
from msdoctor.wire.layout import alerts_file

log = logging.getLogger("msdoctor.sidecar")
#: Periodic snapshots wait at least this many times as long as the last one took (<= ~10 %
#: of the pipeline's time goes to snapshots, however big the state).
SNAPSHOT_BUDGET = 10.0
#: Woken by a change, the sidecar still polls at most every this many seconds: a burst of
#: writes from many ranks is read in one poll, not one poll per write.
MIN_POLL_GAP = 0.02
Clock = Union[WallClock, RecordClock]
#: (run, rank, non-step events, step batch or None): one unit of a recording.
Item = Tuple[str, int, List[Dict[str, Any]], Optional[StepBatch]]


class SnapshotFailure(MsdoctorError):
    """A consumer's state could not be taken: the snapshot is not written."""


SAVE_ERRORS = (SnapshotFailure, OSError, TypeError, ValueError, RecursionError)


def _reason(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, SnapshotFailure) else f"{type(exc).__name__}: {exc}"


class Pipeline:
    """Read a run directory's spool (or items of a recording) through the store, the rule
    engine and the active-alert set.

    ``rules`` (a RuleSet) switches the engine on; ``journal`` appends its transitions to
    ``<run_dir>/alerts.jsonl``, logs them and writes stop requests (``serve``), and loads
    the journal into the active set first. ``persist`` loads and saves the snapshot in
    ``state_dir`` (default ``<run_dir>/.msdoctor``). ``listeners`` hear every new
    transition (deliverers).
    """

    def __init__(self, run_dir: Optional[os.PathLike | str] = None, *, rules: Any = None,
                 clock: Optional[Clock | Callable[[], float]] = None, store: bool = True, journal: bool = False,
                 listeners: Iterable[AlertListener] = (), consumers: Sequence[Consumer] = (),
                 keep_transitions: bool = False, persist: bool = True,
                 state_dir: Optional[os.PathLike | str] = None, poll_interval: float = 0.5,
                 snapshot_interval: float = 5.0, capacity: int = DEFAULT_CAPACITY,
                 poll_bytes: int = DEFAULT_POLL_BYTES, max_runs: int = MAX_RUNS) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        if clock is None or callable(clock) and not isinstance(clock, (WallClock, RecordClock)):
            clock = WallClock(clock or time.time)     # a bare callable is a wall clock
        self.clock: Clock = clock
        self.persist = persist and self.run_dir is not None
        self.state_dir = Path(state_dir) if state_dir else (
            snapshot.default_state_dir(self.run_dir) if self.run_dir is not None else None)
        self.poll_interval = float(poll_interval)
        self.snapshot_interval = float(snapshot_interval)
        self.poll_bytes = int(poll_bytes)
        #: Held while the store, the engine and the consumers change; other threads (HTTP)
        #: take it for a consistent read.
        self.lock = threading.RLock()
        self.store: Optional[Store] = Store(capacity, clock=self.clock.now) if store else None
        #: the run ids kept and what was refused beyond the bound (shared with the store)
        self.run_limit = RunLimit(int(max_runs))
        if self.store is not None:
            self.store.run_limit = self.run_limit
        self.alerts = ActiveAlerts(listeners, clock=self.clock.now)
        self.transitions: Optional[List[Any]] = [] if keep_transitions else None
        self.engine: Any = self._engine(rules, journal) if rules is not None else None
        self.consumers: List[Consumer] = list(consumers)
        taken: Set[str] = {"engine"} if self.engine is not None else set()
        self._names = [consumer_name(c, taken) for c in self.consumers]
        self._reported: Set[Tuple[str, str, str]] = set()
        self.consumer_errors = 0
        self.times = RankTimes()
        self.last_record_t = -math.inf
        self.tailer = self._new_tailer() if self.run_dir is not None else None
        self.restored: Optional[snapshot.Snapshot] = None
        self.last_snapshot: Optional[float] = None
        self.snapshot_seconds = 0.0     # how long the last snapshot took to write
        self.snapshot_failures = 0      # saves that failed (nothing was written)
        self.snapshot_error: Optional[str] = None   # why the last save failed (None: it worked)
        self.forked = forked.ForkedWrite()          # a child writing the snapshot, if any
        self.idle_release = heap.IdleRelease()
        if self.persist:
            self._restore(capacity)

    def _engine(self, rules: Any, journal: bool) -> Any:
        sinks: List[Any] = [self.alerts]
        if self.transitions is not None:
            sinks.append(self.transitions.append)
        if journal:
            from msdoctor.core.engine.consumer import EngineConsumer

            assert self.run_dir is not None, "a journal needs a run directory"
            reader = JournalReader(alerts_file(self.run_dir), self.clock.now)
            self.alerts.load(reader.read_all())     # the active set as it was
            return EngineConsumer(rules, self.run_dir, extra_sinks=sinks, clock=self.clock.now)
        from msdoctor.core.engine.evaluator import Engine

        return Engine(rules, sinks, clock=self.clock.now)

    # -- snapshot ---------------------------------------------------------
    def _stateful(self) -> List[Tuple[str, Any]]:
        engine = [("engine", self.engine)] if self.engine is not None else []
        return engine + list(zip(self._names, self.consumers))

    def _restore(self, capacity: int) -> None:
        assert self.state_dir is not None and self.run_dir is not None and self.tailer is not None
        try:
            snap = snapshot.load(self.state_dir, self.run_dir, capacity)
        except snapshot.SnapshotError as exc:
            log.warning("ignoring the saved state: %s; rebuilding from the start of the spool", exc)
            return
        if snap is None:
            return
        try:
            self.tailer.load_state_dict(snap.spool)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("ignoring the saved state in %s: bad spool offsets (%s); rebuilding from "
                        "the start of the spool", self.state_dir, exc)
            self.tailer = self._new_tailer()
            return
        snap.store.clock = self.clock.now
        self.run_limit.load(snap.store.run_limit.to_json())
        snap.store.run_limit = self.run_limit
        self.run_limit.know(snap.store.runs)
        if self.store is not None:
            self.store = snap.store
        self.restored = snap
        for name, consumer in self._stateful():
            if name in snap.consumers and hasattr(consumer, "load_state_dict"):
                self._call(name, consumer, "load_state_dict", snap.consumers[name])
        if self.engine is not None:
            self.run_limit.know(getattr(self.engine, "runs", {}))
        log.info("resumed from %s (%d spool files)", self.state_dir / snapshot.FILENAME,
                 len(self.tailer.offsets))

    def _new_tailer(self) -> SpoolTailer:
        """A tailer that reads step lines into columns only (the store and engine read those)."""
        assert self.run_dir is not None
        return SpoolTailer(self.run_dir, step_events=False)

    def save_snapshot(self) -> Optional[Path]:
        """Write offsets + state + consumer states now; None when it could not be written.

        All or nothing: when a consumer's ``state_dict`` raises, nothing is written (offsets
        saved without that state would lose it for good); the previous snapshot stays. Each
        failure is counted (:attr:`snapshot_failures`) and logged as an error, with its
        reason in :attr:`snapshot_error`.
        """
        if self.state_dir is None or self.run_dir is None or self.tailer is None:
            return None
        started = time.perf_counter()
        try:
            path = self._write_snapshot()
        except SAVE_ERRORS as exc:
            self._saved(_reason(exc), 0.0)
            return None
        self._saved(None, time.perf_counter() - started)
        return path

    def save_snapshot_forked(self) -> bool:
        """Start writing the snapshot in a forked child (:mod:`msdoctor.core.forked`), the state as
        it is now, while this process polls on; :meth:`collect_snapshot` takes its outcome.
        False when there is nothing to save, a child still writes, or no child could be made."""
        if self.state_dir is None or self.run_dir is None or self.tailer is None \
                or self.forked.running:
            return False
        held = getattr(self.engine, "journal_held", None)
        with self.lock, (held() if held is not None else contextlib.nullcontext()):
            if not self.forked.start(self._write_snapshot, _reason, 20 * self.snapshot_seconds):
                return False
        self.last_snapshot = self.clock.now()
        return True

    def snapshot_if_due(self) -> None:
        """Collect an ended forked save; take a due periodic snapshot (forked where possible)."""
        self.collect_snapshot()
        if self.snapshot_due() and not (forked.available() and self.save_snapshot_forked()):
            self.save_snapshot()

    def collect_snapshot(self, wait: bool = False) -> None:
        """Take the outcome of a forked save once its child has ended (``wait``: block)."""
        done = self.forked.outcome(wait)
        if done is None:
            return
        if done.killed and self.state_dir is not None:
            snapshot.temporary_path(self.state_dir, done.pid).unlink(missing_ok=True)
        self._saved(done.error, done.seconds, in_line=False)

    def _write_snapshot(self) -> Path:
        assert self.state_dir is not None and self.run_dir is not None and self.tailer is not None
        states: Dict[str, Any] = {}
        for name, consumer in self._stateful():
            if hasattr(consumer, "state_dict"):
                try:
                    state = consumer.state_dict()
                except Exception as exc:  # noqa: BLE001 - reported, the pipeline goes on
                    raise SnapshotFailure(f"{name}.state_dict raised "
                                          f"{type(exc).__name__}: {exc}") from exc
                if state is not None:
                    states[name] = state
        return snapshot.save(self.state_dir, self.run_dir, self.tailer.state_dict(),
                             self.store if self.store is not None else Store(), states)

    def _saved(self, error: Optional[str], seconds: float, in_line: bool = True) -> None:
        """Note a save's outcome: a failure counted and logged, or the time it took."""
        if in_line:
            self.idle_release.now()     # the snapshot's buffers, and the polls' since the last
        self.last_snapshot = self.clock.now()
        if error is not None:
            self.snapshot_failures += 1
            if error != self.snapshot_error or str(self.snapshot_failures).rstrip("0") == "1":
                log.error("the state could NOT be saved in %s: %s; the previous snapshot (if "
                          "any) stays (%d failed save(s) so far)", self.state_dir, error,
                          self.snapshot_failures)
            self.snapshot_error = error
            return
        if self.snapshot_error is not None:
            log.warning("the state is saved again in %s after %d failed save(s)",
                        self.state_dir, self.snapshot_failures)
            self.snapshot_error = None
        self.snapshot_seconds = seconds

    def snapshot_due(self) -> bool:
        """Time for a periodic snapshot: ``snapshot_interval`` has passed, and at least
        ``SNAPSHOT_BUDGET`` times as long as the last one took (and no child still writes)."""
        if self.last_snapshot is None or self.forked.running:
            return False
        wait = max(self.snapshot_interval, SNAPSHOT_BUDGET * self.snapshot_seconds)
        return self.clock.now() - self.last_snapshot >= wait

    # -- input --------------------------------------------------------------
    def apply(self, chunk: Chunk) -> None:
        """One chunk of one (run, rank) through the store, the engine and the consumers;
        refused (counted, see :mod:`msdoctor.core.limits`) when its run is one too many."""
        with self.lock:
            if self._admit(chunk):
                if self.engine is not None:
                    self._call("engine", self, "_feed", chunk.run, chunk.rank, chunk.others,
                               chunk.steps)
                else:
                    self._note(chunk.others, latest_time(chunk.steps))
            for name, consumer in zip(self._names, self.consumers):
                if hasattr(consumer, "on_chunk"):
                    self._call(name, consumer, "on_chunk", chunk, self.store)

    def apply_many(self, chunks: List[Chunk]) -> None:
        """:meth:`apply` for the chunks of one poll, with the engine evaluating their step
        batches together (one pass over the rules for all ranks, see
        ``Engine.process_many``); the store and the consumers see each chunk as before."""
        if self.engine is None or not hasattr(self.engine, "process_many") or len(chunks) < 2:
            for chunk in chunks:
                self.apply(chunk)
            return
        with self.lock:
            self._call("engine", self, "_feed_many", [c for c in chunks if self._admit(c)])
        for chunk in chunks:
            for name, consumer in zip(self._names, self.consumers):
                if hasattr(consumer, "on_chunk"):
                    with self.lock:
                        self._call(name, consumer, "on_chunk", chunk, self.store)

    def _admit(self, chunk: Chunk) -> bool:
        """Into the store, unless its run is one too many (counted) or it holds only a
        file-level problem (a directory where a rank file should be: reported, no rank)."""
        if not (chunk.events or chunk.steps is not None or any(e.line_no for e in chunk.errors)):
            return False
        steps = len(chunk.steps) if chunk.steps is not None else 0
        count = max(len(chunk.events), len(chunk.others) + steps)     # a recording: others
        if not self.run_limit.admit(chunk.run, chunk.others, count, chunk.path):
            return False
        if self.store is not None:
            self.store.apply(chunk)
        return True

    def ingest(self, run: str, rank: int, others: List[Dict[str, Any]],
               steps: Optional[StepBatch], source: str = "") -> None:
        """One item of a recording (a log read into batches), as if it came from a spool."""
        self.apply(Chunk(source, rank, run, events=list(others), steps=steps, others=others))

    def _note(self, others: List[Dict[str, Any]], t_max: float) -> None:
        """Under a :class:`RecordClock`, move its ``now`` to the latest record time read
        (``t_max``: the chunk's latest step time). A wall clock needs none of this."""
        if self.clock.live:
            return
        latest = max(self.last_record_t, t_max)
        for e in others:
            t = e.get("t")
            if isinstance(t, (int, float)) and not isinstance(t, bool) and t > latest:
                latest = float(t)
        self.last_record_t = latest
        if isinstance(self.clock, RecordClock):
            self.clock.last_t = latest

    def _feed(self, run: str, rank: int, others: List[Dict[str, Any]],
              batch: Optional[StepBatch]) -> None:
        """Evaluate one item; a pause inside the rank's record ticks that rank's clock in
        between (:mod:`msdoctor.core.pauses`)."""
        self._note(others, latest_time(batch))
        parts = pauses.parts_of(self.times, run, rank, batch)
        if parts is None:
            self.engine.process(run, rank, others, batch)
        else:
            pauses.feed_parts(self.engine, self.times, run, rank, others, parts)
        self._noted(run, rank, batch)

    def _noted(self, run: str, rank: int, batch: Optional[StepBatch]) -> None:
        if batch is not None and len(batch):
            self.times.note(run, rank, batch, latest_time(batch))

    def _feed_many(self, chunks: List[Chunk]) -> None:
        """:meth:`_feed` for the chunks of one poll: those without a pause go to the engine
        together (``process_many``); the ranks with a pause (before their new rows, as when
        the sidecar is slower than the steps, or inside them) part by part, all ranks' k-th
        parts together and their pauses ticked together (``pauses.feed_rounds``)."""
        together = []
        split = []
        for chunk in chunks:
            run, rank, others, batch = chunk.run, chunk.rank, chunk.others, chunk.steps
            self._note(others, latest_time(batch))
            parts = pauses.parts_of(self.times, run, rank, batch)
            if parts is None:
                together.append((run, rank, others, batch))
            else:
                split.append((run, rank, others, parts))
            self._noted(run, rank, batch)
        if split:
            pauses.feed_rounds(self.engine, self.times, split)
        self.engine.process_many(together)

    # -- time ---------------------------------------------------------------
    def tick(self, now: Optional[float] = None) -> None:
        """Judge the clock-driven rules as of ``now`` (default: the clock's) for every rank
        whose backlog is read, then tick the consumers. No-op for the engine under a
        :class:`RecordClock` (recorded time advances only with the records)."""
        now = self.clock.now() if now is None else float(now)
        with self.lock:
            if self.engine is not None and self.clock.live:
                self._call("engine", self, "_tick_engine", now)
            for name, consumer in zip(self._names, self.consumers):
                if hasattr(consumer, "on_tick"):
                    self._call(name, consumer, "on_tick", now, self.store)

    def _tick_engine(self, now: float) -> None:
        behind = self.tailer.behind() if self.tailer is not None else set()
        for run, rc in list(self.engine.runs.items()):
            ranks = [rank for rank in rc.ranks if (run, rank) not in behind]
            self.engine.tick_ranks(run, ranks, now)
            for rank in ranks:
                self.times.tick(run, rank, now)

    def add_consumer(self, consumer: Consumer) -> None:
        """Register one more consumer (before the first poll)."""
        taken = {*self._names, *(["engine"] if self.engine is not None else [])}
        self._names.append(consumer_name(consumer, taken))
        self.consumers.append(consumer)

    def finish(self) -> None:
        """The input is complete: judge every rank as of the clock's end (now for a spool,
        the last record for a recording)."""
        end = self.clock.end(self.last_record_t)
        if self.engine is not None and math.isfinite(end):
            with self.lock:
                self.engine.on_tick(end)
                for run, rc in self.engine.runs.items():
                    for rank in rc.ranks:
                        self.times.tick(run, rank, end)

    # -- the spool ----------------------------------------------------------
    def poll_once(self) -> List[Chunk]:
        """Tail the spool once: apply each chunk, then tick."""
        chunks = self.tailer.poll(self.poll_bytes) if self.tailer is not None else []
        self._note_layers(chunks)
        self.apply_many(chunks)
        self.tick()
        self.idle_release.note(bool(chunks))    # a drain's freed pages go back at its end
        return chunks

    def drain(self, observe: Optional[Callable[[Chunk], None]] = None) -> int:
        """Read the whole spool as it is now (no ticks in between); the chunk count. Call
        :meth:`finish` after it to judge the clock-driven rules."""
        count = 0
        if self.tailer is None:
            return 0
        for chunks in drain(self.tailer):
            self._note_layers(chunks)
            for chunk in chunks:
                self.apply(chunk)
                if observe is not None:
                    observe(chunk)
                count += 1
        return count

    def _note_layers(self, chunks: List[Chunk]) -> None:
        """Every rank's layers events of one read, before any rank is judged (``first_rank``)."""
        book: Any = getattr(self.engine, "layers", None)
        for event, chunk in ((e, c) for c in chunks for e in c.others if book is not None):
            if event.get("type") == "layers":
                book.note(chunk.run, chunk.rank, event)
        if book is not None and book.assigned:      # a first rank read after its alert fired
            with self.lock:
                relabel(self.engine, {c.run for c in chunks})

    def run_forever(self, stop_event: threading.Event) -> None:
        """Poll until ``stop_event`` is set; snapshot periodically and at the end.

        Polls back to back while a poll leaves lines unread; otherwise waits until a rank file
        changes (inotify, :mod:`msdoctor.core.wake`, paced by its :class:`PollPacer`: at
        most half of the sidecar's time goes to polls woken by changes) or ``poll_interval``
        passes, whichever comes first.
        """
        if self.last_snapshot is None:
            self.last_snapshot = self.clock.now()
        from msdoctor.core.wake import PollPacer, SpoolWaker  # ctypes: only a live sidecar

        waker = SpoolWaker(self.run_dir) if self.run_dir is not None else None
        pacer = PollPacer(MIN_POLL_GAP)
        try:
            while not stop_event.is_set():
                if waker is not None and waker.native:
                    waker.watch()                   # before the read: no write falls between
                started = time.monotonic()
                chunks = self.poll_once()
                pacer.polled(started, bool(chunks))
                if self.persist:
                    self.snapshot_if_due()
                if chunks and self.tailer is not None and self.tailer.behind():
                    continue                        # a backlog: read on at once
                if waker is not None and waker.native:
                    waker.wait(self.poll_interval)
                    gap = pacer.gap()
                    if gap > 0:
                        stop_event.wait(gap)
                else:
                    stop_event.wait(self.poll_interval)
        finally:
            if waker is not None:
                waker.close()
            if self.persist:
                self.collect_snapshot(wait=True)
                self.save_snapshot()

    # -- consumer isolation ------------------------------------------------
    def _call(self, name: str, consumer: Any, method: str, *args: Any) -> Any:
        try:
            return getattr(consumer, method)(*args)
        except Exception as exc:  # noqa: BLE001 - a consumer must never stop the pipeline
            self.consumer_errors += 1
            self._report_once(name, method, type(exc).__name__,
                              "consumer %s.%s raised %s: %s (further errors of this kind are "
                              "counted, not logged)", name, method, type(exc).__name__, exc,
                              exc_info=True)
            return None

    def _report_once(self, who: str, what: str, kind: str, message: str, *args: Any,
                     exc_info: bool = False) -> None:
        key = (who, what, kind)
        if key not in self._reported:
            self._reported.add(key)
            log.error(message, *args, exc_info=exc_info)

