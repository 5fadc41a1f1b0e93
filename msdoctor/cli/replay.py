"""``msdoctor replay PATH...``: run the rules over a recorded run directory or training logs.

A run directory (a spool) is read by the sidecar's own tailer; every other input by its
format's reader (:mod:`msdoctor.replay`). Both go through the same pipeline and print the
same alert table; nothing is written into the inputs.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from msdoctor.cli.options import add_rules, colour_on, paint, rule_paths, severity
from msdoctor.core import format as fmt

HELP = "Run the alerting rules over a recorded run directory and print the alerts."
EPILOG = ("exit status: 0 the inputs were read (alerts or not; with --fail-on: none of that "
          "severity or worse), 1 the rule set has errors or, with --fail-on, such an alert fired, "
          "2 bad input (a missing or unreadable file, a log in a layout msdoctor does not read, "
          "a directory with no logs)")
#: Severities from the least to the most severe.
SEVERITIES = ("info", "warning", "critical")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="PATH", nargs="+",
                        help="a run directory (with events/rank-N.jsonl), or training logs / "
                             "step tables (files or directories; see --format)")
    add_rules(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                        help="read a run directory's rank files in N processes (same output; "
                             "default 1)")
    parser.add_argument("--fail-on", choices=SEVERITIES, metavar="SEVERITY",
                        help="exit with status 1 when an alert of this severity or worse fired "
                             f"({', '.join(SEVERITIES)}), e.g. in CI")
    add_input_arguments(parser)


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that say how to read log inputs (shared with ``msdoctor report``)."""
    from msdoctor.replay.formats import FORMATS

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


def replay(run_dir: Path, rules_path: Optional[str] = None, rules: Any = None) -> Dict[str, Any]:
    """Evaluate the rules (``rules``, else loaded from ``rules_path``) over ``run_dir``'s
    spool; never writes into ``run_dir``."""
    from msdoctor.core.engine.loader import default_rules_dir, load_rules
    from msdoctor.replay.driver import replay_paths

    if rules is None:
        rules = load_rules([rules_path or str(default_rules_dir())])
    result = replay_paths([str(run_dir)], rules, "spool")
    result.pop("transitions", None)
    return result


def run(args: argparse.Namespace) -> int:
    from msdoctor.core.engine.errors import RuleSetError
    from msdoctor.core.engine.loader import load_rules
    from msdoctor.replay.driver import replay_paths
    from msdoctor.replay.formats import FormatError

    paths = args.run_dir if isinstance(args.run_dir, list) else [args.run_dir]
    fmt = getattr(args, "format", "auto") or "auto"
    try:
        rules = load_rules(rule_paths(args))
        result = replay_paths(paths, rules, fmt, args.rank, args.run, args.seq_length,
                              args.progress, jobs=max(1, getattr(args, "jobs", 1) or 1))
    except RuleSetError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        print(f"the rule set has {len(exc.errors)} error(s); nothing replayed", file=sys.stderr)
        return 1
    except (FormatError, OSError, ValueError) as exc:
        print(f"msdoctor replay: {exc}", file=sys.stderr)
        return 2
    result.pop("transitions", None)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    else:
        print_result(result, colour_on())
    return failed(result["alerts"], args.fail_on)


def failed(alerts: List[Dict[str, Any]], fail_on: Optional[str]) -> int:
    """1 when an alert of severity ``fail_on`` or worse fired (0 without ``fail_on``); the
    alerts that decided it are named on stderr."""
    if not fail_on:
        return 0
    floor = SEVERITIES.index(fail_on)
    worse = [a for a in alerts if a.get("severity") in SEVERITIES
             and SEVERITIES.index(a["severity"]) >= floor]
    if not worse:
        return 0
    names = sorted({str(a["alert"]) for a in worse})
    print(f"msdoctor replay: --fail-on {fail_on}: {len(worse)} alert(s) of severity {fail_on} or "
          f"worse fired ({', '.join(names)})", file=sys.stderr)
    return 1


