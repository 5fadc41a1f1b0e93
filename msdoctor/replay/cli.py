"""The log side of ``msdoctor replay``: its extra options, and the dispatch by input format.

``msdoctor.commands.replay`` calls :func:`add_arguments` and :func:`dispatch`; a run
directory (a spool) goes on to the command's own spool path, every other input is read
here by its format's reader and evaluated by the same engine.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from msdoctor.replay.formats import FORMATS, FormatError, is_spool
from msdoctor.replay.stats import describe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("auto",) + FORMATS, default="auto",
                        help="input format (default: detected per file)")
    parser.add_argument("--rank", type=int, metavar="N",
                        help="rank of the given log files (default: from the path, e.g. "
                             "rank_3/info.log or worker_3.log, else 0)")
    parser.add_argument("--run", metavar="NAME", help="run name for logs (default: the first path's name)")
    parser.add_argument("--seq-length", type=int, metavar="N",
                        help="tokens per sample, to turn MindFormers' samples/s/p into tokens/s")
    parser.add_argument("--progress", action="store_true", default=None,
                        help="draw a progress bar on stderr (default: on a terminal, for large inputs)")


def dispatch(args: argparse.Namespace) -> Optional[int]:
    """Replay log inputs and return the exit code; None for a run directory (the caller's
    spool path), after setting ``args.run_dir`` to that one directory."""
    paths = args.run_dir if isinstance(args.run_dir, list) else [args.run_dir]
    fmt = getattr(args, "format", "auto") or "auto"
    if len(paths) == 1 and fmt in ("auto", "spool") and is_spool(Path(paths[0])):
        args.run_dir = paths[0]
        return None
    if fmt == "spool":
        print(f"{paths[0]}: not a run directory (expected {Path(paths[0]) / 'events'}/rank-N.jsonl)",
              file=sys.stderr)
        return 2
    from msdoctor.engine.errors import RuleSetError
    from msdoctor.engine.loader import default_rules_dir, load_rules
    from msdoctor.replay.driver import replay_paths

    try:
        rules = load_rules([args.rules or str(default_rules_dir())])
        result = replay_paths(paths, rules, fmt, args.rank, args.run, args.seq_length,
                              args.progress)
    except RuleSetError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        print(f"the rule set has {len(exc.errors)} error(s); nothing replayed", file=sys.stderr)
        return 1
    except (FormatError, OSError) as exc:
        print(f"msdoctor replay: {exc}", file=sys.stderr)
        return 2
    result.pop("transitions", None)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False, default=_jsonable))
        return 0
    print_result(result)
    return 0


def _jsonable(value: Any) -> Any:
    return str(value)


def print_result(result: Dict[str, Any]) -> None:
    """The alert table (the spool replay's own printer) and the input facts and summary."""
    from msdoctor.commands.replay import _print_table

    s = result["summary"]
    print(f"format: {s.get('format')}, {len(s.get('inputs', []))} file(s), "
          f"{s.get('lines', 0):,} lines")
    _print_table(result)
    if s.get("parse_error_count"):
        print(f"{s['parse_error_count']} unreadable line(s) skipped, e.g.:")
        for text in s["parse_errors"][:5]:
            print(f"  {text}")
    for note in s.get("notes", [])[:5]:
        print(f"note: {note}")
    if s.get("unknown_columns"):
        print(f"columns kept but not known as signals: {', '.join(s['unknown_columns'])}")
    print_stats(s.get("stats"))


def print_stats(stats: Optional[Dict[str, Any]]) -> None:
    if stats:
        print("summary: " + describe(stats).replace("\n", "\n         "))
