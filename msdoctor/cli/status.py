"""``msdoctor status``: read a run's spool once and print one line per rank, and the alerts a
sidecar has journalled (``alerts.jsonl``) that are pending or firing.

Runs in-process, writes nothing (no snapshot, no state directory).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from msdoctor.cli.options import add_run_dir, colour_on, paint, severity
from msdoctor.core import format as fmt
from msdoctor.core.alerts.active import ActiveAlerts
from msdoctor.core.alerts.feed import JournalReader
from msdoctor.core.pipeline import Pipeline
from msdoctor.core.spool import SpoolError
from msdoctor.core.state import RankState, Store
from msdoctor.wire.layout import EXPECTED_RUN_DIR, alerts_file, run_dir_error
from msdoctor.wire.numbers import to_wire

HELP = "Print each rank's latest step, loss, throughput, memory and errors from a run's spool."
MAX_ERRORS_SHOWN = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_dir(parser, help=f"the run directory: {EXPECTED_RUN_DIR}")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document (runs, ranks' latest values, active alerts)")
    parser.add_argument("--watch", action="store_true",
                        help="re-read and re-print every --interval seconds until Ctrl-C")
    parser.add_argument("-n", "--interval", type=float, default=2.0, metavar="S",
                        help="seconds between readings with --watch (default: 2)")


def memory(state: RankState) -> str:
    device = state.latest.get("mem_device_bytes")
    if device is not None:
        return fmt.byte_size(device)
    host = state.latest.get("mem_host_rss_bytes")
    return fmt.MISSING if host is None else f"{fmt.byte_size(host)} host"


COLUMNS = ("RANK", "STATUS", "STEP", "LOSS", "GRAD_NORM", "LOSS_SCALE", "LR", "TOK/S",
           "STEP_TIME", "DATA_WAIT", "MEMORY", "UPD_RATIO", "AGE", "ERRORS")


def rank_row(rank: int, state: RankState, now: float) -> List[str]:
    latest = state.latest.get
    return [str(rank), state.status, "-" if state.last_step is None else str(state.last_step),
            fmt.number(latest("loss")), fmt.number(latest("grad_norm")),
            fmt.loss_scale(latest("loss_scale")), fmt.number(latest("lr"), 3),
            fmt.rate(latest("tokens_per_s")), fmt.duration(latest("step_time_s")),
            fmt.percent(latest("data_wait_share")),
            memory(state), fmt.number(latest("update_ratio"), 3), fmt.duration(state.age(now)),
            str(state.counters["decode_errors"])]


def table(rows: List[List[str]]) -> str:
    rows = [[fmt.printable(cell) for cell in row] for row in rows]   # input text: escaped
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


def render(store: Store, errors: List[SpoolError], now: float) -> str:
    out = []
    for run in store.runs.values():
        config = run.config
        facts = [f"run {run.run}"]
        if run.world_size is not None:
            facts.append(f"world_size {run.world_size}")
        for key in ("model", "precision", "seq_length", "global_batch"):
            if key in config:
                facts.append(f"{key} {config[key]}")
        out.append(fmt.printable("  ".join(facts)))
        rows = [list(COLUMNS)] + [rank_row(r, run.ranks[r], now) for r in sorted(run.ranks)]
        out.append(table(rows))
        out.append("")
    if errors:
        shown = errors[:MAX_ERRORS_SHOWN]
        more = len(errors) - len(shown)
        out.append(f"{len(errors)} bad line(s) skipped" + (f", first {len(shown)}:" if more else ":"))
        out.extend(f"  {fmt.printable(e)}" for e in shown)
    return "\n".join(out).rstrip() + "\n"


def journalled_alerts(run_dir: Path) -> List[Dict[str, Any]]:
    """The pending and firing alerts of the run directory's journal (none without one)."""
    active = ActiveAlerts()
    active.load(JournalReader(alerts_file(run_dir)).read_all())
    order = {"firing": 0, "pending": 1}
    return sorted(active.active(), key=lambda a: (order.get(a.get("state"), 2),
                                                  bool(a.get("caused_by")),
                                                  str(a.get("run")), a.get("rank") or 0))


def render_alerts(alerts: List[Dict[str, Any]], colour: bool = False) -> str:
    """One line per active alert; a consequence of another says so (severity coloured on a
    terminal)."""
    if not alerts:
        return ""
    rows = [["STATE", "SEVERITY", "ALERT", "RUN", "RANK", "STEP", "SUMMARY"]]
    for a in alerts:
        rows.append([str(a.get("state")), str(a.get("severity")), str(a.get("alert")),
                     str(a.get("run")), str(a.get("rank")), str(a.get("step")),
                     fmt.consequence(a.get("caused_by"), str(a.get("summary") or ""))])
    lines = table(rows).split("\n")
    lines[1:] = [severity(line, a.get("severity"), colour) for line, a in zip(lines[1:], alerts)]
    return "alerts (the sidecar's alerts.jsonl):\n" + "\n".join(lines) + "\n"


def read_spool(run_dir: Path) -> tuple:
    """Read the whole spool once through the pipeline (no rules): ``(store, errors)``."""
    errors: List[SpoolError] = []
    pipeline = Pipeline(run_dir, persist=False)
    pipeline.drain(lambda chunk: errors.extend(chunk.errors))
    return pipeline.store, errors


def document(store: Store, errors: List[SpoolError], alerts: List[Dict[str, Any]],
             now: float) -> Dict[str, Any]:
    """What ``--json`` prints: per run its facts and each rank's latest values; the alerts."""
    runs = []
    for run in store.runs.values():
        ranks = []
        for rank in sorted(run.ranks):
            state = run.ranks[rank]
            ranks.append({"rank": rank, "status": state.status, "step": state.last_step,
                          "age_s": to_wire(state.age(now)), "decode_errors": state.counters["decode_errors"],
                          "latest": {k: to_wire(v) for k, v in state.latest.items()
                                     if isinstance(v, (int, float, str)) or v is None}})
        runs.append({"run": run.run, "world_size": run.world_size, "config": run.config,
                     "ranks": ranks})
    return {"runs": runs, "alerts": alerts, "bad_lines": [str(e) for e in errors]}


def snapshot(run_dir: Path, as_json: bool) -> str:
    """One reading of the run directory, as text or as a JSON document."""
    store, errors = read_spool(run_dir)
    alerts = journalled_alerts(run_dir)
    now = time.time()
    if as_json:
        return json.dumps(document(store, errors, alerts, now), ensure_ascii=False,
                          default=str) + "\n"
    if not store.runs and not errors:
        return f"no events yet in {run_dir / 'events'} (expected rank-<N>.jsonl files)\n"
    return render(store, errors, now) + render_alerts(alerts, colour_on())


def run(args: argparse.Namespace) -> int:
    problem = run_dir_error(args.run_dir)
    if problem:
        print(f"msdoctor status: {problem}", file=sys.stderr)
        return 2
    if args.interval <= 0:
        print(f"msdoctor status: --interval {args.interval:g}: expected seconds > 0",
              file=sys.stderr)
        return 2
    while True:
        text = snapshot(args.run_dir, args.json)
        if not args.watch:
            sys.stdout.write(text)
            return 0
        clear = "\x1b[H\x1b[2J" if colour_on() else ""
        stamp = f"msdoctor status {args.run_dir}  every {args.interval:g}s  " \
                f"{time.strftime('%H:%M:%S')}\n"
        sys.stdout.write(clear + ("" if args.json else paint(stamp, "bold", colour_on())) + text)
        sys.stdout.flush()
        time.sleep(args.interval)
