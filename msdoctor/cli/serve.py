"""``msdoctor serve``: the sidecar. Tails a run's spool and logs what it sees.

The run directory must exist; its ``events/`` directory may appear later (the
sidecar usually starts before the trainer). State is saved every few seconds
and on SIGINT/SIGTERM in ``<run_dir>/.msdoctor/`` (or ``--state-dir``), so a
restarted sidecar resumes without losing or double-counting an event. SIGHUP
re-loads the rules; a set with errors is refused and the last good one kept. One sidecar
per run directory (a lock, :mod:`msdoctor.core.runlock`); a refused start changes nothing
in the run directory.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Optional, Sequence

from msdoctor.cli.options import add_rules, add_run_dir, rule_paths
from msdoctor.core.engine.reload import RuleReloader
from msdoctor.core.format import EscapingFormatter
from msdoctor.core.limits import MAX_RUNS
from msdoctor.core.pipeline import Pipeline
from msdoctor.core.runlock import RunLock, RunLocked
from msdoctor.core.sidecar_log import LogReporter
from msdoctor.wire.errors import MsdoctorError
from msdoctor.wire.files import problem_with
from msdoctor.wire.layout import DEFAULT_LISTEN, EXPECTED_RUN_DIR, alerts_file, run_dir_error

HELP = "Run the sidecar: tail a run directory's event spool, keep state, log progress."
log = logging.getLogger("msdoctor.serve")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"{HELP} The run directory ({EXPECTED_RUN_DIR}) and its events/ may appear "
        "later: serve waits for them. State is saved in <run_dir>/.msdoctor/ every few seconds and on "
        "SIGINT/SIGTERM; a restarted serve resumes from it. SIGHUP re-loads --rules: a set with "
        "errors is refused (each error logged with file:line:col) and the last good set kept. One "
        "serve per run directory: a second is refused (lock: <run_dir>/.msdoctor/sidecar.lock).")
    add_run_dir(parser, help="the run directory to watch (waited for when it does not exist yet)")
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
    add_rules(parser)
    parser.add_argument("--max-runs", type=int, default=MAX_RUNS, metavar="N",
                        help=f"keep at most N distinct run ids (default: {MAX_RUNS}); the events "
                             "of further runs are refused and counted (refused_events in "
                             "/api/v1/status and /metrics)")
    parser.add_argument("--log-level", default="INFO",
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    from msdoctor.http import wiring as endpoint  # /metrics, /api/v1, alert delivery flags
    endpoint.add_arguments(parser, listen=False)


def build_pipeline(args: argparse.Namespace, listeners: Any = ()) -> Pipeline:
    """The pipeline ``msdoctor serve`` runs: the rules with their journal, the progress log,
    the rule reloader (SIGHUP), and ``listeners`` (the deliverers) of every transition."""
    from msdoctor.core.engine.loader import default_rules_dir

    pipeline = Pipeline(args.run_dir, rules=args.ruleset, journal=True, listeners=listeners,
                        consumers=[LogReporter(progress_every=args.progress_every)],
                        state_dir=args.state_dir, poll_interval=args.poll,
                        snapshot_interval=args.snapshot_every, max_runs=args.max_runs)
    pipeline.add_consumer(RuleReloader(pipeline.engine, getattr(args, "rule_paths", None)
                                         or [default_rules_dir()]))
    return pipeline


def load_ruleset(args: argparse.Namespace) -> Any:
    """Load the shipped rules and ``--rules``; print every error and return None if invalid."""
    from msdoctor.core.engine.errors import RuleSetError
    from msdoctor.core.engine.loader import load_rules
    try:
        args.rule_paths = rule_paths(args)
    except ValueError as exc:
        print(f"msdoctor serve: {exc}", file=sys.stderr)
        return None
    path = ", ".join(args.rule_paths)
    try:
        ruleset = load_rules(args.rule_paths)
    except RuleSetError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        print(f"msdoctor serve: {len(exc.errors)} error(s) in the rules ({path}); not starting",
              file=sys.stderr)
        return None
    log.info("loaded %d rules from %s", len(ruleset), path)
    return ruleset


def refusal(args: argparse.Namespace) -> Optional[str]:
    """Why serve cannot start, found before anything in the run directory is touched."""
    from msdoctor.core.alerts.journal import JOURNAL
    from msdoctor.http.server import ListenError, check_listen, parse_listen

    if args.run_dir.exists() or args.run_dir.is_symlink():
        problem = run_dir_error(args.run_dir, need_events=False)
        if problem is not None:
            return problem
    try:
        host, _port = parse_listen(args.listen, "--listen")   # port 0: any free port
        check_listen(host, args.allow_remote)
    except ListenError as exc:
        return str(exc)
    if args.max_runs < 1:
        return f"--max-runs {args.max_runs}: expected an integer >= 1"
    from msdoctor.http.wiring import token_error

    problem = token_error(args)
    if problem is not None:
        return problem
    if not args.run_dir.exists():
        return None
    return problem_with(alerts_file(args.run_dir), JOURNAL)


def wait_for_run_dir(args: argparse.Namespace) -> bool:
    """Wait until the run directory exists (True), or a signal asks to stop (False)."""
    if args.run_dir.exists():
        return True
    log.info("waiting for the run directory %s to appear (Ctrl-C to stop)", args.run_dir)
    stop = threading.Event()
    stop_on_signals(stop)
    while not args.run_dir.exists():
        if stop.wait(args.poll):
            log.info("stopped before %s appeared", args.run_dir)
            return False
    return True


def run(args: argparse.Namespace) -> int:
    handler = logging.StreamHandler(sys.stderr)    # input text in messages: escaped
    handler.setFormatter(EscapingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, args.log_level), handlers=[handler])
    problem = refusal(args)
    if problem:
        print(f"msdoctor serve: {problem}", file=sys.stderr)
        return 2
    args.ruleset = load_ruleset(args)
    if args.ruleset is None:
        return 2
    if not wait_for_run_dir(args):
        return 0
    problem = refusal(args)
    if problem:
        print(f"msdoctor serve: {problem}", file=sys.stderr)
        return 2
    lock = RunLock(args.run_dir)
    try:
        lock.acquire()
    except RunLocked as exc:
        print(f"msdoctor serve: {exc}; not starting", file=sys.stderr)
        return 2
    except OSError as exc:
        log.warning("cannot take the lock %s (%s): a second sidecar on %s would not be "
                    "refused", lock.path, exc.strerror or exc, args.run_dir)
    try:
        return serve(args)
    finally:
        lock.release()


def serve(args: argparse.Namespace) -> int:
    """Build the pipeline and the front ends, run until SIGINT/SIGTERM."""
    from msdoctor.http.server import ListenError
    from msdoctor.http.wiring import Endpoint

    frontends = Endpoint.from_args(args)
    try:
        sidecar = build_pipeline(args, frontends.deliverers)
    except MsdoctorError as exc:
        print(f"msdoctor serve: {exc}; not starting", file=sys.stderr)
        return 2
    stop = threading.Event()
    stop_on_signals(stop)        # before "serving" is logged: a SIGTERM from then on is clean
    try:
        frontends.start(sidecar.store, sidecar.alerts, lock=sidecar.lock)
    except ListenError as exc:
        print(f"msdoctor serve: {exc}", file=sys.stderr)
        return 2
    if not (args.run_dir / "events").is_dir():
        log.info("waiting for %s to appear", args.run_dir / "events")
    log.info("watching %s (state in %s)", args.run_dir / "events", sidecar.state_dir)
    for consumer in sidecar.consumers:
        if isinstance(consumer, RuleReloader):
            signal.signal(signal.SIGHUP, consumer.request)
            log.info("SIGHUP re-loads the rules from %s", consumer.path)
    try:
        sidecar.run_forever(stop)
    finally:
        frontends.stop()
    if sidecar.snapshot_error is not None:
        log.error("stopped; the state could NOT be saved in %s (%s): a restart re-reads the "
                  "spool from the last good snapshot", sidecar.state_dir, sidecar.snapshot_error)
        return 1
    log.info("stopped; state saved in %s", sidecar.state_dir)
    return 0


def stop_on_signals(stop_event: threading.Event,
                    signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> None:
    """Make SIGINT/SIGTERM set ``stop_event`` (main thread only) for a clean shutdown."""
    def handler(signum: int, _frame: Any) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop_event.set()

    for signum in signals:
        signal.signal(signum, handler)
