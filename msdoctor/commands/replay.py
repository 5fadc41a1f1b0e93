"""``msdoctor replay RUN_DIR``: run the rule engine over a finished run's spool, read-only."""
from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

HELP = "Run the alerting rules over a recorded run directory and print the alerts."

TABLE_FIELDS = ("alert", "severity", "run", "rank", "step", "first_step", "value", "summary",
                "cause", "fix", "runbook_url", "t", "labels", "values", "action")


#: Replay reads about this much of each rank file per poll (~10k steps): fewer, larger
#: batches for the engine, whose per-batch cost is per operator, not per row.
READ_BYTES_PER_FILE = 4 << 20


def poll_all(tailer: Any) -> Iterator[List[Any]]:
    """The chunks of every poll of ``tailer`` (a SpoolTailer), until the spool is drained."""
    while True:
        chunks = tailer.poll(READ_BYTES_PER_FILE * max(1, len(tailer.scan())))
        if not chunks:
            return
        yield chunks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="PATH", nargs="+",   # issue 8: or log files
                        help="a run directory (with events/rank-N.jsonl), or training logs / "
                             "step tables (files or directories; see --format)")
    parser.add_argument("--rules", metavar="DIR", help="rule directory or file (default: rules/)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    from msdoctor.replay.cli import add_arguments as add_log_arguments   # issue 8
    add_log_arguments(parser)


def replay(run_dir: Path, rules_path: Optional[str] = None, rules: Any = None) -> Dict[str, Any]:
    """Evaluate the rules (``rules``, else loaded from ``rules_path``) over ``run_dir``'s
    spool; never writes into ``run_dir``."""
    import numpy as np

    from msdoctor.engine.evaluator import Engine
    from msdoctor.engine.loader import default_rules_dir, load_rules
    from msdoctor.spool import SpoolTailer

    if rules is None:
        rules = load_rules([rules_path or str(default_rules_dir())])
    transitions: List[Any] = []
    engine = Engine(rules, sinks=[transitions.append])
    tailer = SpoolTailer(run_dir)
    started = time.perf_counter()
    events = steps = 0
    spool_errors: List[str] = []
    from msdoctor.replay.stats import RunStats  # issue 8
    stats = RunStats()
    last_t = -math.inf
    collecting = gc.isenabled()
    gc.disable()      # no reference cycles here: collecting the many short-lived dicts is waste
    try:
        for chunks in poll_all(tailer):
            for chunk in chunks:
                stats.add(chunk.steps)              # issue 8: the run summary
                spool_errors.extend(str(e) for e in chunk.errors)
                events += len(chunk.events)
                if chunk.steps is not None and len(chunk.steps):
                    steps += len(chunk.steps)
                    t_all = chunk.steps.t
                    t_max = float(t_all.max())
                    if math.isnan(t_max):           # some steps without a time
                        t_ok = t_all[~np.isnan(t_all)]
                        t_max = float(t_ok.max()) if t_ok.size else -math.inf
                    last_t = max(last_t, t_max)
                for e in chunk.others:              # the step events' times are in chunk.steps.t
                    t = e.get("t")
                    if isinstance(t, (int, float)) and t > last_t:
                        last_t = float(t)
                engine.on_chunk(chunk)
    finally:
        if collecting:
            gc.enable()
    if math.isfinite(last_t):
        engine.on_tick(last_t)          # judge clock rules as of the end of the recording
    took = time.perf_counter() - started
    firing = [a for a in transitions if a.state == "firing"]
    by_alert: Dict[str, int] = {}
    for a in firing:
        by_alert[a.alert] = by_alert.get(a.alert, 0) + 1
    ranks = sorted({(run, r) for run, rc in engine.runs.items() for r in rc.ranks})
    return {
        "alerts": [{k: v for k, v in a.to_dict().items() if k in TABLE_FIELDS} for a in firing],
        "summary": {
            "run_dir": str(run_dir), "rules": len(rules), "events": events, "steps": steps,
            "runs": sorted(engine.runs), "ranks": len(ranks), "firing": len(firing),
            "transitions": len(transitions), "by_alert": by_alert,
            "still_firing": [f"{a['alert']}@{a['run']}/{a['rank']}" for a in engine.firing()],
            "spool_errors": spool_errors[:50], "spool_error_count": len(spool_errors),
            "engine_errors": engine.errors, "seconds": round(took, 3),
            "stats": stats.to_dict(),           # issue 8
        },
    }


def run(args: argparse.Namespace) -> int:
    from msdoctor.engine.errors import RuleSetError
    from msdoctor.replay.cli import dispatch    # issue 8: logs and tables; None for a spool

    code = dispatch(args)
    if code is not None:
        return code

    run_dir = Path(args.run_dir)
    if not (run_dir / "events").is_dir():
        print(f"{run_dir}: not a run directory (expected {run_dir / 'events'}/rank-N.jsonl)",
              file=sys.stderr)
        return 2
    try:
        result = replay(run_dir, args.rules)
    except RuleSetError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        print(f"the rule set has {len(exc.errors)} error(s); nothing replayed", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    _print_table(result)
    from msdoctor.replay.cli import print_stats  # issue 8
    print_stats(result["summary"].get("stats"))
    return 0


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _print_table(result: Dict[str, Any]) -> None:
    s = result["summary"]
    print(f"{s['run_dir']}: {s['steps']} steps from {s['ranks']} rank(s), {s['rules']} rules, "
          f"{s['firing']} alert(s) fired ({s['seconds']:.2f}s)")
    if s["spool_error_count"]:
        print(f"{s['spool_error_count']} bad spool line(s) skipped, e.g. {s['spool_errors'][0]}")
    for message in s["engine_errors"]:
        print(f"engine: {message}")
    alerts = result["alerts"]
    if not alerts:
        print("no alerts")
        return
    header = ("STEP", "RANK", "SEVERITY", "ALERT", "VALUE", "SUMMARY")
    rows = [(str(a["step"]), str(a["rank"]), a["severity"], a["alert"], _fmt(a["value"]),
             a["summary"]) for a in alerts]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header[:-1])]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  " + header[-1])
    for row, a in zip(rows, alerts):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
        if a.get("fix"):
            print(" " * (sum(widths) + 2 * len(widths)) + "fix: " + a["fix"])