def print_result(result: Dict[str, Any], colour: bool = False) -> None:
    """The input facts (for logs), the alert table with fixes, and the run summary (the
    alert rows coloured by severity when ``colour``)."""
    from msdoctor.core.runstats import describe

    s = result["summary"]
    if s.get("format") != "spool":
        print(f"format: {s.get('format')}, {len(s.get('inputs', []))} file(s), "
              f"{s.get('lines', 0):,} lines")
    print_table(result, colour)
    print_ranks(result)
    if s.get("parse_error_count"):
        print(f"{s['parse_error_count']} unreadable line(s) skipped, e.g.:")
        for text in s["parse_errors"][:5]:
            print(f"  {fmt.printable(text)}")
    for note in s.get("notes", [])[:5]:
        print(f"note: {fmt.printable(note)}")
    if s.get("unknown_columns"):
        print("columns kept but not known as signals: "
              + fmt.printable(", ".join(s["unknown_columns"])))
    if s.get("stats"):
        print("summary: " + "\n         ".join(fmt.printable(line)
                                       for line in describe(s["stats"]).split("\n")))


def clock(t: Any) -> str:
    """A record time as local ``YYYY-mm-dd HH:MM:SS`` ('?' when unknown)."""
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if fmt.is_number(t) else "?"


def print_ranks(result: Dict[str, Any]) -> None:
    """Per rank: steps, alerts, the first error with its time and hint; then what was skipped."""
    ranks = result.get("ranks") or []
    if len(ranks) > 1 or any(r["errors"] or not r["steps"] for r in ranks):
        for r in ranks:
            print(fmt.printable(f"rank {r['rank']}: {r['diagnosis']}"))
            for e in r["errors"][:1]:
                more = f" (+{r['error_count'] - 1} more)" if r["error_count"] > 1 else ""
                print("  " + fmt.printable(f"first error at {clock(e['t'])}, {e['where']}: "
                                           f"{e['text'][:300]}{more}"))
            if r.get("hint"):
                print(f"  hint: {fmt.printable(r['hint'])}")
    skipped = result["summary"].get("skipped") or []
    if skipped:
        print(f"skipped {len(skipped)} path(s):")
        for path, why in skipped[:20]:
            print("  " + fmt.printable(f"{path}: {why}"))
        if len(skipped) > 20:
            print(f"  ... and {len(skipped) - 20} more (--json lists all)")


def _value(value: Any) -> str:
    return fmt.number(value) if fmt.is_number(value) else str(value)


def _summary(alert: Dict[str, Any], before: List[Dict[str, Any]]) -> str:
    """The summary cell: a consequence names its cause; an alert that fired as a consequence
    and goes on firing after its cause ended says so."""
    if alert.get("caused_by"):
        return fmt.consequence(alert["caused_by"], alert["summary"])
    key = (alert["alert"], alert.get("run"), alert.get("rank"), alert.get("first_step"))
    if any((b["alert"], b.get("run"), b.get("rank"), b.get("first_step")) == key for b in before):
        return "(its cause ended; firing on its own) " + alert["summary"]
    return alert["summary"]


def print_table(result: Dict[str, Any], colour: bool = False) -> None:
    """One line per fired alert (step, rank, severity, name, value, summary) and its fix."""
    s = result["summary"]
    grouped = (f", {s['consequences']} of them as a consequence of another"
               if s.get("consequences") else "")
    print(f"{s['run_dir']}: {s['steps']} steps from {s['ranks']} rank(s), {s['rules']} rules, "
          f"{s['firing']} alert(s) fired{grouped} ({s['seconds']:.2f}s)")
    if s.get("spool_error_count"):
        print(f"{s['spool_error_count']} bad spool line(s) skipped, e.g. "
              f"{fmt.printable(s['spool_errors'][0])}")
    for message in s["engine_errors"]:
        print(f"engine: {message}")
    ingest = s.get("ingest") or {}
    if ingest.get("refused_events"):
        print(f"{ingest['refused_events']} event(s) of runs beyond the first "
              f"{ingest['max_runs']} refused (at most {ingest['max_runs']} run ids are kept)")
    alerts = result["alerts"]
    if not alerts:
        print("no alerts")
        return
    header = ("STEP", "RANK", "SEVERITY", "ALERT", "VALUE", "SUMMARY")
    rows = [tuple(fmt.printable(c) for c in (a["step"], a["rank"], a["severity"], a["alert"],
                                             _value(a["value"]), _summary(a, alerts[:i])))
            for i, a in enumerate(alerts)]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header[:-1])]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  " + header[-1])
    for row, a in zip(rows, alerts):
        cells = [c.ljust(w) for c, w in zip(row, widths)]
        cells[2] = severity(cells[2], a["severity"], colour)
        cells[3] = paint(cells[3], "bold", colour)
        print("  ".join(cells) + "  " + row[-1])
        if a.get("fix") and not a.get("caused_by"):
            print(" " * (sum(widths) + 2 * len(widths)) + "fix: " + a["fix"])
