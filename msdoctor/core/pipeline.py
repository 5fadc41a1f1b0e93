"""The sidecar loop: tail the spool, update the state, feed the consumers, snapshot.

Consumers (the rule engine, the exporter, the log reporter) are plain objects
with any of these optional methods::

    on_chunk(chunk, store)      # after each Chunk was applied to the store
    on_tick(now, store)         # once per poll, for clock-driven rules
    state_dict() -> dict        # JSON values and numpy arrays; saved in the snapshot
    load_state_dict(d)          # restored from the snapshot on start

A consumer that raises is logged (once per consumer, method and exception
type) and never stops the sidecar.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from msdoctor.core import snapshot
from msdoctor.core.spool import DEFAULT_POLL_BYTES, Chunk, SpoolTailer
from msdoctor.core.state import DEFAULT_CAPACITY, Store

log = logging.getLogger("msdoctor.sidecar")
#: Periodic snapshots wait at least this many times as long as the last one took (<= ~10 %
#: of the sidecar's time goes to snapshots, however big the state).
SNAPSHOT_BUDGET = 10.0


def consumer_name(consumer: Any, taken: Set[str]) -> str:
    """A stable key for a consumer's snapshot state: its ``name`` or class name."""
    base = str(getattr(consumer, "name", None) or type(consumer).__name__)
    name, i = base, 2
    while name in taken:
        name, i = f"{base}#{i}", i + 1
    taken.add(name)
    return name


class Sidecar:
    """Tail ``<run_dir>/events``, keep a :class:`Store`, drive consumers, snapshot.

    On construction the snapshot in ``state_dir`` (default ``<run_dir>/.msdoctor``)
    is loaded when it matches the spool; otherwise ingest starts from the
    beginning of every file. ``persist=False`` neither reads nor writes one.
    """

    def __init__(self, run_dir: os.PathLike | str, state_dir: Optional[os.PathLike | str] = None,
                 poll_interval: float = 0.5, consumers: Sequence[Any] = (),
                 snapshot_interval: float = 5.0, capacity: int = DEFAULT_CAPACITY,
                 poll_bytes: int = DEFAULT_POLL_BYTES, persist: bool = True,
                 clock: Callable[[], float] = time.time) -> None:
        self.run_dir = Path(run_dir)
        self.state_dir = Path(state_dir) if state_dir else snapshot.default_state_dir(run_dir)
        self.poll_interval = float(poll_interval)
        self.snapshot_interval = float(snapshot_interval)
        self.poll_bytes = int(poll_bytes)
        self.persist = persist
        self.clock = clock
        self.consumers: List[Any] = list(consumers)
        taken: Set[str] = set()
        self._names = [consumer_name(c, taken) for c in self.consumers]
        self._reported: Set[Tuple[str, str, str]] = set()
        self.consumer_errors = 0
        #: Held while the store and the consumers change (per chunk, per tick); other
        #: threads (HTTP exporter, API) take it for a consistent read.
        self.lock = threading.RLock()
        self.store = Store(capacity, clock=clock)
        self.tailer = SpoolTailer(self.run_dir)
        self.restored: Optional[snapshot.Snapshot] = None
        self.last_snapshot: Optional[float] = None
        self.snapshot_seconds = 0.0     # how long the last snapshot took to write
        if persist:
            self._restore(capacity)

    # -- snapshot ---------------------------------------------------------
    def _restore(self, capacity: int) -> None:
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
            self.tailer = SpoolTailer(self.run_dir)
            return
        snap.store.clock = self.clock
        self.store = snap.store
        self.restored = snap
        for name, consumer in zip(self._names, self.consumers):
            if name in snap.consumers and hasattr(consumer, "load_state_dict"):
                self._call(name, consumer, "load_state_dict", snap.consumers[name])
        log.info("resumed from %s (%d spool files)", self.state_dir / snapshot.FILENAME,
                 len(self.tailer.offsets))

    def save_snapshot(self) -> Optional[Path]:
        """Write offsets + state + consumer states now; None when it could not be written."""
        started = time.perf_counter()
        states: Dict[str, Any] = {}
        for name, consumer in zip(self._names, self.consumers):
            if hasattr(consumer, "state_dict"):
                state = self._call(name, consumer, "state_dict")
                if state is not None:
                    states[name] = state
        try:
            path = snapshot.save(self.state_dir, self.run_dir, self.tailer.state_dict(),
                                 self.store, states)
        except (OSError, TypeError, ValueError) as exc:
            self._report_once("snapshot", "save", type(exc).__name__,
                              "cannot write the snapshot in %s: %s", self.state_dir, exc)
            return None
        self.last_snapshot = self.clock()
        self.snapshot_seconds = time.perf_counter() - started
        return path

    def snapshot_due(self) -> bool:
        """Time for a periodic snapshot: ``snapshot_interval`` has passed, and at least
        ``SNAPSHOT_BUDGET`` times as long as the last one took (a big state would otherwise
        be saved back to back and starve ingest)."""
        if self.last_snapshot is None:
            return False
        wait = max(self.snapshot_interval, SNAPSHOT_BUDGET * self.snapshot_seconds)
        return self.clock() - self.last_snapshot >= wait

    # -- loop -----------------------------------------------------------------
    def poll_once(self) -> List[Chunk]:
        """Tail the spool once: apply each Chunk, hand it to consumers, then tick them."""
        chunks = self.tailer.poll(self.poll_bytes)
        store = self.store
        for chunk in chunks:
            with self.lock:
                store.apply(chunk)
                for name, consumer in zip(self._names, self.consumers):
                    if hasattr(consumer, "on_chunk"):
                        self._call(name, consumer, "on_chunk", chunk, store)
        now = self.clock()
        with self.lock:
            for name, consumer in zip(self._names, self.consumers):
                if hasattr(consumer, "on_tick"):
                    self._call(name, consumer, "on_tick", now, store)
        return chunks

    def run_forever(self, stop_event: threading.Event) -> None:
        """Poll until ``stop_event`` is set; snapshot periodically and at the end.

        Polls back to back while there is a backlog, otherwise sleeps
        ``poll_interval`` between polls.
        """
        if self.last_snapshot is None:
            self.last_snapshot = self.clock()
        try:
            while not stop_event.is_set():
                chunks = self.poll_once()
                if self.persist and self.snapshot_due():
                    self.save_snapshot()
                if not chunks:
                    stop_event.wait(self.poll_interval)
        finally:
            if self.persist:
                self.save_snapshot()

    # -- consumer isolation ------------------------------------------------
    def _call(self, name: str, consumer: Any, method: str, *args: Any) -> Any:
        try:
            return getattr(consumer, method)(*args)
        except Exception as exc:  # noqa: BLE001 - a consumer must never stop the sidecar
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


def stop_on_signals(stop_event: threading.Event,
                    signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> None:
    """Make SIGINT/SIGTERM set ``stop_event`` (main thread only) for a clean shutdown."""
    def handler(signum: int, _frame: Any) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop_event.set()

    for signum in signals:
        signal.signal(signum, handler)
