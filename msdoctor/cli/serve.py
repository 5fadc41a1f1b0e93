"""``msdoctor serve``: the sidecar. Tails a run's spool and logs what it sees.

The run directory must exist; its ``events/`` directory may appear later (the
sidecar usually starts before the trainer). State is saved every few seconds
and on SIGINT/SIGTERM in ``<run_dir>/.msdoctor/`` (or ``--state-dir``), so a
restarted sidecar resumes without losing or double-counting an event. SIGHUP
re-loads the rules; a set with errors is refused and the last good one kept.
"""
from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Set, Tuple

import numpy as np

from msdoctor.core import format as fmt
from msdoctor.core.pipeline import Pipeline, stop_on_signals
from msdoctor.core.spool import Chunk
from msdoctor.core.state import Store, count_repeats
from msdoctor.wire.layout import DEFAULT_LISTEN, EXPECTED_RUN_DIR, run_dir_error

if TYPE_CHECKING:   # loaded with the rules (see build_consumers)
    from msdoctor.core.engine.consumer import EngineConsumer

HELP = "Run the sidecar: tail a run directory's event spool, keep state, log progress."
log = logging.getLogger("msdoctor.serve")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"{HELP} The run directory must exist ({EXPECTED_RUN_DIR}); if events/ is not there yet, "
        "serve waits for it. State is saved in <run_dir>/.msdoctor/ every few seconds and on "
        "SIGINT/SIGTERM; a restarted serve resumes from it. SIGHUP re-loads --rules: a set with "
        "errors is refused (each error logged with file:line:col) and the last good set kept.")
    parser.add_argument("--run-dir", required=True, type=Path, metavar="DIR",
                        help="the run directory to watch")
    parser.add_argument("--state-dir", type=Path, metavar="D",
                        help="where to keep offsets and the snapshot (default: <run_dir>/.msdoctor)")
    parser.add_argument("--poll", type=float, default=0.5, metavar="S",
                        help="seconds between polls of the spool when idle (default: 0.5)")
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                        help=f"address for /metrics and /api/v1 (default: {DEFAULT_LISTEN}; port 0: any "
                             "free port, logged at start)")
    parser.add_argument("--progress-every", type=float, default=30.0, metavar="S",
                        help="log each rank's progress every S seconds (default: 30)")
    parser.add_argument("--snapshot-every", type=float, default=5.0, metavar="S",
                        help="save the state every S seconds (default: 5)")
    parser.add_argument("--rules", type=Path, metavar="DIR",
                        help="alerting rule directory or file (default: the shipped rules/); "
                             "serve refuses to start if any rule is invalid")
    parser.add_argument("--log-level", default="INFO",
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    from msdoctor.http import wiring as endpoint  # /metrics, /api/v1, alert delivery flags
    endpoint.add_arguments(parser, listen=False)


class LogReporter:
    """A sidecar consumer that logs new ranks, run start/end, progress and bad lines.

    Bad lines are rate-limited per file: the first ``burst`` of each ``window``
    seconds are logged with file:line, the rest are counted and summarised.
    """

    name = "log"

    def __init__(self, progress_every: float = 30.0, burst: int = 5, window: float = 10.0,
                 clock=time.time) -> None:
        self.progress_every, self.burst, self.window, self.clock = progress_every, burst, window, clock
        self._seen: Set[Tuple[str, int]] = set()
        self._last_progress = clock()
        self._reported_step: Dict[Tuple[str, int], int] = {}
        self._errors: Dict[str, List[Any]] = {}   # path -> [window start, logged, suppressed, last]
        self._last_step: Dict[str, int] = {}
        self._repeats_seen: Dict[str, int] = {}
        self._repeat_warned: Dict[str, float] = {}

    def on_chunk(self, chunk: Chunk, store: Store) -> None:
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
        if chunk.steps is not None and len(chunk.steps):
            self._repeats(chunk, store)

    def _repeats(self, chunk: Chunk, store: Store) -> None:
        """Warn (at most once per window per file) when steps went backwards or repeated."""
        state = store.runs[chunk.run].ranks[chunk.rank]
        total = state.counters["repeated_steps"]
        steps = chunk.steps.steps
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


class RuleReloader:
    """A sidecar consumer that re-loads the rules when asked (SIGHUP), in the sidecar thread.

    A rule set with errors is refused as a whole: the engine keeps the last good set and
    every error is logged with file:line:col. A good set replaces the old one (see
    :meth:`EngineConsumer.replace_rules` for what happens to the alerts of removed rules).
    """

    name = "rules-reload"

    def __init__(self, engine: EngineConsumer, path: Path) -> None:
        self.engine, self.path = engine, Path(path)
        self.requested = threading.Event()
        self.reloads = self.refused = 0

    def request(self, signum: int = 0, _frame: Any = None) -> None:
        """Signal handler: only flags the request (the reload runs on the next tick)."""
        self.requested.set()

    def on_tick(self, now: float, store: Store) -> None:
        if self.requested.is_set():
            self.requested.clear()
            self.reload()

    def reload(self) -> bool:
        from msdoctor.core.engine.errors import RuleSetError
        from msdoctor.core.engine.loader import load_rules
        old = {r.alert: r for r in self.engine.rules}
        try:
            ruleset = load_rules([self.path])
        except RuleSetError as exc:
            self.refused += 1
            for error in exc.errors:
                log.error("rules reload: %s", error)
            log.error("rules reload refused: %d error(s) in %s; keeping the previous %d rules",
                      len(exc.errors), self.path, len(old))
            return False
        except OSError as exc:
            self.refused += 1
            log.error("rules reload refused: cannot read %s (%s); keeping the previous %d rules",
                      self.path, exc, len(old))
            return False
        new = {r.alert: r for r in ruleset}
        ended = self.engine.replace_rules(ruleset)
        self.reloads += 1
        def same(a: Any, b: Any) -> bool:
            fields = ("expr", "for_", "keep_firing_for", "labels", "annotations", "action")
            return all(getattr(a, f) == getattr(b, f) for f in fields)
        changed = sorted(n for n in new.keys() & old.keys() if not same(new[n], old[n]))
        log.info("rules reloaded from %s: %d rules (added: %s; removed: %s; changed: %s)%s",
                 self.path, len(new), ", ".join(sorted(new.keys() - old.keys())) or "none",
                 ", ".join(sorted(old.keys() - new.keys())) or "none",
                 ", ".join(changed) or "none",
                 f"; {len(ended)} alert(s) of removed rules ended" if ended else "")
        return True


def build_pipeline(args: argparse.Namespace, listeners: Any = ()) -> Pipeline:
    """The pipeline ``msdoctor serve`` runs: the rules with their journal, the progress log,
    the rule reloader (SIGHUP), and ``listeners`` (the deliverers) of every transition."""
    from msdoctor.core.engine.loader import default_rules_dir

    pipeline = Pipeline(args.run_dir, rules=args.ruleset, journal=True, listeners=listeners,
                        consumers=[LogReporter(progress_every=args.progress_every)],
                        state_dir=args.state_dir, poll_interval=args.poll,
                        snapshot_interval=args.snapshot_every)
    pipeline.add_consumer(RuleReloader(pipeline.engine, args.rules or default_rules_dir()))
    return pipeline


def load_ruleset(args: argparse.Namespace) -> Any:
    """Load ``--rules`` (default: the shipped rules); print every error and return None if invalid."""
    from msdoctor.core.engine.errors import RuleSetError
    from msdoctor.core.engine.loader import default_rules_dir, load_rules
    path = args.rules or default_rules_dir()
    if not Path(path).exists():
        print(f"msdoctor serve: --rules {path}: no such file or directory", file=sys.stderr)
        return None
    try:
        ruleset = load_rules([path])
    except RuleSetError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        print(f"msdoctor serve: {len(exc.errors)} error(s) in the rules ({path}); not starting",
              file=sys.stderr)
        return None
    log.info("loaded %d rules from %s", len(ruleset), path)
    return ruleset


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from msdoctor.http.server import ListenError, parse_listen

    problem = run_dir_error(args.run_dir, need_events=False)
    if problem is None:
        try:
            parse_listen(args.listen, "--listen")   # port 0: any free port (logged once bound)
        except ListenError as exc:
            problem = str(exc)
    if problem:
        print(f"msdoctor serve: {problem}", file=sys.stderr)
        return 2
    args.ruleset = load_ruleset(args)
    if args.ruleset is None:
        return 2
    from msdoctor.http.wiring import Endpoint
    frontends = Endpoint.from_args(args)
    sidecar = build_pipeline(args, frontends.deliverers)
    try:
        frontends.start(sidecar.store, sidecar.alerts, lock=sidecar.lock)
    except ListenError as exc:
        print(f"msdoctor serve: {exc}", file=sys.stderr)
        return 2
    if not (args.run_dir / "events").is_dir():
        log.info("waiting for %s to appear", args.run_dir / "events")
    log.info("watching %s (state in %s)", args.run_dir / "events", sidecar.state_dir)
    stop = threading.Event()
    stop_on_signals(stop)
    for consumer in sidecar.consumers:
        if isinstance(consumer, RuleReloader):
            signal.signal(signal.SIGHUP, consumer.request)
            log.info("SIGHUP re-loads the rules from %s", consumer.path)
    try:
        sidecar.run_forever(stop)
    finally:
        frontends.stop()
    log.info("stopped; state saved in %s", sidecar.state_dir)
    return 0
