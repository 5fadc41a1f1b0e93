"""``msdoctor replay RUN_DIR``: run the rule engine over a finished run's spool, read-only."""
from __future__ import annotations

import argparse
import json
import sys
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
    from msdoctor.engine.loader import default_rules_dir, load_rules
    from msdoctor.replay.driver import evaluate, spool_items

    if rules is None:
        rules = load_rules([rules_path or str(default_rules_dir())])
    spool_errors: List[str] = []
    result = evaluate(spool_items(run_dir, spool_errors), rules)
    del result["transitions"]
    result["summary"].update(run_dir=str(run_dir), spool_errors=spool_errors[:50],
                             spool_error_count=len(spool_errors))
    return result


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
